// Types of the key spec's JavaScript functions. The code itself is
// templates/code-node/key-spec.js, the same file the generated Code node
// runs; scripts/build.js turns it into dist/nodes/IdempotencyGuard/keyspec.js.

/** A derived key, or why there is none (key '' and error set). */
export interface DerivedKey {
	key: string;
	/** event_id, body_sha256, provider_id or form; '' without a key. */
	source: string;
	error?: string;
}

/** A multipart form as n8n gives it: its fields, and its files' bytes. */
export interface Form {
	fields: unknown;
	files: Buffer[];
}

/** Mirrors eventkey.DeriveFor; form is null unless the body is a multipart form. */
export function deriveFor(
	preset: string,
	headers: unknown,
	buf: Buffer,
	scope: string,
	form: Form | null,
): DerivedKey;

/** The first value of a header n8n gives in lower case, or ''. */
export function headerValue(headers: unknown, name: string): string;

/** Whether a Content-Type is multipart/form-data. */
export function isMultipart(contentType: unknown): boolean;

/** The event type of a JSON body keyed by its id or a provider id; '' otherwise. */
export function eventType(buf: Buffer, source: string): string;

/** The spec's message for an empty body. */
export const EMPTY_BODY: string;

/**
 * A receipt's value (type, account): a header's when it is a usable id; a
 * top-level member under the id rules; down a longer path, a string that is
 * a usable header id or a whole number. null when there is none.
 */
export function receiptValue(headers: unknown, buf: Buffer, header: string, path: string[]): string | null;

// Types of the signature check's first step. The code itself is
// templates/code-node/signature-prepare.js, the same file the generated
// Code node runs; scripts/build.js turns it into
// dist/nodes/IdempotencyGuard/signaturespec.js.

/**
 * What the check compares: the exact string the provider signed, and the
 * signatures the request carries; or, when the headers already fail, code
 * and reason (payload '' and no candidates).
 */
export interface PreparedCheck {
	payload: string;
	candidates: string[];
	code: string;
	reason: string;
}

/** The provider's prepare(headers, body), with signed timestamps bounded by toleranceSeconds both ways. */
export function signaturePreparer(provider: string, toleranceSeconds: number): (headers: unknown, body: Buffer) => PreparedCheck;

import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { deriveFor, EMPTY_BODY, eventType, headerValue, isMultipart } from './keyspec';
import { GuardError } from './errors';

/** Where the key comes from, as the node's parameters set it. */
export interface KeyOptions {
	/** '' (the body's id, as Stripe's), or a provider preset. */
	preset: string;
	scope: string;
	/** The binary property holding the raw body (the Webhook's Raw Body option). */
	binaryProperty: string;
}

/** An item's idempotency key, and the bytes it was derived from. */
export interface ItemKey {
	key: string;
	/** event_id, body_sha256, provider_id or form. */
	source: string;
	/**
	 * The event's type, for the business step: the provider's type header
	 * (GitHub's X-GitHub-Event, Shopify's X-Shopify-Topic), else the body's
	 * type; '' when none.
	 */
	eventType: string;
	/** Slack's challenge, when the delivery is its url_verification (slackChallenge). */
	challenge?: string;
	/** The body's bytes: the raw body, or empty (a form, or a parsed JSON body). */
	body: Buffer;
	contentType: string;
}

const NO_BYTES: Buffer = Buffer.alloc(0);

/**
 * keyOf derives the key of a Webhook item by the key spec (docs/key-spec.md),
 * with the same code as the generated Code node:
 * - a multipart form is keyed by its fields and files (n8n keeps none of its bytes);
 * - a body with bytes (the Raw Body option's binary, or a file n8n kept) by its bytes;
 * - a JSON body n8n parsed, without the Raw Body option, by its usable id only: its
 *   bytes are gone, so a body without one asks for the option instead of hashing
 *   n8n's re-serialisation, which would not be the spec's key.
 * It throws a GuardError (400) for an empty body and (500) for what the node's
 * settings cannot key.
 */
export async function keyOf(
	ctx: IExecuteFunctions,
	item: INodeExecutionData,
	index: number,
	opts: KeyOptions,
): Promise<ItemKey> {
	const headers = item.json.headers;
	const contentType = headerValue(headers, 'content-type');
	const binary = item.binary ?? {};
	let derived;
	let body: Buffer = NO_BYTES;
	// What the event type is read from: the bytes, or n8n's parse of them.
	let typed: Buffer = NO_BYTES;
	if (isMultipart(contentType)) {
		const files: Buffer[] = [];
		for (const name of Object.keys(binary)) files.push(await ctx.helpers.getBinaryDataBuffer(index, name));
		derived = deriveFor(opts.preset, headers, NO_BYTES, opts.scope, { fields: item.json.body, files });
	} else if (binary[opts.binaryProperty]) {
		body = await ctx.helpers.getBinaryDataBuffer(index, opts.binaryProperty);
		typed = body;
		derived = deriveFor(opts.preset, headers, body, opts.scope, null);
	} else if (isParsedJSON(contentType, item.json.body)) {
		typed = Buffer.from(JSON.stringify(item.json.body));
		derived = deriveFor(opts.preset, headers, typed, opts.scope, null);
		if (derived.source === 'body_sha256') {
			throw new GuardError(
				'config',
				`This body has no usable id, and the Webhook kept no raw bytes to hash: turn on the Webhook node's Raw Body option (or set Binary Property to where the body's bytes are) so the key can be the SHA-256 of the exact bytes. Nothing was reserved.`,
			);
		}
	} else {
		derived = deriveFor(opts.preset, headers, NO_BYTES, opts.scope, null);
	}
	if (derived.error !== undefined) {
		if (derived.error.startsWith(EMPTY_BODY)) {
			throw new GuardError('rejected', `${capitalise(derived.error)}: a body with neither an id nor any bytes has no idempotency key. Nothing was reserved.`);
		}
		throw new GuardError('config', `${capitalise(derived.error)}. Nothing was reserved.`);
	}
	const key: ItemKey = {
		key: derived.key,
		source: derived.source,
		eventType: typeHeader(headers) || eventType(typed, derived.source),
		body,
		contentType,
	};
	if (opts.preset === 'slack') key.challenge = slackChallenge(typed);
	return key;
}

// The headers that name a delivery's event type where its body does not.
const TYPE_HEADERS = ['x-github-event', 'x-shopify-topic'];

// typeHeader is the first type header that holds a usable value (as the key
// spec's header ids: 1 to 255 bytes of printable ASCII), or ''.
function typeHeader(headers: unknown): string {
	for (const name of TYPE_HEADERS) {
		const v = headerValue(headers, name);
		if (/^[\x20-\x7e]{1,255}$/.test(v)) return v;
	}
	return '';
}

/** What a url_verification may weigh: Slack's is about 150 bytes (keysvc's smallObjectBytes). */
const SMALL_OBJECT_BYTES = 64 * 1024;

/**
 * slackChallenge is the challenge of Slack's url_verification, read from
 * the body's bytes as keysvc reads it: a JSON object (valid UTF-8, one
 * leading BOM allowed) of at most 64 KiB whose type is "url_verification"
 * and whose challenge is a string (JSON.parse's reading: the last of a
 * name wins); undefined for any other body.
 */
export function slackChallenge(buf: Buffer): string | undefined {
	if (buf.length === 0 || buf.length > SMALL_OBJECT_BYTES) return undefined;
	let v: unknown;
	try {
		v = JSON.parse(new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(buf));
	} catch {
		return undefined;
	}
	if (v === null || typeof v !== 'object' || Array.isArray(v)) return undefined;
	const o = v as { type?: unknown; challenge?: unknown };
	return o.type === 'url_verification' && typeof o.challenge === 'string' ? o.challenge : undefined;
}

// n8n parses application/json (alone) into $json.body.
function isParsedJSON(contentType: string, body: unknown): boolean {
	const media = contentType.split(';')[0].trim().toLowerCase();
	return media === 'application/json' && body !== null && typeof body === 'object' && !Array.isArray(body);
}

function capitalise(s: string): string {
	return s.charAt(0).toUpperCase() + s.slice(1);
}

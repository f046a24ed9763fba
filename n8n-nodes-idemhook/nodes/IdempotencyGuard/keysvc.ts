import type { Decision } from './postgres';
import { GuardError } from './errors';

/** The package's own credential: keysvc's base URL and a token with the admin scope. */
export interface KeysvcCredential {
	url: string;
	token: string;
}

/** What one call to keysvc needs. */
export interface KeysvcTarget {
	cred: KeysvcCredential;
	credentialName: string;
	timeoutMs: number;
}

/** A reservation's options: the key's preset and scope, keysvc's signature check, a lease. */
export interface KeysvcReserve {
	body: Buffer;
	headers: Record<string, unknown>;
	preset: string;
	scope: string;
	/** keysvc verifies this provider's signature before it reserves ('' for none). */
	provider: string;
	leaseSeconds?: number;
}

export interface KeysvcDecision extends Decision {
	key: string;
	source: string;
	/** keysvc's Retry-After for a lease in progress. */
	retryAfterSeconds?: number;
}

// Headers a proxy must not pass on (RFC 9110 §7.6.1), and the caller's own
// credentials, which keysvc must not see: keysvc gets the credential's token.
const notForwarded = new Set([
	'host', 'connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer',
	'content-length', 'expect', 'authorization', 'proxy-authorization', 'cookie',
]);

/**
 * reserve sends the delivery's exact bytes and headers to keysvc's POST
 * /v1/reservations, which verifies the provider's signature (when asked),
 * derives the key by the same spec and reserves it (or acquires its lease).
 * keysvc sees what the provider sent, so its signature checks and header
 * presets work as they do in front of any other tool.
 */
export async function reserve(t: KeysvcTarget, r: KeysvcReserve): Promise<KeysvcDecision> {
	const query = new URLSearchParams();
	if (r.preset !== '') query.set('preset', r.preset);
	if (r.scope !== '') query.set('scope', r.scope);
	if (r.provider !== '') query.set('provider', r.provider);
	if (r.leaseSeconds !== undefined) query.set('lease', `${r.leaseSeconds}s`);
	const headers: Record<string, string> = {};
	for (const [name, value] of Object.entries(r.headers)) {
		if (notForwarded.has(name.toLowerCase())) continue;
		if (typeof value === 'string') headers[name] = value;
		else if (Array.isArray(value)) headers[name] = value.join(', ');
	}
	const q = query.toString();
	const res = await call(t, 'POST', '/v1/reservations' + (q ? '?' + q : ''), headers, r.body, 'Nothing was reserved.');
	const answer = (await res.json().catch(() => ({}))) as {
		key?: string;
		source?: string;
		reserved?: boolean;
		attempt?: number;
		lease_until?: string;
	};
	if (res.status === 409) {
		return { status: 'in_progress', key: '', source: '', retryAfterSeconds: retryAfter(res) };
	}
	return {
		status: res.status === 201 ? 'new' : 'duplicate',
		key: answer.key ?? '',
		source: answer.source ?? '',
		attempt: answer.attempt,
		leaseUntil: answer.lease_until,
	};
}

/** markDone is POST /v1/reservations/{key}/done. */
export async function markDone(t: KeysvcTarget, key: string): Promise<boolean> {
	const res = await call(t, 'POST', `/v1/reservations/${encodeURIComponent(key)}/done`, {}, undefined, 'The key was not marked done.');
	return res.status === 200;
}

/** release is DELETE /v1/reservations/{key}. */
export async function release(t: KeysvcTarget, key: string): Promise<boolean> {
	const res = await call(t, 'DELETE', `/v1/reservations/${encodeURIComponent(key)}`, {}, undefined, 'The key was not released.');
	return res.status === 204;
}

// call makes one request and turns every answer that is not a decision into
// a GuardError: a network failure or a 5xx is unavailable (503, the provider
// retries), 401/403 the credential's fault, another 4xx keysvc's verdict on
// the delivery (passed on with keysvc's status and message).
async function call(
	t: KeysvcTarget,
	method: string,
	path: string,
	headers: Record<string, string>,
	body: Buffer | undefined,
	nothing: string,
): Promise<Response> {
	const base = t.cred.url.replace(/\/+$/, '');
	let res: Response;
	try {
		res = await fetch(base + path, {
			method,
			headers: { ...headers, authorization: `Bearer ${t.cred.token}` },
			body,
			signal: AbortSignal.timeout(t.timeoutMs),
		});
	} catch (e) {
		const cause = (e as { cause?: { code?: string }; message?: string }).cause?.code ?? (e as Error).message;
		if (!/^https?:\/\//.test(base)) {
			throw new GuardError('credential', `The keysvc credential "${t.credentialName}" has no usable URL ("${t.cred.url}"): give keysvc's base URL, such as http://keysvc:8080. ${nothing}`);
		}
		throw new GuardError('unavailable', `keysvc did not answer at ${base} (${cause}): ${nothing} Retry later.`, 5);
	}
	if (res.status < 300 || res.status === 409) return res;
	const text = await res.text().catch(() => '');
	let detail = text.slice(0, 300);
	try {
		const j = JSON.parse(text) as { error?: string; code?: string };
		if (j.error) detail = j.code ? `${j.code}: ${j.error}` : j.error;
	} catch {
		// not JSON: keep the text
	}
	if (res.status === 401 || res.status === 403) {
		throw new GuardError('credential', `keysvc refused the token of credential "${t.credentialName}" (${res.status} ${detail}): it needs a token with the admin scope. ${nothing}`);
	}
	if (res.status >= 500) {
		throw new GuardError('unavailable', `keysvc answered ${res.status} (${detail}): ${nothing} Retry later.`, retryAfter(res));
	}
	throw new GuardError('rejected', `keysvc refused the delivery (${res.status} ${detail}). ${nothing}`, undefined, res.status);
}

function retryAfter(res: Response): number {
	const n = Number(res.headers.get('retry-after'));
	return Number.isFinite(n) && n > 0 ? n : 5;
}

import type { ICredentialDataDecryptedObject, IDataObject, IExecuteFunctions, IHttpRequestMethods, IN8nHttpFullResponse } from 'n8n-workflow';

import { cachedCredential } from '../guard/credentials';
import { GuardError } from '../guard/errors';
import type { Decision, Delivery, GuardStore, OpenedStore } from '../guard/store';

/** The package's own credential type: keysvc's base URL and a token. */
export const KEYSVC_CREDENTIAL = 'idemhookKeysvcApi';

// Headers a proxy must not pass on (RFC 9110 §7.6.1), and the sender's own
// credentials, which keysvc must not see: keysvc gets the credential's token.
const notForwarded = new Set([
	'host', 'connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer',
	'content-length', 'expect', 'authorization', 'proxy-authorization', 'cookie',
]);

/**
 * KeysvcStore reserves through keysvc's HTTP API, with n8n's request helper
 * and the node's credential (its authenticate adds the token). keysvc sees
 * the delivery's exact bytes and headers, so it verifies the provider's
 * signature (Signature Check) and derives the key by the same spec; a
 * tenant's token gives the key the tenant's prefix.
 */
export class KeysvcStore implements GuardStore {
	constructor(
		private readonly ctx: IExecuteFunctions,
		private readonly credential: ICredentialDataDecryptedObject,
		private readonly credentialName: string,
		private readonly timeoutMs: number,
	) {}

	/**
	 * POST /v1/reservations: 201 new, 200 duplicate, 409 another attempt
	 * holds the lease. A delivery with bytes goes to keysvc as it came, and
	 * keysvc verifies and derives; one the Webhook kept no bytes of (a
	 * multipart form, a JSON body without the Raw Body option) is reserved
	 * by the key the node derived from what n8n kept, as the caller's key.
	 */
	async reserve(d: Delivery, leaseSeconds?: number): Promise<Decision> {
		const options = this.ctx.getNodeParameter('options', d.index, {}) as IDataObject;
		const provider = String(options.provider ?? '');
		const qs: IDataObject = {};
		if (leaseSeconds !== undefined) qs.lease = `${leaseSeconds}s`;
		const headers: IDataObject = {};
		const bytes = d.key.body.length > 0;
		if (bytes) {
			const preset = String(this.ctx.getNodeParameter('preset', d.index, ''));
			const scope = String(this.ctx.getNodeParameter('scope', d.index, ''));
			if (preset !== '') qs.preset = preset;
			if (scope !== '') qs.scope = scope;
			if (provider !== '') qs.provider = provider;
			for (const [name, value] of Object.entries(d.headers)) {
				if (notForwarded.has(name.toLowerCase())) continue;
				if (typeof value === 'string') headers[name] = value;
				else if (Array.isArray(value)) headers[name] = value.join(', ');
			}
		} else if (provider !== '') {
			throw new GuardError(
				'config',
				`keysvc verifies the ${provider} signature over the body's exact bytes, and the Webhook kept none for this delivery: turn the Webhook's Raw Body option on. Nothing was reserved.`,
			);
		} else {
			headers['Idempotency-Key'] = d.key.key;
		}
		const res = await this.call('POST', '/v1/reservations', 'Nothing was reserved.', { qs, headers, body: bytes ? d.key.body : undefined });
		const answer = (res.body ?? {}) as { key?: string; source?: string; attempt?: number; lease_until?: string };
		if (res.statusCode === 409) {
			return { status: 'in_progress', key: '', source: '', retryAfter: retryAfterOf(res) };
		}
		return {
			status: res.statusCode === 201 ? 'new' : 'duplicate',
			key: answer.key ?? '',
			source: bytes ? (answer.source ?? '') : d.key.source,
			attempt: answer.attempt,
			leaseUntil: answer.lease_until,
		};
	}

	/** POST /v1/reservations/{key}/done. */
	async complete(key: string): Promise<boolean> {
		const res = await this.call('POST', `/v1/reservations/${encodeURIComponent(key)}/done`, 'The key was not marked done.');
		return res.statusCode === 200;
	}

	/** DELETE /v1/reservations/{key}. keysvc releases a key whoever holds it: Attempt is the PostgreSQL store's. */
	async release(key: string): Promise<boolean> {
		const res = await this.call('DELETE', `/v1/reservations/${encodeURIComponent(key)}`, 'The key was not released.');
		return res.statusCode === 204;
	}

	/**
	 * call makes one request and turns every answer that is not a decision
	 * into a GuardError: no answer or a 5xx is unavailable (503, the provider
	 * retries), 401/403 the credential's fault, another 4xx keysvc's verdict
	 * on the delivery (passed on with keysvc's status and message); 404 on
	 * a key is an answer (nothing held it).
	 */
	private async call(
		method: IHttpRequestMethods,
		path: string,
		nothing: string,
		extra: { qs?: IDataObject; headers?: IDataObject; body?: Buffer } = {},
	): Promise<IN8nHttpFullResponse> {
		const base = String(this.credential.url ?? '').replace(/\/+$/, '');
		if (!/^https?:\/\/[^/]/.test(base)) {
			throw new GuardError('credential', `The keysvc credential "${this.credentialName}" has no usable URL ("${base}"): give keysvc's base URL, such as https://keysvc.example.com. ${nothing}`);
		}
		let res: IN8nHttpFullResponse;
		try {
			res = (await this.ctx.helpers.httpRequestWithAuthentication.call(
				this.ctx,
				KEYSVC_CREDENTIAL,
				{
					method,
					url: base + path,
					qs: extra.qs,
					headers: extra.headers,
					body: extra.body,
					timeout: this.timeoutMs,
					returnFullResponse: true,
					ignoreHttpStatusErrors: true,
				},
				// The credential read at most a minute ago (credentials.ts):
				// n8n would otherwise read and decrypt it on every request.
				{ credentialsDecrypted: { id: '', name: this.credentialName, type: KEYSVC_CREDENTIAL, data: this.credential } },
			)) as IN8nHttpFullResponse;
		} catch (e) {
			throw unanswered(e, base, nothing);
		}
		const status = res.statusCode;
		if (status < 300 || status === 409 || (status === 404 && method !== 'POST')) return res;
		const detail = detailOf(res.body);
		if (refusesToken(status, res.body)) {
			throw new GuardError(
				'credential',
				`keysvc refused the token of credential "${this.credentialName}" (${status} ${detail}): the node needs a token with the guard scope (or admin). ${nothing}`,
			);
		}
		if (status >= 500) {
			throw new GuardError('unavailable', `keysvc answered ${status} (${detail}): ${nothing} Retry later.`, retryAfterOf(res));
		}
		throw new GuardError('rejected', `keysvc refused the delivery (${status} ${detail}). ${nothing}`, undefined, status);
	}
}

// unanswered is a request keysvc gave no answer to: refused, reset, timed
// out, or a certificate n8n does not trust.
function unanswered(e: unknown, base: string, nothing: string): GuardError {
	const err = e as { cause?: { code?: string }; httpCode?: string; message?: string };
	const code = err.cause?.code ?? err.httpCode ?? '';
	if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ALTNAME/.test(code)) {
		return new GuardError('credential', `n8n does not trust keysvc's certificate at ${base} (${code}): give keysvc a certificate from a public authority, or start n8n with NODE_EXTRA_CA_CERTS naming yours. ${nothing}`);
	}
	return new GuardError('unavailable', `keysvc did not answer at ${base} (${code || err.message}): ${nothing} Retry later.`, 5);
}

// refusesToken: keysvc's answer is about the token (unknown, a scope too
// small, bound to another provider), not about the delivery (a signature
// that does not verify is 401 too, with its own code).
function refusesToken(status: number, body: unknown): boolean {
	const code = (body as { code?: string } | undefined)?.code;
	return (status === 401 && code === 'unauthorized') || (status === 403 && (code === 'forbidden' || code === 'provider_bound'));
}

// detailOf is keysvc's error code and message, or the start of the body.
function detailOf(body: unknown): string {
	const b = body as { error?: string; code?: string } | string | undefined;
	if (b && typeof b === 'object' && typeof b.error === 'string') return b.code ? `${b.code}: ${b.error}` : b.error;
	return String(b ?? '').slice(0, 300);
}

function retryAfterOf(res: IN8nHttpFullResponse): number {
	const n = Number(res.headers['retry-after']);
	return Number.isFinite(n) && n > 0 ? n : 5;
}

/**
 * openKeysvc returns the node's store: its keysvc credential, read at most
 * CREDENTIAL_TTL_MS ago (or now when fresh), with this execution's Timeout.
 */
export async function openKeysvc(ctx: IExecuteFunctions, fresh: boolean): Promise<OpenedStore<KeysvcStore>> {
	const options = ctx.getNodeParameter('options', 0, {}) as IDataObject;
	const timeoutMs = 1000 * (Number(options.timeoutSeconds) || 10);
	const read = await cachedCredential(
		ctx,
		KEYSVC_CREDENTIAL,
		fresh,
		(name, reason) => `The keysvc credential "${name}" could not be read (${reason}): choose one in the node. Nothing was reserved.`,
		(data, name) => ({ data, name }),
	);
	return {
		store: new KeysvcStore(ctx, read.value.data as ICredentialDataDecryptedObject, read.value.name, timeoutMs),
		cached: read.cached,
		digest: read.digest,
	};
}

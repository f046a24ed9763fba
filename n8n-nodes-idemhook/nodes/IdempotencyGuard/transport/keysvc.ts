import type { ICredentialDataDecryptedObject, IDataObject, IExecuteFunctions, IHttpRequestMethods, IN8nHttpFullResponse } from 'n8n-workflow';

import { cachedCredential } from '../guard/credentials';
import { GuardError } from '../guard/errors';
import type { Decision, Delivery, GuardStore, OpenedStore } from '../guard/store';

/** The package's own credential type: keysvc's base URL and a token. */
export const KEYSVC_CREDENTIAL = 'idemhookKeysvcApi';

// Headers a proxy must not pass on (RFC 9110 §7.6.1); the sender's own
// credentials, which keysvc must not see (keysvc gets the credential's
// token); and what describes the body as the sender sent it: n8n decoded its
// Content-Encoding already, and the bytes go to keysvc as
// application/octet-stream (n8n's request helper turns a body labelled
// application/x-www-form-urlencoded into URLSearchParams, which fails on
// bytes with ERR_INVALID_TUPLE before any request leaves n8n). keysvc reads
// a Content-Type only to key a multipart form, whose bytes n8n never keeps.
const notForwarded = new Set([
	'host', 'connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer',
	'content-length', 'expect', 'authorization', 'proxy-authorization', 'cookie',
	'content-type', 'content-encoding',
]);

/**
 * KeysvcStore reserves through keysvc's HTTP API, with n8n's request helper
 * and the node's credential (its authenticate adds the token). keysvc is
 * sent what it needs and no more: without a Signature Check, only the key
 * the node derived by the key spec (the Code node's own JavaScript); with
 * one, the delivery's exact bytes and headers, so that keysvc verifies the
 * provider's signature and derives the key itself by the same spec (a token
 * bound to a provider reserves only such keys). A tenant's token gives the
 * key the tenant's prefix.
 */
export class KeysvcStore implements GuardStore {
	constructor(
		private readonly ctx: IExecuteFunctions,
		private readonly credential: ICredentialDataDecryptedObject,
		private readonly credentialName: string,
		private readonly timeoutMs: number,
	) {}

	/** The Signature Check of item index: the provider keysvc verifies, or ''. */
	private provider(index: number): string {
		const options = this.ctx.getNodeParameter('options', index, {}) as IDataObject;
		return String(options.provider ?? '');
	}

	checksSignature(index: number): boolean {
		return this.provider(index) !== '';
	}

	/**
	 * POST /v1/reservations: 201 new, 200 duplicate (or, after a Slack
	 * signature check, Slack's url_verification), 409 another attempt holds
	 * the lease.
	 */
	async reserve(d: Delivery, leaseSeconds?: number): Promise<Decision> {
		const provider = this.provider(d.index);
		const qs: IDataObject = {};
		if (leaseSeconds !== undefined) qs.lease = `${leaseSeconds}s`;
		const headers: IDataObject = {};
		let body: Buffer | undefined;
		if (provider === '') {
			// In the query, percent-encoded: a header carries no UTF-8 (n8n's
			// HTTP stack sends a header's characters as Latin-1, and a key
			// may be any id of up to 255 bytes of UTF-8).
			qs.key = d.key.key;
		} else if (d.key.body.length > 0) {
			const preset = String(this.ctx.getNodeParameter('preset', d.index, ''));
			const scope = String(this.ctx.getNodeParameter('scope', d.index, ''));
			if (preset !== '') qs.preset = preset;
			if (scope !== '') qs.scope = scope;
			qs.provider = provider;
			for (const [name, value] of Object.entries(d.headers)) {
				if (notForwarded.has(name.toLowerCase())) continue;
				if (typeof value === 'string') headers[name] = value;
				else if (Array.isArray(value)) headers[name] = value.join(', ');
			}
			headers['Content-Type'] = 'application/octet-stream';
			body = d.key.body;
		} else {
			throw new GuardError(
				'config',
				`keysvc verifies the ${provider} signature over the body's exact bytes, and the Webhook kept none for this delivery: turn the Webhook's Raw Body option on. Nothing was reserved.`,
			);
		}
		const res = await this.call('POST', '/v1/reservations', 'Nothing was reserved.', { qs, headers, body });
		const answer = (res.body ?? {}) as { key?: string; source?: string; attempt?: number; lease_until?: string; status?: string; challenge?: unknown };
		if (res.statusCode === 409) {
			return { status: 'in_progress', key: '', source: '', retryAfter: retryAfterOf(res) };
		}
		if (res.statusCode === 200 && answer.status === 'url_verification' && typeof answer.challenge === 'string') {
			return { status: 'url_verification', key: '', source: '', challenge: answer.challenge };
		}
		return {
			status: res.statusCode === 201 ? 'new' : 'duplicate',
			key: answer.key ?? '',
			source: body !== undefined ? (answer.source ?? '') : d.key.source,
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
					// The token never follows a redirect to another host.
					disableFollowRedirect: true,
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
		if (status < 400) {
			throw new GuardError(
				'credential',
				`keysvc at ${base} answered ${status}, a redirect, which the node does not follow (the token would go along): give the credential the URL keysvc answers at. ${nothing}`,
			);
		}
		const detail = detailOf(res.body);
		if (status === 403 && (res.body as { code?: string } | undefined)?.code === 'provider_bound') {
			throw new GuardError(
				'credential',
				`keysvc refused the token of credential "${this.credentialName}" (${status} ${detail}): the token reserves only deliveries whose signature keysvc verified, so set the node's Signature Check to the token's provider (without one, the node sends keysvc only its key). ${nothing}`,
			);
		}
		if (refusesToken(status, res.body)) {
			throw new GuardError(
				'credential',
				`keysvc refused the token of credential "${this.credentialName}" (${status} ${detail}): the node needs a token with the guard scope (or admin). ${nothing}`,
			);
		}
		if (status >= 500) {
			throw new GuardError('unavailable', `keysvc answered ${status} (${detail}): ${nothing} Retry later.`, retryAfterOf(res));
		}
		if (status === 413) {
			// keysvc's limit, not the delivery's fault: its message names
			// the flag that raises it, and the provider's retries pass once
			// it is raised.
			throw new GuardError('config', `keysvc refused the body as too large (${status} ${detail}). ${nothing}`, undefined, status);
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
	return (status === 401 && code === 'unauthorized') || (status === 403 && code === 'forbidden');
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
	if (ctx.getNode().credentials?.[KEYSVC_CREDENTIAL] === undefined) {
		throw new GuardError('credential', "This node has no Idemhook Keysvc API credential: choose one (keysvc's URL and a token with the guard scope). Nothing was reserved.");
	}
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

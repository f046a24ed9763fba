// A stand-in for what n8n gives a node's execute(): the input items, the
// parameters, the credential, binary data and the authenticated request
// helper, for unit tests of the nodes' own logic. The nodes are proven in
// real n8n by the e2e tests (e2e/communitynode_test.go).
'use strict';
const http = require('http');
const https = require('https');
const path = require('path');

// The verifiable package's build; the self-hosted package's tests read
// theirs from its own folder.
const dist = path.join(__dirname, '..', 'dist', 'nodes', 'IdempotencyGuard');

// The package's credential type, whose authenticate n8n calls (read when
// a request is made: the self-hosted package's tests make none).
function keysvcCredentialType() {
	const { IdemhookKeysvcApi } = require(path.join(__dirname, '..', 'dist', 'credentials', 'IdemhookKeysvcApi.credentials.js'));
	return new IdemhookKeysvcApi();
}

// httpRequestWithAuthentication as n8n 2.41's does what the nodes ask of it
// (returnFullResponse and ignoreHttpStatusErrors set): the credential type's
// authenticate called with the credential (n8n's CredentialsHelper), qs,
// the body's bytes as given, a JSON answer parsed; a request that gets no
// answer throws an error with n8n's cause.code. As n8n's
// convertN8nRequestToAxios, a body labelled exactly
// application/x-www-form-urlencoded is made URLSearchParams, which bytes
// fail (ERR_INVALID_TUPLE) before any request leaves. Its calls are
// recorded with the credential each used.
function requestHelper(calls) {
	return async function (type, options, additional) {
		const cred = additional && additional.credentialsDecrypted ? additional.credentialsDecrypted.data : await this.getCredentials(type);
		calls.push({ type, options, credentialsDecrypted: Boolean(additional && additional.credentialsDecrypted) });
		const url = new URL(options.url);
		for (const [k, v] of Object.entries(options.qs || {})) url.searchParams.set(k, String(v));
		const authenticated = await keysvcCredentialType().authenticate(cred, options);
		const headers = { ...(authenticated.headers || {}) };
		const contentType = Object.keys(headers).find((k) => k.toLowerCase() === 'content-type');
		if (contentType !== undefined && headers[contentType] === 'application/x-www-form-urlencoded' && options.body) {
			try {
				new URLSearchParams(options.body);
			} catch (e) {
				throw Object.assign(new Error(`n8n: ${e.message}`), { cause: { code: e.code } });
			}
		}
		return await new Promise((resolve, reject) => {
			const req = (url.protocol === 'https:' ? https : http).request(url, { method: options.method, headers, timeout: options.timeout }, (res) => {
				const chunks = [];
				res.on('data', (c) => chunks.push(c));
				res.on('end', () => {
					const text = Buffer.concat(chunks).toString();
					let body = text;
					try {
						body = JSON.parse(text);
					} catch {
						// not JSON: the text
					}
					resolve({ statusCode: res.statusCode, headers: res.headers, body });
				});
			});
			req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'ECONNABORTED' })));
			req.on('error', (e) => reject(Object.assign(new Error(`n8n: ${e.message}`), { cause: { code: e.code } })));
			if (options.body) req.write(options.body);
			req.end();
		});
	};
}

// context returns an IExecuteFunctions-like object.
// credential is the credential's data, or a function returning it (read
// each time n8n is asked); credentials the node's references to them (by
// default a keysvc credential without an id, which is never cached).
function context({ items, params = {}, credential = {}, credentials = { idemhookKeysvcApi: { id: null, name: 'keysvc (test)' } }, onError, executionId = '42', calls = [] }) {
	const ctx = {
		getInputData: () => items,
		getNodeParameter: (name, _i, fallback) => (name in params ? params[name] : fallback),
		getCredentials: async () => (typeof credential === 'function' ? credential() : credential),
		getNode: () => ({ name: 'Idempotency Guard', type: 'n8n-nodes-idemhook.idempotencyGuard', credentials, onError }),
		getExecutionId: () => executionId,
		continueOnFail: () => onError === 'continueErrorOutput' || onError === 'continueRegularOutput',
		helpers: {
			getBinaryDataBuffer: async (i, name) => {
				const b = items[i].binary && items[i].binary[name];
				if (!b) throw new Error(`no binary ${name} on item ${i}`);
				return Buffer.from(b.data, 'base64');
			},
		},
	};
	ctx.helpers.httpRequestWithAuthentication = requestHelper(calls);
	return ctx;
}

// A Webhook item with the Raw Body option: headers, the parsed body where
// n8n parses one, and the bytes as binary.data.
function webhookItem(body, headers = {}, parsed) {
	const item = { json: { headers: { ...headers }, body: parsed === undefined ? {} : parsed } };
	if (body !== null) item.binary = { data: { data: Buffer.from(body).toString('base64'), mimeType: 'application/octet-stream' } };
	return item;
}

// The outputs the editor draws: the description's expression, evaluated as
// n8n evaluates it, over the parameters p.
function outputNames(description, p) {
	const expr = description.outputs;
	if (!/^=\{\{.*\}\}$/s.test(expr)) throw new Error(`outputs is not an expression: ${expr}`);
	return new Function('$parameter', 'return ' + expr.slice(3, -2))(p).map((o) => o.displayName);
}

module.exports = { dist, context, webhookItem, outputNames };

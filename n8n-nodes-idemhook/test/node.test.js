// The keysvc node's routing, requests and errors, with a stand-in for n8n's
// execute context and a keysvc stand-in on real HTTP.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const http = require('http');
const path = require('path');
const { dist, context, webhookItem, outputNames } = require('./helpers');
const { IdempotencyGuard } = require(path.join(dist, 'IdempotencyGuard.node.js'));

const node = new IdempotencyGuard();

test('each operation has its outputs', () => {
	const names = (operation, errorOutput) => outputNames(node.description, { operation, options: errorOutput === undefined ? undefined : { errorOutput } });
	assert.deepStrictEqual(names('reserve'), ['New', 'Duplicate']);
	assert.deepStrictEqual(names(undefined), ['New', 'Duplicate']);
	assert.deepStrictEqual(names('acquireLease'), ['New', 'Duplicate', 'In Progress']);
	assert.deepStrictEqual(names('complete'), ['Done']);
	assert.deepStrictEqual(names('release'), ['Done']);
	assert.deepStrictEqual(names('reserve', true), ['New', 'Duplicate', 'Error']);
	assert.deepStrictEqual(names('acquireLease', true), ['New', 'Duplicate', 'In Progress', 'Error']);
	assert.deepStrictEqual(names('complete', false), ['Done']);
});

test('the package has only its own credential, and the node offers only the guard operations', () => {
	assert.deepStrictEqual(node.description.credentials, [{ name: 'idemhookKeysvcApi', required: false }], 'one entry (n8n reads the first), not required: a node without one says what to do at run time');
	const operations = node.description.properties.find((p) => p.name === 'operation').options.map((o) => o.value);
	assert.deepStrictEqual(operations, ['acquireLease', 'complete', 'release', 'reserve']);
});

// n8n leaves a parameter equal to its default out of a saved workflow: the
// new default (a lease) comes with version 2, and version 1 keeps reserve.
test('version 2 acquires a lease by default; version 1, as saved by 0.2, still reserves', () => {
	assert.deepStrictEqual([node.description.version, node.description.defaultVersion], [[1, 2], 2]);
	const defaults = node.description.properties
		.filter((p) => p.name === 'operation')
		.map((p) => [JSON.stringify(p.displayOptions.show['@version']), p.default]);
	assert.deepStrictEqual(defaults, [['[1]', 'reserve'], ['[{"_cnd":{"gte":2}}]', 'acquireLease']]);
	const reserve = node.description.properties[0].options.find((o) => o.value === 'reserve');
	assert.match(reserve.description, /at most once/);
});

test("the credential's authenticate is a function: no expression per call", async () => {
	const { IdemhookKeysvcApi } = require(path.join(dist, '..', '..', 'credentials', 'IdemhookKeysvcApi.credentials.js'));
	const cred = new IdemhookKeysvcApi();
	assert.strictEqual(typeof cred.authenticate, 'function');
	const out = await cred.authenticate({ token: 'tok' }, { url: 'https://k', headers: { 'X-A': '1' } });
	assert.deepStrictEqual(out.headers, { 'X-A': '1', Authorization: 'Bearer tok' });
});

// keyOf is the key a request to keysvc names in its query.
function keyOf(req) {
	return new URL(req.url, 'http://keysvc').searchParams.get('key');
}

// A keysvc stand-in: answers as keysvc does and records what it got.
async function fakeKeysvc(answer) {
	const got = [];
	const server = http.createServer((req, res) => {
		const chunks = [];
		req.on('data', (c) => chunks.push(c));
		req.on('end', () => {
			got.push({ method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks) });
			const [status, body, headers] = answer(req);
			res.writeHead(status, { 'content-type': 'application/json', ...(headers || {}) });
			res.end(JSON.stringify(body));
		});
	});
	await new Promise((r) => server.listen(0, '127.0.0.1', r));
	return { url: `http://127.0.0.1:${server.address().port}`, got, close: () => new Promise((r) => server.close(r)) };
}

test("with a Signature Check, the exact bytes and headers go to keysvc with the credential's token, read once; keysvc's answer routes the item", async () => {
	const ks = await fakeKeysvc((req) =>
		req.headers['stripe-signature'] === 'dup' ? [200, { key: 'teamA:evt:e1', reserved: false }] : [201, { key: 'teamA:evt:e1', reserved: true, source: 'event_id' }],
	);
	try {
		const body = '{"id":"e1","type":"t"}';
		const items = [
			webhookItem(body, { 'content-type': 'application/json', 'stripe-signature': 'new', authorization: 'Bearer sender', host: 'n8n' }),
			webhookItem(body, { 'content-type': 'application/json', 'stripe-signature': 'dup' }),
		];
		const calls = [];
		const ctx = context({ items, calls, params: { operation: 'reserve', preset: '', scope: '', options: { provider: 'stripe' } }, credential: { url: ks.url + '/', token: 'tok' } });
		const [fresh, dup] = await node.execute.call(ctx);
		assert.strictEqual(fresh.length, 1);
		assert.strictEqual(dup.length, 1);
		assert.strictEqual(fresh[0].json.idempotency.key, 'teamA:evt:e1', "keysvc's key: a tenant's token gives it its prefix");
		assert.strictEqual(fresh[0].json.idempotency.eventType, 't');
		assert.strictEqual(fresh[0].json.body !== undefined, true, 'the Webhook item is passed on');
		assert.deepStrictEqual(fresh[0].pairedItem, { item: 0 });
		assert.strictEqual(ks.got[0].url, '/v1/reservations?provider=stripe');
		assert.strictEqual(ks.got[0].body.toString(), body);
		assert.strictEqual(ks.got[0].headers.authorization, 'Bearer tok', "keysvc gets the credential's token, not the sender's");
		assert.strictEqual(ks.got[0].headers['stripe-signature'], 'new');
		assert.strictEqual(ks.got[0].headers['content-type'], 'application/octet-stream', 'the bytes go as bytes, whatever the sender labelled them');
		assert.strictEqual(ks.got[0].headers.host, `127.0.0.1:${new URL(ks.url).port}`, "the sender's Host is not passed on");
		assert.ok(calls.every((c) => c.type === 'idemhookKeysvcApi' && c.credentialsDecrypted), "n8n's helper is given the credential read once");
	} finally {
		await ks.close();
	}
});

test('a lease: ?lease= in seconds, In Progress with keysvc\'s Retry-After; complete and release by key', async () => {
	const ks = await fakeKeysvc((req) => {
		if (req.method === 'POST' && req.url.startsWith('/v1/reservations?')) return [409, { error: 'another attempt holds the lease', code: 'in_progress' }, { 'retry-after': '42' }];
		if (req.method === 'POST') return [200, { key: 'evt:e/1', state: 'done' }];
		return req.url.endsWith('gone') ? [404, { error: 'no reservation', code: 'not_found' }] : [204, {}];
	});
	try {
		const cred = { url: ks.url, token: 'tok' };
		const [, , busy] = await node.execute.call(context({ items: [webhookItem('{"id":"e/1"}')], params: { operation: 'acquireLease', leaseSeconds: 90 }, credential: cred }));
		assert.strictEqual(ks.got[0].url, '/v1/reservations?lease=90s&key=evt%3Ae%2F1', "the lease, and the node's key in the query");
		assert.deepStrictEqual([busy[0].json.idempotency.status, busy[0].json.idempotency.retryAfter], ['in_progress', 42]);

		const [done] = await node.execute.call(context({ items: [{ json: {} }], params: { operation: 'complete', key: 'evt:e/1' }, credential: cred }));
		assert.strictEqual(ks.got[1].url, '/v1/reservations/evt%3Ae%2F1/done');
		assert.deepStrictEqual(done[0].json.idempotency, { key: 'evt:e/1', status: 'done', completed: true });

		const [released] = await node.execute.call(context({ items: [{ json: {} }, { json: {} }], params: { operation: 'release', key: 'evt:e/1' }, credential: cred }));
		assert.deepStrictEqual([ks.got[2].method, ks.got[2].url], ['DELETE', '/v1/reservations/evt%3Ae%2F1']);
		assert.strictEqual(released[0].json.idempotency.released, true);
		const [gone] = await node.execute.call(context({ items: [{ json: {} }], params: { operation: 'release', key: 'gone' }, credential: cred }));
		assert.strictEqual(gone[0].json.idempotency.released, false, 'nothing held the key: an answer, not an error');
	} finally {
		await ks.close();
	}
});

test("with the Error Output option, errors leave by the node's own last output, and the execution goes on", async () => {
	const ctx = context({
		items: [webhookItem(''), webhookItem('{"id":"ok"}')],
		params: { operation: 'acquireLease', leaseSeconds: 60, options: { errorOutput: true } },
		credential: { url: 'http://127.0.0.1:9', token: 't' },
	});
	const routes = await node.execute.call(ctx);
	assert.strictEqual(routes.length, 4);
	assert.deepStrictEqual(routes.slice(0, 3).map((r) => r.length), [0, 0, 0]);
	assert.deepStrictEqual(routes[3].map((r) => r.json.details.status), ['rejected', 'unavailable']);
	assert.deepStrictEqual(routes[3].map((r) => r.pairedItem.item), [0, 1]);
});

test('an error never goes to New: the error output, or the last output under "continue (regular output)"', async () => {
	const ks = await fakeKeysvc(() => [503, { error: 'the reservation store is unavailable; retry later', code: 'store_unavailable' }, { 'retry-after': '7' }]);
	try {
		for (const onError of ['continueErrorOutput', 'continueRegularOutput']) {
			const ctx = context({ items: [webhookItem('{"id":"e2"}')], params: { operation: 'reserve', options: {} }, credential: { url: ks.url, token: 't' }, onError });
			const [fresh, last] = await node.execute.call(ctx);
			assert.strictEqual(fresh.length, 0, onError);
			assert.strictEqual(last.length, 1, onError);
			// n8n moves an item whose json is only error and details to the error output.
			assert.deepStrictEqual(Object.keys(last[0].json).sort(), ['details', 'error']);
			assert.match(last[0].json.error, /keysvc answered 503/);
			assert.deepStrictEqual(last[0].json.details, { status: 'unavailable', httpStatus: 503, retryAfter: 7 });
			assert.strictEqual(last[0].error, undefined, 'n8n would replace the json of an item with an error by its message');
		}
		// Without "continue", the execution fails with n8n's own error type: n8n answers 500 and nothing runs after the node.
		const ctx = context({ items: [webhookItem('{"id":"e2"}')], params: { operation: 'reserve', options: {} }, credential: { url: ks.url, token: 't' } });
		await assert.rejects(node.execute.call(ctx), (e) => e.name === 'NodeOperationError' && /keysvc answered 503/.test(e.message));
	} finally {
		await ks.close();
	}
});

test("keysvc's verdicts: a token refused is the credential's fault, a delivery refused is passed on with keysvc's status", async () => {
	const ks = await fakeKeysvc((req) =>
		req.headers.authorization === 'Bearer reader'
			? [403, { error: 'this token has the read scope; this needs the reserve or guard scope (or admin)', code: 'forbidden' }]
			: [401, { error: 'no signature matches the body and secret', code: 'invalid_signature' }],
	);
	try {
		const run = (token) =>
			node.execute.call(context({ items: [webhookItem('{"id":"v"}')], params: { operation: 'reserve', options: { errorOutput: true, provider: 'stripe' } }, credential: { url: ks.url, token } }));
		const [, , refused] = await run('reader');
		assert.deepStrictEqual([refused[0].json.details.status, refused[0].json.details.httpStatus], ['credential', 500]);
		assert.match(refused[0].json.error, /guard scope/);
		const [, , forged] = await run('guard');
		assert.deepStrictEqual([forged[0].json.details.status, forged[0].json.details.httpStatus], ['rejected', 401]);
		assert.match(forged[0].json.error, /invalid_signature/);
	} finally {
		await ks.close();
	}
});

test('a credential is read once a minute, and again at once when keysvc refuses it', async () => {
	const ks = await fakeKeysvc((req) =>
		req.headers.authorization === 'Bearer good' ? [201, { key: 'evt:c', reserved: true }] : [401, { error: 'missing or invalid bearer token', code: 'unauthorized' }],
	);
	try {
		let token = 'bad';
		let reads = 0;
		const run = () =>
			node.execute.call(
				context({
					items: [webhookItem('{"id":"c"}')],
					params: { operation: 'reserve', options: {} },
					credential: () => (reads++, { url: ks.url, token }),
					credentials: { idemhookKeysvcApi: { id: 'cred-cache-test', name: 'keysvc (test)' } },
					onError: 'continueErrorOutput',
				}),
			);
		// The last output: n8n moves an error item from there to the error output.
		let [fresh, failed] = await run();
		assert.strictEqual(failed.length, 1);
		assert.strictEqual(failed[0].json.details.status, 'credential');
		assert.strictEqual(reads, 1);
		token = 'good'; // the user fixes the credential
		[fresh] = await run();
		assert.strictEqual(fresh.length, 1, 'the refused store was read again and the delivery retried');
		assert.strictEqual(reads, 2);
		[fresh] = await run();
		assert.strictEqual(fresh.length, 1);
		assert.strictEqual(reads, 2, 'a working credential is not read again within the minute');
	} finally {
		await ks.close();
	}
});

test('a credential without a usable URL says what to fix and reaches no keysvc', async () => {
	const [, , noURL] = await node.execute.call(context({ items: [webhookItem('{"id":"u"}')], params: { operation: 'reserve', options: { errorOutput: true } }, credential: { url: 'keysvc:8080', token: 't' } }));
	assert.match(noURL[0].json.error, /no usable URL/);
});

test("a delivery n8n kept no bytes of is reserved by the node's key; one whose signature keysvc must check is refused", async () => {
	const ks = await fakeKeysvc((req) => [201, { key: keyOf(req), reserved: true, source: 'explicit' }]);
	try {
		const form = { json: { headers: { 'content-type': 'multipart/form-data; boundary=x' }, body: { order: '7' } }, binary: {} };
		const [fresh] = await node.execute.call(context({ items: [form], params: { operation: 'reserve', options: {} }, credential: { url: ks.url, token: 't' } }));
		assert.match(keyOf(ks.got[0]), /^form:[0-9a-f]{64}$/);
		assert.strictEqual(ks.got[0].body.length, 0);
		assert.deepStrictEqual([fresh[0].json.idempotency.key, fresh[0].json.idempotency.source], [keyOf(ks.got[0]), 'form']);
		const parsed = { json: { headers: { 'content-type': 'application/json' }, body: { id: 'p' } } };
		const [, , refused] = await node.execute.call(context({ items: [parsed], params: { operation: 'reserve', options: { errorOutput: true, provider: 'stripe' } }, credential: { url: ks.url, token: 't' } }));
		assert.match(refused[0].json.error, /Raw Body option/);
		assert.strictEqual(ks.got.length, 1);
	} finally {
		await ks.close();
	}
});

test('without a Signature Check, keysvc gets the key the node derived and no body; every call refuses redirects', async () => {
	const ks = await fakeKeysvc((req) => [201, { key: keyOf(req), reserved: true, source: 'explicit' }]);
	try {
		const big = '{"data":"' + 'x'.repeat(2_000_000) + '","id":"evt_big"}';
		const form = 'token=t&team_id=T1&command=%2Fdeploy&text=go';
		const items = [
			webhookItem(big, { 'content-type': 'application/json', 'stripe-signature': 's' }),
			webhookItem(form, { 'content-type': 'application/x-www-form-urlencoded' }, { token: 't', team_id: 'T1', command: '/deploy', text: 'go' }),
		];
		const calls = [];
		const [fresh] = await node.execute.call(context({ items, calls, params: { operation: 'reserve', preset: '', scope: '', options: {} }, credential: { url: ks.url, token: 'tok' } }));
		assert.deepStrictEqual(fresh.map((f) => f.json.idempotency.key), ['evt:evt_big', 'sha256:' + require('crypto').createHash('sha256').update(form).digest('hex')]);
		assert.deepStrictEqual(fresh.map((f) => f.json.idempotency.source), ['event_id', 'body_sha256'], "the node's own source");
		for (const got of ks.got) {
			assert.strictEqual(new URL(got.url, ks.url).pathname, '/v1/reservations');
			assert.deepStrictEqual([...new URL(got.url, ks.url).searchParams.keys()], ['key'], 'only the key, in the query');
			assert.strictEqual(got.body.length, 0, 'keysvc needs no body to reserve a key it is given');
			assert.strictEqual(got.headers['stripe-signature'], undefined, 'no header of the delivery goes along');
		}
		assert.ok(calls.every((c) => c.options.disableFollowRedirect === true), 'the token never follows a redirect');
	} finally {
		await ks.close();
	}
});

test('a signed form goes to keysvc as bytes (n8n would fail on it as a form), without its Content-Encoding, which n8n decoded', async () => {
	const ks = await fakeKeysvc(() => [201, { key: 'sha256:abc', reserved: true, source: 'body_sha256' }]);
	try {
		const form = 'token=t&team_id=T1&command=%2Fdeploy&text=go';
		const headers = { 'content-type': 'application/x-www-form-urlencoded', 'content-encoding': 'gzip', 'x-slack-signature': 'v0=1', 'x-slack-request-timestamp': '1' };
		const [fresh] = await node.execute.call(
			context({ items: [webhookItem(form, headers, {})], params: { operation: 'reserve', preset: 'slack', scope: '', options: { provider: 'slack' } }, credential: { url: ks.url, token: 'tok' } }),
		);
		assert.strictEqual(fresh.length, 1);
		assert.strictEqual(ks.got[0].url, '/v1/reservations?preset=slack&provider=slack');
		assert.strictEqual(ks.got[0].body.toString(), form);
		assert.strictEqual(ks.got[0].headers['content-type'], 'application/octet-stream');
		assert.strictEqual(ks.got[0].headers['content-encoding'], undefined);
		assert.strictEqual(ks.got[0].headers['x-slack-signature'], 'v0=1');
	} finally {
		await ks.close();
	}
});

test("Slack's url_verification leaves by Duplicate with its challenge and reserves nothing: checked by the node, or by keysvc after the signature", async () => {
	const challenge = '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P';
	const ks = await fakeKeysvc(() => [200, { status: 'url_verification', challenge }]);
	try {
		const body = `{"token":"x","challenge":"${challenge}","type":"url_verification"}`;
		const item = () => webhookItem(body, { 'content-type': 'application/json', 'x-slack-signature': 'v0=1', 'x-slack-request-timestamp': '1' });
		const run = (options) =>
			node.execute.call(context({ items: [item()], params: { operation: 'acquireLease', leaseSeconds: 60, preset: 'slack', scope: '', options }, credential: { url: ks.url, token: 't' } }));
		const [fresh, dup] = await run({});
		assert.deepStrictEqual([fresh.length, dup.length], [0, 1]);
		assert.deepStrictEqual(dup[0].json.idempotency, { status: 'url_verification', challenge });
		assert.strictEqual(ks.got.length, 0, 'without a Signature Check the node answers it: keysvc is not called');
		const [fresh2, dup2] = await run({ provider: 'slack' });
		assert.deepStrictEqual([fresh2.length, dup2.length], [0, 1]);
		assert.deepStrictEqual(dup2[0].json.idempotency, { status: 'url_verification', challenge });
		assert.strictEqual(ks.got.length, 1, 'with a Signature Check keysvc checks it first');
	} finally {
		await ks.close();
	}
});

test('a body over keysvc\'s --max-body: the error output says what keysvc said, the flag included', async () => {
	const msg = "the body is larger than 16777216 bytes, keysvc's limit: start keysvc with a larger --max-body (KEYSVC_MAX_BODY) to accept it";
	const ks = await fakeKeysvc(() => [413, { error: msg, code: 'body_too_large' }]);
	try {
		const [, , failed] = await node.execute.call(
			context({ items: [webhookItem('{"id":"big"}', { 'x-hub-signature-256': 'sha256=0' })], params: { operation: 'reserve', options: { errorOutput: true, provider: 'github' } }, credential: { url: ks.url, token: 't' } }),
		);
		assert.match(failed[0].json.error, /--max-body/);
		assert.deepStrictEqual([failed[0].json.details.status, failed[0].json.details.httpStatus], ['config', 413]);
	} finally {
		await ks.close();
	}
});

test('a node n8n-nodes-idemhook 0.1.0 saved with its PostgreSQL store fails the execution, naming the command that moves it', async () => {
	const ctx = context({
		items: [webhookItem('{"id":"old"}')],
		params: { operation: 'reserve', options: { errorOutput: true } },
		credentials: { postgres: { id: null, name: 'Postgres' } },
	});
	await assert.rejects(node.execute.call(ctx), (e) => e.name === 'NodeOperationError' && /n8n-nodes-idemhook-postgres/.test(e.message) && /idemhook node-upgrade/.test(e.message));
	const underContinue = context({ items: [webhookItem('{"id":"old"}')], params: { operation: 'reserve', options: {} }, credentials: { postgres: { id: null, name: 'Postgres' } }, onError: 'continueErrorOutput' });
	const [fresh, failed] = await node.execute.call(underContinue);
	assert.deepStrictEqual([fresh.length, failed[0].json.details.status], [0, 'upgrade'], 'under "continue" it never reaches New');
});

test("a token bound to a provider, without a Signature Check: the message says to set it", async () => {
	const ks = await fakeKeysvc(() => [403, { error: 'this token reserves only the keys keysvc derives from deliveries it verified, never a key of its own', code: 'provider_bound' }]);
	try {
		const [, , refused] = await node.execute.call(context({ items: [webhookItem('{"id":"pb"}')], params: { operation: 'reserve', options: { errorOutput: true } }, credential: { url: ks.url, token: 't' } }));
		assert.strictEqual(refused[0].json.details.status, 'credential');
		assert.match(refused[0].json.error, /set the node's Signature Check/);
	} finally {
		await ks.close();
	}
});

test('a node without a keysvc credential says to choose one, and calls nothing', async () => {
	const [, , failed] = await node.execute.call(context({ items: [webhookItem('{"id":"nc"}')], params: { operation: 'reserve', options: { errorOutput: true } }, credentials: {} }));
	assert.strictEqual(failed[0].json.details.status, 'credential');
	assert.match(failed[0].json.error, /no Idemhook Keysvc API credential/);
});

test('a key of any UTF-8 reaches keysvc as it is: in the query, percent-encoded (a header would carry it as Latin-1)', async () => {
	const ks = await fakeKeysvc((req) => [201, { key: keyOf(req), reserved: true, source: 'explicit' }]);
	try {
		for (const id of ['café', '😀 smile+1', 'حدث-١٢٣', 'a\u2028b']) {
			const body = JSON.stringify({ id });
			const [fresh] = await node.execute.call(context({ items: [webhookItem(body, { 'content-type': 'application/json' })], params: { operation: 'reserve', options: {} }, credential: { url: ks.url, token: 't' } }));
			assert.strictEqual(keyOf(ks.got[ks.got.length - 1]), 'evt:' + id);
			assert.strictEqual(fresh[0].json.idempotency.key, 'evt:' + id);
		}
	} finally {
		await ks.close();
	}
});

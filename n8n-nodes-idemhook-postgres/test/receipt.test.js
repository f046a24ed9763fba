// Save Inbox Receipt's own logic: the signature check with the Crypto
// credential's secret, the receipt's key, type, account and kept headers, and
// what is sent to PostgreSQL, with a stand-in pool that records the query.
// The node saves receipts in real n8n and PostgreSQL in e2e/communitynode_inbox_test.go.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const crypto = require('crypto');
const path = require('path');
const { context, webhookItem, outputNames } = require('../../n8n-nodes-idemhook/test/helpers');

const dist = path.join(__dirname, '..', 'dist', 'nodes', 'IdempotencyGuardPostgres');
const { receive, routeOf, schemaPrefixOf } = require(path.join(dist, 'receipt.js'));
const { IdempotencyGuardPostgres } = require(path.join(dist, 'IdempotencyGuardPostgres.node.js'));

const SECRET = 'whsec_receipt_test';
const now = () => Math.floor(Date.now() / 1000);
const hmac = (secret, text, enc) => crypto.createHmac('sha256', secret).update(text, 'utf8').digest(enc);

// Each provider's signature, as its documentation describes the sender's.
const sign = {
	stripe: (body, t = now(), secret = SECRET) => ({ 'stripe-signature': `t=${t},v1=${hmac(secret, `${t}.${body}`, 'hex')}` }),
	github: (body, secret = SECRET) => ({ 'x-hub-signature-256': 'sha256=' + hmac(secret, body, 'hex') }),
	shopify: (body, secret = SECRET) => ({ 'x-shopify-hmac-sha256': hmac(secret, body, 'base64') }),
	slack: (body, t = now(), secret = SECRET) => ({ 'x-slack-request-timestamp': String(t), 'x-slack-signature': 'v0=' + hmac(secret, `v0:${t}:${body}`, 'hex') }),
};

function options(over = {}) {
	return {
		signature: 'stripe',
		toleranceSeconds: 300,
		preset: '',
		scope: '',
		binaryProperty: 'data',
		defaultAccount: 'default',
		typeHeader: '',
		typePath: ['type'],
		accountHeader: '',
		accountPath: ['account'],
		keptHeaders: ['stripe-signature'],
		schemaPrefix: '',
		drainLeaseSeconds: 120,
		...over,
	};
}

// A pool that answers the receipt statement with row, recording each query.
function fakePool(row = { id: '7', state: 'received', new: true, wake: true }) {
	const queries = [];
	return {
		queries,
		target: { pool: { query: async (sql, params) => (queries.push({ sql, params }), { rows: row ? [row] : [], rowCount: row ? 1 : 0 }) }, credentialName: 'Postgres (test)' },
	};
}

const secretOf = (secret = SECRET, cached = false) => async () => ({ secret, cached });

async function receiveOne(item, opts, pool = fakePool(), secrets = secretOf()) {
	const ctx = context({ items: [item] });
	return { got: await receive(ctx, item, 0, opts, pool.target, secrets), queries: pool.queries };
}

test('a signed delivery of each provider is saved; the same with another secret or body is rejected with 401 and saves nothing', async () => {
	const body = '{"id":"evt_sig_1","type":"payment_intent.succeeded"}';
	for (const provider of Object.keys(sign)) {
		const headers = sign[provider](body);
		const ok = await receiveOne(webhookItem(body, headers), options({ signature: provider }));
		assert.strictEqual(ok.got.key, 'evt:evt_sig_1', provider);
		assert.strictEqual(ok.queries.length, 1, provider);

		const forged = await receiveOne(webhookItem(body, sign[provider](body, ...(provider === 'stripe' || provider === 'slack' ? [now(), 'other'] : ['other']))), options({ signature: provider }));
		assert.deepStrictEqual([forged.got.statusCode, forged.got.code, forged.queries.length], [401, 'invalid_signature', 0], provider);

		const tampered = await receiveOne(webhookItem(body.replace('evt_sig_1', 'evt_sig_2'), headers), options({ signature: provider }));
		assert.deepStrictEqual([tampered.got.statusCode, tampered.queries.length], [401, 0], provider);
	}
});

test("the prepared check's own faults are answered with its code: a missing header, a stale timestamp", async () => {
	const body = '{"id":"evt_sig_2"}';
	const missing = await receiveOne(webhookItem(body, {}), options());
	assert.deepStrictEqual([missing.got.statusCode, missing.got.code, missing.queries.length], [401, 'missing_signature', 0]);
	const stale = await receiveOne(webhookItem(body, sign.stripe(body, now() - 301)), options());
	assert.deepStrictEqual([stale.got.code, stale.queries.length], ['signature_too_old', 0]);
	const within = await receiveOne(webhookItem(body, sign.stripe(body, now() - 200)), options());
	assert.strictEqual(within.queries.length, 1);
});

test('a secret read a while ago that matches nothing is read again once (it may have been rotated)', async () => {
	const body = '{"id":"evt_rot"}';
	const reads = [];
	const rotated = async (fresh) => (reads.push(fresh), fresh ? { secret: SECRET, cached: false } : { secret: 'old', cached: true });
	const { got } = await receiveOne(webhookItem(body, sign.stripe(body)), options(), fakePool(), rotated);
	assert.strictEqual(got.new, true);
	assert.deepStrictEqual(reads, [false, true]);
});

test('the receipt: account, type and kept headers where the rules say, the body in base64, and the statement with the schema and drain lease', async () => {
	const body = '{"id":"evt_r1","type":"charge.refunded","account":"acct_9","data":{"object":{"shop":"s1"}}}';
	const headers = { ...sign.stripe(body), 'x-topic': 'orders/paid', 'x-request-id': 'r-1', 'x-other': 'no' };
	const { got, queries } = await receiveOne(webhookItem(body, headers), options({ keptHeaders: ['x-request-id', 'x-missing'], schemaPrefix: 'shop.', drainLeaseSeconds: 90 }));
	assert.deepStrictEqual(got, { key: 'evt:evt_r1', account: 'acct_9', eventType: 'charge.refunded', id: '7', state: 'received', new: true, wake: true });
	const [{ sql, params }] = queries;
	assert.match(sql, /INSERT INTO shop\.inbox_events /);
	assert.match(sql, /UPDATE shop\.inbox_drainer /);
	assert.match(sql, /interval '90 seconds'/);
	assert.deepStrictEqual(params, ['acct_9', 'evt:evt_r1', 'charge.refunded', Buffer.from(body).toString('base64'), '{"x-request-id":"r-1"}']);

	const byHeader = await receiveOne(webhookItem(body, headers), options({ typeHeader: 'x-topic', accountPath: ['data', 'object', 'shop'] }));
	assert.deepStrictEqual([byHeader.got.eventType, byHeader.got.account], ['orders/paid', 's1']);
	const none = await receiveOne(webhookItem('{"id":"evt_r2"}', sign.stripe('{"id":"evt_r2"}')), options());
	assert.deepStrictEqual([none.got.eventType, none.got.account], ['', 'default']);
});

test('a body without id is keyed by its bytes; an empty one is rejected with 400 and saves nothing', async () => {
	const body = 'not json at all';
	const { got } = await receiveOne(webhookItem(body, {}), options({ signature: '' }));
	assert.strictEqual(got.key, 'sha256:' + crypto.createHash('sha256').update(body).digest('hex'));
	const empty = await receiveOne(webhookItem(null, {}), options({ signature: '' }));
	assert.deepStrictEqual([empty.got.statusCode, empty.got.code, empty.queries.length], [400, 'empty_body', 0]);
});

test('a concurrent duplicate that sees no row is a duplicate that starts no worker', async () => {
	const { got } = await receiveOne(webhookItem('{"id":"evt_d"}', {}), options({ signature: '' }), fakePool(null));
	assert.deepStrictEqual([got.new, got.wake, got.id], [false, false, null]);
});

test('the inbox schema is one name by ParseTable rules', () => {
	assert.strictEqual(schemaPrefixOf(''), '');
	assert.strictEqual(schemaPrefixOf('shop'), 'shop.');
	for (const bad of ['Shop', 'a.b', 'select', 'x;drop', '1a']) assert.throws(() => schemaPrefixOf(bad), /not a schema name/, bad);
});

test('through the node: Received and Rejected outputs; the receipt replaces the delivery', async () => {
	const node = new IdempotencyGuardPostgres();
	const ctx = context({
		items: [webhookItem(null, {})],
		params: { operation: 'receive', signature: '', options: { errorOutput: true } },
		credential: { host: '127.0.0.1', port: 9, database: 'd', user: 'u', password: 'p' },
	});
	const routes = await node.execute.call(ctx);
	assert.strictEqual(routes.length, 3);
	assert.deepStrictEqual(routes[1].map((r) => [r.json.status, r.json.statusCode, r.json.code]), [['rejected', 400, 'empty_body']]);
	assert.strictEqual(routes[1][0].binary, undefined);
	assert.deepStrictEqual(routes[1][0].pairedItem, { item: 0 });
});

test('a new receipt that found no worker draining leaves by Start Worker, with drain, only when the node has that output', () => {
	const saved = (over) => ({ key: 'evt:e', account: 'default', eventType: 't', id: '7', state: 'received', new: true, wake: true, ...over });
	const cases = [
		{ got: saved(), workerOutput: true, want: 2, drain: true },
		{ got: saved(), workerOutput: false, want: 0 },
		{ got: saved({ wake: false }), workerOutput: true, want: 0 },
		{ got: saved({ new: false, wake: false }), workerOutput: true, want: 0 },
		{ got: { statusCode: 401, code: 'invalid_signature', error: 'no' }, workerOutput: true, want: 1 },
	];
	for (const c of cases) {
		const [output, json] = routeOf(c.got, c.workerOutput);
		assert.strictEqual(output, c.want, JSON.stringify(c));
		assert.strictEqual(json.drain, c.drain, JSON.stringify(c));
	}
	// The outputs the editor draws (the description's expression) match.
	const names = (p) => outputNames(new IdempotencyGuardPostgres().description, { operation: 'receive', ...p });
	assert.deepStrictEqual(names({ options: { errorOutput: true }, receipt: { workerOutput: true } }), ['Received', 'Rejected', 'Start Worker', 'Error']);
	assert.deepStrictEqual(names({ options: { errorOutput: true } }), ['Received', 'Rejected', 'Error']);
});

test("Slack's URL check is answered its challenge by Received after the signature check, and saves nothing; a forged one is rejected; elsewhere it is an event", async () => {
	const body = '{"token":"Zq8WbT1xLr","challenge":"c7Hn2VqPz0sK4mYd","type":"url_verification"}';
	for (const opts of [options({ signature: 'slack' }), options({ signature: '', preset: 'slack' })]) {
		const checked = await receiveOne(webhookItem(body, sign.slack(body)), opts);
		assert.deepStrictEqual([checked.got, checked.queries.length], [{ challenge: 'c7Hn2VqPz0sK4mYd' }, 0], JSON.stringify(opts));
		assert.deepStrictEqual(routeOf(checked.got, true), [0, { status: 'url_verification', challenge: 'c7Hn2VqPz0sK4mYd' }]);
	}
	const forged = await receiveOne(webhookItem(body, sign.slack(body, now(), 'other')), options({ signature: 'slack' }));
	assert.deepStrictEqual([forged.got.statusCode, forged.queries.length], [401, 0]);
	// Another provider's receiver saves the same body as an event.
	const other = await receiveOne(webhookItem(body, sign.stripe(body)), options({ signature: 'stripe' }));
	assert.deepStrictEqual([other.got.challenge, other.queries.length], [undefined, 1]);
});

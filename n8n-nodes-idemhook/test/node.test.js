// The node's routing and errors, with a stand-in for n8n's execute context.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const http = require('http');
const path = require('path');
const { dist, context, webhookItem } = require('./helpers');
const { IdempotencyGuard } = require(path.join(dist, 'IdempotencyGuard.node.js'));
const { checkTable, explain } = require(path.join(dist, 'postgres.js'));

const node = new IdempotencyGuard();

// The editor draws the outputs from this expression; n8n evaluates it.
function outputsFor(operation, errorOutput) {
	const expr = node.description.outputs;
	assert.match(expr, /^=\{\{\(.*\)\(\$parameter\)\}\}$/s);
	const fn = eval(expr.slice(3, -'($parameter)}}'.length));
	return fn({ operation, options: errorOutput === undefined ? undefined : { errorOutput } }).map((o) => o.displayName);
}

test('each operation has its outputs', () => {
	assert.deepStrictEqual(outputsFor('reserve'), ['New', 'Duplicate']);
	assert.deepStrictEqual(outputsFor(undefined), ['New', 'Duplicate']);
	assert.deepStrictEqual(outputsFor('acquireLease'), ['New', 'Duplicate', 'In Progress']);
	assert.deepStrictEqual(outputsFor('complete'), ['Done']);
	assert.deepStrictEqual(outputsFor('release'), ['Done']);
	assert.deepStrictEqual(outputsFor('reserve', true), ['New', 'Duplicate', 'Error']);
	assert.deepStrictEqual(outputsFor('acquireLease', true), ['New', 'Duplicate', 'In Progress', 'Error']);
	assert.deepStrictEqual(outputsFor('complete', false), ['Done']);
	assert.deepStrictEqual(outputsFor('receive'), ['Received', 'Rejected']);
	assert.deepStrictEqual(outputsFor('receive', true), ['Received', 'Rejected', 'Error']);
});

test("with the Error Output option, errors leave by the node's own last output, and the execution goes on", async () => {
	const ctx = context({
		items: [webhookItem(''), webhookItem('{"id":"ok"}')],
		params: { store: 'keysvc', operation: 'acquireLease', leaseSeconds: 60, options: { errorOutput: true } },
		credential: { url: 'http://127.0.0.1:9', token: 't' },
	});
	const routes = await node.execute.call(ctx);
	assert.strictEqual(routes.length, 4);
	assert.deepStrictEqual(routes.slice(0, 3).map((r) => r.length), [0, 0, 0]);
	assert.deepStrictEqual(routes[3].map((r) => r.json.details.status), ['rejected', 'unavailable']);
	assert.deepStrictEqual(routes[3].map((r) => r.pairedItem.item), [0, 1]);
});

test('table names follow ParseTable', () => {
	for (const ok of ['processed_events', 'shop.processed_events', '_x1']) assert.strictEqual(checkTable(ok), ok);
	for (const bad of ['Processed', 'a.b.c', 'select', 'x;drop table y', '1abc', '', 'a'.repeat(64)]) {
		assert.throws(() => checkTable(bad), /not a table name/, bad);
	}
});

test('errors say what to fix', () => {
	const t = { table: 'processed_events', credentialName: 'Postgres (shop)' };
	const cases = [
		[{ code: '42P01', message: 'relation "processed_events" does not exist' }, 'schema', 500, /schema\.sql/],
		[{ code: '28P01', message: 'password authentication failed for user "x"' }, 'credential', 500, /"Postgres \(shop\)" was refused/],
		[{ code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 127.0.0.1:5432' }, 'unavailable', 503, /did not answer/],
		[{ code: '42703', message: 'column "state" does not exist' }, 'schema', 500, /lease schema/],
		[{ message: 'Connection terminated unexpectedly' }, 'unavailable', 503, /Retry later/],
	];
	for (const [err, kind, status, said] of cases) {
		const e = explain(err, t);
		assert.strictEqual(e.kind, kind, err.message);
		assert.strictEqual(e.httpStatus, status, err.message);
		assert.match(e.message, said);
	}
});

// A keysvc stand-in on real HTTP: answers as keysvc does and records what it got.
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

test('keysvc store: the exact bytes and headers go to keysvc, its answer routes the item', async () => {
	const ks = await fakeKeysvc((req) =>
		req.headers['stripe-signature'] === 'dup' ? [200, { key: 'evt:e1', reserved: false }] : [201, { key: 'evt:e1', reserved: true, source: 'event_id' }],
	);
	try {
		const body = '{"id":"e1","type":"t"}';
		const items = [
			webhookItem(body, { 'content-type': 'application/json', 'stripe-signature': 'new', authorization: 'Bearer sender', host: 'n8n' }),
			webhookItem(body, { 'content-type': 'application/json', 'stripe-signature': 'dup' }),
		];
		const ctx = context({ items, params: { store: 'keysvc', operation: 'reserve', preset: '', scope: '', options: { provider: 'stripe' } }, credential: { url: ks.url, token: 'tok' } });
		const [fresh, dup] = await node.execute.call(ctx);
		assert.strictEqual(fresh.length, 1);
		assert.strictEqual(dup.length, 1);
		assert.strictEqual(fresh[0].json.idempotency.key, 'evt:e1');
		assert.strictEqual(fresh[0].json.body !== undefined, true, 'the Webhook item is passed on');
		assert.strictEqual(ks.got[0].url, '/v1/reservations?provider=stripe');
		assert.strictEqual(ks.got[0].body.toString(), body);
		assert.strictEqual(ks.got[0].headers.authorization, 'Bearer tok', "keysvc gets the credential's token, not the sender's");
		assert.strictEqual(ks.got[0].headers['stripe-signature'], 'new');
	} finally {
		await ks.close();
	}
});

test('an error never goes to New: the error output, or the last output under "continue (regular output)"', async () => {
	const ks = await fakeKeysvc(() => [503, { error: 'the reservation store is unavailable; retry later', code: 'store_unavailable' }, { 'retry-after': '7' }]);
	try {
		for (const onError of ['continueErrorOutput', 'continueRegularOutput']) {
			const ctx = context({ items: [webhookItem('{"id":"e2"}')], params: { store: 'keysvc', operation: 'reserve', options: {} }, credential: { url: ks.url, token: 't' }, onError });
			const [fresh, last] = await node.execute.call(ctx);
			assert.strictEqual(fresh.length, 0, onError);
			assert.strictEqual(last.length, 1, onError);
			// n8n moves an item whose json is only error and details to the error output.
			assert.deepStrictEqual(Object.keys(last[0].json).sort(), ['details', 'error']);
			assert.match(last[0].json.error, /keysvc answered 503/);
			assert.deepStrictEqual(last[0].json.details, { status: 'unavailable', httpStatus: 503, retryAfter: 7 });
			assert.strictEqual(last[0].error, undefined, 'n8n would replace the json of an item with an error by its message');
		}
		// Without "continue", the execution fails: n8n answers 500 and nothing runs after the node.
		const ctx = context({ items: [webhookItem('{"id":"e2"}')], params: { store: 'keysvc', operation: 'reserve', options: {} }, credential: { url: ks.url, token: 't' } });
		await assert.rejects(node.execute.call(ctx), /keysvc answered 503/);
	} finally {
		await ks.close();
	}
});

test('a credential is read once a minute, and again at once when the store refuses it', async () => {
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
					params: { store: 'keysvc', operation: 'reserve', options: {} },
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

test('an SSH tunnel is refused with one clear message', async () => {
	const ctx = context({
		items: [webhookItem('{"id":"e3"}')],
		params: { store: 'postgres', operation: 'reserve', options: {} },
		credential: { host: 'db', port: 5432, database: 'd', user: 'u', password: 'p', sshTunnel: true },
		onError: 'continueErrorOutput',
	});
	const [, last] = await node.execute.call(ctx);
	assert.match(last[0].json.error, /SSH tunnel/);
	assert.strictEqual(last[0].json.details.status, 'credential');
});

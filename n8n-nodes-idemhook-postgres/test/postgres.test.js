// The PostgreSQL store's own logic: table names, what its errors say, the
// credential it refuses, and the outputs of every operation. The node
// reserves in real n8n and PostgreSQL in e2e/communitynode_test.go.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const path = require('path');
const { context, webhookItem, outputNames } = require('../../n8n-nodes-idemhook/test/helpers');

const dist = path.join(__dirname, '..', 'dist', 'nodes', 'IdempotencyGuardPostgres');
const { checkTable, explain, PostgresStore } = require(path.join(dist, 'transport', 'postgres.js'));
const { IdempotencyGuardPostgres } = require(path.join(dist, 'IdempotencyGuardPostgres.node.js'));

const node = new IdempotencyGuardPostgres();

test('each operation has its outputs, Save Inbox Receipt among them', () => {
	const names = (operation, options, receipt) => outputNames(node.description, { operation, options, receipt });
	assert.deepStrictEqual(names('reserve'), ['New', 'Duplicate']);
	assert.deepStrictEqual(names('acquireLease', { errorOutput: true }), ['New', 'Duplicate', 'In Progress', 'Error']);
	assert.deepStrictEqual(names('release'), ['Done']);
	assert.deepStrictEqual(names('receive'), ['Received', 'Rejected']);
	assert.deepStrictEqual(names('receive', { errorOutput: true }), ['Received', 'Rejected', 'Error']);
	const operations = node.description.properties.find((p) => p.name === 'operation').options.map((o) => o.value);
	assert.deepStrictEqual(operations, ['acquireLease', 'complete', 'release', 'reserve', 'receive']);
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

test('the statements and their parameters: a reservation, a lease for an execution, a fenced release', async () => {
	const queries = [];
	const rows = { reserve: { rowCount: 1, rows: [{ key: 'evt:a' }] }, lease: { rowCount: 1, rows: [{ outcome: 'acquired', attempt: 2, lease_until: new Date(0) }] } };
	const pool = { query: async (sql, params) => (queries.push({ sql, params }), /outcome/.test(sql) ? rows.lease : rows.reserve) };
	const key = { key: 'evt:a', source: 'event_id', eventType: '', body: Buffer.alloc(0), contentType: '' };
	const plain = new PostgresStore(pool, 'shop.events', 'Postgres (test)');
	assert.deepStrictEqual(await plain.reserve({ key, headers: {}, index: 0 }), { status: 'new', key: 'evt:a', source: 'event_id' });
	assert.match(queries[0].sql, /INSERT INTO shop\.events \(key\) VALUES \(\$1\) ON CONFLICT \(key\) DO NOTHING RETURNING key/);
	assert.deepStrictEqual(queries[0].params, ['evt:a']);
	const byExecution = new PostgresStore(pool, 'shop.events', 'Postgres (test)', '77');
	const leased = await byExecution.reserve({ key, headers: {}, index: 0 }, 90);
	assert.deepStrictEqual([leased.status, leased.attempt, leased.leaseUntil], ['new', 2, '1970-01-01T00:00:00.000Z']);
	assert.match(queries[1].sql, /interval '90 seconds'/);
	assert.deepStrictEqual(queries[1].params, ['evt:a', '77']);
	await plain.release('evt:a', 2);
	assert.deepStrictEqual(queries[2].params, ['evt:a', 2]);
	assert.match(queries[2].sql, /attempts = \$2/);
});

test('an SSH tunnel is refused with one clear message', async () => {
	const ctx = context({
		items: [webhookItem('{"id":"e3"}')],
		params: { operation: 'reserve', options: {} },
		credential: { host: 'db', port: 5432, database: 'd', user: 'u', password: 'p', sshTunnel: true },
		onError: 'continueErrorOutput',
	});
	const [, last] = await node.execute.call(ctx);
	assert.match(last[0].json.error, /SSH tunnel/);
	assert.strictEqual(last[0].json.details.status, 'credential');
});

test('version 2 acquires a lease by default; version 1 still reserves', () => {
	assert.deepStrictEqual([node.description.version, node.description.defaultVersion], [[1, 2], 2]);
	const defaults = node.description.properties.filter((p) => p.name === 'operation').map((p) => p.default);
	assert.deepStrictEqual(defaults, ['reserve', 'acquireLease']);
});

test("Slack's url_verification leaves by Duplicate with its challenge, and no statement runs", async () => {
	const body = '{"token":"x","challenge":"ch-1","type":"url_verification"}';
	const ctx = context({
		items: [webhookItem(body, { 'content-type': 'application/json' })],
		params: { operation: 'acquireLease', leaseSeconds: 60, preset: 'slack', scope: '', options: { errorOutput: true } },
		// Nothing listens there: a statement would fail to the Error output.
		credential: { host: '127.0.0.1', port: 9, database: 'd', user: 'u', password: 'p' },
	});
	const [fresh, dup, busy, failed] = await node.execute.call(ctx);
	assert.deepStrictEqual([fresh.length, dup.length, busy.length, failed.length], [0, 1, 0, 0]);
	assert.deepStrictEqual(dup[0].json.idempotency, { status: 'url_verification', challenge: 'ch-1' });
});

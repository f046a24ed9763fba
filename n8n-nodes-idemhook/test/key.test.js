// The node's key, from a Webhook item, for every vector of the shared
// conformance file: the node reads items as n8n gives them and derives
// with templates/code-node/key-spec.js, the Code node's own code.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const { dist, context, webhookItem } = require('./helpers');
const { keyOf } = require(path.join(dist, 'guard', 'key.js'));
const { GuardError } = require(path.join(dist, 'guard', 'errors.js'));

const vectors = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'conformance', 'key-vectors.json'), 'utf8')).vectors;

// n8n gives a multipart form as its fields ($json.body) and its files as
// binary properties, and keeps none of its bytes.
function itemOf(v) {
	const headers = v.headers || {};
	if (v.form) {
		const binary = {};
		(v.form.files || []).forEach((f, i) => (binary['file' + i] = { data: f, mimeType: 'application/octet-stream' }));
		return { json: { headers, body: v.form.fields }, binary };
	}
	return webhookItem(Buffer.from(v.body_base64, 'base64'), headers);
}

test('every conformance vector gives the spec key', async () => {
	let checked = 0;
	for (const v of vectors) {
		const item = itemOf(v);
		const ctx = context({ items: [item] });
		const opts = { preset: v.preset || '', scope: v.scope || '', binaryProperty: 'data' };
		if (v.error) {
			await assert.rejects(keyOf(ctx, item, 0, opts), GuardError, v.name);
		} else {
			const k = await keyOf(ctx, item, 0, opts);
			assert.strictEqual(k.key, v.key, v.name);
			assert.strictEqual(k.source, v.source, v.name);
		}
		checked++;
	}
	assert.strictEqual(checked, vectors.length);
	assert.ok(checked > 100, `only ${checked} vectors`);
});

test('an empty body is rejected (400), nothing to key', async () => {
	const item = webhookItem('');
	await assert.rejects(keyOf(context({ items: [item] }), item, 0, { preset: '', scope: '', binaryProperty: 'data' }), (e) => {
		assert.strictEqual(e.kind, 'rejected');
		assert.strictEqual(e.httpStatus, 400);
		assert.match(e.message, /Nothing was reserved/);
		return true;
	});
});

test('without the raw body: a parsed JSON body is keyed by its id, and only by its id', async () => {
	const opts = { preset: '', scope: '', binaryProperty: 'data' };
	const withId = { json: { headers: { 'content-type': 'application/json' }, body: { id: 'evt_1', type: 'invoice.paid' } } };
	const k = await keyOf(context({ items: [withId] }), withId, 0, opts);
	assert.deepStrictEqual([k.key, k.source, k.eventType], ['evt:evt_1', 'event_id', 'invoice.paid']);

	const withoutId = { json: { headers: { 'content-type': 'application/json' }, body: { type: 'ping' } } };
	await assert.rejects(keyOf(context({ items: [withoutId] }), withoutId, 0, opts), /Raw Body option/);

	// A form n8n parsed (x-www-form-urlencoded) is not JSON: its id field is not the event's id.
	const form = { json: { headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: { id: 'x' } } };
	await assert.rejects(keyOf(context({ items: [form] }), form, 0, opts), GuardError);
});

test("the event type: GitHub's and Shopify's headers name it; else the body's type", async () => {
	const cases = [
		[{ 'x-github-event': 'push', 'x-github-delivery': 'd-1' }, '{"ref":"refs/heads/main"}', 'github', 'push'],
		[{ 'x-shopify-topic': 'orders/create', 'x-shopify-webhook-id': 'w-1' }, '{"id":820982911946154500}', 'shopify', 'orders/create'],
		[{ 'x-github-event': 'ping' }, '{"zen":"Keep it logically awesome."}', '', 'ping'],
		[{}, '{"id":"evt_1","type":"charge.succeeded"}', '', 'charge.succeeded'],
		[{ 'x-github-event': '' }, '{"id":"evt_2","type":"t"}', '', 't'],
	];
	for (const [headers, body, preset, want] of cases) {
		const item = webhookItem(body, headers);
		const k = await keyOf(context({ items: [item] }), item, 0, { preset, scope: '', binaryProperty: 'data' });
		assert.strictEqual(k.eventType, want, JSON.stringify(headers));
	}
});

test("Slack's url_verification is read as keysvc reads it", () => {
	const { slackChallenge } = require(path.join(dist, 'guard', 'key.js'));
	const ok = (s) => slackChallenge(Buffer.from(s));
	assert.strictEqual(ok('{"type":"url_verification","challenge":"c1"}'), 'c1');
	assert.strictEqual(ok('\ufeff{"type":"url_verification","challenge":"c1","challenge":"c2"}'), 'c2', 'one BOM; the last of a name wins');
	for (const no of ['{"type":"url_verification","challenge":7}', '{"type":"event_callback","challenge":"c"}', '[{"type":"url_verification","challenge":"c"}]', 'type=url_verification&challenge=c', '']) {
		assert.strictEqual(ok(no), undefined, no);
	}
	assert.strictEqual(slackChallenge(Buffer.from([0x7b, 0xff, 0x7d])), undefined, 'not UTF-8');
	assert.strictEqual(ok(`{"type":"url_verification","challenge":"${'c'.repeat(70000)}"}`), undefined, 'over 64 KiB');
});

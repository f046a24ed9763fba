// A stand-in for what n8n gives a node's execute(): the input items, the
// parameters, the credential and binary data, for unit tests of the node's
// own logic. The node is proven in real n8n by the e2e tests (e2e/communitynode_test.go).
'use strict';
const path = require('path');

const dist = path.join(__dirname, '..', 'dist', 'nodes', 'IdempotencyGuard');

class FakeNodeError extends Error {}

// context returns an IExecuteFunctions-like object.
// credential is the credential's data, or a function returning it (read
// each time n8n is asked); credentials the node's references to them.
function context({ items, params = {}, credential = {}, credentials = {}, onError, executionId = '42' }) {
	return {
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
}

// A Webhook item with the Raw Body option: headers, the parsed body where
// n8n parses one, and the bytes as binary.data.
function webhookItem(body, headers = {}, parsed) {
	const item = { json: { headers: { ...headers }, body: parsed === undefined ? {} : parsed } };
	if (body !== null) item.binary = { data: { data: Buffer.from(body).toString('base64'), mimeType: 'application/octet-stream' } };
	return item;
}

module.exports = { dist, context, webhookItem, FakeNodeError };

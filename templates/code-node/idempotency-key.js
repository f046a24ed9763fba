// idemhook: build the idempotency key of a webhook delivery (key spec v1).
//
// Runs in an n8n Code node ("Run Once for All Items") behind a Webhook node
// with the "Raw Body" option on. It reads the exact request bytes, never the
// parsed $json.body, because n8n parses bodies differently per content type.
//
//   key = "evt:" + the body's top-level "id" string, when the body is valid
//         UTF-8 and (after one optional BOM) exactly one JSON object nested at
//         most 1000 levels, and that id is 1-255 UTF-8 bytes with no control
//         character and no unpaired surrogate;
//   key = "sha256:" + lowercase hex SHA-256 of all the body bytes, otherwise.
//
// Needs NODE_FUNCTION_ALLOW_BUILTIN=crypto on the n8n instance. The spec is
// docs/key-spec.md; conformance/key-vectors.json tests this file byte for byte
// against the Go implementation (package eventkey).
const crypto = require('crypto');

// Provider preset and scope, set by `idemhook generate --preset/--scope`.
// '' (or 'stripe') is the body's id as above; the others are in the spec's
// "Provider presets" section.
const PRESET = '';
const SCOPE = '';

// Inbox pattern (`idemhook generate --pattern inbox`): the receipt also
// carries the event type and the account, read where the rules' provider
// keeps them (a header, else a path into the body: Stripe's "type" and
// Connect "account"; the account is DEFAULT_ACCOUNT when the delivery names
// none), the raw body in base64 and the request headers named in
// RECEIPT_HEADERS (lower case). rules.Source.Value is the Go side.
const RECEIPT = false;
const DEFAULT_ACCOUNT = 'default';
const RECEIPT_HEADERS = [];
const TYPE_HEADER = '';
const TYPE_PATH = ['type'];
const ACCOUNT_HEADER = '';
const ACCOUNT_PATH = ['account'];

// @key-spec: templates/code-node/key-spec.js, the key spec's functions, goes here.

// An empty body gets key '' (the workflow answers 400 and reserves nothing).
// A multipart body has no raw bytes in n8n: its files are the item's binary
// properties, one of which may be called data.
const out = [];
const items = $input.all();
for (let i = 0; i < items.length; i++) {
  let form = null;
  if (isMultipart(headerValue(items[i].json.headers, 'content-type'))) {
    const files = [];
    for (const name of Object.keys(items[i].binary || {})) files.push(await this.helpers.getBinaryDataBuffer(i, name));
    form = { fields: items[i].json.body, files: files };
  }
  const hasBytes = !form && items[i].binary && items[i].binary.data;
  const buf = hasBytes ? await this.helpers.getBinaryDataBuffer(i, 'data') : Buffer.alloc(0);
  const k = deriveFor(PRESET, items[i].json.headers, buf, SCOPE, form);
  const json = { key: k.key, source: k.source, eventType: eventType(buf, k.source) };
  if (k.error) json.error = k.error;
  if (RECEIPT) {
    const type = receiptValue(items[i].json.headers, buf, TYPE_HEADER, TYPE_PATH);
    json.eventType = type !== null ? type : '';
    const account = receiptValue(items[i].json.headers, buf, ACCOUNT_HEADER, ACCOUNT_PATH);
    json.account = account !== null ? account : DEFAULT_ACCOUNT;
    json.body = buf.toString('base64');
    json.headers = {};
    for (const h of RECEIPT_HEADERS) {
      const v = headerValue(items[i].json.headers, h);
      if (v !== '') json.headers[h] = v;
    }
  }
  out.push({ json: json, pairedItem: { item: i } });
}
return out;

package guard

import (
	"encoding/json"
	"strings"
)

// restoreScript is the Code node that gives the user's nodes the item their
// Webhook gave before the guard turned its raw-body option on. That option
// (n8n 2.41, Webhook.node.js) does two things, which the script undoes:
//   - it adds binary.data, the request's exact bytes, which the key needs:
//     removed, unless the Webhook kept the raw body already;
//   - on typeVersion 2 and later, a body n8n does not parse (text/plain,
//     application/octet-stream, no content type) no longer becomes
//     `body: {}` and a binary file of the bytes under the Binary Property
//     name, but no body and the inline bytes: given back as they were, the
//     file pointing at the same bytes (its file name differs: n8n names it
//     at random, or from Content-Disposition).
//
// The item's json (headers, params, query, body, webhookUrl,
// executionMode) is the Webhook's own, so it is equal to what the Webhook
// gave without the option. The Webhook emits one item per delivery.
func restoreScript(rawWebhook string, hadRawBody, unparsedAsFile bool, binaryProperty string) string {
	lit := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	return strings.NewReplacer(
		"__RAW_WEBHOOK__", lit(rawWebhook),
		"__HAD_RAW_BODY__", lit(hadRawBody),
		"__UNPARSED_AS_FILE__", lit(unparsedAsFile),
		"__BINARY_PROPERTY__", lit(binaryProperty),
	).Replace(restoreTemplate)
}

const restoreTemplate = `// idemhook guard: the item the Webhook gave before the guard was added.
// The Webhook now keeps the raw body (the key is built from the exact bytes);
// this node undoes what that option changes, so the nodes after it read what
// they read before, through $input, $('<this node>') or $node["<this node>"].
const RAW_WEBHOOK = __RAW_WEBHOOK__;
const HAD_RAW_BODY = __HAD_RAW_BODY__;
const UNPARSED_AS_FILE = __UNPARSED_AS_FILE__;
const BINARY_PROPERTY = __BINARY_PROPERTY__;

const src = $(RAW_WEBHOOK).first();
const json = Object.assign({}, src.json);
let binary = src.binary ? Object.assign({}, src.binary) : undefined;
if (!HAD_RAW_BODY && binary) {
  const raw = binary.data;
  delete binary.data;
  if (UNPARSED_AS_FILE && json.body === undefined && raw) {
    // n8n did not parse the body: it gave {} and the bytes as a file.
    json.body = {};
    const size = raw.fileSize !== undefined ? Number(String(raw.fileSize).replace(/[^0-9.]/g, '')) : (raw.data || '').length;
    if (size > 0) {
      const name = 'xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx'.replace(/[xy]/g, (c) => {
        const r = Math.floor(Math.random() * 16);
        return (c === 'x' ? r : (r & 0x3) | 0x8).toString(16);
      });
      binary[BINARY_PROPERTY] = Object.assign({}, raw, { fileName: raw.fileName || name });
    }
  }
  if (Object.keys(binary).length === 0) binary = undefined;
}
const item = { json: json, pairedItem: { item: 0 } };
if (binary) item.binary = binary;
return [item];
`

package guard

import (
	"encoding/json"
	"strings"
)

// restoreScript is the Code node that gives the user's nodes the item their
// Webhook gave before the guard turned its raw-body option on. That option
// (n8n 2.41, Webhook.node.js, measured on typeVersions 1 to 2.1) does two
// things, which the script undoes:
//   - it adds binary.data, the request's exact bytes inline, which the key
//     needs: removed, unless the Webhook kept the raw body already. A
//     multipart body gets no raw bytes (n8n parses the form first): its
//     item, files included, is the Webhook's own, whatever its fields are
//     called;
//   - on typeVersion 1.1 and later, a body n8n does not parse (image/png,
//     application/pdf, application/octet-stream, no content type) no longer
//     becomes `body: {}` and a file of its bytes under the Binary Property
//     name, but no body and the inline bytes: given back as n8n's Webhook
//     makes it, through the same binary data service
//     (this.helpers.prepareBinaryData), so the file has the same metadata
//     (mimeType, fileExtension, fileSize, fileType, bytes) and is stored the
//     same way (a reference in filesystem, database or S3 mode). Its file
//     name is the Content-Disposition's, read and sanitised as n8n does, or
//     like n8n's a random UUID.
//
// The item's json (headers, params, query, body, webhookUrl,
// executionMode) is the Webhook's own, so it is equal to what the Webhook
// gave without the option. The Webhook emits one item per delivery.
func restoreScript(rawWebhook string, hadRawBody bool, webhookVersion float64, binaryProperty string) string {
	lit := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	return strings.NewReplacer(
		"__RAW_WEBHOOK__", lit(rawWebhook),
		"__HAD_RAW_BODY__", lit(hadRawBody),
		"__UNPARSED_AS_FILE__", lit(webhookVersion > 1),
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

// n8n's own reading of the request's headers (parse-incoming-message.js).
function headerParams(parts) {
  const out = {};
  for (const part of parts) {
    const eq = part.indexOf('=');
    if (eq === -1) continue;
    let value = part.slice(eq + 1).trim();
    const quoted = value.startsWith('"') && value.endsWith('"');
    if (quoted) value = value.slice(1, -1);
    try {
      value = decodeURIComponent(value);
      if (!quoted && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    } catch (e) {}
    out[part.slice(0, eq).toLowerCase().trim()] = value;
  }
  return out;
}
function dispositionFileName(header) {
  if (!header) return undefined;
  let cd = String(header);
  if (!cd.startsWith('attachment') && !cd.startsWith('inline')) cd = 'attachment; ' + cd;
  const params = headerParams(cd.split(';').slice(1));
  if (params['filename*']) return params['filename*'].split("'")[2];
  return params.filename;
}
// n8n-workflow's sanitizeFilename.
function sanitizeFilename(name) {
  const parts = name.replace(/\\/g, '/').split('/').filter((p) => p !== '');
  let s = (parts.length ? parts[parts.length - 1] : '').replace(/\0/g, '');
  if (!s || /^\.+$/.test(s)) s = 'untitled';
  return s;
}
function randomUUID() {
  return 'xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx'.replace(/[xy]/g, (c) => {
    const r = Math.floor(Math.random() * 16);
    return (c === 'x' ? r : (r & 0x3) | 0x8).toString(16);
  });
}

const src = $(RAW_WEBHOOK).first();
const json = Object.assign({}, src.json);
let binary = src.binary ? Object.assign({}, src.binary) : undefined;
const headers = json.headers || {};
const contentType = headers['content-type'] ? String(headers['content-type']).split(';')[0].toLowerCase() : null;
if (!HAD_RAW_BODY && binary && contentType !== 'multipart/form-data') {
  const raw = binary.data;
  delete binary.data;
  if (UNPARSED_AS_FILE && json.body === undefined && raw) {
    // n8n did not parse the body: it gave {} and the bytes as a file.
    json.body = {};
    const bytes = Buffer.from(raw.data || '', 'base64');
    if (bytes.length > 0) {
      const file = await this.helpers.prepareBinaryData(bytes, undefined, contentType ? raw.mimeType : 'application/octet-stream');
      // Without a name (or with filename=""), n8n's is random too.
      const given = dispositionFileName(headers['content-disposition']);
      file.fileName = given ? sanitizeFilename(given) : randomUUID();
      binary[BINARY_PROPERTY] = file;
    }
  }
  if (Object.keys(binary).length === 0) binary = undefined;
}
const item = { json: json, pairedItem: { item: 0 } };
if (binary) item.binary = binary;
return [item];
`

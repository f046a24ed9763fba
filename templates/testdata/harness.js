// Runs the Code node script the way n8n's task runner does (an async function
// with $input, require and this.helpers) once per case, and prints one JSON
// result per case. Usage: node harness.js CASES.json
// where CASES.json is [{script: FILE, body: BASE64, headers: {...}}].
'use strict';
const fs = require('fs');

const cases = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor;
const compiled = new Map();

// The n8n sandbox has no crypto global and no WebCrypto: hide them so the
// script cannot depend on them by accident.
delete globalThis.crypto;

async function main() {
  const results = [];
  for (const c of cases) {
    if (!compiled.has(c.script)) {
      compiled.set(c.script, new AsyncFunction('$input', 'require', fs.readFileSync(c.script, 'utf8')));
    }
    const run = compiled.get(c.script);
    // With rawBody on, n8n gives every non-multipart body a binary, an empty
    // one included, and header names in lower case. A multipart body it
    // parses: its fields are $json.body, its files binary properties named
    // after their fields, and no bytes of the body are kept.
    const item = { json: { headers: c.headers || {} }, binary: { data: { data: c.body, mimeType: 'application/octet-stream' } } };
    if (c.form) {
      item.json.body = c.form.fields;
      item.binary = {};
      (c.form.files || []).forEach((f, i) => { item.binary['file' + i] = { data: f, mimeType: 'application/octet-stream' }; });
    }
    const $input = { all: () => [item], first: () => item };
    const helpers = {
      getBinaryDataBuffer: async (index, name) => {
        if (index !== 0 || !item.binary[name]) throw new Error(`unexpected binary ${index}/${name}`);
        return Buffer.from(item.binary[name].data, 'base64');
      },
    };
    try {
      const out = await run.call({ helpers }, $input, require);
      if (!Array.isArray(out) || out.length !== 1) throw new Error('expected one output item, got ' + JSON.stringify(out));
      const j = out[0].json;
      results.push({ key: j.key, source: j.source, error: j.error || '', account: j.account, eventType: j.eventType, body: j.body, headers: j.headers });
    } catch (e) {
      results.push({ error: 'threw: ' + String(e && e.message) });
    }
  }
  process.stdout.write(JSON.stringify(results));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

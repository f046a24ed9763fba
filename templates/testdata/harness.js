// Runs the Code node script the way n8n's task runner does (an async function
// with $input, require and this.helpers) once per body, and prints one JSON
// result per body. Usage: node harness.js SCRIPT BODIES.json
'use strict';
const fs = require('fs');

const [script, bodiesFile] = process.argv.slice(2);
const code = fs.readFileSync(script, 'utf8');
const bodies = JSON.parse(fs.readFileSync(bodiesFile, 'utf8'));
const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor;
const run = new AsyncFunction('$input', 'require', code);

// The n8n sandbox has no crypto global and no WebCrypto: hide them so the
// script cannot depend on them by accident.
delete globalThis.crypto;

async function main() {
  const results = [];
  for (const b64 of bodies) {
    const buf = Buffer.from(b64, 'base64');
    // n8n gives an empty or multipart body no binary data at all.
    const item = buf.length === 0 ? { json: {} } : { json: {}, binary: { data: { data: b64, mimeType: 'text/plain' } } };
    const $input = { all: () => [item], first: () => item };
    const helpers = {
      getBinaryDataBuffer: async (index, name) => {
        if (index !== 0 || name !== 'data') throw new Error(`unexpected binary ${index}/${name}`);
        return Buffer.from(buf);
      },
    };
    try {
      const out = await run.call({ helpers }, $input, require);
      if (!Array.isArray(out) || out.length !== 1) throw new Error('expected one output item, got ' + JSON.stringify(out));
      results.push({ key: out[0].json.key, source: out[0].json.source, error: out[0].json.error || '' });
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

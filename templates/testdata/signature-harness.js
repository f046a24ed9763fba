// Runs the three steps of a workflow signature check the way n8n would:
// signature-prepare.js (Code node), then the Crypto node's HMAC-SHA256 of
// signatureCheck.payload with the credential's secret, then the "Signature
// Valid?" If node's expression (expressions/signature-valid.js) and, when it
// is false, the reason code the 401 answers with (the prepared check's code,
// else invalid_signature; expressions/signature-rejection.js).
// Usage: node signature-harness.js CASES.json where CASES.json is [{prepare:
// FILE, check: FILE (the If's expression), reject: FILE (the 401's), secret,
// encoding, nowMs, body: BASE64, headers}]. Prints [{valid, code, bodyKept, key, body, reads}], key and
// body those of a receipt when the first step builds one, reads the first step's calls of
// this.helpers.getBinaryDataBuffer (each a round trip to n8n in its task runner).
'use strict';
const fs = require('fs');
const nodeCrypto = require('crypto');

const cases = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor;
const realNow = Date.now;
delete globalThis.crypto;

async function runScript(file, items, buffers, reads) {
  const run = new AsyncFunction('$input', 'require', fs.readFileSync(file, 'utf8'));
  const helpers = { getBinaryDataBuffer: async (i, name) => { reads.n++; return Buffer.from(buffers[i]); } };
  return run.call({ helpers }, { all: () => items }, require);
}

async function main() {
  const results = [];
  for (const c of cases) {
    Date.now = () => c.nowMs;
    try {
      const buf = Buffer.from(c.body, 'base64');
      const item = { json: { headers: c.headers }, binary: { data: { data: c.body, mimeType: 'application/json' } } };
      const reads = { n: 0 };
      const prepared = await runScript(c.prepare, [item], [buf], reads);
      // The Crypto node: deep copy of json, HMAC written to expectedSignature.
      const hashed = prepared.map((it) => ({
        json: Object.assign(JSON.parse(JSON.stringify(it.json)), {
          expectedSignature: nodeCrypto.createHmac('sha256', c.secret).update(it.json.signatureCheck.payload).digest(c.encoding),
        }),
        binary: it.binary,
      }));
      const json = hashed[0].json;
      const evaluate = (file) => new Function('$json', 'return (' + fs.readFileSync(file, 'utf8') + ');')(json);
      const valid = evaluate(c.check);
      if (typeof valid !== 'boolean') throw new Error('the expression gave ' + JSON.stringify(valid) + ', not a boolean');
      const code = valid ? '' : JSON.parse(evaluate(c.reject)).code;
      const bodyKept = hashed[0].binary && hashed[0].binary.data && hashed[0].binary.data.data === c.body;
      results.push({ valid, code, bodyKept, key: json.key, body: json.body, reads: reads.n });
    } catch (e) {
      results.push({ valid: false, code: 'threw: ' + String(e && e.message) });
    } finally {
      Date.now = realNow;
    }
  }
  process.stdout.write(JSON.stringify(results));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

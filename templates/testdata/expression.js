// Evaluates an n8n expression the way the crypto-node workflow uses it: the
// Webhook node's $json.body is what n8n's JSON body parser gives (the bytes
// decoded as UTF-8, a BOM dropped, then JSON.parse). Prints one JSON result
// per case. Usage: node expression.js EXPRESSION_FILE CASES.json
// where CASES.json is [BASE64 body, ...].
'use strict';
const fs = require('fs');

const expression = fs.readFileSync(process.argv[2], 'utf8');
const bodies = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
const evaluate = new Function('$', 'return (' + expression + ');');

const results = bodies.map((b64) => {
  const text = new TextDecoder('utf-8').decode(Buffer.from(b64, 'base64'));
  const body = JSON.parse(text);
  const $ = (name) => {
    if (name !== 'Webhook') throw new Error('the expression reads node ' + JSON.stringify(name));
    return { item: { json: { body } } };
  };
  try {
    return { id: evaluate($) };
  } catch (e) {
    return { error: String(e && e.message) };
  }
});
process.stdout.write(JSON.stringify(results));

// idemhook: finish a provider signature check (step 3 of 3).
//
// Runs in an n8n Code node after "Compute Signature" (n8n's Crypto node,
// HMAC-SHA256 of signatureCheck.payload with the secret of an encrypted n8n
// credential, written to expectedSignature). It compares the expected
// signature with every signature the request carries, in constant time, and
// writes signature.valid for the "Signature Valid?" If node. The raw body
// travels on untouched for the key step. Needs no built-in module.

// Constant time for equal lengths: every character is compared.
function sameString(a, b) {
  if (typeof a !== 'string' || typeof b !== 'string' || a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

function check(sc, expected) {
  if (!sc || typeof sc !== 'object') return { valid: false, code: 'invalid_signature', reason: 'no signature check was prepared' };
  if (sc.code) return { valid: false, code: sc.code, reason: sc.reason };
  let found = 0;
  for (const c of sc.candidates || []) {
    if (sameString(String(expected), c)) found = 1;
  }
  if (found === 1) return { valid: true, code: '', reason: '' };
  return { valid: false, code: 'invalid_signature', reason: 'no signature matches the body and secret' };
}

return $input.all().map((item, i) => ({
  json: { headers: item.json.headers, signature: check(item.json.signatureCheck, item.json.expectedSignature) },
  binary: item.binary,
  pairedItem: { item: i },
}));

// idemhook: prepare a provider signature check (step 1 of 3).
//
// Runs in an n8n Code node ("Run Once for All Items") right after the
// Webhook node (Raw Body on), before the key is built. It reads the raw bytes
// and the provider's headers and writes, for the next node (n8n's Crypto
// node, which computes the HMAC with the secret held in an encrypted n8n
// credential), the exact string to sign and the signatures the request
// carries. The Code node never sees the secret. Needs no built-in module.
//
// Mirrors package signature (Go); `idemhook generate --verify` sets:
const PROVIDER = 'stripe';
const TOLERANCE_SECONDS = 300;

// n8n gives header names in lower case; a repeated header may be an array.
function header(headers, name) {
  const v = headers ? headers[name] : undefined;
  if (Array.isArray(v)) return typeof v[0] === 'string' ? v[0] : '';
  return typeof v === 'string' ? v : '';
}

// A buffer is valid UTF-8 exactly when decoding and re-encoding it gives the
// same bytes. The Crypto node signs a string as UTF-8, so only such bodies
// can be signed byte for byte here.
function utf8Text(buf) {
  const text = buf.toString('utf8');
  return Buffer.from(text, 'utf8').equals(buf) ? text : null;
}

function fail(code, reason) {
  return { payload: '', candidates: [], code: code, reason: reason };
}

function checkTimestamp(raw) {
  if (!/^[0-9]{1,12}$/.test(raw) || Number(raw) <= 0) return fail('malformed_signature', 'timestamp is not unix seconds');
  const age = Math.floor(Date.now() / 1000) - Number(raw);
  if (age > TOLERANCE_SECONDS) return fail('signature_too_old', 'signed ' + age + 's ago, tolerance ' + TOLERANCE_SECONDS + 's');
  if (-age > TOLERANCE_SECONDS) return fail('signature_too_new', 'signed ' + -age + 's ahead, tolerance ' + TOLERANCE_SECONDS + 's');
  return null;
}

const HEX64 = /^[0-9a-fA-F]{64}$/;

// signed returns the check for a payload built from the body, once the
// headers have passed.
function signed(prefix, buf, candidates) {
  const body = utf8Text(buf);
  if (body === null) return fail('invalid_signature', 'the body is not UTF-8, so the workflow cannot verify it: use the keysvc mode');
  return { payload: prefix + body, candidates: candidates, code: '', reason: '' };
}

function prepare(headers, buf) {
  switch (PROVIDER) {
    case 'stripe': {
      const h = header(headers, 'stripe-signature');
      if (h === '') return fail('missing_signature', 'missing signature header: Stripe-Signature');
      if (h.length > 8192) return fail('malformed_signature', 'Stripe-Signature is too long');
      let t = '';
      const candidates = [];
      for (const part of h.split(',')) {
        const eq = part.trim().indexOf('=');
        if (eq < 0) return fail('malformed_signature', 'Stripe-Signature element is not key=value');
        const k = part.trim().slice(0, eq);
        const v = part.trim().slice(eq + 1);
        if (k === 't') {
          if (t !== '') return fail('malformed_signature', 'Stripe-Signature has two timestamps');
          t = v;
        } else if (k === 'v1' && HEX64.test(v)) {
          candidates.push(v.toLowerCase());
        }
      }
      if (t === '') return fail('malformed_signature', 'Stripe-Signature has no timestamp');
      const stale = checkTimestamp(t);
      if (stale) return stale;
      if (candidates.length === 0) return fail('invalid_signature', 'Stripe-Signature has no v1 signature');
      return signed(t + '.', buf, candidates);
    }
    case 'github': {
      const h = header(headers, 'x-hub-signature-256');
      if (h === '') return fail('missing_signature', 'missing signature header: X-Hub-Signature-256');
      if (!h.startsWith('sha256=') || !HEX64.test(h.slice(7))) return fail('malformed_signature', 'X-Hub-Signature-256 is not sha256=<64 hex digits>');
      return signed('', buf, [h.slice(7).toLowerCase()]);
    }
    case 'shopify': {
      const h = header(headers, 'x-shopify-hmac-sha256').trim();
      if (h === '') return fail('missing_signature', 'missing signature header: X-Shopify-Hmac-Sha256');
      if (!/^[A-Za-z0-9+/]{43}=$/.test(h)) return fail('malformed_signature', 'X-Shopify-Hmac-Sha256 is not a base64 SHA-256 HMAC');
      return signed('', buf, [h]);
    }
    case 'slack': {
      const ts = header(headers, 'x-slack-request-timestamp');
      const sig = header(headers, 'x-slack-signature');
      if (ts === '') return fail('missing_signature', 'missing signature header: X-Slack-Request-Timestamp');
      if (sig === '') return fail('missing_signature', 'missing signature header: X-Slack-Signature');
      const stale = checkTimestamp(ts);
      if (stale) return stale;
      if (!sig.startsWith('v0=') || !HEX64.test(sig.slice(3))) return fail('malformed_signature', 'X-Slack-Signature is not v0=<64 hex digits>');
      return signed('v0:' + ts + ':', buf, [sig.slice(3).toLowerCase()]);
    }
    default:
      return fail('provider_not_configured', 'unknown provider ' + JSON.stringify(PROVIDER));
  }
}

const out = [];
const items = $input.all();
for (let i = 0; i < items.length; i++) {
  const hasBytes = items[i].binary && items[i].binary.data;
  const buf = hasBytes ? await this.helpers.getBinaryDataBuffer(i, 'data') : Buffer.alloc(0);
  out.push({
    json: { headers: items[i].json.headers, signatureCheck: prepare(items[i].json.headers, buf) },
    binary: items[i].binary,
    pairedItem: { item: i },
  });
}
return out;

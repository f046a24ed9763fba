// The key spec's functions: templates/code-node/key-spec.js, the one source
// of the JavaScript key code, shared by this Code node and the n8n community
// node (n8n-nodes-idemhook). They read only their arguments.
const MAX_DEPTH = 1000;
const MAX_ID_BYTES = 255;

function isSpace(c) {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
}

function isHighSurrogate(u) {
  return u >= 0xd800 && u <= 0xdbff;
}

function isLowSurrogate(u) {
  return u >= 0xdc00 && u <= 0xdfff;
}

function validId(id) {
  const bytes = Buffer.byteLength(id, 'utf8');
  if (bytes === 0 || bytes > MAX_ID_BYTES) return false;
  for (let i = 0; i < id.length; i++) {
    const u = id.charCodeAt(i);
    if (u < 0x20 || u === 0x7f) return false;
  }
  return true;
}

// Scanner over the decoded text, one method per JSON production. It mirrors
// eventkey/scan.go; a failed production returns false and the body is hashed.
// member is the top-level member sought ("id" for the spec).
function Scanner(text, member) {
  this.s = text;
  this.member = member;
  this.pos = 0;
  this.idFound = false;
  this.id = '';
  this.idUsable = false;
}

Scanner.prototype.peek = function () {
  return this.pos < this.s.length ? this.s.charCodeAt(this.pos) : 0;
};

Scanner.prototype.skipSpace = function () {
  while (this.pos < this.s.length && isSpace(this.s.charCodeAt(this.pos))) this.pos++;
};

Scanner.prototype.value = function (depth) {
  this.skipSpace();
  const c = this.peek();
  if (c === 0x7b) return this.object(depth + 1);
  if (c === 0x5b) return this.array(depth + 1);
  if (c === 0x22) return this.str() !== null;
  if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return this.number();
  if (c === 0x74) return this.literal('true');
  if (c === 0x66) return this.literal('false');
  if (c === 0x6e) return this.literal('null');
  return false;
};

Scanner.prototype.object = function (depth) {
  if (depth > MAX_DEPTH) return false;
  this.pos++;
  this.skipSpace();
  if (this.peek() === 0x7d) {
    this.pos++;
    return true;
  }
  for (;;) {
    this.skipSpace();
    if (this.peek() !== 0x22) return false;
    const name = this.str();
    if (name === null) return false;
    this.skipSpace();
    if (this.peek() !== 0x3a) return false;
    this.pos++;
    this.skipSpace();
    if (depth === 1 && name.text === this.member) {
      if (!this.idMember()) return false;
    } else if (!this.value(depth)) {
      return false;
    }
    this.skipSpace();
    const c = this.peek();
    if (c === 0x2c) {
      this.pos++;
    } else if (c === 0x7d) {
      this.pos++;
      return true;
    } else {
      return false;
    }
  }
};

// A later top-level member of the sought name overrides an earlier one, as
// JSON.parse does.
Scanner.prototype.idMember = function () {
  this.idFound = true;
  this.id = '';
  this.idUsable = false;
  if (this.peek() !== 0x22) return this.value(1);
  const r = this.str();
  if (r === null) return false;
  this.id = r.text;
  this.idUsable = r.paired && validId(r.text);
  return true;
};

Scanner.prototype.array = function (depth) {
  if (depth > MAX_DEPTH) return false;
  this.pos++;
  this.skipSpace();
  if (this.peek() === 0x5d) {
    this.pos++;
    return true;
  }
  for (;;) {
    if (!this.value(depth)) return false;
    this.skipSpace();
    const c = this.peek();
    if (c === 0x2c) {
      this.pos++;
    } else if (c === 0x5d) {
      this.pos++;
      return true;
    } else {
      return false;
    }
  }
};

const SIMPLE_ESCAPES = { 0x22: '"', 0x5c: '\\', 0x2f: '/', 0x62: '\b', 0x66: '\f', 0x6e: '\n', 0x72: '\r', 0x74: '\t' };

// Returns {text, paired} or null for a malformed string. paired is false when
// an escape left a surrogate without its partner.
Scanner.prototype.str = function () {
  this.pos++;
  let text = '';
  let paired = true;
  while (this.pos < this.s.length) {
    const c = this.s.charCodeAt(this.pos);
    if (c === 0x22) {
      this.pos++;
      return { text: text, paired: paired };
    }
    if (c < 0x20) return null;
    if (c !== 0x5c) {
      text += this.s[this.pos];
      this.pos++;
      continue;
    }
    this.pos++;
    if (this.pos >= this.s.length) return null;
    const e = this.s.charCodeAt(this.pos);
    this.pos++;
    if (SIMPLE_ESCAPES[e] !== undefined) {
      text += SIMPLE_ESCAPES[e];
      continue;
    }
    if (e !== 0x75) return null;
    const u = this.hex4();
    if (u < 0) return null;
    if (isHighSurrogate(u)) {
      const lo = this.lowSurrogateAfter();
      if (lo >= 0) {
        text += String.fromCharCode(u, lo);
        continue;
      }
      paired = false;
      text += '\ufffd';
      continue;
    }
    if (isLowSurrogate(u)) {
      paired = false;
      text += '\ufffd';
      continue;
    }
    text += String.fromCharCode(u);
  }
  return null;
};

// Consumes a "\uDC00".."\uDFFF" escape if one follows; returns it or -1.
Scanner.prototype.lowSurrogateAfter = function () {
  if (this.pos + 6 > this.s.length || this.s[this.pos] !== '\\' || this.s[this.pos + 1] !== 'u') return -1;
  const save = this.pos;
  this.pos += 2;
  const lo = this.hex4();
  if (lo < 0 || !isLowSurrogate(lo)) {
    this.pos = save;
    return -1;
  }
  return lo;
};

Scanner.prototype.hex4 = function () {
  if (this.pos + 4 > this.s.length) return -1;
  const h = this.s.slice(this.pos, this.pos + 4);
  if (!/^[0-9a-fA-F]{4}$/.test(h)) return -1;
  this.pos += 4;
  return parseInt(h, 16);
};

Scanner.prototype.number = function () {
  if (this.peek() === 0x2d) this.pos++;
  const c = this.peek();
  if (c === 0x30) {
    this.pos++;
  } else if (c >= 0x31 && c <= 0x39) {
    this.digits();
  } else {
    return false;
  }
  if (this.peek() === 0x2e) {
    this.pos++;
    if (!this.digits()) return false;
  }
  const e = this.peek();
  if (e === 0x65 || e === 0x45) {
    this.pos++;
    const sign = this.peek();
    if (sign === 0x2b || sign === 0x2d) this.pos++;
    if (!this.digits()) return false;
  }
  return true;
};

Scanner.prototype.digits = function () {
  const start = this.pos;
  for (let c = this.peek(); c >= 0x30 && c <= 0x39; c = this.peek()) this.pos++;
  return this.pos > start;
};

Scanner.prototype.literal = function (word) {
  if (this.s.slice(this.pos, this.pos + word.length) !== word) return false;
  this.pos += word.length;
  return true;
};

// A buffer is valid UTF-8 exactly when decoding and re-encoding it gives the
// same bytes: Node replaces every invalid sequence with U+FFFD.
function isValidUtf8(buf) {
  return Buffer.from(buf.toString('utf8'), 'utf8').equals(buf);
}

// The last top-level string member called name, under the id clause of the
// spec, or null.
function bodyMember(buf, name) {
  if (!isValidUtf8(buf)) return null;
  let start = 0;
  if (buf.length >= 3 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf) start = 3;
  const sc = new Scanner(buf.subarray(start).toString('utf8'), name);
  sc.skipSpace();
  if (sc.peek() !== 0x7b) return null;
  if (!sc.value(0)) return null;
  sc.skipSpace();
  if (sc.pos !== sc.s.length || !sc.idFound || !sc.idUsable) return null;
  return sc.id;
}

// A receipt's value (type, account): a header's when it is a usable id; a
// top-level member under the id rules; down a longer path, a string that is
// a usable header id or a whole number up to Number.MAX_SAFE_INTEGER.
function receiptValue(headers, buf, header, path) {
  if (header !== '') {
    const v = headerValue(headers, header);
    return validId(v) && printableAscii(v) ? v : null;
  }
  if (buf.length === 0 || path.length === 0) return null;
  if (path.length === 1) return bodyMember(buf, path[0]);
  if (!isObject(buf)) return null;
  let v;
  try {
    v = JSON.parse(buf.toString('utf8').replace(/^\ufeff/, ''));
  } catch (e) {
    return null;
  }
  for (const seg of path) {
    if (v === null || typeof v !== 'object' || Array.isArray(v) || !Object.prototype.hasOwnProperty.call(v, seg)) return null;
    v = v[seg];
  }
  if (typeof v === 'string') return validId(v) && printableAscii(v) ? v : null;
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return String(v);
  return null;
}

// isObject mirrors eventkey.IsObject: one JSON object the scanner accepts.
function isObject(buf) {
  if (!isValidUtf8(buf)) return false;
  let start = 0;
  if (buf.length >= 3 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf) start = 3;
  const sc = new Scanner(buf.subarray(start).toString('utf8'), '');
  sc.skipSpace();
  if (sc.peek() !== 0x7b) return false;
  if (!sc.value(0)) return false;
  sc.skipSpace();
  return sc.pos === sc.s.length;
}

const EMPTY_BODY = 'empty body: there is nothing to derive an idempotency key from';

const EMPTY_FORM = EMPTY_BODY + ' (a multipart form with no field and no file)';

// n8n compares the media type before any ';', in lower case.
function isMultipart(contentType) {
  return String(contentType).split(';')[0].toLowerCase() === 'multipart/form-data';
}

// A multipart form, as n8n gives it ({fields: $json.body, files: [Buffer]}),
// is keyed by its fields and files: n8n keeps none of its bytes, and a
// sender's boundary changes with every request. Mirrors eventkey.Form.Key:
// field names in the order of their UTF-8 bytes, each with its values as
// sent; the files' SHA-256 in order.
function formKey(form) {
  const fields = form.fields && typeof form.fields === 'object' ? form.fields : {};
  const names = Object.keys(fields);
  if (names.length === 0 && form.files.length === 0) return { key: '', source: '', error: EMPTY_FORM };
  names.sort((a, b) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')));
  const line = (label, s) => label + ' ' + Buffer.byteLength(s, 'utf8') + ' ' + s + '\n';
  let text = 'idemhook form v1\n';
  for (const name of names) {
    text += line('field', name);
    const v = fields[name];
    for (const value of Array.isArray(v) ? v : [v]) text += line('value', String(value));
  }
  const sums = form.files.map((b) => crypto.createHash('sha256').update(b).digest('hex')).sort();
  for (const s of sums) text += 'file ' + s + '\n';
  return { key: 'form:' + crypto.createHash('sha256').update(text, 'utf8').digest('hex'), source: 'form' };
}

// The spec's own clauses: a form by its form, any other body by its bytes.
function specKey(buf, form) {
  return form ? formKey(form) : deriveKey(buf);
}

// Returns {key, source}; key is '' for an empty body, which has none.
function deriveKey(buf) {
  if (!buf || buf.length === 0) return { key: '', source: '', error: EMPTY_BODY };
  const id = bodyMember(buf, 'id');
  if (id !== null) return { key: 'evt:' + id, source: 'event_id' };
  return { key: 'sha256:' + crypto.createHash('sha256').update(buf).digest('hex'), source: 'body_sha256' };
}

const PRESET_RULES = {
  standardwebhooks: { prefix: 'swh', headers: ['webhook-id', 'svix-id'] },
  github: { prefix: 'gh', headers: ['x-github-delivery'], scopeHeader: 'x-github-hook-id' },
  shopify: { prefix: 'shopify', headers: ['x-shopify-webhook-id'], scopeHeader: 'x-shopify-shop-domain' },
  slack: { prefix: 'slack', bodyMember: 'event_id' },
};

function validScope(s) {
  return s.length <= 64 && /^[A-Za-z0-9._-]*$/.test(s);
}

// Header ids must be printable ASCII: n8n decodes header bytes as Latin-1.
function printableAscii(s) {
  return /^[\x20-\x7e]*$/.test(s);
}

// n8n gives header names in lower case; a repeated header may be an array.
function headerValue(headers, name) {
  const v = headers ? headers[name] : undefined;
  if (Array.isArray(v)) return typeof v[0] === 'string' ? v[0] : '';
  return typeof v === 'string' ? v : '';
}

// Mirrors eventkey.DeriveFor; form is null unless the body is a multipart
// form.
function deriveFor(preset, headers, buf, scope, form) {
  if (preset !== '' && preset !== 'stripe' && !PRESET_RULES[preset]) {
    return { key: '', source: '', error: 'unknown key preset ' + JSON.stringify(preset) };
  }
  if (!validScope(scope)) return { key: '', source: '', error: 'invalid key scope' };
  const rule = PRESET_RULES[preset];
  if (!rule) {
    if (scope !== '') return { key: '', source: '', error: 'invalid key scope: this preset takes no scope' };
    return specKey(buf, form);
  }
  let id = '';
  for (const h of rule.headers || []) {
    id = headerValue(headers, h);
    if (id !== '') break;
  }
  let usable = validId(id) && printableAscii(id);
  if (rule.bodyMember) {
    id = buf && buf.length > 0 ? bodyMember(buf, rule.bodyMember) : null;
    usable = id !== null;
  }
  if (!usable) return specKey(buf, form);
  if (scope === '' && rule.scopeHeader) {
    const s = headerValue(headers, rule.scopeHeader);
    if (validScope(s)) scope = s;
  }
  return { key: [rule.prefix, scope, id].join(':'), source: 'provider_id' };
}

// The event type is only copied to the business step; it plays no part in
// the key.
function eventType(buf, source) {
  if (source === 'body_sha256' || source === '') return '';
  try {
    const v = JSON.parse(buf.toString('utf8').replace(/^\ufeff/, ''));
    return typeof v.type === 'string' ? v.type : '';
  } catch (e) {
    return '';
  }
}

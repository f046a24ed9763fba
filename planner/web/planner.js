// idemhook planner: the page's script. It loads the Go module (the key spec
// and the generator, compiled to WebAssembly) from idemhook.wasm.js, computes
// the key of what is pasted (the SHA-256 with crypto.subtle.digest), and
// generates the files. It makes no network request: nothing pasted leaves
// the page.
'use strict';

const $ = (id) => document.getElementById(id);
const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

// The body's bytes: from the text area (UTF-8), or exactly from a file.
let fileBytes = null;
let computeSeq = 0;

function bodyBytes() {
  return fileBytes !== null ? fileBytes : encoder.encode($('body').value);
}

async function sha256Hex(bytes) {
  const digest = await crypto.subtle.digest('SHA-256', bytes);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

// computeKey shows the key of the current delivery and the rule that made it.
async function computeKey() {
  const seq = ++computeSeq;
  const bytes = bodyBytes();
  const r = idemhook.explain(bytes, $('headers').value, $('preset').value, $('scope').value);
  let key = '';
  if (r.error) {
    key = '';
  } else if (r.source === 'body_sha256') {
    key = 'sha256:' + (await sha256Hex(bytes));
    if (key !== r.key) {
      r.sentence += ' (The page and the Go module disagree on this hash: please report it.)';
    }
  } else {
    key = r.key;
  }
  if (seq !== computeSeq) return; // a newer input is being computed
  $('key').textContent = key;
  $('key').dataset.rule = r.rule;
  const rule = $('rule');
  rule.replaceChildren();
  const code = document.createElement('code');
  code.textContent = r.rule;
  rule.append(code, ' ', r.error || r.sentence);
  if (r.fallback) {
    const fb = document.createElement('span');
    fb.className = 'hint';
    fb.textContent = ' (spec rule: ' + r.fallback + ')';
    rule.append(fb);
  }
  const preset = $('preset').value || 'default';
  $('body-source').textContent = (fileBytes !== null ? 'Bytes from the file (' + fileBytes.length + ' bytes); typing in the text area replaces them. ' : '')
    + 'Preset: ' + preset + ($('scope').value ? ', scope: ' + $('scope').value : '') + '.';
  computeEffect(bytes);
  document.body.dataset.keyReady = String(seq);
}

// computeEffect shows what the chosen rules decide about the delivery
// before the database is read: the rule, the effect key, or the decision
// a check already makes; and what each state of the row leads to.
function computeEffect(bytes) {
  const r = idemhook.effect(bytes, $('headers').value, $('rules-preset').value);
  const rule = $('effect-rule');
  const list = $('effect-row');
  rule.replaceChildren();
  list.replaceChildren();
  $('effect-key').textContent = r.effectKey || '';
  if (r.error) {
    rule.textContent = r.error;
    return;
  }
  const code = document.createElement('code');
  if (r.state) {
    code.textContent = r.state + ' ' + r.outcome;
    rule.append(code, ' ', r.detail + (r.rule ? ' (rule ' + r.rule + ')' : '') + ': no effect, whatever the database holds.');
    return;
  }
  code.textContent = r.rule;
  rule.append('Rule ', code, ': ' + r.table + ' row ' + JSON.stringify(r.id) + ' of account ' + JSON.stringify(r.account)
    + (r.taskKeys.length ? '; outbox tasks ' + r.taskKeys.join(', ') : '') + '. Once the effect is recorded, any other event proposing it is processed as effect_exists. The row decides:');
  for (const c of r.row) {
    const li = document.createElement('li');
    li.textContent = c.state + ' → ' + c.decision;
    list.append(li);
  }
}

// ---- options and files ----

let flags = [];
let zipURL = null;
const fileURLs = [];

function fieldFor(flag) {
  const wrap = document.createElement('div');
  wrap.className = 'option';
  wrap.dataset.pattern = flag.pattern;
  const id = 'opt-' + flag.name;
  const label = document.createElement('label');
  label.htmlFor = id;
  label.textContent = '--' + flag.name;
  let input;
  if (flag.choices && flag.choices.length) {
    input = document.createElement('select');
    for (const c of flag.choices) {
      const o = document.createElement('option');
      o.value = c;
      o.textContent = c;
      input.append(o);
    }
    input.value = flag.default;
  } else {
    input = document.createElement('input');
    input.type = 'text';
    input.value = flag.default;
    input.spellcheck = false;
    input.autocomplete = 'off';
  }
  input.id = id;
  input.name = flag.name;
  input.dataset.default = flag.default;
  const usage = document.createElement('p');
  usage.className = 'usage';
  usage.id = id + '-usage';
  usage.textContent = flag.usage;
  const error = document.createElement('p');
  error.className = 'error';
  error.id = id + '-error';
  error.setAttribute('role', 'alert');
  input.setAttribute('aria-describedby', usage.id + ' ' + error.id);
  wrap.append(label, input, usage, error);
  return wrap;
}

function buildForm() {
  flags = idemhook.options();
  const form = $('options');
  const common = document.createElement('fieldset');
  common.append(Object.assign(document.createElement('legend'), { textContent: 'Options' }));
  const inbox = document.createElement('fieldset');
  inbox.id = 'inbox-options';
  inbox.append(Object.assign(document.createElement('legend'), { textContent: 'Inbox pattern' }));
  for (const f of flags) {
    (f.pattern === 'inbox' ? inbox : common).append(fieldFor(f));
  }
  form.append(common, inbox);
  form.addEventListener('input', generate);
  form.addEventListener('change', generate);
  form.addEventListener('submit', (e) => e.preventDefault());
}

// flagValues are the options that differ from their defaults, as the
// command line would pass them.
function flagValues() {
  const values = {};
  for (const f of flags) {
    const v = $('opt-' + f.name).value.trim();
    if (v !== '' && v !== f.default) values[f.name] = v;
  }
  return values;
}

function generate() {
  $('inbox-options').hidden = $('opt-pattern').value !== 'inbox';
  for (const f of flags) $('opt-' + f.name + '-error').textContent = '';
  $('generate-error').textContent = '';
  for (const u of fileURLs.splice(0)) URL.revokeObjectURL(u);
  if (zipURL) URL.revokeObjectURL(zipURL);
  zipURL = null;
  const list = $('files');
  list.replaceChildren();
  const r = idemhook.generate(flagValues());
  if (r.error) {
    const target = r.flag && $('opt-' + r.flag + '-error');
    (target || $('generate-error')).textContent = r.error;
    $('download-zip').removeAttribute('href');
    $('download-zip').setAttribute('aria-disabled', 'true');
    return;
  }
  for (const name of r.names) {
    const type = name.endsWith('.sql') ? 'application/sql' : 'application/json';
    const url = URL.createObjectURL(new Blob([r.files[name]], { type: type }));
    fileURLs.push(url);
    const a = Object.assign(document.createElement('a'), { href: url, download: name, textContent: name });
    a.dataset.file = name;
    const li = document.createElement('li');
    li.append(a, ' (' + encoder.encode(r.files[name]).length + ' bytes)');
    list.append(li);
  }
  zipURL = URL.createObjectURL(new Blob([r.zip], { type: 'application/zip' }));
  $('download-zip').href = zipURL;
  $('download-zip').removeAttribute('aria-disabled');
  document.body.dataset.filesReady = String(Number(document.body.dataset.filesReady || 0) + 1);
}

// ---- start ----

async function start() {
  const go = new Go();
  const bytes = Uint8Array.from(atob(IDEMHOOK_WASM_BASE64), (c) => c.charCodeAt(0));
  const { instance } = await WebAssembly.instantiate(bytes, go.importObject);
  go.run(instance);
  buildForm();
  for (const name of idemhook.rulesPresets()) {
    $('rules-preset').append(Object.assign(document.createElement('option'), { value: name, textContent: name }));
  }
  $('rules-preset').addEventListener('change', computeKey);
  for (const id of ['body', 'headers', 'scope']) $(id).addEventListener('input', () => {
    if (id === 'body') fileBytes = null;
    computeKey();
  });
  $('preset').addEventListener('change', computeKey);
  $('body-file').addEventListener('change', async () => {
    const file = $('body-file').files[0];
    if (!file) return;
    fileBytes = new Uint8Array(await file.arrayBuffer());
    try {
      $('body').value = decoder.decode(fileBytes);
    } catch (e) {
      $('body').value = '';
      $('body').placeholder = '(the file is not UTF-8: its bytes are used as they are)';
    }
    computeKey();
  });
  $('copy-key').addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText($('key').textContent);
      $('status').textContent = 'Key copied.';
    } catch (e) {
      $('status').textContent = 'Copying is not allowed here: select the key and copy it.';
    }
  });
  await computeKey();
  generate();
  $('status').textContent = 'Ready. Nothing you paste leaves this page.';
  document.body.dataset.ready = 'true';
}

start().catch((e) => {
  $('status').textContent = 'The planner could not start: ' + e;
});

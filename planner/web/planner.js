// idemhook planner: the page's script. It loads the Go module (the key spec,
// the generator and the effect rules, compiled to WebAssembly) from
// idemhook.wasm.js, computes the key of what is pasted (the SHA-256 with
// crypto.subtle.digest), generates the files and writes the command line
// that generates the same files. It makes no
// network request: nothing pasted leaves the page.
'use strict';

const $ = (id) => document.getElementById(id);
const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

// ---- what the page knows of the generator's choices ----

// The guarantees offered in step 2. Each is a mode of `idemhook generate`:
// the flags it sets, and one line on what it guarantees and what it costs
// (the README's "Modes" and "Scale-out and faults" say more).
const GUARANTEES = [
  ['reserve', 'Reserve', 'reserve', 'code-node', 'reserve',
    'A replay is answered 200 duplicate and your step runs once. Costs: a crash between the reservation and your step loses that event; the Code node needs n8n to allow crypto.'],
  ['lease', 'Lease', 'reserve', 'code-node', 'lease',
    'None lost: a dead attempt\'s lease expires and the retry takes over; a retry while it runs gets 409. Costs: a Mark Done step; a crash right after your step can repeat it.'],
  ['transactional', 'Transactional', 'reserve', 'code-node', 'transactional',
    'Exactly once, none lost: the reservation and your business write are one SQL statement. Costs: your step must be SQL on the same PostgreSQL.'],
  ['crypto-node', 'Crypto node', 'reserve', 'crypto-node', 'reserve',
    'Reserve without a Code node: n8n\'s Crypto node hashes, no environment variable to set. Costs: the id is read from n8n\'s parsed body (JSON sent as text/plain is hashed); body ids only.'],
  ['keysvc', 'keysvc', 'reserve', 'keysvc', 'reserve',
    'keysvc derives and reserves the key and checks the signature: no Code or Crypto node, one table shared with other tools. Costs: one more service, reachable from n8n.'],
  ['inbox', 'Inbox', 'inbox', 'code-node', 'reserve',
    'Save, answer 200, then decide: one effect per business change even across events, none lost, external calls through an outbox. Costs: four or five workflows and effect rules.'],
].map(([value, title, pattern, hashing, guard, line]) => ({ value, title, flags: { pattern, hashing, guard }, line }));

// Where each option is shown. Options not named here are shown among the
// advanced ones, so a new flag of the generator is never left out.
const GROUPS = [
  { id: 'group-basic', legend: 'The workflow', flags: ['path', 'name', 'credential', 'retention', 'lease', 'keysvc-url', 'keysvc-credential', 'receiver', 'outbox-url', 'outbox-credential', 'account', 'events'] },
  { id: 'group-mode', legend: 'Set by the steps above', advanced: true, flags: ['pattern', 'hashing', 'guard', 'verify'] },
  { id: 'group-signature', legend: 'Signature', advanced: true, flags: ['verify-credential', 'tolerance'] },
  { id: 'group-tables', legend: 'Tables', advanced: true, flags: ['events-table', 'business-table', 'db-schema'] },
  { id: 'group-executions', legend: 'What n8n keeps of executions', advanced: true, flags: ['save-success', 'save-errors', 'save-manual', 'execution-timeout'] },
  { id: 'group-inbox', legend: 'The worker and the recoverer', advanced: true, flags: ['defer-limit', 'claim-lease', 'max-attempts', 'retry-backoff', 'sweep-every'] },
  { id: 'group-outbox', legend: 'The outbox', advanced: true, flags: ['outbox-max-attempts', 'outbox-backoff', 'outbox-timeout', 'outbox-batch'] },
  { id: 'group-other', legend: 'Other', advanced: true, flags: [] },
];

// MIRRORS pair a control of the steps above with the option it is: the
// control is what people use; a hidden field #opt-<flag> in #options carries
// its value, for automation that sets options by id. Whichever of the two
// changed since they were last synced wins.
const MIRRORS = [['preset', 'preset'], ['scope', 'scope'], ['rules-preset', 'rules']];

// READS says when a mode reads an option that its pattern allows (the
// rest is Flag.Pattern): an option the files would not change with is
// hidden and not sent. TestOptionsShownAreTheOnesThatChangeTheFiles checks
// this against the generator.
const READS = {
  hashing: (m) => m.pattern === 'reserve', // the inbox builds its receipt in the Code node
  lease: (m) => m.guard === 'lease',
  'keysvc-url': (m) => m.hashing === 'keysvc',
  'keysvc-credential': (m) => m.hashing === 'keysvc',
  'verify-credential': n8nVerifies,
  tolerance: n8nVerifies,
  'outbox-credential': (m) => m.outbox,
  'outbox-max-attempts': (m) => m.outbox,
  'outbox-backoff': (m) => m.outbox,
  'outbox-timeout': (m) => m.outbox,
  'outbox-batch': (m) => m.outbox,
};

// n8nVerifies: the signature is checked by the workflow's Crypto node, not
// by keysvc, so its credential and tolerance are the workflow's.
function n8nVerifies(m) {
  const keysvcVerifies = m.pattern === 'inbox' ? m.receiver === 'keysvc' : m.hashing === 'keysvc';
  return m.verify !== '' && !keysvcVerifies;
}

// Header presets read their id from a header, and only they take a scope.
const SCOPED = new Set(['standardwebhooks', 'github', 'shopify', 'slack']);

// A sample header line per provider, as the headers' placeholder.
const SAMPLE_HEADERS = {
  stripe: 'Stripe-Signature: t=1700000000,v1=…',
  standardwebhooks: 'webhook-id: msg_2Kx3\nwebhook-timestamp: 1700000000',
  github: 'X-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958\nX-GitHub-Hook-ID: 292430182',
  shopify: 'X-Shopify-Webhook-Id: b54557e4-bdd9-4b37-8a5f-bf7d70bcd043\nX-Shopify-Shop-Domain: example.myshopify.com',
  slack: 'X-Slack-Signature: v0=…',
};

let flags = []; // idemhook.options(): the CLI's option table
let providers = []; // idemhook.providers(): what choosing a provider sets
let mode = { pattern: 'reserve', hashing: 'code-node', guard: 'reserve', receiver: 'n8n', outbox: false, verify: '' };

// ---- the delivery and its key ----

// The body's bytes: from the text area (UTF-8), or exactly from a file.
let fileBytes = null;
let computeSeq = 0;
// Nothing is judged before a delivery was entered: an empty body at load
// is not an error, only an empty page (options changed do not count).
let touched = false;

function bodyBytes() {
  return fileBytes !== null ? fileBytes : encoder.encode($('body').value);
}

async function sha256Hex(bytes) {
  const digest = await crypto.subtle.digest('SHA-256', bytes);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

// keyPreset is the preset the key is read with: #preset, else the --verify
// provider's, as the generator reads --preset, so that the key shown is the
// one the generated workflow derives.
function keyPreset() {
  return $('preset').value || mode.verify;
}

// computeKey shows the key of the current delivery and the rule that made it.
async function computeKey() {
  const seq = ++computeSeq;
  if (!touched) {
    showKey('', null);
    document.body.dataset.keyReady = String(seq);
    return;
  }
  const bytes = bodyBytes();
  const r = idemhook.explain(bytes, $('headers').value, keyPreset(), $('scope').value);
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
  showKey(key, r);
  $('body-source').textContent = (fileBytes !== null ? 'Bytes from the file (' + fileBytes.length + ' bytes); typing in the text area replaces them. ' : '')
    + 'Key preset: ' + (keyPreset() || 'default') + ($('scope').value ? ', scope: ' + $('scope').value : '') + '.';
  computeEffect(bytes);
  document.body.dataset.keyReady = String(seq);
}

// showKey writes the key and its rule: a code, then the sentence.
function showKey(key, r) {
  $('key').textContent = key;
  const rule = $('rule');
  rule.replaceChildren();
  if (!r) {
    delete $('key').dataset.rule;
    $('effect-key').textContent = '';
    $('effect-rule').replaceChildren();
    $('effect-row').replaceChildren();
    return;
  }
  $('key').dataset.rule = r.rule;
  rule.append(code(r.rule), ' ', r.error || r.sentence);
  if (r.fallback) {
    const fb = document.createElement('span');
    fb.className = 'hint';
    fb.textContent = ' (spec rule: ' + r.fallback + ')';
    rule.append(fb);
  }
}

function code(text) {
  const c = document.createElement('code');
  c.textContent = text;
  return c;
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
  if (r.state) {
    rule.append(code(r.state + ' ' + r.outcome), ' ', r.detail + (r.rule ? ' (rule ' + r.rule + ')' : '') + ': no effect, whatever the database holds.');
    return;
  }
  rule.append('Rule ', code(r.rule), ': ' + r.table + ' row ' + JSON.stringify(r.id) + ' of account ' + JSON.stringify(r.account)
    + (r.taskKeys.length ? '; outbox tasks ' + r.taskKeys.join(', ') : '') + '. Once the effect is recorded, any other event proposing it is processed as effect_exists. The row decides:');
  for (const c of r.row) {
    const li = document.createElement('li');
    li.textContent = c.state + ' → ' + c.decision;
    list.append(li);
  }
}

// ---- step 1: the provider ----

function buildProviderControl() {
  providers = idemhook.providers();
  for (const p of providers) {
    $('provider').append(new Option(p.label, p.name));
  }
  for (const name of idemhook.rulesPresets()) {
    $('rules-preset').append(new Option(name, name));
  }
}

function providerChoice(name) {
  return providers.find((p) => p.name === name) || providers[0];
}

// applyProvider sets what the chosen provider implies: the signature check,
// the key preset and, for the inbox pattern, the rules and the receiver.
// "none" turns the check off where a pattern would check one by default.
function applyProvider() {
  const c = providerChoice($('provider').value);
  setOption('verify', c.verify || 'none');
  $('preset').value = c.preset;
  if (!SCOPED.has(c.preset)) $('scope').value = '';
  if (c.rules) $('rules-preset').value = c.rules;
  setOption('receiver', c.receiver || 'n8n');
  $('headers').placeholder = SAMPLE_HEADERS[c.preset] || '';
  refresh();
}

// describeProvider says in words what the provider control set.
function describeProvider() {
  const c = providerChoice($('provider').value);
  const preset = keyPreset();
  const signer = (providers.find((p) => p.verify === mode.verify) || { label: mode.verify }).label;
  const parts = [mode.verify ? 'Checks the ' + signer + ' signature first (--verify ' + mode.verify + ')' : 'No signature check'];
  parts.push(preset ? 'reads the key with the ' + preset + ' preset' : 'reads the key from the body\'s id, or hashes the body');
  if (mode.pattern === 'inbox') {
    parts.push('receives with ' + (mode.receiver === 'keysvc' ? 'keysvc\'s durable inbox' : 'an n8n workflow'));
    if (!c.rules) parts.push('no effect rules ship for ' + (c.name ? c.label : 'any sender') + ' yet: write your own (docs/inbox.md) and pass --rules FILE to the CLI');
  }
  $('provider-sets').textContent = parts.join('; ') + '.';
}

// reflectProvider shows the provider that the options now name, after an
// option was set directly (#opt-verify, or automation).
function reflectProvider() {
  const c = providers.find((p) => p.verify === mode.verify);
  if (c && providerChoice($('provider').value).verify !== mode.verify) $('provider').value = c.name;
}

// ---- step 2: the guarantee ----

function buildGuaranteeControl() {
  const set = $('guarantee');
  for (const g of GUARANTEES) {
    const label = document.createElement('label');
    label.className = 'choice';
    const input = Object.assign(document.createElement('input'), { type: 'radio', name: 'guarantee', value: g.value, id: 'guarantee-' + g.value });
    const title = Object.assign(document.createElement('span'), { className: 'choice-title', textContent: g.title });
    const line = Object.assign(document.createElement('span'), { className: 'choice-line', textContent: g.line });
    label.append(input, title, line);
    set.append(label);
  }
  set.addEventListener('change', (e) => applyGuarantee(e.target.value));
}

function applyGuarantee(value) {
  const g = GUARANTEES.find((x) => x.value === value);
  for (const [name, v] of Object.entries(g.flags)) setOption(name, v);
  refresh();
}

// guaranteeOf names the choice a mode is: the pattern first, then the
// hashing, then the guard (keysvc with a lease is keysvc, with the lease
// guard said below the choices).
function guaranteeOf(m) {
  if (m.pattern === 'inbox') return 'inbox';
  if (m.hashing !== 'code-node') return m.hashing;
  return m.guard;
}

function reflectGuarantee() {
  const value = guaranteeOf(mode);
  const radio = $('guarantee-' + value);
  if (radio) radio.checked = true;
  const base = GUARANTEES.find((g) => g.value === value);
  const extra = Object.entries(base.flags).filter(([name, v]) => mode[name] !== v && applies(flagNamed(name), mode));
  $('guarantee-also').textContent = extra.length ? 'Combined with ' + extra.map(([name]) => '--' + name + ' ' + mode[name]).join(', ') + ' (set in the advanced options).' : '';
  document.body.dataset.pattern = mode.pattern;
}

// ---- the options ----

function fieldFor(flag) {
  const wrap = document.createElement('div');
  wrap.className = 'option';
  wrap.id = 'opt-' + flag.name + '-field';
  wrap.dataset.pattern = flag.pattern;
  const id = 'opt-' + flag.name;
  const label = document.createElement('label');
  label.htmlFor = id;
  label.textContent = '--' + flag.name;
  let input;
  if (flag.choices && flag.choices.length) {
    input = document.createElement('select');
    if (flag.default === '') input.append(new Option('(default)', ''));
    for (const c of flag.choices) input.append(new Option(c, c));
    input.value = flag.default;
  } else {
    input = Object.assign(document.createElement('input'), { type: 'text', value: flag.default, spellcheck: false, autocomplete: 'off' });
  }
  input.id = id;
  input.name = flag.name;
  input.dataset.default = flag.default;
  const usage = Object.assign(document.createElement('p'), { className: 'usage', id: id + '-usage', textContent: flag.usage });
  const error = errorFor(flag.name);
  input.setAttribute('aria-describedby', usage.id + ' ' + error.id);
  wrap.append(label, input, usage, error);
  return wrap;
}

function errorFor(name) {
  const error = Object.assign(document.createElement('p'), { className: 'error', id: 'opt-' + name + '-error' });
  error.setAttribute('role', 'alert');
  return error;
}

// mirrorFor is the hidden field of a mirrored option; its error is shown
// next to the control it mirrors (already in the page).
function mirrorFor(flag) {
  const input = Object.assign(document.createElement('input'), { type: 'hidden', id: 'opt-' + flag.name, name: flag.name, value: flag.default });
  input.dataset.default = flag.default;
  return input;
}

function buildForm() {
  flags = idemhook.options();
  const form = $('options');
  const mirrored = new Set(MIRRORS.map(([, flag]) => flag));
  const placed = new Set(GROUPS.flatMap((g) => g.flags));
  const sets = {};
  for (const g of GROUPS) {
    sets[g.id] = Object.assign(document.createElement('fieldset'), { id: g.id });
    sets[g.id].append(Object.assign(document.createElement('legend'), { textContent: g.legend }));
  }
  for (const f of flags) {
    if (mirrored.has(f.name)) {
      form.append(mirrorFor(f));
      continue;
    }
    const group = GROUPS.find((g) => g.flags.includes(f.name)) || GROUPS[GROUPS.length - 1];
    if (!placed.has(f.name)) group.flags.push(f.name);
    sets[group.id].append(fieldFor(f));
  }
  const advanced = Object.assign(document.createElement('details'), { id: 'advanced' });
  advanced.append(Object.assign(document.createElement('summary'), { id: 'advanced-summary', textContent: 'Advanced options' }));
  for (const g of GROUPS) (g.advanced ? advanced : form).append(sets[g.id]);
  form.append(advanced);
  form.addEventListener('input', refresh);
  form.addEventListener('change', refresh);
  form.addEventListener('submit', (e) => e.preventDefault());
}

function setOption(name, value) {
  $('opt-' + name).value = value;
}

// syncMirrors carries each mirrored control to its hidden field, or the
// field to the control when the field was set since the last sync. It
// reports whether a value changed.
const synced = {};
function syncMirrors() {
  let changed = false;
  for (const [control, flag] of MIRRORS) {
    const c = $(control);
    const f = $('opt-' + flag);
    if (f.value !== synced[flag]) {
      if (c.tagName === 'SELECT' && ![...c.options].some((o) => o.value === f.value)) c.append(new Option(f.value, f.value));
      c.value = f.value;
    } else {
      f.value = c.value;
    }
    changed = changed || synced[flag] !== f.value;
    synced[flag] = f.value;
  }
  return changed;
}

// rawValues are the fields' values by flag name, trimmed.
function rawValues() {
  const raw = {};
  for (const f of flags) raw[f.name] = $('opt-' + f.name).value.trim();
  return raw;
}

// modeOf is what decides which options apply: the pattern and mode, and
// whether an outbox is called.
function modeOf(raw) {
  return {
    pattern: raw.pattern || 'reserve', hashing: raw.hashing || 'code-node', guard: raw.guard || 'reserve',
    receiver: raw.receiver || 'n8n', outbox: raw['outbox-url'] !== '', verify: '',
  };
}

function flagNamed(name) {
  return flags.find((f) => f.name === name);
}

function applies(flag, m) {
  if (flag.pattern !== '' && flag.pattern !== m.pattern) return false;
  return READS[flag.name] === undefined || READS[flag.name](m);
}

// chosenFlags are the flags the page generates with, as the command line
// would pass them: the options that apply to the chosen pattern and mode,
// where they differ from what the generator would use anyway. --verify and
// --preset default to what other options imply (the inbox pattern checks
// its rules' provider; the preset is the --verify provider's), which the
// module tells.
function chosenFlags() {
  syncMirrors();
  const raw = rawValues();
  const m = modeOf(raw);
  const given = (f) => raw[f.name] !== '' && raw[f.name] !== f.default && applies(f, m);
  // What the other options imply, before the provider is known (so
  // without the options that read it).
  const base = {};
  for (const f of flags) {
    if (given(f) && f.name !== 'verify' && f.name !== 'preset') base[f.name] = raw[f.name];
  }
  const implied = idemhook.defaults(base);
  const impliedVerify = implied.error ? '' : implied.verify;
  m.verify = raw.verify === '' ? impliedVerify : (raw.verify === 'none' ? '' : raw.verify);
  const values = {};
  for (const f of flags) {
    if (given(f)) values[f.name] = raw[f.name];
  }
  if (values.verify !== undefined && m.verify === impliedVerify) delete values.verify;
  if (values.preset !== undefined && values.preset === m.verify) delete values.preset;
  return { values, mode: m, implied };
}

// showApplicable hides the options the mode does not read, and a group
// with none left; the advanced summary counts what it holds.
function showApplicable(implied) {
  let advanced = 0;
  for (const g of GROUPS) {
    let shown = 0;
    for (const name of g.flags) {
      const on = applies(flagNamed(name), mode);
      $('opt-' + name + '-field').hidden = !on;
      shown += on ? 1 : 0;
    }
    $(g.id).hidden = shown === 0;
    if (g.advanced) advanced += shown;
  }
  $('advanced-summary').textContent = 'Advanced options (' + advanced + ')';
  // The defaults that depend on the pattern, as placeholders.
  if (!implied.error) {
    $('opt-path').placeholder = implied.path;
    $('opt-name').placeholder = implied.name;
  }
}

// ---- the files and the command ----

let zipURL = null;
const fileURLs = [];

// STEP_ERRORS: where the error of an option the steps set is shown, beside
// the step that set it (its field is among the advanced options).
const STEP_ERRORS = { verify: 'provider-error', pattern: 'guarantee-error', hashing: 'guarantee-error', guard: 'guarantee-error' };

function clearErrors() {
  for (const f of flags) $('opt-' + f.name + '-error').textContent = '';
  for (const id of new Set(Object.values(STEP_ERRORS))) $(id).textContent = '';
  $('generate-error').textContent = '';
}

// showError puts the generator's message next to the field it names, and
// beside the step that set it or else unfolds what hides the field; the
// files panel says that nothing was generated.
function showError(r) {
  const target = r.flag && $('opt-' + r.flag + '-error');
  if (target) {
    target.textContent = r.error;
    const fold = target.closest('details');
    if (STEP_ERRORS[r.flag]) $(STEP_ERRORS[r.flag]).textContent = r.error;
    else if (fold) fold.open = true;
  }
  $('generate-error').textContent = 'No files: ' + r.error;
  $('download-zip').removeAttribute('href');
  $('download-zip').setAttribute('aria-disabled', 'true');
  $('files').replaceChildren();
}

function generate(values) {
  clearErrors();
  for (const u of fileURLs.splice(0)) URL.revokeObjectURL(u);
  if (zipURL) URL.revokeObjectURL(zipURL);
  zipURL = null;
  const r = idemhook.generate(values);
  if (r.error) {
    showError(r);
    return;
  }
  listFiles(r);
  zipURL = URL.createObjectURL(new Blob([r.zip], { type: 'application/zip' }));
  $('download-zip').href = zipURL;
  $('download-zip').removeAttribute('aria-disabled');
  document.body.dataset.filesReady = String(Number(document.body.dataset.filesReady || 0) + 1);
}

function listFiles(r) {
  const list = $('files');
  list.replaceChildren();
  for (const name of r.names) {
    const type = name.endsWith('.sql') ? 'application/sql' : 'application/json';
    const url = URL.createObjectURL(new Blob([r.files[name]], { type: type }));
    fileURLs.push(url);
    const a = Object.assign(document.createElement('a'), { href: url, download: name, textContent: name });
    a.dataset.file = name;
    const li = document.createElement('li');
    li.append(a, ' ', Object.assign(document.createElement('span'), { className: 'size', textContent: formatSize(encoder.encode(r.files[name]).length) }));
    list.append(li);
  }
}

function formatSize(n) {
  return n < 1024 ? n + ' B' : (n / 1024).toFixed(1) + ' kB';
}

// shellQuote quotes a value for a POSIX shell, only when it needs it.
function shellQuote(s) {
  return /^[A-Za-z0-9_@%+=:,.\/-]+$/.test(s) ? s : "'" + s.replace(/'/g, "'\\''") + "'";
}

// showCommand writes the `idemhook generate` command of the chosen flags,
// one flag a line, in the CLI's order.
function showCommand(values) {
  const lines = ['idemhook generate --out ./idemhook'];
  for (const f of flags) {
    if (f.name in values) lines.push('--' + f.name + ' ' + shellQuote(values[f.name]));
  }
  $('command').textContent = lines.join(' \\\n  ');
}

// ---- everything that follows a change ----

// refresh recomputes what depends on the options: which apply, the steps
// that reflect them, the files, the command and the key.
function refresh() {
  const chosen = chosenFlags();
  mode = chosen.mode;
  showApplicable(chosen.implied);
  reflectGuarantee();
  reflectProvider();
  describeProvider();
  generate(chosen.values);
  showCommand(chosen.values);
  computeKey();
}

// deliveryChanged follows an edit of the delivery: the key, and the files
// too when a mirrored control (preset, scope, rules) changed with it.
function deliveryChanged() {
  touched = true;
  if (syncMirrors()) refresh();
  else computeKey();
}

function copier(button, source, done) {
  $(button).addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText($(source).textContent);
      $('status').textContent = done;
    } catch (e) {
      $('status').textContent = 'Copying is not allowed here: select the text and copy it.';
    }
  });
}

// ---- start ----

async function start() {
  const go = new Go();
  const bytes = Uint8Array.from(atob(IDEMHOOK_WASM_BASE64), (c) => c.charCodeAt(0));
  const { instance } = await WebAssembly.instantiate(bytes, go.importObject);
  go.run(instance);
  buildProviderControl();
  buildGuaranteeControl();
  buildForm();
  $('provider').addEventListener('change', applyProvider);
  for (const id of ['preset', 'rules-preset']) $(id).addEventListener('change', deliveryChanged);
  for (const id of ['body', 'headers', 'scope']) $(id).addEventListener('input', () => {
    if (id === 'body') fileBytes = null;
    deliveryChanged();
  });
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
    deliveryChanged();
  });
  copier('copy-key', 'key', 'Key copied.');
  copier('copy-command', 'command', 'Command copied.');
  refresh();
  $('status').textContent = 'Ready. Nothing you paste leaves this page.';
  document.body.dataset.ready = 'true';
}

start().catch((e) => {
  $('status').textContent = 'The planner could not start: ' + e;
});

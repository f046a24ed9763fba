// idemhook planner: the page's script. It loads the Go module (the key spec,
// the generator and the effect rules, compiled to WebAssembly) from
// idemhook.wasm.js, computes the key of what is pasted (the SHA-256 with
// crypto.subtle.digest), generates the files, draws the generated workflow
// and writes the command line that generates the same files. It makes no
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
  ['lease', 'Lease (the default)', 'reserve', 'code-node', 'lease',
    'None lost: a retry while your step runs gets 409, an attempt that dies is taken over after its lease, and the example step and its done commit together. Costs: your own steps outside the database run at least once (pass the key on); the Code node needs n8n to allow crypto.'],
  ['transactional', 'Transactional', 'reserve', 'code-node', 'transactional',
    'Exactly once, none lost: the reservation and your business write are one SQL statement. Costs: your step must be SQL on the same PostgreSQL.'],
  ['at-most-once', 'At most once', 'reserve', 'code-node', 'at-most-once',
    'The seed\'s template, first sight wins: a replay is answered 200 duplicate. Costs: an attempt that dies loses its event, and a retry during a running attempt is answered duplicate, lost if that attempt fails.'],
  ['crypto-node', 'Crypto node', 'reserve', 'crypto-node', 'lease',
    'The lease without a Code node: n8n\'s Crypto node hashes, no environment variable to set. Costs: the id is read from n8n\'s parsed body (JSON sent as text/plain is hashed); body ids only.'],
  ['keysvc', 'keysvc', 'reserve', 'keysvc', 'lease',
    'keysvc derives and leases the key and checks the signature: no Code or Crypto node, keys kept and pruned by keysvc. Costs: one more service, reachable from n8n.'],
  ['node', 'Community node', 'reserve', 'node', 'lease',
    'The lease in one node: the Idempotency Guard (npm n8n-nodes-idemhook) builds and leases the key, the cheapest per delivery. Costs: the package installed in n8n.'],
  ['inbox', 'Inbox', 'inbox', 'code-node', 'lease',
    'Save, answer 200, then decide: one effect per business change even across events, none lost, external calls through an outbox. Costs: four or five workflows and effect rules.'],
  ['inbox-node', 'Inbox, community node', 'inbox', 'node', 'lease',
    'The inbox with its receipt in one node: the Idempotency Guard checks the signature and saves the event in n8n\'s own process, no Code or Crypto node. Costs: the package installed in n8n; not with keysvc\'s inbox in front.'],
].map(([value, title, pattern, hashing, guard, line]) => ({ value, title, flags: { pattern, hashing, guard }, line }));

// Where each option is shown. Options not named here are shown among the
// advanced ones, so a new flag of the generator is never left out.
const GROUPS = [
  { id: 'group-basic', legend: 'The workflow', flags: ['path', 'name', 'credential', 'retention', 'lease', 'keysvc-url', 'keysvc-credential', 'node-store', 'node-type', 'receiver', 'outbox-url', 'outbox-credential', 'account', 'events'] },
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
  // The inbox's n8n receiver builds its receipt in a Code node or the community node; keysvc's in keysvc.
  hashing: (m) => m.pattern === 'reserve' || m.receiver !== 'keysvc',
  lease: (m) => m.guard === 'lease',
  // keysvc keeps its keys and prunes them itself: no events table, no cleanup workflow.
  retention: (m) => !keysInKeysvc(m),
  'events-table': (m) => !keysInKeysvc(m),
  'keysvc-url': (m) => m.hashing === 'keysvc',
  'keysvc-credential': (m) => m.hashing === 'keysvc' || nodeOnKeysvc(m),
  // The node's type names its package, and so its store.
  'node-store': (m) => m.hashing === 'node' && !m.nodeTyped,
  'node-type': (m) => m.hashing === 'node',
  'verify-credential': n8nVerifies,
  tolerance: n8nVerifies,
  'outbox-credential': (m) => m.outbox,
  'outbox-max-attempts': (m) => m.outbox,
  'outbox-backoff': (m) => m.outbox,
  'outbox-timeout': (m) => m.outbox,
  'outbox-batch': (m) => m.outbox,
};

// nodeOnKeysvc: the community node reserves through keysvc (the package
// n8n Cloud can install).
function nodeOnKeysvc(m) {
  return m.pattern === 'reserve' && m.hashing === 'node' && m['node-store'] === 'keysvc';
}

// keysInKeysvc: keysvc holds the keys (generator.Options.KeysInKeysvc).
function keysInKeysvc(m) {
  return m.pattern === 'reserve' && (m.hashing === 'keysvc' || nodeOnKeysvc(m));
}

// n8nVerifies: the signature is checked by the workflow's Crypto node, not
// by keysvc, so its credential and tolerance are the workflow's.
function n8nVerifies(m) {
  const keysvcVerifies = m.pattern === 'inbox' ? m.receiver === 'keysvc' : m.hashing === 'keysvc' || nodeOnKeysvc(m);
  return m.verify !== '' && !keysvcVerifies;
}

// These two follow package signature/provider's table, and a test
// (planner/providers_test.go) fails when they disagree with it.
// The presets that read the provider's own id take a scope; the others do not.
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
let mode = { pattern: 'reserve', hashing: 'code-node', guard: 'lease', receiver: 'n8n', outbox: false, verify: '' };

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
  if (key && !document.body.dataset.firstKeyAt) document.body.dataset.firstKeyAt = String(Math.round(performance.now()));
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
  if (m.pattern === 'inbox') return m.hashing === 'node' ? 'inbox-node' : 'inbox';
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
    pattern: raw.pattern || 'reserve', hashing: raw.hashing || 'code-node', guard: raw.guard || 'lease',
    receiver: raw.receiver || 'n8n', outbox: raw['outbox-url'] !== '', verify: '',
    'node-store': GUARD_STORES[raw['node-type']] || raw['node-store'] || 'postgres', nodeTyped: raw['node-type'] !== '',
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
  // The receiver follows the provider too (keysvc for Standard Webhooks).
  if (values.receiver !== undefined) {
    const rest = Object.assign({}, values);
    delete rest.receiver;
    const d = idemhook.defaults(rest);
    if (!d.error && d.receiver === values.receiver) delete values.receiver;
  }
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
let lastResult = null;

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
  $('workflow-picture').classList.add('stale');
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
  lastResult = r;
  drawWorkflows(r);
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

// ---- the picture of the workflow ----

const SVG = 'http://www.w3.org/2000/svg';
const NODE = 100; // an n8n node's size on its canvas
const MIN_SCALE = 0.45; // below this, the names cannot be read: the picture scrolls instead

// What each node type looks like: a short name inside the node, and the
// class that colours it.
const NODE_KINDS = {
  'n8n-nodes-base.webhook': ['Webhook', 'trigger'],
  'n8n-nodes-base.scheduleTrigger': ['Schedule', 'trigger'],
  'n8n-nodes-base.executeWorkflowTrigger': ['Called', 'trigger'],
  'n8n-nodes-base.errorTrigger': ['On error', 'trigger'],
  'n8n-nodes-base.code': ['Code', 'code'],
  'n8n-nodes-base.set': ['Set', 'code'],
  'n8n-nodes-base.crypto': ['Crypto', 'code'],
  'n8n-nodes-base.noOp': ['No-op', 'code'],
  'n8n-nodes-base.postgres': ['Postgres', 'db'],
  'n8n-nodes-base.if': ['If', 'branch'],
  'n8n-nodes-base.respondToWebhook': ['Respond', 'respond'],
  'n8n-nodes-base.stopAndError': ['Stop', 'respond'],
  'n8n-nodes-base.httpRequest': ['HTTP', 'call'],
  'n8n-nodes-base.executeWorkflow': ['Workflow', 'call'],
};
// idemhook's community nodes, under either name n8n loads each by, and the
// store each reserves in (package communitynode's table: a test,
// planner/providers_test.go, fails when they disagree).
const GUARD_STORES = {
  'n8n-nodes-idemhook.idempotencyGuard': 'keysvc',
  'CUSTOM.idempotencyGuard': 'keysvc',
  'n8n-nodes-idemhook-postgres.idempotencyGuardPostgres': 'postgres',
  'CUSTOM.idempotencyGuardPostgres': 'postgres',
};
for (const type of Object.keys(GUARD_STORES)) NODE_KINDS[type] = ['Guard', 'db'];
const STICKY = 'n8n-nodes-base.stickyNote';

let shownFile = null;

function svgEl(name, attrs, text) {
  const el = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  return el;
}

// drawWorkflows offers a tab per generated workflow, the one the provider
// calls first, and draws the one shown.
function drawWorkflows(r) {
  const files = r.workflows.map((w) => w.file);
  const main = (r.workflows.find((w) => w.webhookPath) || r.workflows[0]).file;
  const order = [main, ...files.filter((f) => f !== main)];
  if (!order.includes(shownFile)) shownFile = main;
  const tabs = $('workflow-tabs');
  tabs.replaceChildren();
  for (const file of order) {
    const tab = Object.assign(document.createElement('button'), { type: 'button', className: 'tab', textContent: tabName(file) });
    tab.setAttribute('role', 'tab');
    tab.setAttribute('aria-selected', String(file === shownFile));
    tab.dataset.file = file;
    tab.addEventListener('click', () => { shownFile = file; drawWorkflows(lastResult); });
    tabs.append(tab);
  }
  const doc = JSON.parse(r.files[shownFile]);
  const picture = $('workflow-picture');
  picture.classList.remove('stale');
  picture.replaceChildren(drawWorkflow(doc, shownFile));
  fitPicture();
  $('workflow-caption').textContent = shownFile + ': "' + doc.name + '", ' + doc.nodes.filter((n) => n.type !== STICKY).length
    + ' nodes, laid out as the n8n editor will show them. The tabs: every workflow of the files, in the order to deploy them.';
}

function tabName(file) {
  return file === 'workflow.json' ? 'workflow' : file.replace(/-workflow\.json$/, '');
}

// drawWorkflow draws a generated workflow as the n8n editor shows it: the
// sticky notes behind, the connections, then the nodes at their positions.
function drawWorkflow(doc, file) {
  const box = bounds(doc.nodes);
  const svg = svgEl('svg', { class: 'workflow', viewBox: [box.x, box.y, box.w, box.h].join(' '), role: 'img', 'aria-label': 'The nodes and connections of ' + file });
  svg.dataset.file = file;
  svg.dataset.width = box.w;
  svg.dataset.height = box.h;
  svg.append(markers());
  const byName = new Map(doc.nodes.map((n) => [n.name, n]));
  for (const n of doc.nodes) if (n.type === STICKY) svg.append(drawSticky(n));
  for (const e of connections(doc)) svg.append(drawEdge(e, byName));
  for (const n of doc.nodes) if (n.type !== STICKY) svg.append(drawNode(n));
  return svg;
}

// bounds is the area every node, its name and every note cover.
function bounds(nodes) {
  let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
  for (const n of nodes) {
    const [x, y] = n.position;
    const [w, h] = n.type === STICKY ? stickySize(n) : [NODE, NODE + 60];
    x0 = Math.min(x0, x - (n.type === STICKY ? 0 : 30));
    y0 = Math.min(y0, y);
    x1 = Math.max(x1, x + w + (n.type === STICKY ? 0 : 60));
    y1 = Math.max(y1, y + h + (n.type === STICKY ? 0 : 60)); // room for edges that loop back below
  }
  const pad = 20;
  return { x: x0 - pad, y: y0 - pad, w: x1 - x0 + 2 * pad, h: y1 - y0 + 2 * pad };
}

function stickySize(n) {
  return [n.parameters.width || 240, n.parameters.height || 160];
}

function markers() {
  const defs = svgEl('defs');
  for (const kind of ['main', 'error']) {
    const m = svgEl('marker', { id: 'arrow-' + kind, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
    m.append(svgEl('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow-' + kind }));
    defs.append(m);
  }
  return defs;
}

// connections lists the workflow's connections: from a node's output to
// another node's input.
function connections(doc) {
  const out = [];
  for (const [from, byType] of Object.entries(doc.connections)) {
    for (const [type, outputs] of Object.entries(byType)) {
      outputs.forEach((targets, output) => {
        for (const t of targets || []) out.push({ from: from, type: type, output: output, to: t.node, input: t.index });
      });
    }
  }
  return out;
}

// outputsOf gives a node's outputs as n8n draws them: an If node's true
// and false, and an error output after the others when errors continue on
// their own output.
function outputsOf(n) {
  let labels = n.type === 'n8n-nodes-base.if' ? ['true', 'false'] : [''];
  if (NODE_KINDS[n.type] && NODE_KINDS[n.type][0] === 'Guard') labels = guardOutputs(n.parameters || {});
  if (n.onError === 'continueErrorOutput') labels.push('error');
  return labels;
}

// guardOutputs are the Idempotency Guard's outputs for its parameters, as
// the node names them.
function guardOutputs(p) {
  const byOperation = { reserve: ['New', 'Duplicate'], acquireLease: ['New', 'Duplicate', 'In Progress'] };
  const labels = (byOperation[p.operation || 'reserve'] || ['Done']).slice();
  if (p.options && p.options.errorOutput === true) labels.push('Error');
  return labels;
}

function drawEdge(e, byName) {
  const a = byName.get(e.from);
  const b = byName.get(e.to);
  const outputs = outputsOf(a);
  const label = outputs[e.output] || '';
  const sx = a.position[0] + NODE;
  const sy = a.position[1] + (NODE * (e.output + 1)) / (Math.max(outputs.length, e.output + 1) + 1);
  const tx = b.position[0];
  const ty = b.position[1] + NODE / 2;
  const kind = label === 'error' ? 'error' : 'main';
  const g = svgEl('g', { class: 'edge edge-' + kind });
  Object.assign(g.dataset, { from: e.from, output: e.output, to: e.to, input: e.input, type: e.type });
  g.append(svgEl('path', { d: edgePath(sx, sy, tx, ty, Math.max(a.position[1], b.position[1])), 'marker-end': 'url(#arrow-' + kind + ')' }));
  if (label) g.append(svgEl('text', { x: sx + 8, y: sy - 6, class: 'edge-label' }, label));
  return g;
}

// edgePath is a curve forward, as in the editor, or a loop below both
// nodes for a connection back to an earlier node.
function edgePath(sx, sy, tx, ty, lowest) {
  if (tx - sx >= 40) {
    const dx = Math.max(40, (tx - sx) / 2);
    return `M${sx},${sy} C${sx + dx},${sy} ${tx - dx},${ty} ${tx},${ty}`;
  }
  const below = lowest + NODE + 70;
  return `M${sx},${sy} C${sx + 60},${sy} ${sx + 60},${below} ${sx},${below} L${tx},${below} C${tx - 60},${below} ${tx - 60},${ty} ${tx},${ty}`;
}

function drawNode(n) {
  const [kind, cls] = NODE_KINDS[n.type] || [n.type.split('.').pop(), 'code'];
  const [x, y] = n.position;
  const g = svgEl('g', { class: 'node node-' + cls, transform: `translate(${x},${y})` });
  g.dataset.node = n.name;
  g.dataset.type = n.type;
  g.append(svgEl('title', {}, n.name + ' (' + n.type + ')'));
  const trigger = cls === 'trigger';
  g.append(svgEl('path', { class: 'node-box', d: nodeShape(trigger) }));
  const status = respondCode(n);
  g.append(svgEl('text', { x: NODE / 2, y: NODE / 2 + 6, class: status ? 'node-kind node-status' : 'node-kind' }, status || kind));
  const outputs = outputsOf(n);
  outputs.forEach((label, i) => {
    g.append(svgEl('circle', { cx: NODE, cy: (NODE * (i + 1)) / (outputs.length + 1), r: 5, class: label === 'error' ? 'port port-error' : 'port' }));
  });
  if (!trigger) g.append(svgEl('circle', { cx: 0, cy: NODE / 2, r: 5, class: 'port' }));
  wrap(n.name, 16).slice(0, 3).forEach((line, i) => {
    g.append(svgEl('text', { x: NODE / 2, y: NODE + 24 + i * 21, class: 'node-name' }, line));
  });
  return g;
}

// nodeShape is a rounded square; a trigger's left side is round, as in the
// editor.
function nodeShape(trigger) {
  const r = 10;
  const left = trigger ? 40 : r;
  return `M${left},0 H${NODE - r} Q${NODE},0 ${NODE},${r} V${NODE - r} Q${NODE},${NODE} ${NODE - r},${NODE} H${left} `
    + (trigger ? `A${left},${NODE / 2} 0 0 1 ${left},0 Z` : `Q0,${NODE} 0,${NODE - r} V${r} Q0,0 ${r},0 Z`);
}

// respondCode is the status a Respond node answers, shown as its icon.
function respondCode(n) {
  if (n.type !== 'n8n-nodes-base.respondToWebhook') return '';
  const c = n.parameters && n.parameters.options && n.parameters.options.responseCode;
  return /^\d{3}$/.test(String(c)) ? String(c) : ''; // not an expression choosing one
}

// wrap breaks text into lines of about width characters, at spaces, and
// a word longer than a line where it must.
function wrap(text, width) {
  const lines = [];
  let line = '';
  const words = text.split(/\s+/).flatMap((w) => w.match(new RegExp('.{1,' + width + '}', 'g')) || []);
  for (const word of words) {
    if (line && (line + ' ' + word).length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line ? line + ' ' + word : word;
    }
  }
  if (line) lines.push(line);
  return lines;
}

// drawSticky draws a note with its title and as much of its text as fits,
// the Markdown reduced to plain words.
function drawSticky(n) {
  const [x, y] = n.position;
  const [w, h] = stickySize(n);
  const g = svgEl('g', { class: 'sticky', transform: `translate(${x},${y})` });
  g.dataset.node = n.name;
  g.dataset.type = n.type;
  g.append(svgEl('rect', { width: w, height: h, rx: 6 }));
  // A nested svg clips what does not fit, as the editor does.
  const clip = svgEl('svg', { width: w, height: h });
  g.append(clip);
  const text = (n.parameters.content || '').split('\n').map(plainMarkdown).filter((l) => l.text !== '');
  let top = 28;
  for (const l of text) {
    const size = l.heading ? 20 : 15;
    for (const line of wrap(l.text, Math.floor((w - 24) / (size * 0.58)))) {
      if (top > h - 6) return g;
      clip.append(svgEl('text', { x: 12, y: top, class: l.heading ? 'sticky-title' : 'sticky-text' }, line));
      top += size + 5;
    }
    top += 4;
  }
  return g;
}

// plainMarkdown is a line of a note without its Markdown: headings,
// emphasis, code marks and link targets.
function plainMarkdown(line) {
  const heading = /^#+\s/.test(line);
  const text = line.replace(/^#+\s*/, '').replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/\*\*|`/g, '').trim();
  return { heading: heading, text: text };
}

// fitPicture sizes the drawing to the space it has: the whole workflow
// when it can be read that small, else at the smallest readable scale,
// scrolled sideways inside its frame (never the page).
function fitPicture() {
  const svg = document.querySelector('#workflow-picture svg');
  if (!svg) return;
  const w = Number(svg.dataset.width);
  const h = Number(svg.dataset.height);
  const room = $('workflow-picture').clientWidth;
  const scale = Math.min(1, Math.max(room / w, MIN_SCALE));
  svg.setAttribute('width', Math.round(w * scale));
  svg.setAttribute('height', Math.round(h * scale));
}

// ---- everything that follows a change ----

// refresh recomputes what depends on the options: which apply, the steps
// that reflect them, the files, the picture, the command and the key.
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

// wasmResponse is the module from the gzip in base64 that the page embeds
// (it may be opened from disk, where it could fetch nothing): decompressed
// as the browser compiles it.
function wasmResponse(base64) {
  let gz;
  if (Uint8Array.fromBase64) {
    gz = Uint8Array.fromBase64(base64);
  } else {
    const text = atob(base64);
    gz = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) gz[i] = text.charCodeAt(i);
  }
  const stream = new Blob([gz]).stream().pipeThrough(new DecompressionStream('gzip'));
  return new Response(stream, { headers: { 'Content-Type': 'application/wasm' } });
}

async function start() {
  const go = new Go();
  const { instance } = await WebAssembly.instantiateStreaming(wasmResponse(IDEMHOOK_WASM_GZIP_BASE64), go.importObject);
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
  new ResizeObserver(fitPicture).observe($('workflow-picture'));
  refresh();
  $('status').textContent = 'Ready. Nothing you paste leaves this page.';
  // When the page could first give a key, since navigation began (the
  // planner test prints it).
  document.body.dataset.readyAt = String(Math.round(performance.now()));
  document.body.dataset.ready = 'true';
}

start().catch((e) => {
  $('status').textContent = 'The planner could not start: ' + e;
});

// keysvc console: calls keysvc's /v1/console routes with the token given,
// and nothing else. Every value from the server is put in the page as text
// (textContent), never as markup.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const TOKEN_KEY = 'keysvc-console-token';
  const base = new URL('../', location.href); // keysvc's root, also behind a path prefix
  let token = sessionStorage.getItem(TOKEN_KEY) || '';
  let session = null; // GET /v1/console
  let busy = false;

  // One list's position: its filter, the cursor of the page shown and of
  // the pages before it, the rows selected.
  const lists = {
    inbox: { path: 'v1/console/inbox/entries', form: 'inbox-filter', table: 'inbox-entries', before: 0, back: [], selected: new Set(), ids: [] },
    events: { path: 'v1/console/pattern/events', form: 'events-filter', table: 'pattern-events', before: 0, back: [], selected: new Set(), ids: [] },
    tasks: { path: 'v1/console/pattern/tasks', form: 'tasks-filter', table: 'pattern-tasks', before: 0, back: [], selected: new Set(), ids: [] },
  };
  let tab = 'inbox';
  let openEntry = 0;

  class APIError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, body) {
    const opts = { method, headers: { Authorization: 'Bearer ' + token }, cache: 'no-store', credentials: 'omit', redirect: 'error' };
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    const resp = await fetch(new URL(path, base), opts);
    let data = null;
    try {
      data = await resp.json();
    } catch (e) {
      data = null;
    }
    if (!resp.ok) {
      throw new APIError(resp.status, (data && data.code) || 'http_' + resp.status, (data && data.error) || resp.statusText);
    }
    return data;
  }

  // el builds an element: attributes, then children (strings become text).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === false || v === null || v === undefined) continue;
      if (k === 'class') e.className = v;
      else if (k.startsWith('data-')) e.setAttribute(k, v);
      else if (k in e) e[k] = v;
      else e.setAttribute(k, v);
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function say(text, isError) {
    const s = $('status');
    s.textContent = text || '';
    s.className = isError ? 'error' : '';
  }

  const pad = (n) => String(n).padStart(2, '0');
  function fmtTime(iso) {
    if (!iso) return '';
    const d = new Date(iso);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }
  function fmtAge(seconds) {
    const s = Math.max(0, Math.round(seconds));
    if (s < 90) return s + ' s';
    if (s < 5400) return Math.round(s / 60) + ' min';
    if (s < 172800) return Math.round(s / 3600) + ' h';
    return Math.round(s / 86400) + ' d';
  }
  function fmtDue(iso) {
    if (!iso) return '';
    const s = (new Date(iso) - Date.now()) / 1000;
    return s <= 1 ? 'now' : 'in ' + fmtAge(s);
  }
  const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;
  const stateBadge = (state) => el('span', { class: 'state state-' + state }, state);
  const isAdmin = () => session && session.token.scope === 'admin';

  // The list's filter as query parameters; datetime-local inputs are local
  // times, sent as RFC 3339.
  function filterOf(name) {
    const form = $(lists[name].form);
    const out = {};
    for (const input of form.elements) {
      if (!input.name || input.value === '') continue;
      if (input.type === 'datetime-local') out[input.name] = new Date(input.value).toISOString();
      else out[input.name] = input.value;
    }
    return out;
  }

  async function loadList(name) {
    const l = lists[name];
    const q = new URLSearchParams(filterOf(name));
    if (l.before) q.set('before', l.before);
    const page = await api('GET', l.path + '?' + q);
    const rows = page.entries || page.items || [];
    l.ids = rows.map((r) => r.id);
    l.next = page.next_before || 0;
    for (const id of [...l.selected]) if (!l.ids.includes(id)) l.selected.delete(id);
    const tbody = $(l.table).tBodies[0];
    tbody.replaceChildren(...rows.map((r) => renderRow[name](r, l)));
    if (rows.length === 0) tbody.append(el('tr', {}, el('td', { colSpan: 9, class: 'empty' }, 'Nothing matches.')));
    $(name + '-older').disabled = !l.next;
    $(name + '-newer').disabled = l.back.length === 0;
    selectionChanged(name);
  }

  function selectBox(name, id) {
    const l = lists[name];
    if (!isAdmin()) return null;
    const box = el('input', { type: 'checkbox', checked: l.selected.has(id), 'aria-label': 'select ' + id });
    box.addEventListener('change', () => {
      if (box.checked) l.selected.add(id);
      else l.selected.delete(id);
      selectionChanged(name);
    });
    return el('td', { class: 'admin-only' }, box);
  }

  function selectionChanged(name) {
    const n = lists[name].selected.size;
    const ids = name === 'inbox' ? ['inbox-replay-selected', 'inbox-retry-selected'] : [name + '-retry-selected'];
    for (const id of ids) {
      const b = $(id);
      if (b) b.disabled = n === 0;
    }
  }

  const renderRow = {
    inbox(e, l) {
      let last = '';
      if (e.last_attempt) {
        const a = e.last_attempt;
        last = a.status ? String(a.status) : '';
        if (a.error) last += (last ? ' · ' : '') + a.error;
        if (!a.status && !a.error) last = a.kind;
      }
      const next = e.in_flight ? 'in flight' : fmtDue(e.next_attempt_at);
      const open = el('button', { type: 'button', class: 'link', 'data-open': e.id }, String(e.id));
      open.addEventListener('click', () => showEntry(e.id));
      return el('tr', { 'data-id': e.id, 'data-state': e.state }, selectBox('inbox', e.id), el('td', {}, open), el('td', {}, e.endpoint),
        el('td', {}, e.event_type), el('td', {}, stateBadge(e.state)), el('td', { class: 'num' }, e.attempts),
        el('td', { class: 'reason' }, e.state === 'failed' && e.last_error ? e.last_error : last), el('td', { class: 'time' }, next), el('td', { class: 'time' }, fmtTime(e.received_at)));
    },
    events(e) {
      const due = e.due_at ? fmtDue(e.due_at) : e.claimed_until ? 'claimed until ' + fmtTime(e.claimed_until) : '';
      return el('tr', { 'data-id': e.id, 'data-state': e.state }, selectBox('events', e.id), el('td', {}, e.id), el('td', {}, e.event_type),
        el('td', {}, stateBadge(e.state)), el('td', {}, e.outcome || ''), el('td', { class: 'reason' }, e.reason || ''),
        el('td', { class: 'num' }, e.attempts), el('td', { class: 'time' }, due), el('td', { class: 'time' }, fmtTime(e.received_at)));
    },
    tasks(t) {
      return el('tr', { 'data-id': t.id, 'data-state': t.state }, selectBox('tasks', t.id), el('td', {}, t.id), el('td', { class: 'key' }, t.operation_key),
        el('td', {}, t.kind), el('td', {}, stateBadge(t.state)), el('td', { class: 'num' }, t.attempts), el('td', {}, t.last_status || ''),
        el('td', { class: 'reason' }, t.last_error || ''), el('td', { class: 'time' }, ['pending', 'ambiguous'].includes(t.state) ? fmtDue(t.next_attempt_at) : ''));
    },
  };

  async function loadInboxSummary() {
    const s = await api('GET', 'v1/console/inbox');
    const tbody = $('inbox-summary').tBodies[0];
    const select = $('inbox-filter').elements.endpoint;
    const chosen = select.value;
    select.replaceChildren(el('option', { value: '' }, 'any'), ...s.endpoints.map((e) => el('option', { value: e.name }, e.name)));
    select.value = chosen;
    tbody.replaceChildren(...s.endpoints.map((e) => {
      const waiting = e.states.find((c) => c.state === 'received');
      const states = el('span', { class: 'states' }, ...e.states.map((c) => el('span', { class: 'count' }, stateBadge(c.state), ' ' + c.count)));
      const queue = Object.entries(e.queue).map(([k, v]) => `${k} ${v}`).join(', ');
      return el('tr', { 'data-endpoint': e.name }, el('td', {}, e.name, e.configured ? '' : ' (not configured)'), el('td', {}, e.target_host || ''),
        el('td', {}, waiting ? `${waiting.count} (${fmtAge(waiting.oldest_age_seconds)})` : '0'), el('td', {}, states), el('td', {}, queue));
    }));
    if (s.endpoints.length === 0) tbody.append(el('tr', {}, el('td', { colSpan: 5, class: 'empty' }, 'No endpoint.')));
  }

  async function loadPatternSummary() {
    const s = await api('GET', 'v1/console/pattern');
    $('pattern-schema').textContent = s.schema ? '(schema ' + s.schema + ')' : '';
    for (const [id, counts] of [['pattern-event-counts', s.events], ['pattern-task-counts', s.tasks]]) {
      $(id).tBodies[0].replaceChildren(...counts.map((c) =>
        el('tr', {}, el('td', {}, stateBadge(c.state)), el('td', { class: 'num' }, c.count), el('td', {}, fmtAge(c.oldest_age_seconds)))));
    }
  }

  async function showEntry(id) {
    openEntry = id;
    const e = await api('GET', 'v1/console/inbox/entries/' + id);
    $('entry-id').textContent = e.id;
    const fields = [['endpoint', e.endpoint], ['account', e.account], ['key', e.key], ['event type', e.event_type], ['state', stateBadge(e.state)],
      ['outcome', e.outcome], ['last error', e.last_error], ['received', fmtTime(e.received_at)], ['finished', fmtTime(e.finished_at)]];
    $('entry-fields').replaceChildren(...fields.filter(([, v]) => v).flatMap(([k, v]) => [el('dt', {}, k), el('dd', { 'data-field': k }, v)]));
    $('entry-headers').tBodies[0].replaceChildren(...Object.entries(e.headers || {}).map(([k, v]) => el('tr', {}, el('th', {}, k), el('td', { class: 'key' }, v))));
    $('entry-history').tBodies[0].replaceChildren(...e.deliveries.map((d) => el('tr', { 'data-kind': d.kind || '' },
      el('td', { class: 'num' }, d.attempt || ''), el('td', { class: 'time' }, fmtTime(d.at)), el('td', {}, d.kind || ''), el('td', {}, d.status || ''),
      el('td', { class: 'reason' }, d.error || ''), el('td', { class: 'num' }, d.kind === 'replay' || d.kind === 'retry_now' ? '' : d.duration_ms), el('td', {}, d.actor || ''))));
    const bodyButton = $('entry-show-body');
    const note = $('entry-body-note');
    if (bodyButton) {
      bodyButton.hidden = !session.bodies;
      note.hidden = session.bodies;
      note.textContent = session.bodies ? '' : 'Bodies are hidden on this keysvc (--console-bodies=false).';
    }
    const replay = $('entry-replay');
    const retry = $('entry-retry');
    if (replay) replay.disabled = !['failed', 'forwarded'].includes(e.state);
    if (retry) retry.disabled = e.state !== 'received';
    $('entry-body').hidden = true;
    $('entry').hidden = false;
  }

  async function showBody() {
    const b = await api('GET', 'v1/console/inbox/entries/' + openEntry + '/body');
    const pre = $('entry-body');
    pre.textContent = b.encoding === 'base64' ? '(not UTF-8; base64) ' + b.body : b.body;
    pre.hidden = false;
  }

  // act asks the route how many items the selection holds (a dry run),
  // confirms that number, then acts on exactly those (expect).
  async function act(path, selection, verb, one, many) {
    const dry = await api('POST', path, { ...selection, dry_run: true });
    if (dry.matched === 0) {
      say(`Nothing to ${verb.toLowerCase()}: no ${many} in a state it applies to.`);
      return;
    }
    if (!(await confirmDialog(`${verb} ${plural(dry.matched, one, many)}?`))) return;
    const res = await api('POST', path, { ...selection, expect: dry.matched });
    say(`${verb}: ${plural(res.done, one, many)} done.`);
    for (const l of Object.values(lists)) l.selected.clear();
    await refresh();
  }

  function confirmDialog(text) {
    const d = $('confirm');
    $('confirm-text').textContent = text;
    return new Promise((resolve) => {
      const done = (answer) => {
        $('confirm-ok').onclick = $('confirm-cancel').onclick = d.oncancel = null;
        d.close();
        resolve(answer);
      };
      $('confirm-ok').onclick = () => done(true);
      $('confirm-cancel').onclick = () => done(false);
      d.oncancel = () => done(false);
      d.showModal();
    });
  }

  async function refresh() {
    if (busy || !session) return;
    busy = true;
    try {
      if (tab === 'inbox' && session.inbox) {
        await loadInboxSummary();
        await loadList('inbox');
        if (openEntry) await showEntry(openEntry);
      }
      if (tab === 'pattern' && session.pattern) {
        await loadPatternSummary();
        await loadList('events');
        await loadList('tasks');
      }
      document.body.dataset.renders = String(Number(document.body.dataset.renders || 0) + 1);
    } catch (err) {
      say(err.message, true);
    } finally {
      busy = false;
    }
  }

  function showTab(name) {
    tab = name;
    $('inbox-view').hidden = name !== 'inbox';
    $('pattern-view').hidden = name !== 'pattern';
    for (const b of $('tabs').querySelectorAll('button')) b.classList.toggle('active', b.dataset.tab === name);
    refresh();
  }

  // open reads who the token is and what keysvc serves, and removes what
  // the token may not do from the page.
  async function open() {
    session = await api('GET', 'v1/console');
    sessionStorage.setItem(TOKEN_KEY, token);
    $('token-form').hidden = true;
    $('who').hidden = false;
    $('who-name').textContent = session.token.name || 'no token needed';
    $('who-scope').textContent = session.token.scope;
    if (!isAdmin()) for (const e of document.querySelectorAll('.admin-only')) e.remove();
    $('tabs').hidden = false;
    $('tab-inbox').hidden = !session.inbox;
    $('tab-pattern').hidden = !session.pattern;
    say(session.inbox || session.pattern ? '' : 'This keysvc has neither an inbox (--endpoints) nor a pattern schema (--pattern-schema).');
    showTab(session.inbox ? 'inbox' : 'pattern');
    document.body.dataset.ready = 'true';
  }

  function wire() {
    $('token-form').addEventListener('submit', async (ev) => {
      ev.preventDefault();
      token = $('token').value.trim();
      $('token').value = '';
      try {
        await open();
      } catch (err) {
        say(err.status === 401 || err.status === 403 ? 'keysvc refused this token: ' + err.message : err.message, true);
      }
    });
    $('forget').addEventListener('click', () => {
      sessionStorage.removeItem(TOKEN_KEY);
      location.reload();
    });
    $('refresh').addEventListener('click', refresh);
    for (const b of $('tabs').querySelectorAll('button')) b.addEventListener('click', () => showTab(b.dataset.tab));
    for (const name of Object.keys(lists)) {
      const l = lists[name];
      $(l.form).addEventListener('submit', (ev) => {
        ev.preventDefault();
        l.before = 0;
        l.back = [];
        l.selected.clear();
        refresh();
      });
      $(name + '-older').addEventListener('click', () => {
        l.back.push(l.before);
        l.before = l.next;
        refresh();
      });
      $(name + '-newer').addEventListener('click', () => {
        l.before = l.back.pop() || 0;
        refresh();
      });
      const all = $(name + '-all');
      if (all) {
        all.addEventListener('change', () => {
          for (const id of l.ids) all.checked ? l.selected.add(id) : l.selected.delete(id);
          loadList(name).catch((err) => say(err.message, true));
        });
      }
    }
    const guarded = (f) => () => f().catch((err) => say(err.message, true));
    const on = (id, f) => $(id) && $(id).addEventListener('click', guarded(f));
    const ids = (name) => ({ ids: [...lists[name].selected] });
    const filter = (name) => {
      const f = filterOf(name);
      delete f.limit;
      return { filter: f };
    };
    on('inbox-replay-selected', () => act('v1/console/inbox/replay', ids('inbox'), 'Replay', 'entry', 'entries'));
    on('inbox-retry-selected', () => act('v1/console/inbox/retry', ids('inbox'), 'Retry now', 'entry', 'entries'));
    on('inbox-replay-filter', () => act('v1/console/inbox/replay', filter('inbox'), 'Replay', 'entry', 'entries'));
    on('inbox-retry-filter', () => act('v1/console/inbox/retry', filter('inbox'), 'Retry now', 'entry', 'entries'));
    on('entry-replay', () => act('v1/console/inbox/replay', { ids: [openEntry] }, 'Replay', 'entry', 'entries'));
    on('entry-retry', () => act('v1/console/inbox/retry', { ids: [openEntry] }, 'Retry now', 'entry', 'entries'));
    on('entry-show-body', showBody);
    on('events-retry-selected', () => act('v1/console/pattern/events/retry', ids('events'), 'Retry', 'event', 'events'));
    on('events-retry-filter', () => act('v1/console/pattern/events/retry', filter('events'), 'Retry', 'event', 'events'));
    on('tasks-retry-selected', () => act('v1/console/pattern/tasks/retry', ids('tasks'), 'Retry', 'task', 'tasks'));
    on('tasks-retry-filter', () => act('v1/console/pattern/tasks/retry', filter('tasks'), 'Retry', 'task', 'tasks'));
    $('entry-close').addEventListener('click', () => {
      openEntry = 0;
      $('entry').hidden = true;
    });
    setInterval(() => {
      if (!document.hidden && !$('confirm').open) refresh();
    }, 5000);
    document.body.dataset.wired = 'true';
  }

  wire();
  if (token) {
    open().catch((err) => {
      sessionStorage.removeItem(TOKEN_KEY);
      say(err.message, true);
    });
  }
})();

// The operator's page: reads /ui/state every two seconds and the unfinished
// tasks (the admin API) every ten, while it is visible, and draws them. No library, no inline
// script (the page's Content-Security-Policy allows none); every value is
// put in the page as text, never as markup.
'use strict';

const STATE_EVERY_MS = 2000;
const TASKS_EVERY_MS = 10000;
const FETCH_TIMEOUT_MS = 10000;
const ARM_MS = 400; // a confirming click this soon after arming is a double-click
const CONFIRM_MS = 5000;
const LIST_LIMIT = 500; // tasks listed
const MAX_ROWS = 100; // rows drawn
const OUTCOMES = ['completed', 'failed', 'cancelled', 'expired'];
const SVG = 'http://www.w3.org/2000/svg';

let updates = 0;
let tasks = [];
const confirming = new Map(); // hash -> {armed, until} (ms)

const $ = (selector) => document.querySelector(selector);

function text(selector, value) {
  const element = $(selector);
  if (element) element.textContent = value;
}

function count(value) {
  if (value === null || value === undefined) return '\u221e';
  return String(Math.round(value));
}

function age(secs) {
  if (secs < 120) return `${Math.round(secs)} s`;
  if (secs < 7200) return `${Math.round(secs / 60)} min`;
  if (secs < 172800) return `${Math.round(secs / 3600)} h`;
  return `${Math.round(secs / 86400)} d`;
}

function meter(selector, value, limit) {
  const bar = $(selector);
  if (!bar) return;
  const share = limit ? Math.min(1, value / limit) : 0;
  bar.style.width = `${(share * 100).toFixed(1)}%`;
  bar.className = share >= 0.9 ? 'bad' : share >= 0.7 ? 'warn' : '';
}

function showError(message) {
  const element = $('#error');
  element.textContent = message;
  element.hidden = !message;
}

// One row saying `message` across the table of `tbody`.
function noRows(tbody, message) {
  const cell = document.createElement('td');
  cell.className = 'none';
  cell.colSpan = tbody.closest('table').querySelectorAll('thead th').length;
  cell.textContent = message;
  const row = document.createElement('tr');
  row.append(cell);
  tbody.replaceChildren(row);
}

// The rows of `tbody`, one per item, keyed by `key` (a data- attribute).
function rows(tbody, items, key, cells, empty = 'none') {
  if (!items.length) {
    noRows(tbody, empty);
    return;
  }
  tbody.replaceChildren(...items.map((item) => {
    const row = document.createElement('tr');
    row.dataset[key] = item[key];
    for (const [name, value] of cells(item)) {
      const cell = document.createElement('td');
      cell.className = name;
      if (value instanceof Node) cell.append(value); else cell.textContent = value;
      row.append(cell);
    }
    return row;
  }));
}

async function call(method, url, body) {
  const response = await fetch(url, {
    method,
    credentials: 'same-origin',
    cache: 'no-store',
    signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
    headers: body ? { 'content-type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  if (response.status === 401) {
    // Signed out elsewhere, the session ended, or the token was rotated:
    // back to the sign-in, once (never a loop of reloads).
    const last = Number(sessionStorage.getItem('signedOutAt') || 0);
    if (Date.now() - last > 10000) {
      sessionStorage.setItem('signedOutAt', String(Date.now()));
      window.location.assign('/');
    }
    throw new Error('signed out: sign in again (reload the page)');
  }
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(answer.error || `${url}: HTTP ${response.status}`);
  return answer;
}

function drawState(state) {
  $('#draining').hidden = !state.draining;
  text('#working', count(state.tasks.working));
  text('#input-required', count(state.tasks.inputRequired));
  const admission = state.admission;
  text('#queued', count(admission.queued));
  text('#queued-limit', count(admission.queuedLimit));
  text('#queued-oldest', age(admission.oldestQueuedSecs));
  meter('#queued-meter', admission.queued, admission.queuedLimit);
  text('#running', count(admission.running));
  text('#running-limit', count(admission.runningLimit));
  meter('#running-meter', admission.running, admission.runningLimit);
  text('#listen-open', count(state.listen.open));
  text('#listen-limit', count(state.listen.limit));
  meter('#listen-meter', state.listen.open, state.listen.limit);

  const running = Object.entries(state.runningByTool).map(([tool, n]) => ({ tool, n }));
  rows($('#running-tools tbody'), running, 'tool', (r) => [['tool', r.tool], ['running num', count(r.n)]], 'no tool runs');
  const refusals = Object.entries(state.refusals).sort().map(([cause, total]) => ({ cause, total }));
  rows($('#refusals tbody'), refusals, 'cause', (r) => [['cause', r.cause], ['total num', count(r.total)]], 'nothing refused');

  const store = $('#store tbody');
  store.replaceChildren();
  if (!state.store.length) noRows(store, 'no store operation yet');
  for (const op of state.store) {
    const row = document.createElement('tr');
    row.dataset.store = op.store;
    row.dataset.operation = op.operation;
    const ms = (v) => (v === null ? '-' : v.toFixed(v < 1 ? 2 : 1));
    for (const [name, value] of [['store', op.store], ['operation', op.operation],
      ['count num', count(op.count)], ['p50 num', ms(op.p50Ms)], ['p99 num', ms(op.p99Ms)],
      ['errors num' + (op.errors > 0 ? ' bad' : ''), count(op.errors)]]) {
      const cell = document.createElement('td');
      cell.className = name;
      cell.textContent = value;
      row.append(cell);
    }
    store.append(row);
  }

  rows($('#upstreams tbody'), state.upstreams, 'upstream', (u) => [
    ['upstream', u.upstream],
    ['breaker' + (u.breakerOpen ? ' bad' : ''), u.breakerOpen ? 'open' : 'closed'],
    ['waiting' + (u.waiting ? ' warn' : ''), u.waiting ? 'yes' : 'no'],
    ['in-use num', count(u.inUse)],
    ['calls num', count(u.calls)],
    ['errors num', count(u.errors)],
  ], 'no upstreams: this server is not a gateway');

  drawTools(state.tools);
  updates += 1;
  const updated = $('#updated');
  updated.textContent = new Date(state.at).toLocaleTimeString();
  updated.dataset.updates = String(updates);
}

function svg(name, attributes) {
  const element = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, String(value));
  return element;
}

// A chart of 60 minutes, `series` [[class, values]] stacked as bars, or
// drawn as lines when `lines`.
function chart(kind, title, series, lines) {
  const width = 240;
  const height = 48;
  const chartSvg = svg('svg', { class: kind, viewBox: `0 0 ${width} ${height}`, role: 'img' });
  const label = svg('title', {});
  label.textContent = title;
  chartSvg.append(label);
  // The last 60 minutes (an hour of readings gives 61 points, so 60 or 61
  // minutes with the one going on).
  series = series.map(([cls, values]) => [cls, values.slice(-60)]);
  const n = series.length ? series[0][1].length : 0;
  const slot = width / 60;
  const offset = (60 - n) * slot;
  const totals = Array.from({ length: n }, (_, i) =>
    lines ? Math.max(...series.map(([, v]) => v[i] || 0)) : series.reduce((s, [, v]) => s + (v[i] || 0), 0));
  const top = Math.max(1e-9, ...totals);
  if (lines) {
    for (const [cls, values] of series) {
      const points = values.map((v, i) => (v === null ? null : [(offset + (i + 0.5) * slot).toFixed(1), (height - 1 - (v / top) * (height - 3)).toFixed(1)])).filter(Boolean);
      if (points.length > 1) chartSvg.append(svg('polyline', { class: cls, points: points.map((p) => p.join(',')).join(' '), fill: 'none' }));
      // A minute with tasks ended and its neighbours without: a dot.
      for (const [x, y] of points) chartSvg.append(svg('circle', { class: cls, cx: x, cy: y, r: 1.5 }));
    }
  } else {
    for (let i = 0; i < n; i += 1) {
      let y = height;
      for (const [cls, values] of series) {
        const h = ((values[i] || 0) / top) * (height - 2);
        if (h <= 0) continue;
        y -= h;
        chartSvg.append(svg('rect', { class: cls, x: (offset + i * slot + 0.5).toFixed(1), y: y.toFixed(1), width: (slot - 1).toFixed(1), height: h.toFixed(1) }));
      }
    }
  }
  const figure = document.createElement('figure');
  const caption = document.createElement('figcaption');
  caption.textContent = title;
  figure.append(caption, chartSvg);
  return figure;
}

function drawTools(tools) {
  const holder = $('#tools');
  holder.replaceChildren(...tools.map((tool) => {
    const box = document.createElement('div');
    box.className = 'tool';
    box.dataset.tool = tool.tool;
    const head = document.createElement('h3');
    head.textContent = tool.tool;
    const totals = document.createElement('p');
    totals.className = 'totals';
    for (const [name, value] of [['created', tool.created], ...OUTCOMES.map((o) => [o, tool.ended[o]])]) {
      const item = document.createElement('span');
      item.className = `total-${name}`;
      const number = document.createElement('b');
      number.className = name;
      number.textContent = count(value);
      item.append(number, ` ${name}`);
      totals.append(item, ' ');
    }
    const m = tool.minutes;
    const p95 = m.p95Secs.filter((v) => v !== null);
    const slowest = p95.length ? `${Math.max(...p95).toPrecision(3)} s` : 'none ended';
    box.append(head, totals,
      chart('rate', 'tasks created per minute', [['created', m.created]], false),
      chart('outcomes', 'ended per minute, by outcome', OUTCOMES.map((o) => [o, m[o]]), false),
      chart('durations', `duration p50 and p95 (top: ${slowest})`, [['p50', m.p50Secs], ['p95', m.p95Secs]], true));
    return box;
  }));
}

function drawTasks() {
  const filter = $('#tasks-filter').value.trim().toLowerCase();
  const showIds = $('#show-ids').checked;
  const now = Date.now();
  const shown = tasks.filter((t) => !filter || [t.task, t.tool || '', t.principal, t.status].some((v) => v.toLowerCase().includes(filter)));
  const drawn = shown.slice(0, MAX_ROWS);
  text('#tasks-count', drawn.length < shown.length
    ? `the oldest ${drawn.length} of ${shown.length} (the filter narrows them)`
    : `${shown.length} of ${tasks.length}${tasks.length >= LIST_LIMIT ? ' (the oldest listed)' : ''}`);
  rows($('#tasks tbody'), drawn, 'task', (t) => {
    const button = document.createElement('button');
    const arming = confirming.get(t.task);
    const armed = arming && arming.until > now;
    button.className = armed ? 'cancel confirming' : 'cancel';
    button.textContent = armed ? 'Confirm cancel' : 'Cancel';
    button.disabled = t.cancelRequested;
    button.dataset.task = t.task;
    return [
      ['hash', t.task],
      ['tool', t.tool || '?'],
      ['principal', t.principal],
      ['status ' + t.status, t.cancelRequested ? `${t.status} (cancelling)` : t.status],
      ['age num', age(t.ageSecs)],
      ['id', showIds && t.id ? t.id : ''],
      ['action', button],
    ];
  }, tasks.length ? 'no task matches the filter' : 'no unfinished task');
}

async function refreshState() {
  if (document.hidden) return;
  try {
    drawState(await call('GET', '/ui/state'));
    showError('');
  } catch (error) {
    showError(`cannot read the numbers: ${error.message}`);
  }
}

async function refreshTasks() {
  if (document.hidden) return;
  try {
    const answer = await call('POST', '/admin/tasks/list', {
      filter: { status: 'unfinished' },
      limit: LIST_LIMIT,
      show: { ids: $('#show-ids').checked },
      page: true,
    });
    tasks = answer.tasks;
    drawTasks();
  } catch (error) {
    showError(`cannot list the tasks: ${error.message}`);
  }
}

async function onTableClick(event) {
  const button = event.target.closest('button.cancel');
  if (!button) return;
  const hash = button.dataset.task;
  const arming = confirming.get(hash);
  const now = Date.now();
  if (!arming || arming.until < now) {
    confirming.set(hash, { armed: now, until: now + CONFIRM_MS });
    drawTasks();
    setTimeout(drawTasks, CONFIRM_MS + 50);
    return;
  }
  if (event.detail > 1 || now - arming.armed < ARM_MS) return; // a double-click confirms nothing
  confirming.delete(hash);
  button.disabled = true;
  try {
    await call('POST', '/admin/tasks/cancel', { task: hash });
    showError('');
  } catch (error) {
    showError(`cannot cancel ${hash}: ${error.message}`);
  }
  refreshTasks();
}

function every(ms, job) {
  const run = async () => {
    await job();
    setTimeout(run, ms);
  };
  run();
}

document.addEventListener('DOMContentLoaded', () => {
  // Ids only after a fresh, explicit step: never a box a reload restored.
  $('#show-ids').checked = false;
  $('#tasks tbody').addEventListener('click', onTableClick);
  $('#tasks-filter').addEventListener('input', drawTasks);
  $('#show-ids').addEventListener('change', refreshTasks);
  every(STATE_EVERY_MS, refreshState);
  every(TASKS_EVERY_MS, refreshTasks);
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) {
      refreshState();
      refreshTasks();
    }
  });
});

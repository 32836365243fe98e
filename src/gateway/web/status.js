// kvgate status page: reads /kvgate/v1/status and /kvgate/v1/sessions (see status.html).
'use strict';
(function () {
const $ = id => document.getElementById(id);
const B = document.body;
function h(tag, at, ...kids) {
  const e = document.createElement(tag);
  if (at) for (const k in at) {
    const v = at[k];
    if (v == null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of kids.flat(3)) if (c != null && c !== false) e.append(c instanceof Node ? c : String(c));
  return e;
}
const num = v => typeof v === 'number' && isFinite(v);
const nil = v => v === undefined || v === null || (typeof v === 'number' && !isFinite(v));
const obj = v => v && typeof v === 'object' && !Array.isArray(v) ? v : null;
const arr = v => Array.isArray(v) ? v : [];
const str = v => nil(v) ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v);
// data-k: JSON path, data-v: raw value, text: formatted
function V(k, v, f, tag, cls, l) {
  return h(tag || 'span', {'data-k': k, 'data-v': str(v), class: cls, 'data-l': l}, nil(v) ? '—' : f && (typeof v === 'number' || f.all) ? f(v) : str(v));
}
const NF = new Intl.NumberFormat('en-US');
const fI = v => NF.format(Math.round(v));
const KiB = 1024, MiB = KiB * 1024, GiB = MiB * 1024;
function fB(b) {
  const a = Math.abs(b);
  if (a >= GiB) return (b / GiB).toFixed(a >= 100 * GiB ? 0 : 2) + ' GiB';
  if (a >= MiB) return (b / MiB).toFixed(a >= 100 * MiB ? 0 : 1) + ' MiB';
  if (a >= KiB) return (b / KiB).toFixed(1) + ' KiB';
  return b + ' B';
}
const fP = r => (r * 100).toFixed(1).replace(/\.0$/, '') + '%';
const fMs = v => v < 1000 ? v.toFixed(v < 10 ? 1 : 0) + ' ms' : (v / 1000).toFixed(v < 10000 ? 2 : 1) + ' s';
function fD(s) {
  s = Math.max(0, s);
  if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + Math.floor(s % 60) + ' s';
  if (s < 86400) return Math.floor(s / 3600) + ' h ' + Math.floor(s % 3600 / 60) + ' min';
  return Math.floor(s / 86400) + ' d ' + Math.floor(s % 86400 / 3600) + ' h';
}
const fAgo = t => { const d = Date.now() / 1000 - t; return d < 5 ? 'just now' : fD(d).replace(/ \d+ s$/, '') + ' ago'; };
const YN = v => v === true ? 'yes' : v === false ? 'no' : str(v); YN.all = 1;
const nn = v => num(v) ? v : null;
const fN = v => num(v) ? fI(v) : '—';
const fTok = v => fI(v) + ' tok';
const fRate = v => fI(v) + ' tok/s';
const fT = ms => num(ms) ? new Date(ms).toLocaleTimeString([], {hour: '2-digit', minute: '2-digit', second: '2-digit'}) : '—';
const fDT = ms => num(ms) ? new Date(ms).toLocaleString([], {month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit'}) : '—';
const fK = v => v >= 1024 && v % 1024 === 0 ? v / 1024 + 'k' : v >= 1000 ? (v / 1000).toFixed(1).replace(/\.0$/, '') + 'k' : String(v);
const ratio = t => num(t.prompt_tokens) && t.prompt_tokens > 0 && num(t.cached_tokens) ? t.cached_tokens / t.prompt_tokens : 0;
const CAUSE = {client_edit: 'client edited history', volatile_line: 'volatile line (clock/date/id)', tool_reorder: 'tool results reordered',
  client_truncation: 'client dropped old turns', compaction: 'kvgate compacted', slot_eviction: 'slot evicted (cache lost)', engine_restart: 'engine restarted'};
const causeCls = c => c === 'compaction' ? 'badge b-ac' : c === 'slot_eviction' || c === 'engine_restart' ? 'badge b-bad' : 'badge b-wa';
const COMP = {weights: 'Weights', kv: 'KV cache', recurrent: 'Recurrent state', compute: 'Compute buffers', output: 'Output',
  prompt_cache: 'Prompt cache', checkpoints: 'Checkpoints', reserve: 'Reserve'};
// The supervisor's states (engine/supervisor_state.h).
const stateCls = s => s === 'ready' ? 'badge b-ok' : ['starting', 'verifying', 'restarting', 'degraded'].includes(s) ? 'badge b-wa' : s === 'failed' || s === 'stopped' ? 'badge b-bad' : 'badge';
const TH = (cols, n, last) => h('thead', null, h('tr', null, cols.map((t, i) => h('th', {class: i >= n && i !== last ? 'n' : null}, t))));
const M = (...t) => h('div', {class: 'mu'}, t);
const tile = (label, ...v) => h('div', {class: 'stat'}, h('div', {class: 'sv'}, v), h('div', {class: 'sl'}, label));
const dl = rows => h('dl', null, rows.map(([a, ...b]) => [h('dt', null, a), h('dd', null, b)]));
const put = (id, ...kids) => { const e = $(id); e.className = e.className.replace(/\bmu\b/, ''); e.replaceChildren(...kids.flat(3).filter(x => x != null && x !== false)); return e; };
const body = (sec, ...kids) => { const s = $(sec); s.replaceChildren(s.querySelector('h2'), ...kids.flat(3).filter(x => x != null && x !== false)); };
const cssv = n => getComputedStyle(document.documentElement).getPropertyValue(n).trim();
// Chart.js 3 or later (the options below are its; an older one draws nothing rather than fail).
const hasChart = () => typeof window.Chart === 'function' && parseInt(String(window.Chart.version || '0'), 10) >= 3;

// ---- key and URL parameters (before any fetch) ----
let KEY = null;
try { KEY = sessionStorage.getItem('kvgate_key') || null; } catch (e) {}
function store(k) { KEY = k || null; try { if (KEY) sessionStorage.setItem('kvgate_key', KEY); else sessionStorage.removeItem('kvgate_key'); } catch (e) {} }
const U = new URL(location.href), Q = U.searchParams;
const HP = new URLSearchParams(U.hash.replace(/^#/, ''));
if (Q.has('key') || HP.has('key')) {
  const k = Q.get('key') || HP.get('key');
  Q.delete('key');
  if (HP.has('key')) { HP.delete('key'); const r = HP.toString(); U.hash = r ? '#' + r : ''; }
  try { history.replaceState(history.state, '', U.pathname + U.search + U.hash); } catch (e) {}
  if (k) store(k);
}
const P_SID = Q.get('session'), P_TURN = /^\d+$/.test(Q.get('turn') || '') ? +Q.get('turn') : null;

// fetching
const st = {status: null, sessions: null, got: {}, err: {}, login: false};
async function api(path) {
  const o = {cache: 'no-store', headers: {}};
  if (KEY) o.headers.Authorization = 'Bearer ' + KEY;
  const r = await fetch(path, o);
  if (r.status === 401) { showLogin(KEY ? 'The gateway rejected this API key.' : 'This gateway needs an API key.'); const e = new Error('unauthorized'); e.auth = true; throw e; }
  let j = null;
  try { j = await r.json(); } catch (e) {}
  if (!r.ok) { const e = new Error((j && j.error && j.error.message) || 'HTTP ' + r.status); e.status = r.status; throw e; }
  return j;
}
const loops = {status: {p: '/kvgate/v1/status', busy: false, t: 0}, sessions: {p: '/kvgate/v1/sessions', busy: false, t: 0}};
function kick(name) {
  const L = loops[name];
  clearTimeout(L.t); L.t = 0;
  if (L.busy || st.login || document.hidden) return;
  L.busy = true;
  api(L.p).then(j => { L.busy = false; safe(() => onData(name, j)); }, e => { L.busy = false; onFail(name, e); })
    .finally(() => { if (!st.login && !L.t && !L.busy) L.t = setTimeout(() => kick(name), 2000); });
}
const kickAll = () => { kick('status'); kick('sessions'); };
function safe(f) { try { f(); } catch (e) { console.error(e); } }
function onData(name, j) {
  st[name] = j; st.got[name] = true; st.err[name] = null;
  if (name === 'status') renderStatus(); else renderSessions();
  $('hupd').textContent = 'updated ' + fT(Date.now());
  if (st.got.status && st.got.sessions && !st.err.status && !st.err.sessions) {
    $('banner').hidden = true;
    // ms from navigation to the first page with its data (measured by scripts/status-page-bench.sh)
    if (B.dataset.state !== 'ready' && !B.dataset.readyMs) B.dataset.readyMs = String(Math.round(performance.now()));
    B.dataset.state = 'ready';
  }
}
function onFail(name, e) {
  if (e && e.auth) return;
  st.err[name] = e;
  const b = $('banner');
  b.textContent = 'Cannot reach the kvgate gateway (' + (e && e.message || 'network error') + '). Retrying every 2 s…';
  b.hidden = false;
  B.dataset.state = 'error';
}
document.addEventListener('visibilitychange', () => { if (!document.hidden) kickAll(); });

// login
function showLogin(msg) {
  st.login = true;
  for (const n in loops) { clearTimeout(loops[n].t); loops[n].t = 0; }
  $('lmsg').textContent = msg || 'This gateway needs an API key.';
  $('grid').hidden = true; $('banner').hidden = true; $('login').hidden = false; $('logout').hidden = true;
  $('hstate').className = 'badge'; $('hstate').textContent = 'locked';
  B.dataset.state = 'login';
  setTimeout(() => $('lkey').focus(), 0);
}
$('lf').addEventListener('submit', ev => {
  ev.preventDefault();
  store($('lkey').value.trim()); $('lkey').value = '';
  st.login = false; $('login').hidden = true; $('grid').hidden = false; $('logout').hidden = !KEY;
  B.dataset.state = 'loading';
  kickAll();
  if (sel.sid) { sel.listSig = null; loadTurns(); ensureDetail(); }
});
$('logout').hidden = !KEY;
$('logout').addEventListener('click', () => { store(null); st.got = {}; showLogin('Logged out. Enter the API key to continue.'); });

// charts
const charts = {};
function chartDefaults() {
  if (!hasChart() || chartDefaults.done) return;
  chartDefaults.done = true;
  Chart.defaults.color = cssv('--mu'); Chart.defaults.borderColor = cssv('--ln');
  Chart.defaults.font.size = 10; Chart.defaults.animation = false;
}
function lineChart(id, cv, ds, scales, labels) {
  let c = charts[id];
  if (!c) {
    c = charts[id] = new Chart(cv, {type: 'line', data: {labels: labels || [], datasets: ds},
      options: {animation: false, responsive: true, maintainAspectRatio: false, spanGaps: true, interaction: {mode: 'index', intersect: false}, plugins: {legend: {display: false}}, scales}});
  } else {
    if (labels) c.data.labels = labels;
    ds.forEach((d, i) => { if (c.data.datasets[i]) c.data.datasets[i].data = d.data; });
    c.update('none');
  }
}
const ln = (data, c, o) => Object.assign({data, borderColor: cssv(c), backgroundColor: cssv(c), borderWidth: 1.5, pointRadius: 0}, o);
const key = (c, t) => h('span', null, h('i', {style: 'background:var(' + c + ')'}), t);
const sparks = new Map();
function spark(cell, sid, turns) {
  if (!hasChart() || !turns.length) return;
  const data = turns.map(ratio), rad = turns.map(t => t.cause ? 2.5 : 0), sig = JSON.stringify([data, rad]);
  let s = sparks.get(sid);
  if (!s) {
    const c = h('canvas', {class: 'spark', width: 100, height: 26, 'aria-label': 'cached ratio per turn'});
    cell.append(c);
    const chart = new Chart(c, {type: 'line', data: {labels: data.map((_, i) => i), datasets: [{data, borderColor: cssv('--ac'), borderWidth: 1.5,
      pointRadius: rad, pointBackgroundColor: cssv('--bad'), pointBorderWidth: 0, tension: 0, fill: false}]},
      options: {animation: false, responsive: false, events: [], layout: {padding: 3},
        plugins: {legend: {display: false}, tooltip: {enabled: false}}, scales: {x: {display: false}, y: {display: false, min: -0.08, max: 1.08}}}});
    sparks.set(sid, s = {c, chart, sig});
  } else {
    cell.append(s.c);
    if (s.sig !== sig) { s.sig = sig; const d = s.chart.data; d.labels = data.map((_, i) => i); d.datasets[0].data = data; d.datasets[0].pointRadius = rad; s.chart.update('none'); }
  }
}
$('cjs').addEventListener('load', () => safe(() => { if (st.status) renderStatus(); if (st.sessions) renderSessions(); }));

// status panels
function renderStatus() {
  const s = obj(st.status) || {};
  const e = obj(s.engine) || {};
  chartDefaults(); renderSum();
  const hs = $('hstate'); hs.className = stateCls(e.state); hs.textContent = nil(e.state) ? '—' : str(e.state);
  $('hinfo').textContent = str(e.fork);
  $('logout').hidden = !KEY;
  // engine
  const sc = obj(e.startup_checks);
  let checks;
  if (sc) {
    const li = (kind, label, cls, t) => h('li', {'data-check': kind}, h('span', {class: cls}, label), h('span', null, str(t)));
    checks = [h('h3', null, 'Startup checks', sc.checker ? h('span', {class: 'mu sm'}, ' · ' + str(sc.checker)) : null),
      h('ul', {class: 'checks'}, arr(sc.findings).map(t => li('mismatch', 'MISMATCH', 'badge b-bad', t)),
        arr(sc.warnings).map(t => li('warning', 'warning', 'badge b-wa', t)), arr(sc.verified).map(t => li('ok', 'ok', 'badge b-ok', t)))];
    if (!arr(sc.findings).length && !arr(sc.warnings).length && !arr(sc.verified).length) checks.push(M('No checks reported.'));
  } else checks = [h('h3', null, 'Startup checks'), M('No startup checks reported.')];
  body('engine',
    h('div', {style: 'display:flex;gap:10px;align-items:center;flex-wrap:wrap;margin-bottom:6px'}, V('engine.state', e.state, null, 'span', stateCls(e.state) + ' big'),
      e.available === false ? h('span', {class: 'badge b-bad'}, 'unavailable') : null),
    dl([['Fork', V('engine.fork', e.fork)], ['Build', V('engine.build', e.build)], ['Restarts', V('engine.restarts', e.restarts, fI)],
      ['Generation', V('engine.generation', e.generation, fI)], ['PID', V('engine.pid', e.pid)], ['Port', V('engine.port', e.port)],
      ['Uptime', V('engine.uptime_s', e.uptime_s, fD)], ['Ready in', V('engine.ready_in_ms', e.ready_in_ms, fMs)]]),
    checks);
  // memory
  const m = obj(s.memory);
  if (!m) body('memory', M('No memory plan reported.'),
    h('div', {hidden: true}, ['planned_total_bytes', 'budget_bytes', 'n_ctx', 'n_ctx_slot', 'slots'].map(k => V('memory.' + k, null))));
  else {
    const comps = arr(m.components).filter(obj), tot = num(m.planned_total_bytes) ? m.planned_total_bytes : comps.reduce((a, c) => a + ((nn(c.planned_bytes) || 0)), 0);
    const bud = num(m.budget_bytes) && m.budget_bytes > 0 ? m.budget_bytes : null, scale = Math.max(tot, bud || 0) || 1;
    const col = i => 'var(--s' + (i % 8 + 1) + ')';
    const over = bud && tot > bud;
    body('memory',
      h('div', {class: 'stats'}, tile('planned', V('memory.planned_total_bytes', m.planned_total_bytes, fB, 'span', over ? 'over' : null)),
        tile('budget' + (m.budget_source ? ' (' + str(m.budget_source) + ')' : ''), V('memory.budget_bytes', m.budget_bytes, fB)),
        tile(over ? 'over budget' : 'headroom', bud ? h('span', {class: over ? 'over' : null}, fB(Math.abs(bud - tot))) : '—')),
      h('div', {class: 'bar', role: 'img', 'aria-label': 'planned memory against budget'},
        comps.map((c, i) => num(c.planned_bytes) && c.planned_bytes > 0 ? h('div', {style: 'width:' + (c.planned_bytes / scale * 100).toFixed(2) + '%;background:' + col(i)}) : null),
        bud ? h('div', {class: 'bud', style: 'left:calc(' + Math.min(100, bud / scale * 100).toFixed(2) + '% - 2px)'}) : null),
      h('div', {class: 'tw'}, h('table', null, TH(['Component', 'Planned', 'Reported'], 1),
        h('tbody', null, comps.map((c, i) => h('tr', {'data-component': str(c.name)},
          h('td', null, h('span', {class: 'sw', style: 'background:' + col(i)}), COMP[c.name] || str(c.name)),
          V('planned_bytes', c.planned_bytes, fB, 'td', 'n'),
          V('reported_bytes', c.reported_bytes, fB, 'td', 'n' + (num(c.reported_bytes) && num(c.planned_bytes) && c.reported_bytes > c.planned_bytes * 1.01 + 65536 ? ' over' : ''))))))),
      dl([['Context', V('memory.n_ctx', m.n_ctx, fI), ' tokens'], ['Per slot', V('memory.n_ctx_slot', m.n_ctx_slot, fI), ' tokens'],
        ['Slots', V('memory.slots', m.slots, fI)], ['Unified memory', V('memory.unified_memory', m.unified_memory, YN)]]));
  }
  // slots
  const sl = arr(s.slots).filter(obj), busy = sl.filter(x => x.session != null && x.session !== '').length;
  body('slots', sl.length ? [h('div', {class: 'mu sm'}, busy + ' of ' + sl.length + ' held by a conversation'),
    h('ul', {class: 'slots'}, sl.map(x => {
      const sid = x.session == null ? '' : str(x.session);
      return h('li', {'data-slot': str(x.id), 'data-v': sid}, h('span', null, 'Slot ', str(x.id)),
        sid ? h('button', {class: 'lk id', type: 'button', onclick: () => selectSession(sid, null)}, sid) : h('span', {class: 'mu'}, 'free'));
    }))] : M('No slots reported.'));
  // queue
  const q = obj(s.queue) || {}, mt = obj(s.metrics) || {}, errs = obj(mt.errors) || {};
  const ek = Object.keys(errs);
  body('queue',
    h('div', {class: 'stats'}, tile('active', V('queue.active', q.active, fI), h('span', {class: 'mu'}, ' / ', V('queue.max_active', q.max_active, fI))),
      tile('waiting', V('queue.waiting', q.waiting, fI), h('span', {class: 'mu'}, ' / ', V('queue.max_waiting', q.max_waiting, fI))),
      tile('admitted', V('queue.admitted', q.admitted, fI)), tile('longest wait', V('queue.longest_wait_ms', q.longest_wait_ms, fMs))),
    dl([['Refused: queue full', V('queue.refused_queue_full', q.refused_queue_full, fI)], ['Refused: timeout', V('queue.refused_timeout', q.refused_timeout, fI)],
      ['Client gone', V('queue.client_gone', q.client_gone, fI)], ['Mean hold', V('queue.mean_hold_ms', q.mean_hold_ms, fMs)],
      ['Wait limit', V('queue.max_wait_ms', q.max_wait_ms, fMs)], ['Per conversation', V('queue.max_waiting_per_session', q.max_waiting_per_session, fI), ' waiting max']]),
    h('h3', null, 'Errors'),
    ek.length ? h('table', null, TH(['Kind', 'Count'], 1),
      h('tbody', null, ek.map(k => h('tr', {'data-error': k}, h('td', {class: 'id'}, k), V('count', errs[k], fI, 'td', 'n')))))
      : M('No errors.'));
  // throughput
  const tp = obj(s.throughput) || {}, rec = arr(tp.recent).filter(obj);
  const last = f => { for (let i = rec.length - 1; i >= 0; i--) if (num(rec[i][f])) return rec[i][f]; return null; };
  const mpt = tp.prefill_ms_per_token;
  put('tp-body', h('div', {class: 'stats'}, tile('prefill (latest)', V('throughput.prefill_tokens_per_s', last('prefill_tokens_per_s'), fRate)),
    tile('TTFT (latest)', V('throughput.ttft_ms', last('ttft_ms'), fMs)), tile('decode (latest)', V('throughput.decode_tokens_per_s', last('decode_tokens_per_s'), fRate)),
    tile('learned prefill / token', V('throughput.prefill_ms_per_token', mpt, v => v > 0 ? v.toFixed(v < 1 ? 3 : 2) + ' ms' : 'learning…')),
    tile('TTFT mean', V('metrics.ttft_ms_mean', mt.ttft_ms_mean, fMs))),
    h('div', {class: 'mu sm'}, rec.length ? 'Last ' + rec.length + ' chat request' + (rec.length === 1 ? '' : 's') : 'No chat requests yet.'));
  $('tp-ch').hidden = !(hasChart() && rec.length);
  if (hasChart() && rec.length) lineChart('tp', $('tp-c'), [
    ln(rec.map(r => nn(r.prefill_tokens_per_s)), '--ac', {yAxisID: 'y', pointRadius: 1.5, tension: .25}),
    ln(rec.map(r => nn(r.ttft_ms)), '--wa', {yAxisID: 'y1', pointRadius: 1.5, borderDash: [4, 3], tension: .25})],
    {x: {ticks: {maxTicksLimit: 4, maxRotation: 0}, grid: {display: false}},
      y: {position: 'left', beginAtZero: true, title: {display: true, text: 'tok/s'}},
      y1: {position: 'right', beginAtZero: true, grid: {drawOnChartArea: false}, title: {display: true, text: 'TTFT ms'}}},
    rec.map(r => num(r.ts) ? new Date(r.ts).toLocaleTimeString([], {hour: '2-digit', minute: '2-digit', second: '2-digit'}) : ''));
  const bp = obj(s.bench_prefill), pts = bp ? arr(bp.points).filter(p => obj(p) && num(p.tokens) && p.tokens > 0) : [];
  const cl = bp ? obj(bp.cliff) || {} : {};
  put('bp-body', bp ? [h('h3', null, 'Prefill benchmark'),
    h('div', null, 'Cliff at ', V('bench_prefill.cliff.cliff_tokens', cl.cliff_tokens, fTok, 'b'), ' · safe cap ', V('bench_prefill.cliff.safe_cap_tokens', cl.safe_cap_tokens, fTok, 'b')),
    cl.explanation ? h('div', {class: 'mu sm'}, str(cl.explanation)) : null,
    bp.file ? h('div', {class: 'mu sm id'}, str(bp.file)) : null,
    hasChart() && pts.length ? h('div', {class: 'key'}, key('--ac', 'measured'), key('--mu', 'trend'), num(cl.cliff_tokens) && key('--bad', 'cliff'), num(cl.safe_cap_tokens) && key('--ok', 'safe cap')) : null] : null);
  $('bp-ch').hidden = !(hasChart() && pts.length);
  if (hasChart() && pts.length) {
    const ymax = Math.ceil(Math.max(...pts.map(p => Math.max((nn(p.tokens_per_s) || 0), (nn(p.trend_tokens_per_s) || 0))), 1) * 1.1 / 100) * 100;
    const xs = pts.map(p => p.tokens).concat([cl.cliff_tokens, cl.safe_cap_tokens].filter(v => num(v) && v > 0));
    const vline = x => num(x) && x > 0 ? [{x, y: 0}, {x, y: ymax}] : [];
    lineChart('bp', $('bp-c'), [
      ln(pts.map(p => ({x: p.tokens, y: nn(p.tokens_per_s)})), '--ac', {pointRadius: 3}),
      ln(pts.map(p => ({x: p.tokens, y: nn(p.trend_tokens_per_s)})), '--mu', {borderWidth: 1, borderDash: [4, 3]}),
      ln(vline(cl.cliff_tokens), '--bad'), ln(vline(cl.safe_cap_tokens), '--ok', {borderDash: [2, 2]})],
      {x: {type: 'logarithmic', min: Math.min(...xs) / 1.3, max: Math.max(...xs) * 1.3, title: {display: true, text: 'prompt tokens'}, ticks: {maxRotation: 0, callback: v => { const m = Math.round(v / Math.pow(10, Math.floor(Math.log10(v))) * 100) / 100; return m === 1 || m === 2 || m === 5 ? fK(v) : ''; }}},
        y: {beginAtZero: true, max: ymax, title: {display: true, text: 'tok/s'}}});
  }
}

// conversations
const sel = {sid: null, turn: null, explicit: false, list: null, listErr: null, listAt: 0, listBusy: false, listSig: null, detail: null, detailKey: null, detailErr: null};
function renderSum() {
  const s = obj(st.status) || {}, mt = obj(s.metrics) || {}, n = obj(st.sessions) && Array.isArray(st.sessions.data) ? st.sessions.data.length : null;
  put('cv-sum', h('div', {class: 'stats'}, tile('conversations', V('sessions', nil(s.sessions) ? n : s.sessions, fI)),
    tile('cache hit overall', V('metrics.cache_hit_ratio', mt.cache_hit_ratio, fP)), tile('prompt tokens', V('metrics.prompt_tokens', mt.prompt_tokens, fI)),
    tile('cached tokens', V('metrics.cached_tokens', mt.cached_tokens, fI)), tile('prefilled tokens', V('metrics.prefilled_tokens', mt.prefilled_tokens, fI)),
    tile('completion tokens', V('metrics.completion_tokens', mt.completion_tokens, fI))));
}
function renderSessions() {
  const list = arr(obj(st.sessions) && st.sessions.data).filter(x => obj(x) && x.id != null);
  renderSum();
  const live = new Set(list.map(x => str(x.id)));
  for (const [k, v] of sparks) if (!live.has(k)) { v.chart.destroy(); sparks.delete(k); }
  if (!list.length) put('cv-body', M('No conversations yet.'));
  else {
    const later = [];
    const rows = list.map(x => {
      const id = str(x.id), view = obj(x.view) || {}, turns = arr(x.turns).filter(obj);
      const comp = num(view.compactions) ? view.compactions : arr(x.compaction_history).length;
      const sp = h('td', null);
      later.push([sp, id, turns]);
      const open = () => selectSession(id, null);
      return h('tr', {'data-session': id, class: 'ck' + (id === sel.sid ? ' sel' : ''), tabindex: 0, onclick: open, onkeydown: ev => { if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); open(); } }},
        h('td', null, h('span', {class: 'id'}, id), num(x.slot) ? h('span', {class: 'badge b-ac sm', style: 'margin-left:6px'}, 'slot ' + x.slot) : null),
        sp, V('messages', x.messages, fI, 'td', 'n', 'messages'), V('last_prompt_tokens', x.last_prompt_tokens, fI, 'td', 'n', 'tokens now'),
        V('cache_hit_ratio', x.cache_hit_ratio, fP, 'td', 'n', 'cached'), V('requests', x.requests, fI, 'td', 'n', 'requests'),
        V('compactions', comp, fI, 'td', 'n', 'compactions'), V('last_used', x.last_used, fAgo, 'td', 'n mu', 'last used'));
    });
    put('cv-body', h('div', {class: 'tw'}, h('table', null, TH(['Conversation', 'Cached/turn', 'Msgs', 'Tokens now', 'Cached', 'Req', 'Compact.', 'Last used'], 2),
      h('tbody', null, rows))));
    for (const [c, id, t] of later) safe(() => spark(c, id, t));
  }
  renderConvDetail(list);
  const sig = sigOf(sel.sid);
  if (sig && sel.listSig == null && sel.list) sel.listSig = sig;
  if (sig && sig !== sel.listSig && Date.now() - sel.listAt >= 2000) loadTurns();
}
// changes when the conversation gets a new turn
function sigOf(sid) {
  const x = sid != null && arr(obj(st.sessions) && st.sessions.data).find(y => obj(y) && str(y.id) === sid), t = x && arr(x.turns);
  return x ? JSON.stringify([x.requests, x.messages, t.length && obj(t[t.length - 1]) && t[t.length - 1].n]) : null;
}
function renderConvDetail(list) {
  const x = sel.sid != null && list.find(y => str(y.id) === sel.sid);
  if (!x) { put('cv-det'); return; }
  const hist = arr(x.compaction_history).filter(obj);
  put('cv-det', h('h3', null, 'Compactions · ', h('span', {class: 'id'}, sel.sid)),
    hist.length ? h('div', {class: 'tw'}, h('table', null, TH(['Time', 'Level', 'Tokens', 'Duration', 'Dropped'], 2),
      h('tbody', null, hist.slice().reverse().map(c => h('tr', null, h('td', null, fDT(c.ts)), h('td', null, str(c.level) || '—', ' ', h('span', {class: 'mu'}, str(c.trigger))),
        h('td', {class: 'n'}, fN(c.tokens_before), ' → ', fN(c.tokens_after)),
        h('td', {class: 'n'}, num(c.duration_ms) ? fMs(c.duration_ms) : '—'), h('td', {class: 'n'}, num(c.dropped_messages) ? fI(c.dropped_messages) + ' msg' : '—'))))))
      : M('No compactions.'),
    x.kv_state !== undefined && x.kv_state !== null ? [h('h3', null, 'Saved KV state'), h('pre', {'data-k': 'kv_state'}, JSON.stringify(x.kv_state))] : null);
}

// inspector
function setUrl() {
  try { const u = new URL(location.href); if (sel.sid) u.searchParams.set('session', sel.sid); else u.searchParams.delete('session');
    if (sel.explicit && sel.turn != null) u.searchParams.set('turn', sel.turn); else u.searchParams.delete('turn');
    history.replaceState(history.state, '', u.pathname + u.search + u.hash); } catch (e) {}
}
function selectSession(sid, turn, quiet) {
  if (sid !== sel.sid) Object.assign(sel, {sid, list: null, listErr: null, listAt: 0, listSig: null, detail: null, detailKey: null, detailErr: null, turn: null, explicit: false});
  if (turn != null) { sel.turn = turn; sel.explicit = true; }
  document.querySelectorAll('#cv-body tr[data-session]').forEach(r => r.classList.toggle('sel', r.getAttribute('data-session') === sid));
  if (st.sessions) renderConvDetail(arr(st.sessions.data).filter(obj));
  if (!quiet) setUrl();
  renderInspector();
  loadTurns();
  if (sel.turn != null) ensureDetail();
}
const enc = encodeURIComponent;
function loadTurns() {
  if (!sel.sid || sel.listBusy || st.login) return;
  const sid = sel.sid;
  sel.listBusy = true; sel.listAt = Date.now(); sel.listSig = sigOf(sid);
  api('/kvgate/v1/sessions/' + enc(sid) + '/turns').then(j => {
    if (sid !== sel.sid) return;
    sel.list = arr(j && j.data).filter(t => obj(t) && num(t.n)); sel.listErr = null;
    if (!sel.explicit && sel.list.length) { const b = sel.list.filter(t => obj(t.break)); sel.turn = (b.length ? b[b.length - 1] : sel.list[sel.list.length - 1]).n; }
    safe(renderTurnList); ensureDetail();
  }, e => { if (sid === sel.sid && !e.auth) { sel.listErr = e; safe(renderTurnList); } })
    .finally(() => { sel.listBusy = false; sel.listAt = Date.now(); });
}
function ensureDetail() {
  if (!sel.sid || sel.turn == null || st.login) return;
  const key = sel.sid + '\n' + sel.turn;
  if (sel.detailKey === key) return;
  sel.detailKey = key; sel.detail = null; sel.detailErr = null;
  safe(renderDetail);
  const sid = sel.sid, n = sel.turn;
  api('/kvgate/v1/sessions/' + enc(sid) + '/turns/' + enc(String(n))).then(j => { if (sel.detailKey === key) { sel.detail = obj(j) || {}; safe(renderDetail); } },
    e => { if (sel.detailKey === key) { if (e.auth) sel.detailKey = null; else { sel.detailErr = e; safe(renderDetail); } } });
}
function pickTurn(n) { sel.turn = n; sel.explicit = true; setUrl(); safe(renderTurnList); ensureDetail(); }
function renderInspector() {
  if (!sel.sid) return;
  const ib = put('in-body', h('div', {class: 'mu sm', style: 'margin-bottom:8px'}, 'Conversation ', h('span', {class: 'id'}, sel.sid)),
    h('div', {class: 'insp'}, h('div', {id: 'in-list', class: 'tl'}), h('div', {id: 'in-det'})));
  ib.className = '';
  renderTurnList(); renderDetail();
}
function renderTurnList() {
  const box = $('in-list');
  if (!box) return;
  const top = box.scrollTop;
  if (!sel.list) { box.replaceChildren(M(sel.listErr ? 'Could not load turns: ' + sel.listErr.message : 'Loading turns…')); return; }
  if (!sel.list.length) { box.replaceChildren(M('No turns recorded.')); return; }
  box.replaceChildren(h('table', null, TH(['#', 'Prompt', 'Cached', 'Prefilled', 'Cause'], 0, 4),
    h('tbody', null, sel.list.slice().reverse().map(t => {
      const b = obj(t.break), c = b ? b.cause : null;
      return h('tr', {'data-turn': t.n, class: 'ck' + (t.n === sel.turn ? ' sel' : ''), tabindex: 0, onclick: () => pickTurn(t.n), onkeydown: ev => { if (ev.key === 'Enter') pickTurn(t.n); }},
        h('td', {class: 'n'}, str(t.n)), V('prompt_tokens', t.prompt_tokens, fI, 'td', 'n'), V('cached_tokens', t.cached_tokens, fI, 'td', 'n'),
        V('prefilled_tokens', t.prefilled_tokens, fI, 'td', 'n'),
        h('td', null, b ? (c ? h('span', {class: causeCls(c) + ' sm', 'data-k': 'cause', 'data-v': str(c)}, CAUSE[c] || str(c)) : '—') : h('span', {class: 'mu sm', 'data-k': 'cause', 'data-v': ''}, 'extends')));
    }))));
  box.scrollTop = top;
}
function renderDetail() {
  const box = $('in-det');
  if (!box) return;
  if (sel.turn == null) { box.replaceChildren(M(sel.list && !sel.list.length ? '' : 'Select a turn.')); return; }
  const d = sel.detail;
  if (!d) { box.replaceChildren(M(sel.detailErr ? 'Could not load turn ' + sel.turn + ': ' + sel.detailErr.message : 'Loading turn ' + sel.turn + '…')); return; }
  const b = obj(d.break), c = b ? b.cause : null, bf = b ? obj(b.before) || {} : {}, af = b ? obj(b.after) || {} : {};
  const ex = (lab, o, p) => h('div', null, h('div', {class: 'exh'}, lab), h('pre', null, h('span', {'data-k': p + '.same'}, str(o.same)), h('mark', {'data-k': p + '.differs'}, str(o.differs))));
  const roles = b && (b.role_before !== undefined || b.role_after !== undefined) ? h('span', {class: 'mu'}, ' (', b.role_before == null ? 'none' : str(b.role_before), ' → ', b.role_after == null ? 'none' : str(b.role_after), ')') : null;
  const comps = arr(d.compactions).filter(obj);
  box.replaceChildren(h('div', {id: 'turn-detail', 'data-session': sel.sid, 'data-turn': str(nil(d.n) ? sel.turn : d.n)},
    h('div', {style: 'display:flex;gap:10px;align-items:center;flex-wrap:wrap'}, h('b', {class: 'big'}, 'Turn ', str(nil(d.n) ? sel.turn : d.n)),
      h('span', {'data-k': 'break.cause', 'data-v': c == null ? '' : str(c), class: b ? causeCls(c) : 'badge b-ok'}, b ? (c == null ? '—' : CAUSE[c] || str(c)) : 'no break · extended the cached prefix'),
      h('span', {class: 'mu sm'}, fDT(d.ts), num(d.status) ? ' · HTTP ' + d.status : '')),
    h('div', {class: 'stats', style: 'margin-top:10px'}, tile('prompt', V('turn.prompt_tokens', d.prompt_tokens, fI)), tile('cached', V('turn.cached_tokens', d.cached_tokens, fI)),
      tile('prefilled', V('turn.prefilled_tokens', d.prefilled_tokens, fI)), tile('recomputed', V('break.recomputed_tokens', b ? b.recomputed_tokens : null, fI)),
      tile('TTFT', V('turn.ttft_ms', d.ttft_ms, fMs)), tile('total', V('turn.total_ms', d.total_ms, fMs))),
    b ? [b.detail != null ? h('div', {'data-k': 'break.detail'}, str(b.detail)) : null,
      dl([['Message', V('break.message', b.message, fI), roles], ['Byte in message', V('break.byte_in_message', b.byte_in_message, fI)], ['Prompt byte', V('break.prompt_byte', b.prompt_byte, fI)],
        ['Messages', V('turn.messages', d.messages, fI), nil(d.view_messages) || d.view_messages === d.messages ? null : h('span', {class: 'mu'}, ' (' + fI(d.view_messages) + ' in view)')]]),
      h('div', {class: 'ex'}, ex('Previous turn', bf, 'before'), ex('This turn', af, 'after'))] :
      h('div', {hidden: true}, V('break.message', null), V('break.byte_in_message', null), ['before.same', 'before.differs', 'after.same', 'after.differs'].map(k => h('span', {'data-k': k}))),
    comps.length ? [h('h3', null, 'Compactions in this turn'), h('ul', null, comps.map(x => h('li', null, str(x.level), ' ', str(x.trigger), ': ', fN(x.tokens_before), ' → ', fN(x.tokens_after), ' tokens')))] : null));
}

// start
if (P_SID) selectSession(P_SID, P_TURN, true);
kickAll();
})();

// spanprof serve's UI: search traces, a trace's waterfall with CPU and
// off-CPU per span, flame graphs (a span, a route, a worker) and diffs of
// any profile type the data holds (cpu, wall, off_cpu, in-use memory...),
// workers with their in-use memory over time. Every value from the data
// goes into the page as text (textContent), never as HTML.
'use strict';

const view = document.getElementById('view');
const crumbs = document.getElementById('crumbs');
const tip = document.getElementById('tip');
const token = new URLSearchParams(location.search).get('token');

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'on') {
      for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn);
    } else if (k === 'text') {
      e.textContent = v;
    } else {
      e.setAttribute(k, v);
    }
  }
  for (const k of kids) e.append(k);
  return e;
}

async function api(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') q.set(k, v);
  }
  if (token) q.set('token', token);
  const r = await fetch(path + (q.toString() ? '?' + q : ''));
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

const ms = ns => (ns / 1e6).toFixed(ns < 1e7 ? 2 : 1) + ' ms';
const bytes = b => b >= 1048576 ? (b / 1048576).toFixed(1) + ' MiB'
  : b >= 1024 ? (b / 1024).toFixed(1) + ' KiB' : b + ' B';
// A value in a type's unit, as text.
const inUnit = unit => unit === 'nanoseconds' ? ms : unit === 'bytes' ? bytes
  : v => String(v) + (unit && unit !== 'count' ? ' ' + unit : '');
const typeLabel = t => ({ cpu: 'CPU', wall: 'wall-clock', off_cpu: 'off-CPU',
  inuse_space: 'in-use memory', inuse_objects: 'in-use objects',
  alloc_space: 'allocated memory', alloc_objects: 'allocated objects' })[t] || t;
const when = ns => new Date(ns / 1e6).toISOString().replace('T', ' ').slice(0, 23);
const hashParams = () => new URLSearchParams(location.hash.split('?')[1] || '');
const go = (path, params) => {
  location.hash = path + (params ? '?' + new URLSearchParams(params) : '');
};

function fail(e) {
  view.append(el('p', { class: 'error', text: String(e.message || e) }));
}

// --- search ---------------------------------------------------------------

async function searchPage() {
  const p = hashParams();
  crumbs.textContent = 'traces';
  view.replaceChildren();
  const svc = el('select', { name: 'service' }, el('option', { value: '', text: 'any service' }));
  const field = (name, ph) => el('input', { name, placeholder: ph, value: p.get(name) || '' });
  const order = el('select', { name: 'order' },
    el('option', { value: 'slowest', text: 'slowest first' }),
    el('option', { value: 'recent', text: 'most recent first' }));
  order.value = p.get('order') || 'slowest';
  const form = el('form', { class: 'search', id: 'search' },
    el('label', { text: 'service' }, svc),
    el('label', { text: 'route' }, field('route', '/api/items')),
    el('label', { text: 'method' }, field('method', 'GET')),
    el('label', { text: 'status' }, field('status', '200')),
    el('label', { text: 'min duration' }, field('min_duration', '100ms')),
    el('label', { text: 'since' }, field('since', '-1h')),
    el('label', { text: 'until' }, field('until', 'now')),
    el('label', { text: 'order' }, order),
    el('button', { type: 'submit', id: 'find', text: 'Find traces' }));
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    const f = {};
    for (const [k, v] of new FormData(form)) if (v) f[k] = v;
    go('#/', f);
  });
  view.append(form);
  try {
    for (const s of await api('/api/services')) {
      svc.append(el('option', { value: s, text: s }));
    }
    svc.value = p.get('service') || '';
    const q = Object.fromEntries(p);
    if (!q.order) q.order = 'slowest';
    const traces = await api('/api/traces', q);
    const tb = el('tbody');
    for (const t of traces) {
      tb.append(el('tr', { class: 'row trace-row', on: { click: () => go('#/trace/' + t.trace_id) } },
        el('td', { text: when(t.start_ns) }),
        el('td', { text: t.service || '' }),
        el('td', { class: 'span-name', text: t.name || '' }),
        el('td', { text: (t.method || '') + ' ' + (t.route || t.target || '') }),
        el('td', { class: 'num', text: t.http_status || '' }),
        el('td', { class: 'num duration', text: ms(t.duration_ns) }),
        el('td', { class: 'num', text: t.spans })));
    }
    view.append(el('table', { id: 'traces' },
      el('thead', {}, el('tr', {}, ...['start', 'service', 'span', 'route', 'status', 'duration', 'spans']
        .map(h => el('th', { text: h })))), tb));
    if (!traces.length) view.append(el('p', { class: 'muted', text: 'No trace matches.' }));
  } catch (e) { fail(e); }
}

// --- a trace --------------------------------------------------------------

async function tracePage(id) {
  crumbs.textContent = 'trace ' + id;
  view.replaceChildren();
  try {
    const t = await api('/api/traces/' + id);
    const t0 = Math.min(...t.spans.map(s => s.start_ns));
    const t1 = Math.max(...t.spans.map(s => s.start_ns + s.duration_ns));
    const total = Math.max(1, t1 - t0);
    const depth = {};
    for (const s of t.spans) depth[s.span_id] = s.parent_id && depth[s.parent_id] !== undefined ? depth[s.parent_id] + 1 : 0;
    const tb = el('tbody');
    for (const s of t.spans) {
      const bar = el('div', { class: s.error ? 'err' : '' });
      bar.style.left = ((s.start_ns - t0) / total * 100) + '%';
      bar.style.width = Math.max(0.2, s.duration_ns / total * 100) + '%';
      const name = el('td', { class: 'span-name', text: s.name || '' });
      name.style.paddingLeft = (8 + 14 * depth[s.span_id]) + 'px';
      tb.append(el('tr', { class: 'row span-row', 'data-span': s.span_id, 'data-samples': s.cpu_samples,
        on: { click: () => go('#/flame', { trace: t.trace_id, span: s.span_id }) } },
        name,
        el('td', { text: s.service || '' }),
        el('td', { text: (s.method || '') + ' ' + (s.route || s.target || '') }),
        el('td', { class: 'num', text: s.http_status || '' }),
        el('td', { class: 'num wall', text: ms(s.duration_ns) }),
        el('td', { class: 'num cpu', 'data-ns': s.cpu_ns, text: ms(s.cpu_ns) }),
        el('td', { class: 'num off-cpu', 'data-ns': s.off_cpu_ns === null ? '' : s.off_cpu_ns,
          text: s.off_cpu_ns === null || s.off_cpu_ns === undefined ? '' : ms(s.off_cpu_ns) }),
        el('td', { class: 'num', text: s.cpu_samples }),
        el('td', {}, el('div', { class: 'wf' }, bar))));
    }
    view.append(el('p', {}, 'Click a span for the flame graph of its own samples (CPU, or another profile type it has). ' +
      'Off-CPU: the time its worker was blocked (wall-clock profiling); empty when not measured.'));
    view.append(el('table', { id: 'waterfall' },
      el('thead', {}, el('tr', {}, ...['span', 'service', 'route', 'status', 'wall', 'CPU', 'off-CPU', 'samples', '']
        .map(h => el('th', { text: h })))), tb));
    const root = t.spans.find(s => s.kind === 2 && s.route);
    if (root) {
      const range = { service: root.service, route: root.route, since: '-1h' };
      view.append(el('p', {},
        el('a', { href: '#/flame?' + new URLSearchParams(range), id: 'route-flame', text: 'Flame graph of ' + root.route + ' (last hour)' }),
        ' · ',
        el('a', { href: '#/diff?' + new URLSearchParams(Object.assign({ split: Math.round(root.duration_ns / 2e6) + 'ms' }, range)),
          id: 'route-diff', text: 'Slow against fast requests of ' + root.route })));
    }
  } catch (e) { fail(e); }
}

// --- flame graphs ---------------------------------------------------------

function hue(name) {
  let h = 0;
  for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) | 0;
  return h;
}

// Draws tree (nodes {n, t:[cpu...], s:[samples...], c:[...]}) into box,
// root at the bottom; diff colours red where side 0 spends a larger share.
function flame(box, tree, diff, unit, what) {
  const fmt = inUnit(unit || 'nanoseconds');
  what = what || 'CPU';
  const rowH = 17;
  let zoom = tree;
  const parent = new Map();
  let maxDepth = 0;
  (function walk(n, d) {
    n.d = d; maxDepth = Math.max(maxDepth, d);
    for (const c of n.c || []) { parent.set(c, n); walk(c, d + 1); }
  })(tree, 0);
  const total0 = tree.t[0] || 1, total1 = diff ? (tree.t[1] || 1) : 1;
  const search = el('input', { id: 'flame-search', placeholder: 'search functions' });
  const matched = el('span', { id: 'flame-matched', class: 'muted' });
  const reset = el('button', { id: 'flame-reset', text: 'Reset zoom' });
  const graph = el('div', { class: 'flame', id: 'flame' });
  box.append(el('div', { class: 'bar' }, search, matched, reset), graph);

  function colour(n) {
    if (!diff) {
      const h = hue(n.n);
      return 'hsl(' + (20 + Math.abs(h) % 40) + ',' + (70 + Math.abs(h >> 8) % 20) + '%,' + (55 + Math.abs(h >> 16) % 15) + '%)';
    }
    const a = n.t[0] / total0, b = n.t[1] / total1, dlt = a - b;
    const k = Math.min(1, Math.abs(dlt) / Math.max(a, b, 1e-9));
    return dlt >= 0 ? 'rgb(255,' + Math.round(255 - 180 * k) + ',' + Math.round(255 - 180 * k) + ')'
                    : 'rgb(' + Math.round(255 - 180 * k) + ',' + Math.round(255 - 180 * k) + ',255)';
  }

  function draw() {
    graph.replaceChildren();
    const W = graph.clientWidth || 1000;
    graph.style.height = ((maxDepth + 1) * rowH) + 'px';
    const z = zoom.t[0] || 1;
    // The zoomed frame's ancestors span the whole width.
    for (let a = zoom; a; a = parent.get(a)) place(a, 0, W, a !== zoom);
    (function lay(n, x, w) {
      let cx = x;
      for (const c of n.c || []) {
        const cw = w * c.t[0] / (n.t[0] || 1);
        if (cw >= 0.5) { place(c, cx, cw, false); lay(c, cx, cw); }
        cx += cw;
      }
    })(zoom, 0, W);
    function place(n, x, w, dim) {
      const f = el('div', { class: 'frame' + (dim ? ' dim' : ''), text: w > 30 ? n.n : '' });
      f.dataset.name = n.n;
      f.style.left = x + 'px';
      f.style.width = w + 'px';
      f.style.top = ((maxDepth - n.d) * rowH) + 'px';
      f.style.background = colour(n);
      f.addEventListener('click', () => { zoom = n === zoom && parent.get(n) ? parent.get(n) : n; draw(); });
      f.addEventListener('mousemove', ev => {
        const self = n.t[0] - (n.c || []).reduce((s, c) => s + c.t[0], 0);
        let text = n.n + '\ntotal ' + fmt(n.t[0]) + ' ' + what + ' (' + (100 * n.t[0] / total0).toFixed(2) + '%)' +
          ', self ' + fmt(self) + ', ' + n.s[0] + ' samples';
        if (diff) text += '\nbase ' + fmt(n.t[1]) + ' (' + (100 * n.t[1] / total1).toFixed(2) + '%)';
        tip.textContent = text;
        tip.style.whiteSpace = 'pre';
        tip.style.left = (ev.clientX + 12) + 'px';
        tip.style.top = (ev.clientY + 12) + 'px';
        tip.hidden = false;
      });
      f.addEventListener('mouseleave', () => { tip.hidden = true; });
      graph.append(f);
      void z;
    }
    highlight();
  }

  // Matching frames are highlighted; their share counts each sample once
  // (a match inside a match is not added again).
  function highlight() {
    const term = search.value.toLowerCase();
    let sum = 0;
    (function walk(n, inside) {
      const m = term && n !== tree && n.n.toLowerCase().includes(term);
      if (m && !inside) sum += n.t[0];
      for (const c of n.c || []) walk(c, inside || m);
    })(tree, false);
    for (const f of graph.children) {
      f.classList.toggle('match', !!term && f.dataset.name.toLowerCase().includes(term));
    }
    matched.textContent = term ? 'matched: ' + (100 * sum / total0).toFixed(2) + '% of ' + what + ' (' + fmt(sum) + ')' : '';
  }

  search.addEventListener('input', highlight);
  reset.addEventListener('click', () => { zoom = tree; draw(); });
  draw();
}

// A choice of the profile types the selection sel has (/api/types): only
// those present, the current one chosen; picking one reloads the page
// with ?type=. Its options say the type's name and its total.
async function typeSelector(sel, p, path) {
  const types = await api('/api/types', sel);
  const cur = p.type || 'cpu';
  const box = el('select', { id: 'type-select', 'data-types': types.map(t => t.type).join(',') });
  for (const t of types) {
    box.append(el('option', { value: t.type, text: typeLabel(t.type) + ' (' + t.type + ', ' + inUnit(t.unit)(t.value) + ')' }));
  }
  if (!types.some(t => t.type === cur)) box.append(el('option', { value: cur, text: typeLabel(cur) + ' (none)' }));
  box.value = cur;
  box.addEventListener('change', () => go(path, Object.assign({}, p, { type: box.value })));
  return el('label', { class: 'types', text: 'profile type ' }, box);
}

async function flamePage() {
  const p = Object.fromEntries(hashParams());
  view.replaceChildren();
  let title;
  if (p.span) title = 'span ' + p.span + ' of trace ' + p.trace;
  else if (p.route) title = 'route ' + p.route + (p.service ? ' of ' + p.service : '');
  else title = 'worker profile' + (p.pid ? ' of pid ' + p.pid : 's');
  crumbs.textContent = 'flame graph: ' + title;
  try {
    const sel = Object.assign({}, p);
    delete sel.type;
    const chooser = await typeSelector(sel, p, '#/flame');
    const r = await api('/api/flame', p);
    const what = typeLabel(r.type), fmt = inUnit(r.unit);
    view.append(chooser);
    view.append(el('h3', { id: 'flame-title', 'data-type': r.type, 'data-total': r.tree.t[0],
      text: what + ' of ' + title + ': ' + fmt(r.tree.t[0]) + ', ' + r.tree.s[0] + ' samples' }));
    const dl = new URLSearchParams(p);
    if (token) dl.set('token', token);
    view.append(el('p', {},
      p.trace ? el('a', { href: '#/trace/' + p.trace, text: 'back to the trace' }) : '',
      p.trace ? ' · ' : '',
      el('a', { href: '/api/pprof?' + dl, id: 'pprof-link', download: 'spanprof.pb.gz', text: 'Download pprof (go tool pprof)' })));
    if (!r.tree.s[0]) view.append(el('p', { class: 'muted', text: 'No ' + what + ' sample in this selection.' }));
    flame(view, r.tree, false, r.unit, what);
  } catch (e) { fail(e); }
}

async function diffPage() {
  const p = Object.fromEntries(hashParams());
  view.replaceChildren();
  const q = { service: p.service, route: p.route, since: p.since, until: p.until,
    base_service: p.service, base_route: p.route, base_since: p.since, base_until: p.until };
  let title;
  if (p.split) {
    q.min_duration = p.split; q.base_max_duration = p.split;
    title = p.route + ': requests of ' + p.split + ' or more (red) against faster ones (blue)';
  } else {
    q.since = p.since; q.until = p.until; q.base_since = p.base_since; q.base_until = p.base_until;
    title = p.route + ': ' + p.since + '..' + (p.until || 'now') + ' (red) against ' + p.base_since + '..' + (p.base_until || '');
  }
  crumbs.textContent = 'diff: ' + p.route;
  q.type = p.type;
  try {
    const chooser = await typeSelector({ service: p.service, route: p.route, since: p.since, until: p.until }, p, '#/diff');
    const r = await api('/api/diff', q);
    const what = typeLabel(r.type), fmt = inUnit(r.unit);
    view.append(chooser);
    view.append(el('h3', { id: 'diff-title', 'data-type': r.type, text: title + ' · ' + what }));
    view.append(el('p', { class: 'muted', text: 'Widths: the first selection (' + fmt(r.tree.t[0]) + ' ' + what + '); red: a larger share than in the base (' + fmt(r.tree.t[1]) + ' ' + what + '), blue: a smaller one.' }));
    flame(view, r.tree, true, r.unit, what);
  } catch (e) { fail(e); }
}

// --- workers ----------------------------------------------------------------

async function workersPage() {
  const p = Object.fromEntries(hashParams());
  crumbs.textContent = 'workers';
  view.replaceChildren();
  try {
    const ws = await api('/api/workers', { since: p.since || '-1h', until: p.until });
    const tb = el('tbody');
    for (const w of ws) {
      tb.append(el('tr', { class: 'row worker-row', on: { click: () => go('#/flame', { pid: w.pid, since: p.since || '-1h' }) } },
        el('td', { class: 'num', text: w.pid }),
        el('td', { text: w.service || '' }),
        el('td', { class: 'num', text: ms(w.cpu_ns) }),
        el('td', { class: 'num', text: w.cpu_ns ? (100 * w.in_requests_ns / w.cpu_ns).toFixed(1) + '%' : '' }),
        el('td', { class: 'num', text: w.samples }),
        el('td', { text: when(w.first_ns) + ' to ' + when(w.last_ns) })));
    }
    view.append(el('p', {}, 'Each worker\'s whole CPU profile over the last hour: click one. What ran in no request is under [no request].'));
    view.append(el('table', { id: 'workers' },
      el('thead', {}, el('tr', {}, ...['pid', 'service', 'CPU', 'in requests', 'samples', 'seen']
        .map(h => el('th', { text: h })))), tb));
    if (!ws.length) view.append(el('p', { class: 'muted', text: 'No profile in this time range.' }));
    await memorySection(p.since || '-1h', p.until);
  } catch (e) { fail(e); }
}

// In-use memory per worker over time (inuse_space profiles): a small
// chart and the latest value per worker, and a link to its in-use flame
// graph by stack; says so when no memory profile came.
async function memorySection(since, until) {
  view.append(el('h3', { text: 'In-use memory' }));
  const mem = await api('/api/memory', { since, until });
  if (!mem.length) {
    view.append(el('p', { class: 'muted', id: 'memory-none',
      text: 'No memory profile received in this time range: in-use memory shows here once the modules export inuse_space profiles.' }));
    return;
  }
  const tb = el('tbody');
  const t0 = Math.min(...mem.map(w => w.points[0][0]));
  const t1 = Math.max(...mem.map(w => w.points[w.points.length - 1][0]));
  for (const w of mem) {
    const vals = w.points.map(x => x[1]);
    const max = Math.max(1, ...vals);
    const W = 240, H = 36;
    const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    svg.setAttribute('width', W); svg.setAttribute('height', H);
    svg.setAttribute('class', 'memory-chart');
    const line = document.createElementNS('http://www.w3.org/2000/svg', 'polyline');
    line.setAttribute('fill', 'none'); line.setAttribute('stroke', '#c44');
    line.setAttribute('points', w.points.map(([t, v]) =>
      ((t1 > t0 ? (t - t0) / (t1 - t0) : 0.5) * (W - 2) + 1).toFixed(1) + ',' + (H - 1 - v / max * (H - 2)).toFixed(1)).join(' '));
    svg.append(line);
    const last = vals[vals.length - 1];
    tb.append(el('tr', { class: 'memory-row', 'data-pid': w.pid, 'data-bytes': last, 'data-points': w.points.length },
      el('td', { class: 'num', text: w.pid }),
      el('td', { text: w.service || '' }),
      el('td', { class: 'num', text: bytes(last) }),
      el('td', { class: 'num', text: bytes(Math.max(...vals)) }),
      el('td', {}, svg),
      el('td', {}, el('a', { class: 'memory-flame', href: '#/flame?' + new URLSearchParams({ pid: w.pid, since, type: 'inuse_space' }),
        text: 'in-use flame graph' }))));
  }
  view.append(el('table', { id: 'memory' },
    el('thead', {}, el('tr', {}, ...['pid', 'service', 'in use (latest)', 'peak', 'over time', '']
      .map(h => el('th', { text: h })))), tb));
}

function route() {
  tip.hidden = true;
  const h = location.hash.split('?')[0];
  if (h.startsWith('#/trace/')) return tracePage(h.slice(8));
  if (h === '#/flame') return flamePage();
  if (h === '#/diff') return diffPage();
  if (h === '#/workers') return workersPage();
  return searchPage();
}

window.addEventListener('hashchange', route);
route();

// Troupe web console: a single page over the gateway's /v1 HTTP API
// (same origin). No framework and no build step: plain ES2020.
//
// Session: the login form POSTs the token to /v1/session, which answers with
// an HttpOnly cookie; every later request rides on that cookie and carries
// X-Troupe-Console: 1 (the gateway's CSRF guard for cookie sessions). A 401
// from any call brings the login form back.
//
// Routes (location.hash): "#/" the cluster dashboard (GPU map, queues,
// jobs); "#/jobs/<id>" one job (summary, placement, logs, timeline).
// Live updates come from /v1/events (Server-Sent Events), with a poll every
// few seconds as a fallback.
'use strict';

(() => {
  const TERMINAL = new Set(['succeeded', 'failed', 'canceled']);
  const PENDING = new Set(['queued', 'placing']);
  // States whose jobs hold GPUs (and so appear on the map).
  const HOLDING = ['placing', 'starting', 'running'];
  const POLL_MS = 5000;
  const DEBOUNCE_MS = 250;
  const PAGE_SIZE = 100;
  const ACTIVE_PAGE_SIZE = 500;
  const MAX_PAGES = 20;
  const LOG_LIMIT_CHARS = 2_000_000;   // the pane keeps the last ones
  const LOG_STALL_MS = 3000;            // a silent followed log is read plainly...
  const LOG_POLL_MAX_CHARS = 1_000_000; // ...while it is smaller than this

  const $ = (id) => document.getElementById(id);
  const enc = encodeURIComponent;

  // ---------------------------------------------------------------- state

  const app = {
    me: null,              // whoami: {team} or {admin, name}
    signedIn: false,
    nodes: [],
    active: new Map(),     // job_id -> job holding GPUs (placement known)
    recent: new Map(),     // job_id -> the last event's {state, workers, at}
    jobs: [],              // the job list as loaded (all pages so far)
    jobsNext: null,        // cursor for "Load more"
    queues: null,
    clusters: null,        // /v1/clusters at a front door; null on one cluster
    oneCluster: false,     // /v1/clusters said 404: not asked again
    view: null,            // 'dashboard' | 'job'
    jobId: null,           // the job page's job
    job: null,
    history: [],
    logRank: 0,
    logCtl: null,          // AbortController of the log reader
    events: null,          // EventSource
    eventsRetry: null,
    pollTimer: null,
    refreshTimer: null,
    nameFilterTimer: null,
  };

  // ---------------------------------------------------------------- DOM helper

  // h('a', {href: '#/', class: 'x', 'data-job': id, onclick: fn}, 'text', child)
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'style' && typeof v === 'object') Object.assign(el.style, v);
      else if (k.startsWith('--')) el.style.setProperty(k, v);
      else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    append(el, children);
    return el;
  }

  function append(el, children) {
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      if (Array.isArray(c)) append(el, c);
      else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
  }

  function announce(text) {
    const a = $('announcer');
    a.textContent = '';
    // A fresh text node so that repeated messages are read again.
    setTimeout(() => { a.textContent = text; }, 30);
  }

  function showBanner(id, text) {
    const el = $(id);
    el.textContent = text || '';
    el.hidden = !text;
  }

  // ---------------------------------------------------------------- formatting

  function ms(v) {
    const n = Number(v);
    return Number.isFinite(n) && n > 0 ? n : null;
  }

  function pad(n) { return String(n).padStart(2, '0'); }

  function fmtTime(v) {
    const t = ms(v);
    if (t === null) return '';
    const d = new Date(t);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
      `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }

  function fmtDuration(msec) {
    if (msec === null || msec < 0) return '';
    let s = Math.round(msec / 1000);
    if (s < 60) return `${s}s`;
    const d = Math.floor(s / 86400); s -= d * 86400;
    const hr = Math.floor(s / 3600); s -= hr * 3600;
    const m = Math.floor(s / 60); s -= m * 60;
    if (d) return `${d}d ${hr}h`;
    if (hr) return `${hr}h ${m}m`;
    return `${m}m ${s}s`;
  }

  function runTime(job) {
    const start = ms(job.start_ms);
    if (start === null) return '';
    const end = ms(job.end_ms) ?? (TERMINAL.has(job.state) ? null : Date.now());
    return end === null ? '' : fmtDuration(end - start);
  }

  function pct(x) {
    return `${Math.round(Number(x || 0) * 100)}%`;
  }

  function plural(n, word) {
    return `${n} ${word}${n === 1 ? '' : 's'}`;
  }

  function gpusLabel(job) {
    const g = job.gpus || 0;
    const w = job.workers || 1;
    return w > 1 ? `${w} × ${g}` : String(g);
  }

  // A stable colour per team. The teams the queues know (sorted by name) take
  // the palette's colours in turn, so that a cluster's teams never share
  // one; any other team (or any team past the palette) gets a hue from its
  // name's hash.
  const PALETTE = ['#4e79a7', '#e0702a', '#4f9a48', '#d6474a', '#33918b', '#a67c0a',
    '#9b5f8f', '#d0557f', '#8c6d4f', '#6366c8', '#2f8f5b', '#b04a2a'];
  const teamColors = new Map();
  let paletteTeams = '';
  function setPaletteTeams(teams) {
    const key = [...new Set(teams)].sort().join('\n');
    if (key === paletteTeams) return false;
    paletteTeams = key;
    teamColors.clear();
    const list = key ? key.split('\n') : [];
    if (list.length <= PALETTE.length) list.forEach((t, i) => teamColors.set(t, PALETTE[i]));
    return true;
  }
  function teamColor(team) {
    if (!teamColors.has(team)) {
      let hash = 2166136261;
      for (const ch of String(team)) {
        hash ^= ch.codePointAt(0);
        hash = Math.imul(hash, 16777619) >>> 0;
      }
      teamColors.set(team, `hsl(${hash % 360} 55% ${38 + (hash >>> 9) % 3 * 5}%)`);
    }
    return teamColors.get(team);
  }

  function stateBadge(state, extra) {
    return h('span', Object.assign({class: `state state-${state || 'unknown'}`, 'data-state': state}, extra || {}),
      state || 'unknown');
  }

  function teamChip(team) {
    if (!team) return '';
    return h('span', {class: 'team'},
      h('span', {class: 'swatch', '--team-color': teamColor(team), 'aria-hidden': 'true'}), team);
  }

  // ---------------------------------------------------------------- HTTP

  class ApiError extends Error {
    constructor(status, detail, code) {
      super(detail);
      this.status = status;
      this.detail = detail;
      this.code = code || '';
    }
  }

  async function problemOf(res) {
    let detail = `${res.status} ${res.statusText || 'error'}`.trim();
    let code = '';
    try {
      const type = res.headers.get('content-type') || '';
      if (type.includes('json')) {
        const p = await res.json();
        detail = p.detail || p.title || detail;
        code = p.code || '';
      } else {
        const t = (await res.text()).trim();
        if (t) detail = t.slice(0, 500);
      }
    } catch (_) { /* keep the status line */ }
    return new ApiError(res.status, detail, code);
  }

  // api(path, {method, body, signal, raw, quiet401}): JSON (or null for 204);
  // raw: the Response itself. A 401 signs out unless quiet401.
  async function api(path, opts = {}) {
    const {method = 'GET', body, signal, raw = false, quiet401 = false} = opts;
    const headers = {'X-Troupe-Console': '1', Accept: raw ? 'text/plain' : 'application/json'};
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let res;
    try {
      res = await fetch(path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: 'same-origin',
        cache: 'no-store',
        signal,
      });
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      throw new ApiError(0, `cannot reach the gateway (${e.message})`, 'network');
    }
    if (!res.ok) {
      const err = await problemOf(res);
      if (res.status === 401 && !quiet401) signOut('Your session has ended. Sign in again.');
      throw err;
    }
    if (raw) return res;
    if (res.status === 204) return null;
    const type = res.headers.get('content-type') || '';
    return type.includes('json') ? res.json() : res.text();
  }

  // Every page of a job listing (bounded), following "next".
  async function listAll(query) {
    const out = [];
    let after = '';
    for (let i = 0; i < MAX_PAGES; i++) {
      const r = await api(`/v1/jobs?${query}${after ? `&after=${enc(after)}` : ''}`);
      out.push(...(r.jobs || []));
      if (!r.next) break;
      after = r.next;
    }
    return out;
  }

  // Runs fn at most once at a time; a call while it runs queues one rerun.
  function singleFlight(fn) {
    let running = null;
    let again = false;
    const run = async () => {
      if (running) { again = true; return running; }
      running = (async () => {
        try {
          do { again = false; await fn(); } while (again && app.signedIn);
        } finally { running = null; }
      })();
      return running;
    };
    return run;
  }

  // ---------------------------------------------------------------- session

  function showLogin(message) {
    $('login-view').hidden = false;
    $('dashboard-view').hidden = true;
    $('job-view').hidden = true;
    $('session-bar').hidden = true;
    $('topnav').hidden = true;
    const err = $('login-error');
    err.textContent = message || '';
    err.hidden = !message;
    $('token').focus();
  }

  async function login(ev) {
    ev.preventDefault();
    const input = $('token');
    const token = input.value.trim();
    if (!token) {
      showLogin('Enter an API token.');
      return;
    }
    const button = $('login-submit');
    button.disabled = true;
    $('login-error').hidden = true;
    try {
      await api('/v1/session', {method: 'POST', body: {token}, quiet401: true});
      input.value = '';
      await start();
    } catch (e) {
      input.select();
      if (e.status === 401 || e.status === 403) showLogin(`Sign-in refused: ${e.detail}`);
      else showLogin(`Sign-in failed: ${e.detail || e.message}`);
    } finally {
      button.disabled = false;
    }
  }

  async function logout() {
    try { await api('/v1/session', {method: 'DELETE', quiet401: true}); } catch (_) { /* signed out anyway */ }
    signOut('');
  }

  function stopLive() {
    if (app.events) { app.events.close(); app.events = null; }
    clearTimeout(app.eventsRetry);
    clearInterval(app.pollTimer);
    clearTimeout(app.refreshTimer);
    app.refreshTimer = null;
    app.pollTimer = null;
    setLive('off');
  }

  function signOut(message) {
    const was = app.signedIn;
    app.signedIn = false;
    app.me = null;
    stopLive();
    stopLogs();
    // Forget everything shown so that nothing of the last session stays on screen.
    app.nodes = [];
    app.active.clear();
    app.recent.clear();
    app.jobs = [];
    app.jobsNext = null;
    app.queues = null;
    app.clusters = null;
    app.oneCluster = false;
    $('clusters-section').hidden = true;
    $('filter-cluster-field').hidden = true;
    $('filter-cluster').replaceChildren(h('option', {value: ''}, 'All clusters'));
    app.job = null;
    app.jobId = null;
    app.view = null;
    for (const id of ['gpu-map', 'map-legend', 'job-rows', 'queues', 'job-summary', 'job-placement',
      'job-history', 'log-pane', 'whoami', 'map-summary', 'submit-result', 'cluster-rows',
      'clusters-summary']) $(id).textContent = '';
    if (was || message !== undefined) showLogin(message);
  }

  async function start() {
    const me = await api('/v1/whoami', {quiet401: true});
    app.me = me || {};
    app.signedIn = true;
    const admin = Boolean(app.me.admin);
    $('whoami').textContent = admin ? `admin ${app.me.name || ''}`.trim() : `team ${app.me.team || '?'}`;
    $('whoami').title = admin ? 'Signed in with an admin token'
      : `Signed in with a team token${app.me.name ? ` (${app.me.name})` : ''}`;
    $('filter-team-field').hidden = !admin;
    $('submit-team-field').hidden = !admin;
    $('login-view').hidden = true;
    $('session-bar').hidden = false;
    $('topnav').hidden = false;
    connectEvents();
    clearInterval(app.pollTimer);
    app.pollTimer = setInterval(() => {
      if (!document.hidden) refreshCurrent();
    }, POLL_MS);
    route();
  }

  // ---------------------------------------------------------------- live updates

  function setLive(mode) {
    const el = $('live-indicator');
    el.dataset.live = mode;
    el.textContent = mode === 'on' ? 'live' : 'polling';
    el.title = mode === 'on' ? 'Receiving live job events' : `No event stream: refreshing every ${POLL_MS / 1000} s`;
  }

  function connectEvents() {
    if (!('EventSource' in window) || !app.signedIn) return;
    if (app.events) app.events.close();
    const team = app.me && app.me.team ? `?team=${enc(app.me.team)}` : '';
    const es = new EventSource(`/v1/events${team}`, {withCredentials: true});
    app.events = es;
    es.addEventListener('open', () => setLive('on'));
    es.addEventListener('job', (ev) => {
      let e;
      try { e = JSON.parse(ev.data); } catch (_) { return; }
      onJobEvent(e);
    });
    // The gateway skipped events for a slow reader: refetch everything.
    es.addEventListener('dropped', () => scheduleRefresh());
    es.addEventListener('error', () => {
      setLive('off');
      // The browser retries by itself unless the stream was refused (a
      // non-200 answer such as 401): then try again later; the poll notices
      // an ended session.
      if (es.readyState === EventSource.CLOSED && app.events === es) {
        app.events = null;
        clearTimeout(app.eventsRetry);
        app.eventsRetry = setTimeout(connectEvents, POLL_MS);
      }
    });
  }

  // A refresh that was asked before an event arrived may answer with the
  // job as it was before that event: the event wins. `recent`: job_id ->
  // {state, workers, at} of the last event, for a while.
  function noteEvent(e) {
    const now = performance.now();
    app.recent.set(e.job_id, {state: e.state, workers: e.workers, at: now});
    if (app.recent.size > 2000) {
      for (const [id, r] of app.recent) if (now - r.at > 60000) app.recent.delete(id);
    }
  }

  function newerEvent(jobId, since) {
    const r = app.recent.get(jobId);
    return r && r.at > since ? r : null;
  }

  // A node's (or pool's) name as shown: at a front door (troupe-dispatch)
  // nodes, pools and jobs carry their cluster, and two clusters may each
  // have a node or pool of one name: "c1/node-1".
  function inCluster(cluster, name) {
    return cluster ? `${cluster}/${name}` : String(name);
  }

  // Gives a job's GPUs back on the node cards, until a refresh says so.
  function releaseGpus(placement, cluster) {
    for (const p of placement || []) {
      const n = app.nodes.find((x) => inCluster(x.cluster, x.node) === inCluster(cluster, p.node));
      const k = (p.gpus || []).length;
      if (!n || !k) continue;
      n.gpus_allocated = Math.max(0, (n.gpus_allocated || 0) - k);
      n.gpus_free = Math.min(n.gpus_total || 0, (n.gpus_free || 0) + k);
    }
  }

  function onJobEvent(e) {
    if (!e || !e.job_id) return;
    noteEvent(e);
    // Fast path: move the job on the map and in the list right away; the
    // debounced refresh below brings the rest.
    if (HOLDING.includes(e.state) && Array.isArray(e.workers) && e.workers.length) {
      const prev = app.active.get(e.job_id) || {};
      app.active.set(e.job_id, Object.assign({}, prev, {
        job_id: e.job_id, team: e.team, name: e.name, kind: e.kind,
        state: e.state, attempt: e.attempt, placement: e.workers, cluster: e.cluster,
      }));
    } else if (!HOLDING.includes(e.state) && app.active.has(e.job_id)) {
      const gone = app.active.get(e.job_id);
      releaseGpus(gone.placement, gone.cluster);
      app.active.delete(e.job_id);
    }
    const row = app.jobs.find((j) => j.job_id === e.job_id);
    if (row) row.state = e.state;
    if (app.view === 'dashboard') {
      renderMap();
      renderJobs();
    }
    if (app.view === 'job' && e.job_id === app.jobId && app.job) {
      app.job.state = e.state;
    }
    scheduleRefresh();
  }

  // At most one refresh per DEBOUNCE_MS however many events arrive (a busy
  // cluster never goes quiet, so this must not wait for a pause).
  function scheduleRefresh() {
    if (app.refreshTimer) return;
    app.refreshTimer = setTimeout(() => {
      app.refreshTimer = null;
      refreshCurrent();
    }, DEBOUNCE_MS);
  }

  function refreshCurrent() {
    if (!app.signedIn) return;
    if (app.view === 'dashboard') refreshDashboard();
    else if (app.view === 'job') loadJob();
  }

  // ---------------------------------------------------------------- routing

  function route() {
    if (!app.signedIn) return;
    const m = /^#\/jobs\/([^/?#]+)/.exec(location.hash);
    if (m) {
      openJob(decodeURIComponent(m[1]));
    } else {
      openDashboard();
    }
  }

  function setView(view) {
    app.view = view;
    $('dashboard-view').hidden = view !== 'dashboard';
    $('job-view').hidden = view !== 'job';
    const nav = $('nav-cluster');
    if (view === 'dashboard') nav.setAttribute('aria-current', 'page');
    else nav.removeAttribute('aria-current');
  }

  // ---------------------------------------------------------------- dashboard

  function openDashboard() {
    if (app.view === 'job') stopLogs();
    app.jobId = null;
    app.job = null;
    setView('dashboard');
    document.title = 'Troupe console';
    renderClusters();
    renderMap();
    renderJobs();
    refreshDashboard();
  }

  const refreshDashboard = singleFlight(async () => {
    const results = await Promise.allSettled([loadClusters(), loadMap(), loadJobs(false), loadQueues()]);
    if (!app.signedIn || app.view !== 'dashboard') return;
    const failed = results.find((r) => r.status === 'rejected' && r.reason && r.reason.status !== 401);
    showBanner('dashboard-error', failed ? `Could not refresh: ${failed.reason.detail || failed.reason.message}` : '');
  });

  async function loadMap() {
    const since = performance.now();
    const [nodes, ...lists] = await Promise.all([
      api('/v1/nodes'),
      ...HOLDING.map((s) => listAll(`state=${s}&limit=${ACTIVE_PAGE_SIZE}`)),
    ]);
    app.nodes = (nodes && nodes.nodes) || [];
    const before = app.active;
    app.active = new Map();
    // Placed meanwhile (the event put it on the map): keep it there.
    for (const [id, r] of app.recent) {
      if (r.at > since && HOLDING.includes(r.state) && before.has(id)) app.active.set(id, before.get(id));
    }
    for (const j of lists.flat()) {
      const r = newerEvent(j.job_id, since);
      if (r && !HOLDING.includes(r.state)) {
        releaseGpus(j.placement, j.cluster);  // ended meanwhile
        continue;
      }
      if (r) j.state = r.state;
      app.active.set(j.job_id, j);
    }
    if (app.view === 'dashboard') renderMap();
  }

  function jobsQuery(after) {
    const q = new URLSearchParams();
    const team = $('filter-team').value;
    const state = $('filter-state').value;
    const cluster = app.clusters ? $('filter-cluster').value : '';
    if (team && app.me && app.me.admin) q.set('team', team);
    if (state) q.set('state', state);
    if (cluster) q.set('cluster', cluster);
    // A refresh reloads as many jobs as are on screen.
    q.set('limit', String(after ? PAGE_SIZE : Math.min(1000, Math.max(PAGE_SIZE, app.jobs.length))));
    if (after) q.set('after', after);
    return q.toString();
  }

  async function loadJobs(more) {
    const since = performance.now();
    const r = await api(`/v1/jobs?${jobsQuery(more ? app.jobsNext : '')}`);
    const jobs = (r && r.jobs) || [];
    for (const j of jobs) {
      const e = newerEvent(j.job_id, since);
      if (e) j.state = e.state;
    }
    app.jobs = more ? app.jobs.concat(jobs) : jobs;
    app.jobsNext = (r && r.next) || null;
    if (app.view === 'dashboard') renderJobs();
  }

  // At a front door the cluster filter keeps the queues to that cluster's
  // pools too (GET /v1/queues?cluster=).
  async function loadQueues() {
    const cluster = app.clusters ? $('filter-cluster').value : '';
    app.queues = await api(cluster ? `/v1/queues?cluster=${encodeURIComponent(cluster)}` : '/v1/queues');
    const recolored = setPaletteTeams(((app.queues && app.queues.teams) || []).map((t) => t.team));
    if (app.view === 'dashboard') {
      if (recolored) {
        renderMap();
        renderJobs();
      }
      renderQueues();
      fillTeamFilter();
    }
  }

  // -- clusters (behind a front door)

  async function loadClusters() {
    if (app.oneCluster) return;
    try {
      app.clusters = await api('/v1/clusters');
    } catch (e) {
      if (e.status !== 404) throw e;
      app.oneCluster = true;  // one cluster's gateway: no front door to ask
      app.clusters = null;
    }
    if (app.view === 'dashboard') renderClusters();
  }

  function renderClusters() {
    const list = (app.clusters && app.clusters.clusters) || [];
    $('clusters-section').hidden = !app.clusters;
    const rows = list.slice().sort((a, b) => String(a.name).localeCompare(String(b.name))).map((c) => {
      const reachable = c.state === 'reachable';
      const types = Object.entries(c.gpu_types || {}).sort((a, b) => a[0].localeCompare(b[0]))
        .map(([t, cap]) => `${t} ${cap.free ?? 0}/${cap.total ?? 0}`).join(', ');
      return h('tr', {'data-cluster': c.name, 'data-state': c.state},
        h('th', {scope: 'row'}, c.name, c.region ? h('span', {class: 'muted small'}, ` · ${c.region}`) : ''),
        h('td', null, types || '—'),
        h('td', {class: 'num'}, `${c.gpus_free ?? 0} / ${c.gpus_total ?? 0}`),
        h('td', {class: 'num'}, String(c.queued ?? 0)),
        h('td', {class: 'num'}, String(c.running ?? 0)),
        h('td', null, h('span', {class: reachable ? 'badge badge-info' : 'badge badge-dead',
          title: reachable ? 'answering the front door' : 'not answering the front door: its running jobs show unreachable'},
        c.state || 'unknown')));
    });
    $('cluster-rows').replaceChildren(...rows);
    fillClusterFilter(list.map((c) => String(c.name)));
    const down = list.filter((c) => c.state !== 'reachable').length;
    $('clusters-summary').textContent = list.length
      ? `${plural(list.length, 'cluster')} behind the front door${down ? `, ${down} unreachable` : ''}` : '';
  }

  // -- GPU map

  function renderMap() {
    const map = $('gpu-map');
    const admin = Boolean(app.me && app.me.admin);
    const cells = new Map(); // "node/gpu" -> job
    const teams = new Set();
    for (const job of app.active.values()) {
      for (const p of job.placement || []) {
        for (const g of p.gpus || []) cells.set(`${inCluster(job.cluster, p.node)}/${g}`, job);
      }
    }
    let total = 0;
    let free = 0;
    const nodes = app.nodes.slice().sort((a, b) =>
      String(a.pool || '').localeCompare(String(b.pool || '')) ||
      inCluster(a.cluster, a.node).localeCompare(inCluster(b.cluster, b.node), undefined, {numeric: true}));
    const cards = nodes.map((n) => {
      const name = inCluster(n.cluster, n.node);
      // False fields may be left out: a node without "alive" is down, one
      // without "schedulable" is cordoned.
      const alive = Boolean(n.alive);
      const cordoned = !n.schedulable;
      const gpus = n.gpus_total || 0;
      total += alive ? gpus : 0;
      free += alive ? (n.gpus_free || 0) : 0;
      let attributed = 0;
      for (let i = 0; i < gpus; i++) if (cells.has(`${name}/${i}`)) attributed++;
      // GPUs busy but not on a job this session can see: allocated ones are
      // someone else's, then the reserved ones (being placed).
      let otherLeft = Math.max(0, (n.gpus_allocated || 0) - attributed);
      let reservedLeft = Math.max(0, (n.gpus_reserved || 0) - Math.max(0, attributed - (n.gpus_allocated || 0)));
      const row = [];
      for (let i = 0; i < gpus; i++) {
        const job = cells.get(`${name}/${i}`);
        const base = {'data-node': name, 'data-gpu': i};
        if (job) {
          teams.add(job.team);
          const label = `${name} GPU ${i}: ${job.name || job.job_id} (${job.job_id}), team ${job.team}, ${job.state}`;
          row.push(h('a', Object.assign(base, {
            class: `gpu gpu-job gpu-${job.state}`,
            href: `#/jobs/${enc(job.job_id)}`,
            'data-job': job.job_id,
            'data-team': job.team,
            'data-state': job.state,
            '--team-color': teamColor(job.team),
            title: label,
            'aria-label': label,
          }), h('span', {class: 'gpu-index', 'aria-hidden': 'true'}, i)));
          continue;
        }
        let kind = 'free';
        let text = 'free';
        if (otherLeft > 0) {
          otherLeft--;
          kind = 'other';
          text = admin ? 'in use' : 'in use (other team)';
        } else if (reservedLeft > 0) {
          reservedLeft--;
          kind = 'reserved';
          text = 'reserved';
        }
        if (!alive) { kind += ' gpu-dead'; text += ', node down'; }
        const label = `${name} GPU ${i}: ${text}`;
        row.push(h('span', Object.assign(base, {
          class: `gpu gpu-${kind}`, role: 'img', title: label, 'aria-label': label,
        }), h('span', {class: 'gpu-index', 'aria-hidden': 'true'}, i)));
      }
      const badges = [];
      if (!alive) badges.push(h('span', {class: 'badge badge-dead', 'data-testid': 'node-down'}, 'down'));
      if (n.draining) {
        badges.push(h('span', {class: 'badge badge-warn', 'data-testid': 'node-draining', title: n.reason || ''},
          n.reason ? `draining: ${n.reason}` : 'draining'));
      } else if (cordoned) {
        badges.push(h('span', {class: 'badge badge-warn', 'data-testid': 'node-cordoned', title: n.reason || ''},
          n.reason ? `cordoned: ${n.reason}` : 'cordoned'));
      }
      const classes = ['node-card'];
      if (!alive) classes.push('node-dead');
      if (n.draining) classes.push('node-draining');
      else if (cordoned) classes.push('node-cordoned');
      const meta = [n.gpu_type, n.pool && n.pool !== n.gpu_type ? `pool ${n.pool}` : '', n.host]
        .filter(Boolean).join(' · ');
      return h('article', {class: classes.join(' '), 'data-node': name, 'aria-label': `Node ${name}`},
        h('header', {class: 'node-head'},
          h('h3', {class: 'node-name'}, name),
          badges),
        h('p', {class: 'node-meta muted small'}, meta),
        h('div', {class: 'gpu-row', role: 'group', 'aria-label': `GPUs of ${name}`}, row),
        h('p', {class: 'node-foot muted small'},
          `${n.gpus_free || 0} of ${gpus} free`,
          n.gpus_reserved ? ` · ${n.gpus_reserved} reserved` : '',
          n.running ? ` · ${plural(n.running, 'job')} running` : ''));
    });
    map.replaceChildren(...cards);
    if (!cards.length) map.append(h('p', {class: 'muted empty'}, 'No nodes have joined the cluster.'));
    $('map-summary').textContent = cards.length
      ? `${plural(nodes.length, 'node')} · ${free} of ${total} GPUs free`
      : '';

    const legend = [...teams].sort().map((t) =>
      h('li', {'data-team': t}, h('span', {class: 'gpu gpu-job gpu-mini', '--team-color': teamColor(t), 'aria-hidden': 'true'}), t));
    legend.push(
      h('li', null, h('span', {class: 'gpu gpu-other gpu-mini', 'aria-hidden': 'true'}), admin ? 'in use' : 'in use (other team)'),
      h('li', null, h('span', {class: 'gpu gpu-reserved gpu-mini', 'aria-hidden': 'true'}), 'reserved'),
      h('li', null, h('span', {class: 'gpu gpu-free gpu-mini', 'aria-hidden': 'true'}), 'free'));
    $('map-legend').replaceChildren(...legend);
  }

  // -- job list

  function renderJobs() {
    const text = $('filter-name').value.trim().toLowerCase();
    const jobs = app.jobs
      .filter((j) => !text || String(j.name || '').toLowerCase().includes(text) || j.job_id.toLowerCase().includes(text))
      .sort((a, b) => (ms(b.submit_ms) || 0) - (ms(a.submit_ms) || 0) || String(b.job_id).localeCompare(String(a.job_id)));
    // At a front door (troupe-dispatch) each job says its cluster: a column for it.
    const clustered = app.jobs.some((j) => j.cluster);
    $('jobs-cluster-col').hidden = !clustered;
    const rows = jobs.map((j) => h('tr', {'data-job': j.job_id, 'data-state': j.state},
      h('td', null, h('a', {class: 'mono', href: `#/jobs/${enc(j.job_id)}`, 'data-testid': 'job-link', 'data-job': j.job_id}, j.job_id)),
      h('td', {class: 'name'}, j.name || ''),
      clustered ? h('td', {'data-testid': 'job-cluster'}, j.cluster || '') : null,
      h('td', null, teamChip(j.team)),
      h('td', null, stateBadge(j.state, {'data-testid': 'job-state'}),
        j.attempt > 1 ? h('span', {class: 'muted small'}, ` attempt ${j.attempt}`) : ''),
      h('td', {class: 'num'}, gpusLabel(j)),
      h('td', {title: j.submit_ms ? new Date(ms(j.submit_ms)).toISOString() : ''}, fmtTime(j.submit_ms)),
      h('td', null, runTime(j)),
      h('td', {class: 'actions'}, TERMINAL.has(j.state) || j.state === 'canceling'
        ? '' : cancelButton(j, 'btn btn-small btn-danger', 'Cancel'))));
    $('job-rows').replaceChildren(...rows);
    $('jobs-empty').hidden = rows.length > 0;
    $('jobs-more').hidden = !app.jobsNext;
  }

  function cancelButton(job, cls, text) {
    return h('button', {
      type: 'button',
      class: cls,
      'data-testid': 'cancel-job',
      'data-job': job.job_id,
      'aria-label': `Cancel job ${job.name || ''} ${job.job_id}`.replace(/\s+/g, ' '),
      onclick: (ev) => cancelJob(job, ev.currentTarget),
    }, text);
  }

  async function cancelJob(job, button) {
    if (!window.confirm(`Cancel job ${job.name ? `"${job.name}" ` : ''}(${job.job_id})?`)) return;
    if (button) button.disabled = true;
    try {
      const since = performance.now();
      const r = await api(`/v1/jobs/${enc(job.job_id)}`, {method: 'DELETE'});
      const state = (r && r.state) || 'canceling';
      announce(`Job ${job.job_id}: ${state}`);
      // The job's events may already have told more (canceled).
      if (!newerEvent(job.job_id, since)) {
        for (const j of app.jobs) if (j.job_id === job.job_id) j.state = state;
        if (app.job && app.job.job_id === job.job_id) app.job.state = state;
        if (app.view === 'dashboard') renderJobs();
        else renderJob();
      }
    } catch (e) {
      if (e.status === 401) return;
      const msg = `Could not cancel ${job.job_id}: ${e.detail || e.message}`;
      showBanner(app.view === 'job' ? 'job-error' : 'dashboard-error', msg);
      announce(msg);
    } finally {
      if (button) button.disabled = false;
    }
    scheduleRefresh();
  }

  // The cluster filter (the job list's and the queues'): shown at a front
  // door, one option per cluster.
  function fillClusterFilter(names) {
    $('filter-cluster-field').hidden = !app.clusters;
    const select = $('filter-cluster');
    const current = select.value;
    const want = [...new Set(current ? [...names, current] : names)].sort();
    const have = [...select.options].slice(1).map((o) => o.value).join('\n');
    if (have === want.join('\n')) return;
    select.replaceChildren(h('option', {value: ''}, 'All clusters'), ...want.map((c) => h('option', {value: c}, c)));
    select.value = current;
  }

  function fillTeamFilter() {
    if (!app.me || !app.me.admin) return;
    const select = $('filter-team');
    const teams = new Set();
    for (const t of (app.queues && app.queues.teams) || []) teams.add(t.team);
    for (const j of app.jobs) if (j.team) teams.add(j.team);
    const current = select.value;
    if (current) teams.add(current);
    const have = [...select.options].slice(1).map((o) => o.value).join('\n');
    const want = [...teams].sort();
    if (have === want.join('\n')) return;
    select.replaceChildren(h('option', {value: ''}, 'All teams'), ...want.map((t) => h('option', {value: t}, t)));
    select.value = current;
    $('team-names').replaceChildren(...want.map((t) => h('option', {value: t})));
  }

  // -- submit

  // "a 'b c' d" -> ["a", "b c", "d"]; quotes group words, backslash escapes.
  function splitWords(text) {
    const words = [];
    let cur = '';
    let inWord = false;
    let quote = '';
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      if (quote) {
        if (c === quote) quote = '';
        else if (c === '\\' && quote === '"' && i + 1 < text.length) cur += text[++i];
        else cur += c;
      } else if (c === '"' || c === "'") {
        quote = c;
        inWord = true;
      } else if (c === '\\' && i + 1 < text.length) {
        cur += text[++i];
        inWord = true;
      } else if (/\s/.test(c)) {
        if (inWord) words.push(cur);
        cur = '';
        inWord = false;
      } else {
        cur += c;
        inWord = true;
      }
    }
    if (quote) throw new Error('the command has an unclosed quote');
    if (inWord) words.push(cur);
    return words;
  }

  function parseEnv(text) {
    const env = {};
    text.split('\n').forEach((raw, i) => {
      const line = raw.trim();
      if (!line || line.startsWith('#')) return;
      const eq = line.indexOf('=');
      const key = eq < 0 ? line : line.slice(0, eq).trim();
      if (eq < 0 || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) {
        throw new Error(`environment line ${i + 1}: expected KEY=VALUE`);
      }
      env[key] = line.slice(eq + 1);
    });
    return env;
  }

  function submitResult(children, isError) {
    const out = $('submit-result');
    out.classList.toggle('form-error', Boolean(isError));
    out.replaceChildren(...children);
  }

  async function submitJob(ev) {
    ev.preventDefault();
    const admin = Boolean(app.me && app.me.admin);
    let spec;
    try {
      const command = splitWords($('submit-command').value);
      if (!command.length) throw new Error('enter a command');
      const gpus = Number($('submit-gpus').value || 0);
      const workers = Number($('submit-workers').value || 1);
      if (!Number.isInteger(gpus) || gpus < 0) throw new Error('GPUs must be a whole number');
      if (!Number.isInteger(workers) || workers < 1) throw new Error('workers must be a whole number, 1 or more');
      spec = {command, resources: {gpus}, workers};
      const name = $('submit-name').value.trim();
      if (name) spec.name = name;
      const env = parseEnv($('submit-env').value);
      if (Object.keys(env).length) spec.env = env;
      if (admin) {
        const team = $('submit-team').value.trim();
        if (!team) throw new Error('an admin submits for a team: enter one');
        spec.team = team;
      }
    } catch (e) {
      submitResult([`Not submitted: ${e.message}.`], true);
      return;
    }
    const button = $('submit-button');
    button.disabled = true;
    submitResult(['Submitting…'], false);
    try {
      const r = await api('/v1/jobs', {method: 'POST', body: spec});
      const id = r && r.job_id;
      submitResult(['Submitted ', h('a', {href: `#/jobs/${enc(id)}`, class: 'mono', 'data-job': id, 'data-testid': 'submitted-job'}, id), '.'], false);
      announce(`Submitted job ${id}`);
      scheduleRefresh();
    } catch (e) {
      if (e.status !== 401) submitResult([`Not submitted: ${e.detail || e.message}`], true);
    } finally {
      button.disabled = false;
    }
  }

  // -- queues

  function bar(value, scale, markers, color, label) {
    const w = (x) => `${Math.max(0, Math.min(100, (x / (scale || 1)) * 100))}%`;
    return h('div', {class: 'bar', role: 'img', 'aria-label': label, title: label},
      h('div', {class: 'bar-fill', style: {width: w(value)}, '--team-color': color}),
      markers.map((m) => h('div', {class: `bar-mark bar-mark-${m.kind}`, style: {left: w(m.at)}, title: m.title})));
  }

  function renderQueues() {
    const q = app.queues || {};
    const pools = new Map();
    for (const p of q.pools || []) pools.set(inCluster(p.cluster, p.pool), {pool: p, teams: []});
    for (const t of q.teams || []) {
      const key = inCluster(t.cluster, t.pool);
      if (!pools.has(key)) pools.set(key, {pool: {pool: t.pool, cluster: t.cluster}, teams: []});
      pools.get(key).teams.push(t);
    }
    const sections = [...pools.entries()].sort((a, b) => a[0].localeCompare(b[0])).map(([name, {pool, teams}]) => {
      const weights = teams.reduce((s, t) => s + Number(t.weight || 0), 0);
      const total = pool.gpus_total || 0;
      const hold = pool.hold && typeof pool.hold === 'object' && Object.keys(pool.hold).length
        ? Object.entries(pool.hold).map(([k, v]) => `${k} ${typeof v === 'object' ? JSON.stringify(v) : v}`).join(', ')
        : '';
      const rows = teams.sort((a, b) => String(a.team).localeCompare(String(b.team))).map((t) => {
        const inUse = t.in_use || 0;
        const guaranteed = t.guaranteed || 0;
        const limit = t.limit === undefined || t.limit === null ? -1 : Number(t.limit);
        const scale = Math.max(total, inUse, guaranteed, limit > 0 ? limit : 0, 1);
        // The gateway gives fair_share (over every team of the pool, which
        // a team token does not see); else it is computed from the rows here.
        const fair = typeof t.fair_share === 'number' ? t.fair_share
          : (weights > 0 ? Number(t.weight || 0) / weights : 0);
        const dominant = Number(t.dominant_share || 0);
        const marks = [{kind: 'guarantee', at: guaranteed, title: `guaranteed ${guaranteed}`}];
        if (limit >= 0) marks.push({kind: 'limit', at: limit, title: `limit ${limit}`});
        const usage = `${inUse} in use, ${guaranteed} guaranteed, limit ${limit >= 0 ? limit : 'none'}`;
        const share = `share ${pct(dominant)} of the pool, fair share ${pct(fair)}, weighted share ${Number(t.weighted_share || 0).toFixed(2)}`;
        return h('tr', {'data-team': t.team, 'data-pool': name},
          h('th', {scope: 'row'}, teamChip(t.team)),
          h('td', {class: 'num'}, t.weight ?? ''),
          h('td', {class: 'bar-cell'},
            bar(inUse, scale, marks, teamColor(t.team), usage),
            h('span', {class: 'small'}, `${inUse} / ${guaranteed} guaranteed · limit ${limit >= 0 ? limit : 'none'}`,
              t.borrowed ? ` · ${t.borrowed} borrowed` : '',
              t.borrow === false ? ' · no borrowing' : '')),
          h('td', {class: 'num'}, plural(t.pending_jobs || 0, 'job'), h('br'), h('span', {class: 'muted small'}, plural(t.pending_gpus || 0, 'GPU'))),
          h('td', {class: 'bar-cell'},
            bar(dominant, 1, [{kind: 'fair', at: fair, title: `fair share ${pct(fair)}`}], teamColor(t.team), share),
            h('span', {class: 'small'}, `${pct(dominant)} used · fair ${pct(fair)} · weighted ${Number(t.weighted_share || 0).toFixed(2)}`,
              dominant > fair + 1e-9 ? h('span', {class: 'over'}, ' above fair share') : '')));
      });
      return h('section', {class: 'pool', 'data-pool': name},
        h('h3', null, `Pool ${name}`,
          h('span', {class: 'muted small'}, total ? ` · ${pool.gpus_free || 0} of ${total} GPUs free` : ''),
          hold ? h('span', {class: 'badge badge-info', title: 'A hold keeps GPUs for a waiting job'}, `hold: ${hold}`) : ''),
        rows.length
          ? h('div', {class: 'table-wrap'}, h('table', {class: 'queues'},
            h('thead', null, h('tr', null,
              h('th', {scope: 'col'}, 'Team'),
              h('th', {scope: 'col', class: 'num'}, 'Weight'),
              h('th', {scope: 'col'}, 'GPUs in use'),
              h('th', {scope: 'col', class: 'num'}, 'Pending'),
              h('th', {scope: 'col'}, 'Share against fair share'))),
            h('tbody', null, rows)))
          : h('p', {class: 'muted'}, 'No teams in this pool.'));
    });
    $('queues').replaceChildren(...sections);
    $('queues').dataset.cluster = q.cluster || '';
    if (q.cluster) $('queues').prepend(h('p', {class: 'muted small', 'data-testid': 'queues-cluster'}, `Cluster ${q.cluster} only (the cluster filter below).`));
    if (!sections.length) $('queues').append(h('p', {class: 'muted empty'}, 'No queues.'));
  }

  // ---------------------------------------------------------------- job page

  function openJob(id) {
    const fresh = app.jobId !== id || app.view !== 'job';
    setView('job');
    if (fresh) {
      stopLogs();
      app.jobId = id;
      app.job = null;
      app.history = [];
      app.logRank = 0;
      $('job-page').dataset.job = id;
      $('job-title').textContent = id;
      $('job-id-line').textContent = '';
      for (const el of ['job-summary', 'job-placement', 'job-history', 'log-pane', 'log-rank']) $(el).textContent = '';
      $('job-state').replaceChildren();
      $('job-cancel').hidden = true;
      showBanner('job-why', '');
      showBanner('job-error', '');
      document.title = `${id} · Troupe console`;
      // Screen readers: the page changed; start reading at its title.
      $('job-title').focus({preventScroll: true});
      window.scrollTo(0, 0);
    }
    loadJob().then(() => {
      if (fresh && app.jobId === id && app.job) startLogs();
    });
  }

  const loadJob = singleFlight(async () => {
    const id = app.jobId;
    if (!id || app.view !== 'job') return;
    const since = performance.now();
    try {
      const [job, hist] = await Promise.all([
        api(`/v1/jobs/${enc(id)}`),
        api(`/v1/jobs/${enc(id)}/history`).catch((e) => {
          if (e.status === 401) throw e;
          return {events: []};
        }),
      ]);
      if (app.jobId !== id) return;
      const wasLive = app.job && !TERMINAL.has(app.job.state);
      const newer = newerEvent(id, since);
      if (newer) job.state = newer.state;
      app.job = job;
      app.history = (hist && hist.events) || [];
      let why = null;
      if (PENDING.has(job.state)) {
        why = await api(`/v1/jobs/${enc(id)}/why`).catch(() => null);
      }
      if (app.jobId !== id) return;
      showBanner('job-error', '');
      renderJob(why);
      // The log reader waits for the job's end; nudge it when it ended.
      if (wasLive && TERMINAL.has(job.state) && app.logCtl && app.logCtl.waiting) app.logCtl.wake();
    } catch (e) {
      if (e.status === 401 || app.jobId !== id) return;
      showBanner('job-error', e.status === 404 ? `No job ${id}: ${e.detail}` : `Could not load the job: ${e.detail || e.message}`);
    }
  });

  function renderJob(why) {
    const job = app.job;
    if (!job) return;
    $('job-title').textContent = job.name || job.job_id;
    $('job-id-line').textContent = job.job_id;
    $('job-state').replaceChildren(stateBadge(job.state));
    $('job-state').dataset.state = job.state;
    document.title = `${job.name || job.job_id} · Troupe console`;

    const cancel = $('job-cancel');
    cancel.hidden = TERMINAL.has(job.state) || job.state === 'canceling';
    cancel.dataset.job = job.job_id;

    if (why !== undefined) {
      showBanner('job-why', why && why.pending
        ? `Waiting: ${why.reason || why.code || 'no reason given'}${why.code ? ` (${why.code})` : ''}`
        : '');
    }
    if (!PENDING.has(job.state)) showBanner('job-why', '');

    const end = ms(job.end_ms);
    const items = [
      ['Team', teamChip(job.team)],
      ['Cluster', job.cluster ? `${job.cluster}${job.cluster_job_id ? ` (as ${job.cluster_job_id})` : ''}` : ''],
      ['Kind', job.kind],
      ['State', job.state],
      ['Attempt', job.attempt],
      ['GPUs', job.workers > 1 ? `${job.gpus || 0} per worker × ${job.workers} workers` : `${job.gpus || 0}`],
      ['GPU type', job.gpu_type],
      ['Priority', job.priority],
      ['Submitted', fmtTime(job.submit_ms)],
      ['Started', fmtTime(job.start_ms)],
      ['Ended', end ? fmtTime(job.end_ms) : ''],
      ['Run time', runTime(job)],
      ['Exit code', job.exit_code !== undefined ? job.exit_code : (job.state === 'succeeded' ? 0 : '')],
      ['Reason', job.reason],
    ];
    $('job-summary').replaceChildren(...items
      .filter(([, v]) => v !== undefined && v !== null && v !== '')
      .flatMap(([k, v]) => [h('dt', null, k), h('dd', {'data-field': k.toLowerCase().replace(/\s+/g, '-')}, v)]));

    const placement = (job.placement || []).slice().sort((a, b) => (a.rank || 0) - (b.rank || 0));
    $('job-placement').replaceChildren(placement.length
      ? h('table', {class: 'placement'},
        h('thead', null, h('tr', null, h('th', {scope: 'col', class: 'num'}, 'Rank'), h('th', {scope: 'col'}, 'Node'), h('th', {scope: 'col'}, 'GPUs'))),
        h('tbody', null, placement.map((p) => h('tr', {'data-rank': p.rank || 0},
          h('td', {class: 'num'}, p.rank || 0), h('td', {class: 'mono'}, inCluster(job.cluster, p.node)), h('td', {class: 'mono'}, (p.gpus || []).join(', '))))))
      : h('p', {class: 'muted'}, TERMINAL.has(job.state) ? 'No GPUs are held.' : 'Not placed yet.'));

    renderRanks(Math.max(job.workers || 1, placement.length));
    renderHistory();
  }

  function renderRanks(n) {
    const select = $('log-rank');
    if (select.options.length !== n) {
      select.replaceChildren(...Array.from({length: n}, (_, i) => h('option', {value: i}, `rank ${i}`)));
      select.value = String(app.logRank < n ? app.logRank : 0);
    }
    select.disabled = n <= 1;
  }

  function renderHistory() {
    const events = app.history.slice().sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0) || (ms(a.ts_ms) || 0) - (ms(b.ts_ms) || 0));
    const items = events.map((e) => {
      const when = e.ts ? new Date(e.ts) : (ms(e.ts_ms) ? new Date(ms(e.ts_ms)) : null);
      const workers = (e.workers || []).map((w) => `rank ${w.rank || 0} on ${w.node} [${(w.gpus || []).join(',')}]`).join('; ');
      return h('li', {'data-state': e.state, 'data-seq': e.seq},
        h('time', {datetime: when ? when.toISOString() : ''}, when ? fmtTime(when.getTime()) : ''),
        stateBadge(e.state),
        e.attempt > 1 ? h('span', {class: 'muted small'}, `attempt ${e.attempt}`) : '',
        h('span', {class: 'event-detail'},
          workers,
          e.exit_code !== undefined ? `${workers ? ' · ' : ''}exit ${e.exit_code}` : '',
          e.reason ? `${workers || e.exit_code !== undefined ? ' · ' : ''}${e.reason}` : ''));
    });
    $('job-history').replaceChildren(...items);
    if (!items.length) $('job-history').append(h('li', {class: 'muted'}, 'No events yet.'));
  }

  // -- logs

  function stopLogs() {
    if (app.logCtl) {
      app.logCtl.abort();
      app.logCtl = null;
    }
  }

  function logStatus(text) {
    $('log-status').textContent = text;
  }

  // The log pane: one text node that grows; the view stays at the bottom
  // while the reader is there, and is left alone when they scrolled up.
  // A log only grows, so every source (the followed stream, a plain read)
  // is a prefix of it: the pane shows the longest one seen. `shown` counts
  // the characters shown since the start of the log (the pane may have
  // dropped its oldest ones).
  function logWriter(pane) {
    const node = document.createTextNode('');
    pane.replaceChildren(node);
    const w = {
      shown: 0,
      reset(text) {
        node.data = text || '';
        w.shown = node.length;
        pane.scrollTop = pane.scrollHeight;
      },
      // `text` is the log from character `from` on.
      offer(text, from = 0) {
        const end = from + text.length;
        if (!text || end <= w.shown || from > w.shown) return;
        const atEnd = pane.scrollHeight - pane.scrollTop - pane.clientHeight < 24;
        node.appendData(text.slice(w.shown - from));
        w.shown = end;
        if (node.length > LOG_LIMIT_CHARS) node.deleteData(0, node.length - LOG_LIMIT_CHARS);
        if (atEnd) pane.scrollTop = pane.scrollHeight;
      },
    };
    return w;
  }

  // Shows a job's log for one rank: the whole log of an ended job; for a
  // live one, the followed stream (?follow=1) until the job ends. When the
  // stream stays silent (a quiet job, or a proxy or compression holding the
  // chunks back), the log so far is read plainly every few seconds.
  async function startLogs() {
    stopLogs();
    const ctl = new AbortController();
    let wake = null;
    ctl.waiting = false;
    ctl.wake = () => { if (wake) wake(); };
    app.logCtl = ctl;
    const id = app.jobId;
    const rank = app.logRank;
    const out = logWriter($('log-pane'));
    const pause = (msec) => new Promise((resolve) => {
      ctl.waiting = true;
      const t = setTimeout(done, msec);
      function done() { clearTimeout(t); ctl.waiting = false; wake = null; resolve(); }
      wake = done;
      ctl.signal.addEventListener('abort', done, {once: true});
    });
    const base = `/v1/jobs/${enc(id)}/logs?rank=${rank}`;
    const readPlain = async () => (await api(base, {raw: true, signal: ctl.signal})).text();
    let backoff = 1000;
    while (!ctl.signal.aborted) {
      const live = app.job && !TERMINAL.has(app.job.state);
      let poller = null;
      try {
        if (!live) {
          logStatus('loading…');
          out.reset(await readPlain());
          logStatus(out.shown ? '' : 'empty');
          return;
        }
        logStatus(PENDING.has(app.job.state) ? 'waiting for the job to start…' : 'following');
        // While the stream is silent: a plain read after LOG_STALL_MS, then
        // less and less often while those bring nothing new.
        let lastData = Date.now();
        let stall = LOG_STALL_MS;
        let polling = false;
        poller = setInterval(async () => {
          if (polling || Date.now() - lastData < stall || out.shown > LOG_POLL_MAX_CHARS) return;
          if (!app.job || app.job.state !== 'running') return;
          polling = true;
          try {
            const before = out.shown;
            out.offer(await readPlain());
            stall = out.shown > before ? LOG_STALL_MS : Math.min(stall * 2, 8 * LOG_STALL_MS);
          } catch (_) { /* the stream decides */ }
          lastData = Date.now();
          polling = false;
        }, 500);
        const res = await api(`${base}&follow=1`, {raw: true, signal: ctl.signal});
        if (res.body && res.body.getReader) {
          const reader = res.body.getReader();
          const dec = new TextDecoder();
          let streamed = 0; // characters of this stream so far (it starts at the log's start)
          for (;;) {
            const {value, done} = await reader.read();
            const text = done ? dec.decode() : dec.decode(value, {stream: true});
            out.offer(text, streamed);
            streamed += text.length;
            if (done) break;
            lastData = Date.now();
            stall = LOG_STALL_MS;
            if (!PENDING.has(app.job ? app.job.state : '')) logStatus('following');
            backoff = 1000;
          }
        } else {
          out.offer(await res.text());
        }
        clearInterval(poller);
        // The stream ended: usually the job did. Look again; the next turn
        // reads the whole log once the job is over.
        await loadJob();
        if (app.job && !TERMINAL.has(app.job.state)) await pause(backoff);
      } catch (e) {
        clearInterval(poller);
        if (ctl.signal.aborted || e.name === 'AbortError' || e.status === 401) return;
        logStatus(e.status === 404 ? 'no log yet' : `log unavailable: ${e.detail || e.message}`);
        if (app.job && TERMINAL.has(app.job.state) && !live) return;
        await pause(backoff);
      }
      backoff = Math.min(backoff * 2, POLL_MS);
    }
  }

  // ---------------------------------------------------------------- wiring

  function bind() {
    $('login-form').addEventListener('submit', login);
    $('logout').addEventListener('click', logout);
    $('submit-form').addEventListener('submit', submitJob);
    $('job-filters').addEventListener('submit', (ev) => ev.preventDefault());
    $('filter-state').addEventListener('change', () => { app.jobs = []; refreshDashboard(); });
    $('filter-team').addEventListener('change', () => { app.jobs = []; refreshDashboard(); });
    $('filter-cluster').addEventListener('change', () => { app.jobs = []; refreshDashboard(); });
    $('filter-name').addEventListener('input', () => {
      clearTimeout(app.nameFilterTimer);
      app.nameFilterTimer = setTimeout(renderJobs, 120);
    });
    $('jobs-more').addEventListener('click', async (ev) => {
      const b = ev.currentTarget;
      b.disabled = true;
      try { await loadJobs(true); } catch (e) {
        if (e.status !== 401) showBanner('dashboard-error', `Could not load more jobs: ${e.detail || e.message}`);
      } finally { b.disabled = false; }
    });
    $('job-cancel').addEventListener('click', (ev) => {
      if (app.job) cancelJob(app.job, ev.currentTarget);
    });
    $('log-rank').addEventListener('change', (ev) => {
      app.logRank = Number(ev.currentTarget.value) || 0;
      startLogs();
    });
    window.addEventListener('hashchange', route);
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden) refreshCurrent();
    });
  }

  async function boot() {
    bind();
    try {
      await start();
    } catch (e) {
      if (e.status === 401) showLogin('');
      else showLogin(`Cannot reach the gateway: ${e.detail || e.message}`);
    }
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', boot);
  else boot();
})();

#!/usr/bin/env node
// Real-browser test of the Troupe web console (gateway/console), served by a
// running troupe-gateway. Drives Debian's chromium through playwright-core
// (which never downloads a browser).
//
//   node console_test.mjs --url http://127.0.0.1:PORT --token TOKEN --out DIR
//
// TOKEN is a team token (team nlp) of a cluster with a node of 2+ GPUs that
// runs `command: ["simulated"]` jobs for TROUPE_SIM_DURATION_S seconds. The
// test signs in through the login form, follows a short job from the GPU map
// to "succeeded" and its log, submits a long job through the console's form
// and cancels it with the console's cancel button, checks that a wrong token
// is refused and shows no data, and saves DIR/console.png. Exit status 0 on
// success; 1 with a message naming the failed step otherwise.
//
// Options: --chromium PATH (default /usr/lib/chromium/chromium, or
// $TROUPE_CHROMIUM), --timeout-s N (per wait, default 30), --headed,
// --clusters c1,c2 (the gateway serves a front door, troupe-dispatch, over
// these clusters: the clusters panel has a reachable row for each, the GPU
// map shows each one's nodes as "c1/NODE", and a
// job's row, map cells and page name its cluster).

import {chromium} from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';
import {parseArgs as parseCli} from 'node:util';

function parseArgs(argv) {
  let v;
  try {
    ({values: v} = parseCli({args: argv.slice(2), options: {
      'url': {type: 'string', default: process.env.TROUPE_GATEWAY_URL || ''},
      'token': {type: 'string', default: process.env.TROUPE_TOKEN || ''},
      'out': {type: 'string', default: '.'},
      'chromium': {type: 'string',
        default: process.env.TROUPE_CHROMIUM || '/usr/lib/chromium/chromium'},
      'timeout-s': {type: 'string', default: '30'},
      'headed': {type: 'boolean', default: false},
      'clusters': {type: 'string', default: ''},
      'help': {type: 'boolean', short: 'h'},
    }}));
  } catch (e) {
    usage(e.message);
  }
  if (v.help) usage('', 0);
  const opts = {url: v.url, token: v.token, out: v.out, chromium: v.chromium,
    timeoutS: Number(v['timeout-s']), headed: v.headed,
    clusters: v.clusters.split(',').map((c) => c.trim()).filter((c) => c)};
  if (!opts.url) usage('--url is required');
  if (!opts.token) usage('--token is required');
  if (!(opts.timeoutS > 0)) usage('--timeout-s must be a positive number');
  opts.url = opts.url.replace(/\/+$/, '');
  return opts;
}

function usage(msg, code = 2) {
  if (msg) console.error(`console_test: ${msg}`);
  console.error('usage: node console_test.mjs --url http://127.0.0.1:PORT --token TOKEN --out DIR ' +
    '[--chromium PATH] [--timeout-s N] [--headed] [--clusters c1,c2]');
  process.exit(code);
}

const opts = parseArgs(process.argv);
const WAIT = opts.timeoutS * 1000;
const started = Date.now();
let currentStep = 'start';

function log(msg) {
  const t = ((Date.now() - started) / 1000).toFixed(1).padStart(6);
  console.log(`[${t}s] ${msg}`);
}

function step(name) {
  currentStep = name;
  log(`step: ${name}`);
}

class TestFailure extends Error {}

function fail(msg) {
  throw new TestFailure(msg);
}

// The gateway's API straight from node, with the bearer token.
async function apiCall(method, p, body) {
  let res;
  try {
    res = await fetch(`${opts.url}${p}`, {
      method,
      headers: Object.assign({Authorization: `Bearer ${opts.token}`, Accept: 'application/json'},
        body === undefined ? {} : {'Content-Type': 'application/json'}),
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(WAIT),
    });
  } catch (e) {
    const why = (e.cause && (e.cause.code || e.cause.message)) || e.message;
    throw new TestFailure(`${method} ${opts.url}${p}: ${why}`);
  }
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (_) { /* not JSON */ }
  return {status: res.status, json, text};
}

// Waits for a condition in the page, naming what was awaited on timeout.
async function waitFor(page, what, fn, arg) {
  try {
    return await page.waitForFunction(fn, arg, {timeout: WAIT, polling: 100});
  } catch (e) {
    fail(`timed out after ${opts.timeoutS}s waiting for ${what}`);
  }
}

async function waitSelector(page, what, selector, state = 'visible') {
  try {
    return await page.waitForSelector(selector, {timeout: WAIT, state});
  } catch (e) {
    fail(`timed out after ${opts.timeoutS}s waiting for ${what} (${selector})`);
  }
}

async function rowState(page, jobId) {
  return page.$eval(`#job-rows tr[data-job="${jobId}"] [data-testid="job-state"]`, (el) => el.textContent.trim())
    .catch(() => '(no row)');
}

async function waitRowState(page, jobId, states) {
  const want = Array.isArray(states) ? states : [states];
  try {
    await page.waitForFunction(({id, want}) => {
      const el = document.querySelector(`#job-rows tr[data-job="${id}"] [data-testid="job-state"]`);
      return el && want.includes(el.textContent.trim());
    }, {id: jobId, want}, {timeout: WAIT, polling: 100});
  } catch (e) {
    fail(`job ${jobId} did not reach ${want.join('|')} in the job list within ${opts.timeoutS}s ` +
      `(shown: ${await rowState(page, jobId)})`);
  }
}

async function signIn(page, token) {
  await page.goto(`${opts.url}/`, {waitUntil: 'domcontentloaded', timeout: WAIT});
  await waitSelector(page, 'the login form', '#login-form');
  await page.fill('#token', token);
  await page.click('#login-submit');
}

async function main() {
  fs.mkdirSync(opts.out, {recursive: true});
  if (!fs.existsSync(opts.chromium)) {
    fail(`no chromium at ${opts.chromium} (Debian: apt-get install chromium; or pass --chromium PATH)`);
  }

  step('gateway is up and the token is valid');
  // The gateway may still be starting: retry a refused connection a while.
  let me;
  for (const deadline = Date.now() + WAIT; ;) {
    try {
      me = await apiCall('GET', '/v1/whoami');
      break;
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  if (me.status !== 200) fail(`GET /v1/whoami with the token answered ${me.status}: ${me.text.slice(0, 300)}`);
  log(`whoami: ${me.text.trim()}`);

  const browser = await chromium.launch({
    executablePath: opts.chromium,
    headless: !opts.headed,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  const cleanup = [];
  try {
    const pageErrors = [];
    const watch = (page, label) => {
      page.on('pageerror', (err) => pageErrors.push(`${label}: ${err.message}`));
      page.on('console', (msg) => {
        // 401s are expected (the page probes its session; the wrong token).
        if (msg.type() === 'error' && !/status of 401/.test(msg.text())) log(`${label} console error: ${msg.text()}`);
      });
      // The console asks before it cancels a job.
      page.on('dialog', (d) => d.accept());
    };

    // ---- a wrong token: refused, and nothing of the cluster is shown
    step('a wrong token is refused and shows no data');
    {
      const ctx = await browser.newContext({viewport: {width: 1400, height: 1000}});
      const page = await ctx.newPage();
      watch(page, 'wrong-token page');
      await signIn(page, `wrong-${Date.now()}`);
      const err = await waitSelector(page, 'the login error', '#login-error');
      const text = (await err.textContent()).trim();
      if (!text) fail('the login error is empty');
      log(`login error shown: "${text}"`);
      const leaked = await page.evaluate(() => ({
        dashboardHidden: document.getElementById('dashboard-view').hidden,
        nodes: document.querySelectorAll('[data-node]').length,
        jobs: document.querySelectorAll('#job-rows tr').length,
        queues: document.getElementById('queues').children.length,
      }));
      if (!leaked.dashboardHidden || leaked.nodes || leaked.jobs || leaked.queues) {
        fail(`data is shown after a refused sign-in: ${JSON.stringify(leaked)}`);
      }
      if (!(await page.isVisible('#login-form'))) fail('the login form is not shown after a refused sign-in');
      await ctx.close();
    }

    // ---- sign in with the real token
    step('sign in through the login form');
    const ctx = await browser.newContext({viewport: {width: 1400, height: 1000}});
    const page = await ctx.newPage();
    watch(page, 'console');
    await signIn(page, opts.token);
    await waitSelector(page, 'the dashboard', '#dashboard-view');
    await waitFor(page, 'the signed-in identity in the top bar',
      () => (document.getElementById('whoami').textContent || '').trim() !== '');
    log(`signed in as: ${(await page.textContent('#whoami')).trim()}`);
    if (await page.isVisible('#login-form')) fail('the login form is still shown after signing in');
    await waitSelector(page, 'a node card on the GPU map', '#gpu-map [data-node]');
    const cells = await page.$$eval('#gpu-map .gpu[data-node][data-gpu]', (els) => els.length);
    if (cells < 2) fail(`the GPU map shows ${cells} GPU cells, expected 2 or more`);
    log(`GPU map: ${await page.$$eval('#gpu-map .node-card', (els) => els.length)} node(s), ${cells} GPU cell(s)`);
    // At a front door: every cluster's nodes, each named with its cluster.
    for (const c of opts.clusters) {
      await waitFor(page, `a GPU cell of a node of cluster ${c} on the map`,
        (c) => [...document.querySelectorAll('#gpu-map .gpu[data-node]')].some((el) => el.dataset.node.startsWith(`${c}/`)), c);
    }
    if (opts.clusters.length) {
      const named = await page.$$eval('#gpu-map .gpu[data-node]', (els) => [...new Set(els.map((el) => el.dataset.node))]);
      const stray = named.filter((n) => !opts.clusters.some((c) => n.startsWith(`${c}/`)));
      if (stray.length) fail(`GPU map nodes not named with a cluster of ${opts.clusters.join(',')}: ${stray.join(', ')}`);
      log(`GPU map nodes: ${named.join(', ')}`);
    }
    // At a front door, a row per cluster, each reachable; on one cluster no
    // clusters panel at all.
    if (opts.clusters.length) {
      for (const c of opts.clusters) {
        await waitFor(page, `cluster ${c}'s row, reachable, in the clusters panel`,
          (c) => !document.getElementById('clusters-section').hidden &&
            document.querySelector(`#cluster-rows tr[data-cluster="${c}"][data-state="reachable"]`) !== null, c);
      }
      log(`clusters panel: ${(await page.textContent('#clusters-summary')).trim()}`);
    } else if (await page.isVisible('#clusters-section')) {
      fail('the clusters panel is shown on a cluster without a front door');
    }
    const cookies = await ctx.cookies();
    if (cookies.some((c) => c.name === 'troupe_session' && !c.httpOnly)) fail('the session cookie is not HttpOnly');
    // The token must not be kept by the page.
    const kept = await page.evaluate((t) => {
      const all = [];
      for (const s of [localStorage, sessionStorage]) for (let i = 0; i < s.length; i++) all.push(s.getItem(s.key(i)));
      return all.some((v) => String(v).includes(t)) || document.getElementById('token').value.includes(t);
    }, opts.token);
    if (kept) fail('the token is still in the page (storage or the input) after signing in');

    // A 2 s job may come and go between two polls: the map must follow the
    // event stream, so wait until the console has it open.
    step('the console\'s event stream (/v1/events) is open');
    await waitFor(page, 'the live indicator (EventSource on /v1/events open)',
      () => document.getElementById('live-indicator').dataset.live === 'on');

    // ---- a short job, submitted through the API
    step('submit a short job (2 s) through the API');
    const short = await apiCall('POST', '/v1/jobs', {
      name: 'browser-short',
      command: ['simulated'],
      env: {TROUPE_SIM_DURATION_S: '2'},
      resources: {gpus: 1},
      workers: 1,
    });
    if (short.status !== 201 || !short.json || !short.json.job_id) {
      fail(`POST /v1/jobs answered ${short.status}: ${short.text.slice(0, 300)}`);
    }
    const shortId = short.json.job_id;
    cleanup.push(shortId);
    log(`short job: ${shortId}`);

    step('the short job appears on the GPU map and in the job list');
    // The map only shows the job while it holds GPUs: wait for the cell, or
    // accept the row already at "succeeded" only after the cell was seen.
    await waitSelector(page, `a GPU cell of job ${shortId} on the map`, `#gpu-map .gpu[data-job="${shortId}"]`, 'attached');
    const cell = await page.$eval(`#gpu-map .gpu[data-job="${shortId}"]`, (el) => ({
      node: el.dataset.node, gpu: el.dataset.gpu, team: el.dataset.team, title: el.title,
    })).catch(() => null);
    if (cell) log(`map cell: node ${cell.node} GPU ${cell.gpu} team ${cell.team} ("${cell.title}")`);
    await waitSelector(page, `job ${shortId} in the job list`, `#job-rows tr[data-job="${shortId}"]`);
    // At a front door: the job's cluster in its row, and its map cell on a node of that cluster.
    let shortCluster = '';
    if (opts.clusters.length) {
      const sel = `#job-rows tr[data-job="${shortId}"] [data-testid="job-cluster"]`;
      await waitFor(page, `the cluster of job ${shortId} in its row`, (sel) => {
        const el = document.querySelector(sel);
        return el && el.textContent.trim() !== '';
      }, sel);
      shortCluster = (await page.textContent(sel)).trim();
      if (!opts.clusters.includes(shortCluster)) fail(`job ${shortId}'s row names cluster "${shortCluster}", not one of ${opts.clusters.join(',')}`);
      if (cell && !cell.node.startsWith(`${shortCluster}/`)) fail(`job ${shortId} runs in ${shortCluster} but its map cell is on ${cell.node}`);
      if (!(await page.isVisible('#jobs-cluster-col'))) fail('the job list has no Cluster column at a front door');
      log(`short job's cluster: ${shortCluster}`);
    }

    step('the short job reaches succeeded');
    await waitRowState(page, shortId, 'succeeded');
    await waitFor(page, `job ${shortId} to leave the GPU map once it ended`,
      (id) => !document.querySelector(`#gpu-map .gpu[data-job="${id}"]`), shortId);

    // At a front door: the job list's cluster filter (GET /v1/jobs?cluster=)
    // keeps one cluster's jobs: another cluster's hides the short job, its own
    // shows it again.
    if (shortCluster) {
      step('the job list\'s cluster filter');
      if (!(await page.isVisible('#filter-cluster'))) fail('no cluster filter at a front door');
      const other = opts.clusters.find((c) => c !== shortCluster);
      if (other) {
        await page.selectOption('#filter-cluster', other);
        await waitFor(page, `job ${shortId} (in ${shortCluster}) to leave the list filtered to ${other}`,
          (id) => !document.querySelector(`#job-rows tr[data-job="${id}"]`), shortId);
        const shown = await page.$$eval('#job-rows [data-testid="job-cluster"]', (els) => els.map((e) => e.textContent.trim()));
        const stray = shown.filter((c) => c !== other);
        if (stray.length) fail(`the list filtered to ${other} shows jobs of ${stray.join(', ')}`);
        log(`filtered to ${other}: ${shown.length} job(s)`);
        // The queues panel follows the filter: only that cluster's pools,
        // as its front door named them (GET /v1/queues?cluster=).
        await waitFor(page, `the queues panel to show only ${other}'s pools`, (c) => {
          const q = document.getElementById('queues');
          const pools = [...q.querySelectorAll('section[data-pool]')].map((el) => el.dataset.pool);
          return q.dataset.cluster === c && pools.length > 0 && pools.every((p) => p.startsWith(`${c}/`));
        }, other);
      }
      await page.selectOption('#filter-cluster', shortCluster);
      await waitSelector(page, `job ${shortId} in the list filtered to ${shortCluster}`, `#job-rows tr[data-job="${shortId}"]`);
      await page.selectOption('#filter-cluster', '');
      await waitFor(page, 'the queues panel to show every cluster\'s pools again', (cs) => {
        const q = document.getElementById('queues');
        const pools = [...q.querySelectorAll('section[data-pool]')].map((el) => el.dataset.pool);
        return q.dataset.cluster === '' && cs.every((c) => pools.some((p) => p.startsWith(`${c}/`)));
      }, opts.clusters);
    } else if (await page.isVisible('#filter-cluster')) {
      fail('a cluster filter is shown on a cluster without a front door');
    }

    step('the short job\'s page shows its log and timeline');
    await page.click(`#job-rows tr[data-job="${shortId}"] a[data-testid="job-link"]`);
    await waitFor(page, `the job page of ${shortId}`, (id) => {
      const v = document.getElementById('job-view');
      return !v.hidden && document.getElementById('job-page').dataset.job === id;
    }, shortId);
    if (!page.url().includes(`#/jobs/${shortId}`)) fail(`the job page's address is ${page.url()}`);
    await waitFor(page, 'the job page state "succeeded"',
      () => (document.getElementById('job-state').textContent || '').trim() === 'succeeded');
    await waitFor(page, 'log text in the log pane',
      () => (document.getElementById('log-pane').textContent || '').trim().length > 0);
    const logText = (await page.textContent('#log-pane')).trim();
    log(`log pane: ${logText.split('\n').length} line(s), first: "${logText.split('\n')[0].slice(0, 120)}"`);
    if (!logText.includes(shortId) && !/simulated/i.test(logText)) {
      log('note: the log mentions neither the job id nor "simulated"');
    }
    await waitFor(page, 'events in the timeline',
      () => document.querySelectorAll('#job-history li[data-state]').length > 0);
    const states = await page.$$eval('#job-history li[data-state]', (els) => els.map((e) => e.dataset.state));
    log(`timeline: ${states.join(' → ')}`);
    if (!states.includes('succeeded')) fail(`the timeline has no "succeeded" event: ${states.join(', ')}`);
    if (shortCluster) {
      const shown = (await page.textContent('#job-summary dd[data-field="cluster"]').catch(() => '') || '').trim();
      if (!shown.startsWith(shortCluster)) fail(`the job page names cluster "${shown}", expected ${shortCluster}`);
      log(`job page cluster: ${shown}`);
    }
    if (await page.isVisible('#job-cancel')) fail('the cancel button is shown for an ended job');

    // ---- a long job, submitted through the console's form, canceled with its button
    step('submit a long job (300 s) through the console\'s form');
    await page.click('#nav-cluster');
    await waitSelector(page, 'the dashboard', '#dashboard-view');
    await page.click('#submit-box > summary');
    await page.fill('#submit-name', 'browser-long');
    await page.fill('#submit-gpus', '1');
    await page.fill('#submit-workers', '1');
    await page.fill('#submit-command', 'simulated');
    await page.fill('#submit-env', 'TROUPE_SIM_DURATION_S=300');
    await page.click('#submit-button');
    const submitted = await waitSelector(page, 'the submitted job\'s link', '#submit-result [data-testid="submitted-job"]')
      .catch(async (e) => {
        const result = await page.textContent('#submit-result').catch(() => '');
        throw new TestFailure(`${e.message}; the form says: "${(result || '').trim()}"`);
      });
    const longId = await submitted.getAttribute('data-job');
    if (!longId) fail('the submitted job\'s link has no data-job');
    cleanup.push(longId);
    log(`long job: ${longId}`);

    step('the long job runs (map and list)');
    await waitSelector(page, `a GPU cell of job ${longId} on the map`, `#gpu-map .gpu[data-job="${longId}"]`, 'attached');
    await waitRowState(page, longId, 'running');
    await page.screenshot({path: path.join(opts.out, 'console.png'), fullPage: true});
    log(`screenshot: ${path.join(opts.out, 'console.png')}`);

    step('the long job\'s page follows its log while it runs');
    await page.click(`#job-rows tr[data-job="${longId}"] a[data-testid="job-link"]`);
    await waitFor(page, `the job page of ${longId}`, (id) =>
      !document.getElementById('job-view').hidden && document.getElementById('job-page').dataset.job === id, longId);
    await waitFor(page, 'log text of the running job in the log pane',
      () => (document.getElementById('log-pane').textContent || '').trim().length > 0);
    const liveState = (await page.textContent('#job-state')).trim();
    if (liveState !== 'running') fail(`the job page shows the long job ${liveState}, expected running`);
    if (!(await page.isVisible('#job-cancel'))) fail('the job page shows no cancel button for a running job');
    await page.click('#nav-cluster');
    await waitSelector(page, 'the dashboard', '#dashboard-view');

    step('cancel the long job with the console\'s cancel button');
    const cancel = `#job-rows tr[data-job="${longId}"] button[data-testid="cancel-job"]`;
    await waitSelector(page, 'the cancel button of the long job', cancel);
    await page.click(cancel);
    await waitRowState(page, longId, 'canceled');
    await waitFor(page, `job ${longId} to leave the GPU map`,
      (id) => !document.querySelector(`#gpu-map .gpu[data-job="${id}"]`), longId);
    const shownNow = await rowState(page, longId);
    if (shownNow !== 'canceled') fail(`the job list went back to ${shownNow} for the canceled job`);
    const gone = await page.$(`#job-rows tr[data-job="${longId}"] button[data-testid="cancel-job"]`);
    if (gone) fail('the cancel button is still shown for a canceled job');
    const view = await apiCall('GET', `/v1/jobs/${encodeURIComponent(longId)}`);
    if (!view.json || view.json.state !== 'canceled') fail(`the API says the long job is ${view.json && view.json.state}`);

    await page.screenshot({path: path.join(opts.out, 'console-end.png'), fullPage: true});

    step('sign out');
    await page.click('#logout');
    await waitSelector(page, 'the login form after signing out', '#login-form');
    const after = await page.evaluate(() => document.querySelectorAll('#gpu-map [data-node], #job-rows tr').length);
    if (after) fail(`${after} map/job element(s) remain on screen after signing out`);
    // The session is over on the server as well.
    const probe = await page.evaluate(async () => (await fetch('/v1/whoami', {credentials: 'same-origin'})).status);
    if (probe !== 401) fail(`GET /v1/whoami after signing out answered ${probe}, expected 401`);

    if (pageErrors.length) fail(`uncaught errors in the page:\n  ${pageErrors.join('\n  ')}`);
    cleanup.length = 0;
    await ctx.close();
  } catch (e) {
    // Leave a picture of what the page showed.
    for (const c of browser.contexts()) {
      for (const [i, p] of c.pages().entries()) {
        await p.screenshot({path: path.join(opts.out, `console-failure-${i}.png`), fullPage: true}).catch(() => {});
      }
    }
    throw e;
  } finally {
    await browser.close().catch(() => {});
    // Don't leave a 300 s job holding GPUs after a failure.
    for (const id of cleanup) {
      await apiCall('DELETE', `/v1/jobs/${encodeURIComponent(id)}`).catch(() => {});
    }
  }
}

main().then(() => {
  log('PASS: console test');
  process.exit(0);
}, (e) => {
  const msg = e instanceof TestFailure ? e.message : (e && e.stack) || String(e);
  console.error(`FAIL (${currentStep}): ${msg}`);
  process.exit(1);
});

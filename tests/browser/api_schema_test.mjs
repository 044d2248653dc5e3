#!/usr/bin/env node
// Checks troupe-gateway's real HTTP replies against docs/openapi.yaml.
//
//   node api_schema_test.mjs --url http://127.0.0.1:PORT --team-token T --admin-token A
//
// T is a team token, A an admin token, of a cluster with a schedulable node
// that runs `command: ["simulated"]` jobs (troupe-node --simulate). The test
// validates the document (SwaggerParser), then calls every path and method it
// lists, with success and error cases, and checks each reply: its status and
// content type must be documented for that operation, and a JSON body must
// match the documented schema (ajv). It fails if an operation of the document
// was not exercised, so a new route needs a check here. Prints one line per
// check; exit status 0 when all pass, 1 with the failures listed otherwise.
//
// Options: --timeout-s N (each wait, default 30), --doc PATH (the document,
// default ../../docs/openapi.yaml from this script), --front-door (the
// gateway serves a front door's NATS, troupe-dispatch: only what needs one
// is checked, GET /v1/clusters, which a gateway of one cluster answers 404).

import SwaggerParser from '@apidevtools/swagger-parser';
import Ajv from 'ajv';
import path from 'node:path';
import {fileURLToPath} from 'node:url';
import {parseArgs as parseCli} from 'node:util';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const TERMINAL = new Set(['succeeded', 'failed', 'canceled']);
const UNKNOWN_JOB = 'j-0000000000a-ffffff';

function usage(msg, code = 2) {
  if (msg) console.error(`api_schema_test: ${msg}`);
  console.error('usage: node api_schema_test.mjs --url http://127.0.0.1:PORT ' +
    '--team-token T --admin-token A [--timeout-s N] [--doc OPENAPI_YAML]');
  process.exit(code);
}

function parseArgs(argv) {
  let v;
  try {
    ({values: v} = parseCli({args: argv.slice(2), options: {
      'url': {type: 'string'}, 'team-token': {type: 'string'}, 'admin-token': {type: 'string'},
      'timeout-s': {type: 'string', default: '30'}, 'doc': {type: 'string'},
      'front-door': {type: 'boolean'},
      'help': {type: 'boolean', short: 'h'},
    }}));
  } catch (e) {
    usage(e.message);
  }
  if (v.help) usage('', 0);
  const opts = {url: v.url || '', team: v['team-token'] || '', admin: v['admin-token'] || '',
    timeoutS: Number(v['timeout-s']), frontDoor: Boolean(v['front-door']),
    doc: v.doc ? path.resolve(v.doc) : path.resolve(HERE, '../../docs/openapi.yaml')};
  if (!opts.url) usage('--url is required');
  if (!opts.team) usage('--team-token is required');
  if (!opts.admin) usage('--admin-token is required');
  if (!(opts.timeoutS > 0)) usage('--timeout-s must be a positive number');
  opts.url = opts.url.replace(/\/+$/, '');
  return opts;
}

const opts = parseArgs(process.argv);
const WAIT = opts.timeoutS * 1000;
const DOC = opts.doc;
const failures = [];
let checks = 0;

function pass(name, note = '') {
  checks++;
  console.log(`ok    ${name}${note ? `  (${note})` : ''}`);
}

function failed(name, why) {
  checks++;
  failures.push(`${name}: ${why}`);
  console.log(`FAIL  ${name}: ${why}`);
}

class CheckFailure extends Error {}

// Runs one named check; an exception (a CheckFailure or anything else) fails
// it, and the test goes on with the next one.
async function check(name, fn) {
  try {
    const note = await fn();
    pass(name, typeof note === 'string' ? note : '');
  } catch (e) {
    failed(name, describe(e));
  }
}

function describe(e) {
  if (e instanceof CheckFailure) return e.message;
  if (e && (e.name === 'TimeoutError' || e.name === 'AbortError')) return `no reply within ${opts.timeoutS} s (${e.name})`;
  if (e && e.cause) return `${e.message}: ${e.cause.message || e.cause}`;  // fetch: connection refused, reset
  return (e && e.stack) || String(e);
}

function must(cond, why) {
  if (!cond) throw new CheckFailure(why);
}

async function until(what, fn, timeoutMs = WAIT) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > deadline) throw new CheckFailure(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

// ---------------------------------------------------------------- the document

let api;
try {
  api = await SwaggerParser.validate(DOC);   // also dereferences every $ref
  pass(`document: ${path.relative(process.cwd(), DOC)} is valid OpenAPI ${api.openapi}`);
} catch (e) {
  failed('document: SwaggerParser.validate', e.message);
  finish();
}

const ajv = new Ajv({strict: false, allErrors: true, formats: {binary: true}});
const compiled = new WeakMap();
function validator(schema) {
  let v = compiled.get(schema);
  if (!v) {
    v = ajv.compile(schema);
    compiled.set(schema, v);
  }
  return v;
}

function validate(schema, value, what) {
  const v = validator(schema);
  if (!v(value)) {
    const errs = v.errors.map((e) => `${e.instancePath || '/'} ${e.message}` +
      (e.params && Object.keys(e.params).length ? ` ${JSON.stringify(e.params)}` : '')).join('; ');
    throw new CheckFailure(`${what} does not match its schema: ${errs}; body ${JSON.stringify(value).slice(0, 400)}`);
  }
}

const operations = [];  // {key, template, method, op, regex, ok, err, statuses}
for (const [template, item] of Object.entries(api.paths)) {
  const regex = new RegExp('^' + template.split('/').map((seg) =>
    /^\{[^}]+\}$/.test(seg) ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('/') + '$');
  for (const m of METHODS) {
    if (!item[m]) continue;
    operations.push({key: `${m.toUpperCase()} ${template}`, template, method: m, op: item[m], regex,
      literal: !template.includes('{'), ok: false, err: false, statuses: new Set()});
  }
}

function operationFor(method, urlPath) {
  const p = urlPath.split('?')[0];
  const found = operations.filter((o) => o.method === method.toLowerCase() && o.regex.test(p));
  found.sort((a, b) => Number(b.literal) - Number(a.literal));
  return found[0];
}

function documentedResponse(op, status) {
  const r = op.responses || {};
  return r[String(status)] || r[`${String(status)[0]}XX`] || r.default;
}

function mediaType(ct) {
  return (ct || '').split(';')[0].trim().toLowerCase();
}

function documentedContent(content, mt) {
  if (!content) return undefined;
  const lower = Object.fromEntries(Object.entries(content).map(([k, v]) => [k.toLowerCase(), v]));
  return lower[mt] || lower[`${mt.split('/')[0]}/*`] || lower['*/*'];
}

const isJson = (mt) => mt === 'application/json' || mt.endsWith('+json');

// ---------------------------------------------------------------- HTTP

function headersFor(token, extra = {}) {
  const h = {...extra};
  if (token) h.Authorization = `Bearer ${token}`;
  return h;
}

async function send(method, urlPath, {token, body, headers = {}, raw = false, signal} = {}) {
  const init = {method, headers: headersFor(token, headers), redirect: 'manual',
    signal: signal || AbortSignal.timeout(WAIT)};
  if (body !== undefined) {
    init.body = raw ? body : JSON.stringify(body);
    if (!init.headers['Content-Type']) init.headers['Content-Type'] = 'application/json';
  }
  return fetch(opts.url + urlPath, init);
}

// Checks a reply against the document: its status (expected, and documented
// for the operation), its content type (documented for that status) and, for
// JSON, its body against the schema. Returns the parsed body (JSON) or text.
// bodyText: the body when already read; stream: only the content type is
// checked (the caller reads the body).
async function checkReply(method, urlPath, res, expect, {stream = false, bodyText} = {}) {
  const o = operationFor(method, urlPath);
  must(o, `${method} ${urlPath} matches no operation of the document`);
  o.statuses.add(res.status);
  if (res.status >= 200 && res.status < 300) o.ok = true; else o.err = true;
  const text = stream ? undefined : (bodyText !== undefined ? bodyText : await res.text());
  const ct = res.headers.get('content-type');
  const brief = text === undefined ? '' : `; body ${text.slice(0, 300)}`;
  must(res.status === expect.status, `${o.key}: status ${res.status}, expected ${expect.status}${brief}`);
  const doc = documentedResponse(o.op, res.status);
  must(doc, `${o.key}: status ${res.status} is not documented for the operation`);
  if (!doc.content || Object.keys(doc.content).length === 0) {
    must(!text, `${o.key} ${res.status}: the document gives no content, but the body is ${JSON.stringify(text?.slice(0, 200))}`);
    return undefined;
  }
  const mt = mediaType(ct);
  const media = documentedContent(doc.content, mt);
  must(media, `${o.key} ${res.status}: content type ${JSON.stringify(ct)} is not documented ` +
    `(documented: ${Object.keys(doc.content).join(', ')})`);
  if (expect.type) must(mt === expect.type, `${o.key} ${res.status}: content type ${mt}, expected ${expect.type}`);
  if (stream || !isJson(mt)) return text;
  let json;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new CheckFailure(`${o.key} ${res.status}: the ${mt} body is not JSON: ${text.slice(0, 200)}`);
  }
  if (media.schema) validate(media.schema, json, `${o.key} ${res.status} ${mt} body`);
  if (mt === 'application/problem+json') {
    validate(api.components.schemas.Problem, json, `${o.key} ${res.status} problem`);
    must(json.status === res.status, `${o.key}: problem status ${json.status} but HTTP ${res.status}`);
    must(json.type === `urn:troupe:problem:${json.code}`, `${o.key}: problem type ${json.type} for code ${json.code}`);
  }
  if (expect.code) must(json.code === expect.code, `${o.key} ${res.status}: code ${json.code}, expected ${expect.code}`);
  return json;
}

// One request and its reply's check, as one line of output.
async function call(name, method, urlPath, expect, reqOpts = {}) {
  let out;
  await check(`${method} ${urlPath.length > 60 ? urlPath.slice(0, 60) + '…' : urlPath} -> ${expect.status}` +
    `${expect.code ? ' ' + expect.code : ''}${name ? ' [' + name + ']' : ''}`, async () => {
    const res = await send(method, urlPath, reqOpts);
    out = await checkReply(method, urlPath, res, expect);
    if (expect.after) return expect.after(out, res);
  });
  return out;
}

const T = opts.team;
const A = opts.admin;
const JSON_T = {status: 200, type: 'application/json'};
const simSpec = (secs, extra = {}) => ({command: ['simulated'], env: {TROUPE_SIM_DURATION_S: String(secs)}, ...extra});

// ---------------------------------------------------------------- checks

// Nothing else is worth trying when the gateway does not answer.
try {
  await fetch(`${opts.url}/healthz`, {signal: AbortSignal.timeout(WAIT)});
} catch (e) {
  failed(`the gateway at ${opts.url}`, describe(e));
  finish();
}

// Behind a front door: its clusters, and nothing else is checked here.
if (opts.frontDoor) {
  await call('team token', 'GET', '/v1/clusters', {...JSON_T, after: (j) => {
    must((j.clusters || []).length > 0, 'no clusters');
    return j.clusters.map((c) => `${c.name}: ${c.state}`).join(', ');
  }}, {token: T});
  await call('admin token', 'GET', '/v1/clusters', JSON_T, {token: A});
  await call('no token', 'GET', '/v1/clusters', {status: 401, code: 'unauthorized'});
  const o = operationFor('GET', '/v1/clusters');
  if (!o || !o.ok || !o.err) failed('coverage: GET /v1/clusters', 'not exercised');
  else pass('coverage: GET /v1/clusters', `statuses ${[...o.statuses].sort().join(', ')}`);
  finish();
}

// Probes.
await call('', 'GET', '/healthz', JSON_T);
await call('', 'GET', '/readyz', JSON_T);
await call('', 'GET', '/metrics', {status: 200, type: 'text/plain',
  after: (text) => must(text.includes('troupe_gateway_requests_total'), 'no troupe_gateway_requests_total in /metrics')});

// Who am I; no token, a bad token.
const me = await call('team token', 'GET', '/v1/whoami', {...JSON_T,
  after: (j) => must(j.team && !j.admin, `a team token's whoami has no team: ${JSON.stringify(j)}`)}, {token: T});
const TEAM = me?.team || 'nlp';
const OTHER = TEAM === 'vision' ? 'research' : 'vision';
await call('admin token', 'GET', '/v1/whoami', {...JSON_T,
  after: (j) => must(j.admin === true, `an admin token's whoami is not admin: ${JSON.stringify(j)}`)}, {token: A});
await call('no token', 'GET', '/v1/whoami', {status: 401, code: 'unauthorized',
  after: (j, res) => must(/^Bearer/i.test(res.headers.get('www-authenticate') || ''), 'no WWW-Authenticate: Bearer')});
await call('bad token', 'GET', '/v1/whoami', {status: 401, code: 'unauthorized'}, {token: 'trp_not-a-valid-token'});

// The session cookie.
let cookie = '';
await call('good token', 'POST', '/v1/session', {status: 204, after: (_, res) => {
  const sc = res.headers.get('set-cookie') || '';
  must(/troupe_session=[^;]+/.test(sc) && /HttpOnly/i.test(sc), `Set-Cookie is ${JSON.stringify(sc)}`);
  cookie = sc.match(/troupe_session=[^;]+/)[0];
}}, {body: {token: T}});
await call('bad token', 'POST', '/v1/session', {status: 401, code: 'unauthorized'}, {body: {token: 'trp_not-a-valid-token'}});
await call('session cookie', 'GET', '/v1/whoami', {...JSON_T,
  after: (j) => must(j.team === TEAM, `whoami by cookie: ${JSON.stringify(j)}`)}, {headers: {Cookie: cookie}});
await call('cookie without X-Troupe-Console', 'POST', '/v1/jobs', {status: 403, code: 'forbidden'},
  {headers: {Cookie: cookie}, body: simSpec(1)});
await call('cookie and X-Troupe-Console: 1', 'POST', '/v1/jobs', {status: 201},
  {headers: {Cookie: cookie, 'X-Troupe-Console': '1'}, body: simSpec(1)});
await call('', 'DELETE', '/v1/session', {status: 204, after: (_, res) => {
  const sc = res.headers.get('set-cookie') || '';
  must(/troupe_session=;|Max-Age=0/i.test(sc), `the cookie is not cleared: Set-Cookie ${JSON.stringify(sc)}`);
}}, {headers: {Cookie: cookie}});

// Submit a job while following the event stream: its first event must come.
let jobA = '';
await check(`GET /v1/events -> 200 text/event-stream, then a JobEvent of a submitted job`, async () => {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), WAIT);
  try {
    const res = await send('GET', '/v1/events', {token: T, headers: {Accept: 'text/event-stream'}, signal: ac.signal});
    await checkReply('GET', '/v1/events', res, {status: 200, type: 'text/event-stream'}, {stream: true});
    const sub = await send('POST', '/v1/jobs', {token: T, body: simSpec(1)});
    const j = await checkReply('POST', '/v1/jobs', sub, {status: 201, type: 'application/json'});
    jobA = j.job_id;
    const loc = sub.headers.get('location');
    must(loc === `/v1/jobs/${jobA}`, `POST /v1/jobs 201: Location ${loc}, expected /v1/jobs/${jobA}`);
    pass(`POST /v1/jobs -> 201 (${jobA}, Location ${loc})`);
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    for (;;) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch (e) {
        throw new CheckFailure(`no \`event: job\` for ${jobA} within ${opts.timeoutS} s (${e.name})`);
      }
      must(!chunk.done, `the stream ended before an \`event: job\` for ${jobA}`);
      buf += dec.decode(chunk.value, {stream: true}).replace(/\r\n?/g, '\n');
      let at;
      while ((at = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, at);
        buf = buf.slice(at + 2);
        let event = 'message';
        const data = [];
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) continue;
          const i = line.indexOf(':');
          const field = i < 0 ? line : line.slice(0, i);
          const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
          if (field === 'event') event = value;
          else if (field === 'data') data.push(value);
        }
        if (event !== 'job' || data.length === 0) continue;
        let ev;
        try {
          ev = JSON.parse(data.join('\n'));
        } catch (e) {
          throw new CheckFailure(`an \`event: job\` whose data is not JSON: ${data.join('\n').slice(0, 200)}`);
        }
        if (ev.job_id !== jobA) continue;
        validate(api.components.schemas.JobEvent, ev, 'the SSE `event: job` data');
        return `first event of ${jobA}: ${ev.state}`;
      }
    }
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
});
if (!jobA) {  // the stream failed before the submission: submit without it
  await call('fallback', 'POST', '/v1/jobs', {status: 201, after: (j) => { jobA = j.job_id; }}, {token: T, body: simSpec(1)});
}
await call('no token', 'GET', '/v1/events', {status: 401, code: 'unauthorized'});
await call("another team's", 'GET', `/v1/events?team=${OTHER}`, {status: 403, code: 'forbidden'}, {token: T});

// Submissions refused.
await call('malformed', 'POST', '/v1/jobs', {status: 400, code: 'malformed'}, {token: T, body: '{not json', raw: true});
await call('max_retries 1000', 'POST', '/v1/jobs', {status: 422, code: 'invalid_spec'},
  {token: T, body: simSpec(1, {max_retries: 1000})});
await call('no token', 'POST', '/v1/jobs', {status: 401, code: 'unauthorized'}, {body: simSpec(1)});
await call("another team's spec", 'POST', '/v1/jobs', {status: 403, code: 'wrong_team'},
  {token: T, body: simSpec(1, {team: OTHER})});
await call('body over 1 MiB', 'POST', '/v1/jobs', {status: 413, code: 'too_large'},
  {token: T, body: JSON.stringify(simSpec(1, {name: 'x'.repeat(1100 * 1024)})), raw: true});
const key = `api-schema-test-${Date.now()}`;
await call('idempotency key', 'POST', '/v1/jobs', {status: 201}, {token: T, body: simSpec(1, {idempotency_key: key})});
await call('same key, another spec', 'POST', '/v1/jobs', {status: 409, code: 'idempotency_conflict'},
  {token: T, body: simSpec(2, {idempotency_key: key})});
await check('the submitted spec matches #/components/schemas/JobSpec', async () => {
  validate(api.components.schemas.JobSpec, simSpec(1), 'the job spec');
});

// The job: its view, why, until it ends; then logs and history.
if (jobA) {
  await call('team token', 'GET', `/v1/jobs/${jobA}`, JSON_T, {token: T});
  await call('admin token', 'GET', `/v1/jobs/${jobA}`, JSON_T, {token: A});
  await call('', 'GET', `/v1/jobs/${jobA}/why`, JSON_T, {token: T});
  let end;
  await check(`${jobA} ends (polling GET /v1/jobs/{id})`, async () => {
    end = await until(`${jobA} to end`, async () => {
      const res = await send('GET', `/v1/jobs/${jobA}`, {token: T});
      const j = await checkReply('GET', `/v1/jobs/${jobA}`, res, JSON_T);
      return TERMINAL.has(j.state) && j;
    });
    must(end.state === 'succeeded', `${jobA} ended ${end.state}: ${end.reason}`);
    return end.state;
  });
  await call('ended', 'GET', `/v1/jobs/${jobA}/why`, JSON_T, {token: T});
  await call('ended', 'GET', `/v1/jobs/${jobA}/logs`, {status: 200, type: 'text/plain'}, {token: T});
  await call('follow=1, ended', 'GET', `/v1/jobs/${jobA}/logs?follow=1`, {status: 200, type: 'application/octet-stream'}, {token: T});
  await call('', 'GET', `/v1/jobs/${jobA}/logs?rank=9`, {status: 404, code: 'no_rank'}, {token: T});
  await call('', 'GET', `/v1/jobs/${jobA}/logs?rank=-1`, {status: 400, code: 'bad_request'}, {token: T});
  await check(`GET /v1/jobs/${jobA}/history -> 200 with an event`, async () => {
    const h = await until(`a history event of ${jobA}`, async () => {
      const res = await send('GET', `/v1/jobs/${jobA}/history`, {token: T});
      const j = await checkReply('GET', `/v1/jobs/${jobA}/history`, res, JSON_T);
      return j.events.length >= 1 && j;
    });
    return `${h.events.length} events: ${h.events.map((e) => e.state).join(', ')}`;
  });
  await call('ended job', 'DELETE', `/v1/jobs/${jobA}`, {...JSON_T,
    after: (j) => must(j.state === 'succeeded', `canceling an ended job answered state ${j.state}`)}, {token: T});
}

// A long job, canceled.
const long = await call('long job', 'POST', '/v1/jobs', {status: 201}, {token: T, body: simSpec(600)});
if (long?.job_id) {
  const id = long.job_id;
  await call('running job', 'DELETE', `/v1/jobs/${id}`, JSON_T, {token: T});
  await check(`${id} ends canceled (polling GET /v1/jobs/{id})`, async () => {
    const j = await until(`${id} to end`, async () => {
      const res = await send('GET', `/v1/jobs/${id}`, {token: T});
      const v = await checkReply('GET', `/v1/jobs/${id}`, res, JSON_T);
      return TERMINAL.has(v.state) && v;
    });
    must(j.state === 'canceled', `ended ${j.state}`);
    return j.state;
  });
}

// Unknown jobs, and no token, for every job route.
for (const [m, sub] of [['GET', ''], ['DELETE', ''], ['GET', '/logs'], ['GET', '/why'], ['GET', '/history']]) {
  await call('unknown job', m, `/v1/jobs/${UNKNOWN_JOB}${sub}`, {status: 404, code: 'not_found'}, {token: T});
  await call('no token', m, `/v1/jobs/${UNKNOWN_JOB}${sub}`, {status: 401, code: 'unauthorized'});
}

// Lists.
await call('team token', 'GET', '/v1/jobs', {...JSON_T,
  after: (j) => must(!jobA || (j.jobs || []).some((x) => x.job_id === jobA), `${jobA} is not in the list`)}, {token: T});
await call('admin, one team', 'GET', `/v1/jobs?team=${TEAM}&limit=1`, JSON_T, {token: A});
await call('admin, every team', 'GET', '/v1/jobs?state=succeeded', JSON_T, {token: A});
await call('', 'GET', '/v1/jobs?limit=0', {status: 400, code: 'bad_request'}, {token: T});
await call("another team's", 'GET', `/v1/jobs?team=${OTHER}`, {status: 403, code: 'forbidden'}, {token: T});
await call('no token', 'GET', '/v1/jobs', {status: 401, code: 'unauthorized'});

// Queues and nodes.
await call('team token', 'GET', '/v1/queues', {...JSON_T, after: (j) => {
  const others = j.teams.filter((r) => r.team !== TEAM).map((r) => r.team);
  must(others.length === 0, `a team's token sees other teams' rows: ${others.join(', ')}`);
  must(!j.pools.some((p) => p.hold), "a team's token sees a pool's hold");
  return `${j.teams.length} team rows, ${j.pools.length} pools`;
}}, {token: T});
await call('admin token', 'GET', '/v1/queues', {...JSON_T,
  after: (j) => `${j.teams.length} team rows, ${j.pools.length} pools`}, {token: A});
await call('no token', 'GET', '/v1/queues', {status: 401, code: 'unauthorized'});
await call('team token', 'GET', '/v1/nodes', {...JSON_T,
  after: (j) => must((j.nodes || []).length > 0, 'no nodes')}, {token: T});
const nodesNow = await call('admin token', 'GET', '/v1/nodes', JSON_T, {token: A});
await call('no token', 'GET', '/v1/nodes', {status: 401, code: 'unauthorized'});
// An operator's node operations (admin tokens): each undone at once, so the
// node stays schedulable. Removing one needs a lost node (below).
const nodeName = ((nodesNow && nodesNow.nodes) || [{}])[0].node || 'none';
const N = encodeURIComponent(nodeName);
await call('team token', 'POST', `/v1/nodes/${N}/cordon`, {status: 403, code: 'forbidden'}, {token: T, body: {}});
await call('admin token', 'POST', `/v1/nodes/${N}/cordon`, {...JSON_T,
  after: (j) => must(j.state === 'cordoned', `cordon answered ${JSON.stringify(j)}`)}, {token: A, body: {reason: 'schema test'}});
await call('admin token', 'POST', `/v1/nodes/${N}/uncordon`, {...JSON_T,
  after: (j) => must(j.state === 'schedulable', `uncordon answered ${JSON.stringify(j)}`)}, {token: A});
await call('admin token', 'POST', `/v1/nodes/${N}/drain`, JSON_T, {token: A, body: {reason: 'schema test'}});
await call('admin token', 'POST', `/v1/nodes/${N}/uncordon`, JSON_T, {token: A});
await call('bad body', 'POST', `/v1/nodes/${N}/drain`, {status: 400, code: 'malformed'}, {token: A, body: '{not json', raw: true});
await call('unknown node', 'POST', '/v1/nodes/no-such-node/cordon', {status: 404, code: 'unknown_node'}, {token: A, body: {}});
await call('no token', 'POST', `/v1/nodes/${N}/uncordon`, {status: 401, code: 'unauthorized'});
await call('alive node', 'DELETE', `/v1/nodes/${N}`, {status: 409, code: 'node_alive'}, {token: A});
await call('unknown node', 'DELETE', '/v1/nodes/no-such-node', {status: 404, code: 'unknown_node'}, {token: A});
await call('team token', 'DELETE', `/v1/nodes/${N}`, {status: 403, code: 'forbidden'}, {token: T});
// One cluster's gateway: no front door, so no clusters (--front-door checks
// the success).
await call('team token', 'GET', '/v1/clusters', {status: 404, code: 'not_found'}, {token: T});

// ---------------------------------------------------------------- coverage

// Error replies a healthy cluster cannot be made to give; an operation whose
// documented errors are all here needs no error case.
const UNREACHABLE = {
  'GET /readyz 503': 'needs NATS or the scheduler down',
  'GET /v1/clusters 503': 'needs the front door down',
  'POST /v1/nodes/{name}/cordon 400': 'a cordon body is optional: drain checks the malformed one',
  'POST /v1/nodes/{name}/uncordon 400': 'as cordon',
};
// Successes only a front door gives (checked with --front-door).
const ELSEWHERE = {
  'GET /v1/clusters': 'its success needs a front door (--front-door, clusters_test.cpp)',
  'DELETE /v1/nodes/{name}': 'its success needs a lost node (recovery_events_test.cpp "troupe remove-node")',
};

for (const o of operations) {
  const all = Object.keys(o.op.responses || {}).filter((s) => !/^2/.test(s));
  const errs = all.filter((s) => !UNREACHABLE[`${o.key} ${s}`]);
  const skipped = all.filter((s) => UNREACHABLE[`${o.key} ${s}`]).map((s) => `${s} not exercised: ${UNREACHABLE[`${o.key} ${s}`]}`);
  const seen = [...o.statuses].sort().join(', ');
  if (!o.ok && ELSEWHERE[o.key] && o.err) pass(`coverage: ${o.key}`, `statuses ${seen}; ${ELSEWHERE[o.key]}`);
  else if (!o.ok) failed(`coverage: ${o.key}`, `no success case was exercised (statuses seen: ${seen || 'none'})`);
  else if (errs.length && !o.err) failed(`coverage: ${o.key}`, `no error case was exercised (documented: ${errs.join(', ')})`);
  else pass(`coverage: ${o.key}`, [`statuses ${seen}`, ...skipped].join('; '));
}

finish();

function finish() {
  if (failures.length) {
    console.log(`\n${failures.length} of ${checks} checks failed:`);
    for (const f of failures) console.log(`  - ${f}`);
    process.exit(1);
  }
  console.log(`\nall ${checks} checks passed`);
  process.exit(0);
}

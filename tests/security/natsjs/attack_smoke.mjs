// Attack smoke test of the NATS identities `troupe auth` signs (gateway/auth/),
// run with a stock client (nats.js) against a live nats-server whose config
// includes <auth dir>/nats-auth.conf (or nats-auth-notls.conf).
//
//   npm install && node attack_smoke.mjs <server url> <auth dir> [team]
//
// <server url>: tls://127.0.0.1:PORT for a TLS server (verified with
// <auth dir>/ca.pem), nats://127.0.0.1:PORT for the no-TLS fragment.
// [team]: the team whose team-<team>.creds is used (default: the first one
// found; run `troupe auth add-team NAME` first). Exits 0 when every outcome is
// the expected one, 1 otherwise (each check prints ok/FAIL), 2 on usage.
import { connect, credsAuthenticator, ErrorCode } from "nats";
import { readFileSync, readdirSync, existsSync } from "node:fs";
import { join } from "node:path";

const [url, authDir, teamArg] = process.argv.slice(2);
if (!url || !authDir) {
  console.error("usage: node attack_smoke.mjs <server url> <auth dir> [team]");
  process.exit(2);
}
const useTls = url.startsWith("tls://");
const servers = useTls ? url.replace(/^tls:\/\//, "nats://") : url;
const team =
  teamArg ??
  readdirSync(authDir)
    .filter((f) => /^team-.+\.creds$/.test(f))
    .sort()
    .map((f) => f.slice("team-".length, -".creds".length))[0];
if (!team) {
  console.error(`no team-*.creds in ${authDir}: run \`troupe auth add-team NAME\` first`);
  process.exit(2);
}

let failures = 0;
function report(ok, what, detail = "") {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}${detail ? ` (${detail})` : ""}`);
  if (!ok) failures++;
}

function readCreds(identity) {
  return readFileSync(join(authDir, `${identity}.creds`));
}

function options(credsBytes, inboxPrefix, extra = {}) {
  const o = {
    servers,
    authenticator: credsAuthenticator(credsBytes),
    timeout: 5000,
    reconnect: false,
    ...extra,
  };
  if (inboxPrefix) o.inboxPrefix = inboxPrefix;
  if (useTls) o.tls = { caFile: join(authDir, "ca.pem") };
  return o;
}

// Connects and records the permission violations the server reports.
async function open(identity, inboxPrefix) {
  const nc = await connect(options(readCreds(identity), inboxPrefix));
  const violations = [];
  (async () => {
    for await (const s of nc.status()) {
      if (s.type === "error" && s.permissionContext) violations.push(s.permissionContext);
    }
  })().catch(() => {});
  nc.violated = async (operation, subject, waitMs = 1500) => {
    const until = Date.now() + waitMs;
    while (Date.now() < until) {
      if (violations.some((v) => v.operation === operation && v.subject === subject)) return true;
      await new Promise((r) => setTimeout(r, 50));
    }
    return false;
  };
  return nc;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  // --- team-<team> -----------------------------------------------------------
  let nc;
  try {
    nc = await open(`team-${team}`, `_INBOX_${team}`);
    report(true, `team-${team} connects${useTls ? " over TLS" : ""}`);
  } catch (e) {
    report(false, `team-${team} connects`, e.message);
    return;
  }

  try {
    await nc.request(`troupe.${team}.status`, new TextEncoder().encode("{}"), { timeout: 2000 });
    report(true, `team-${team} requests troupe.${team}.status (a responder answered)`);
  } catch (e) {
    const ok = e.code === ErrorCode.NoResponders || e.code === "503";
    report(ok, `team-${team} may request troupe.${team}.status`, ok ? "503 no responders" : e.message);
  }

  for (const subject of [">", "$JS.API.>", "troupe.sys.>", `troupe.other-${team}.events.>`, "_INBOX.>"]) {
    nc.subscribe(subject, { callback: () => {} });
    await nc.flush();
    report(await nc.violated("subscription", subject), `team-${team} may not subscribe to ${subject}`);
  }
  {
    const subject = `troupe.${team}.events.>`;
    nc.subscribe(subject, { callback: () => {} });
    await nc.flush();
    report(!(await nc.violated("subscription", subject, 500)), `team-${team} may subscribe to ${subject}`);
  }
  for (const subject of [
    "$JS.API.STREAM.LIST",
    "$KV.TROUPE_STATE.x",
    "troupe.sys.hello",
    "troupe.sys.agent.n1.register",
    `troupe.${team}.events.fake`,
    `troupe.other-${team}.submit`,
  ]) {
    nc.publish(subject, new TextEncoder().encode("{}"));
    await nc.flush();
    report(await nc.violated("publish", subject), `team-${team} may not publish to ${subject}`);
  }
  await nc.close();

  // The team identity with the shared _INBOX prefix: its requests cannot work.
  try {
    const plain = await open(`team-${team}`, undefined);
    let outcome = "answered";
    try {
      await plain.request(`troupe.${team}.status`, new TextEncoder().encode("{}"), { timeout: 1500 });
    } catch (e) {
      outcome = e.code;
    }
    report(outcome !== "answered" && outcome !== ErrorCode.NoResponders && outcome !== "503",
      `team-${team} cannot use the shared _INBOX.> for replies`, String(outcome));
    await plain.close().catch(() => {});
  } catch (e) {
    report(true, `team-${team} cannot use the shared _INBOX.> for replies`, e.message);
  }

  // --- forged credentials ----------------------------------------------------
  {
    const text = readCreds(`team-${team}`).toString();
    const jwt = text.split("\n")[1];
    const payload = JSON.parse(Buffer.from(jwt.split(".")[1], "base64url").toString());
    payload.nats.pub = { allow: [">"] };
    payload.nats.sub = { allow: [">"] };
    const forgedJwt = [jwt.split(".")[0], Buffer.from(JSON.stringify(payload)).toString("base64url"),
      jwt.split(".")[2]].join(".");
    const forged = text.replace(jwt, forgedJwt);
    try {
      const f = await connect(options(new TextEncoder().encode(forged), `_INBOX_${team}`));
      await f.close();
      report(false, "a JWT with widened permissions (old signature) is refused", "it connected");
    } catch (e) {
      report(/authorization/i.test(e.message) || e.code === ErrorCode.AuthorizationViolation,
        "a JWT with widened permissions (old signature) is refused", e.code ?? e.message);
    }
  }
  if (useTls) {
    // Without TLS (no CA given) the client must not get in.
    try {
      const p = await connect({ servers, authenticator: credsAuthenticator(readCreds(`team-${team}`)),
        timeout: 3000, reconnect: false, inboxPrefix: `_INBOX_${team}`, tls: null });
      await p.close();
      report(false, "a client without TLS is refused", "it connected");
    } catch (e) {
      report(true, "a client without TLS is refused", e.code ?? e.message);
    }
  }

  // --- node identities, when present ----------------------------------------
  const node = readdirSync(authDir).find((f) => /^node-.+\.creds$/.test(f));
  if (node) {
    const name = node.slice("node-".length, -".creds".length);
    const n = await open(`node-${name}`, `_INBOX_node-${name}`);
    for (const subject of [`troupe.sys.agent.other-${name}.register`, `troupe.${team}.submit`, "troupe.sys.jobs"]) {
      n.publish(subject, new TextEncoder().encode("{}"));
      await n.flush();
      report(await n.violated("publish", subject), `node-${name} may not publish to ${subject}`);
    }
    n.publish(`troupe.sys.agent.${name}.heartbeat`, new TextEncoder().encode("{}"));
    await n.flush();
    report(!(await n.violated("publish", `troupe.sys.agent.${name}.heartbeat`, 500)),
      `node-${name} may publish troupe.sys.agent.${name}.heartbeat`);
    n.subscribe(`troupe.${team}.events.>`, { callback: () => {} });
    await n.flush();
    report(await n.violated("subscription", `troupe.${team}.events.>`), `node-${name} may not read team events`);
    await n.close();
  }

  // --- admin identities, when present ---------------------------------------
  const admin = readdirSync(authDir).find((f) => /^admin-.+\.creds$/.test(f));
  if (admin) {
    const id = admin.slice(0, -".creds".length);
    const a = await open(id, `_INBOX_${id}`);
    for (const subject of ["troupe.sys.nodes", `troupe.${team}.status`]) {
      try {
        await a.request(subject, new TextEncoder().encode("{}"), { timeout: 2000 });
        report(true, `${id} may request ${subject} (a responder answered)`);
      } catch (e) {
        const ok = e.code === ErrorCode.NoResponders || e.code === "503";
        report(ok, `${id} may request ${subject}`, ok ? "503 no responders" : e.message);
      }
    }
    for (const subject of ["troupe.sys.hello", "troupe.sys.node.n1.launch", "$JS.API.STREAM.LIST",
      `troupe.${team}.events.fake`]) {
      a.publish(subject, new TextEncoder().encode("{}"));
      await a.flush();
      report(await a.violated("publish", subject), `${id} may not publish to ${subject}`);
    }
    a.subscribe("$JS.API.>", { callback: () => {} });
    await a.flush();
    report(await a.violated("subscription", "$JS.API.>"), `${id} may not subscribe to $JS.API.>`);
    await a.close();
  }

  // --- scheduler: the account has JetStream ----------------------------------
  try {
    const s = await open("scheduler", undefined);
    const jsm = await s.jetstreamManager({ timeout: 5000 });
    const name = `ATTACK_SMOKE_${process.pid}`;
    await jsm.streams.add({ name, subjects: [`attack.smoke.${process.pid}.>`], storage: "memory" });
    const js = s.jetstream();
    const ack = await js.publish(`attack.smoke.${process.pid}.x`, new TextEncoder().encode("1"));
    report(ack.seq === 1, "scheduler creates a JetStream stream and publishes to it", `${name} seq ${ack.seq}`);
    await jsm.streams.delete(name);
    await s.close();
  } catch (e) {
    report(false, "scheduler creates a JetStream stream", e.message);
  }

  await sleep(10);
}

main()
  .catch((e) => {
    report(false, "unexpected error", e.stack ?? String(e));
  })
  .finally(() => {
    console.log(failures === 0 ? "attack smoke: all outcomes as expected" : `attack smoke: ${failures} unexpected`);
    process.exit(failures === 0 ? 0 : 1);
  });

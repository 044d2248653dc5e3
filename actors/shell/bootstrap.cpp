#include "actors/shell/bootstrap.hpp"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <thread>

#include "actors/policy/config.hpp"
#include "actors/policy/shards.hpp"
#include "bus/log.hpp"
#include "bus/subjects.hpp"
#include "messages/json_text.hpp"
#include "messages/wire.hpp"

namespace troupe::shell {

namespace {

// --job-retention-s at most ten years (its milliseconds stay far from overflow).
constexpr int64_t kMaxRetentionS = 10LL * 365 * 24 * 3600;

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

// The least automatic bound of a stream (events; a team's logs: a quarter).
constexpr int64_t kMinAutoBytes = 64LL * 1024 * 1024;

// The one stream of every team's output that older versions made overlaps
// the teams' own: it goes, and the output it held with it.
void drop_legacy_logs(bus::Connection& conn) {
  std::string err;
  auto reply = conn.request(std::string("$JS.API.STREAM.DELETE.") + subjects::kLegacyLogsStream,
                            std::string(), 5000, &err);
  if (!reply) {
    spdlog::warn("could not delete the old {} stream ({}): teams' logs streams may not be made",
                 subjects::kLegacyLogsStream, err);
    return;
  }
  auto j = json_text::parse(reply->begin(), reply->end());
  if (j.is_object() && j.value("success", false))
    spdlog::warn(
        "deleted the stream {} of an older version (every team's output in one stream; "
        "now one stream per team, {}<team>): the output it held is gone",
        subjects::kLegacyLogsStream, subjects::kLogsStreamPrefix);
}

}  // namespace

int parse_options(int argc, char** argv, Options& o) {
  CLI::App app{"troupe-scheduler: the Troupe actor system on NATS"};
  o.url = env_or("TROUPE_NATS", "nats://127.0.0.1:4222");
  app.add_option("--nats", o.url, "NATS server URL(s), comma-separated (env TROUPE_NATS)");
  // The scheduler's identity (docs/security.md): scheduler.creds.
  o.creds = env_or("TROUPE_NATS_CREDS", "");
  o.tls_ca = env_or("TROUPE_NATS_CA", "");
  app.add_option("--creds", o.creds, "NATS credentials file (env TROUPE_NATS_CREDS)");
  app.add_option("--tls-ca", o.tls_ca,
                 "CA of the NATS server's TLS certificate (env TROUPE_NATS_CA)");
  app.add_option("--config", o.config, "cluster config file (YAML or JSON)");
  o.replicas = static_cast<int>(std::strtol(env_or("TROUPE_REPLICAS", "1").c_str(), nullptr, 10));
  app.add_option("--replicas", o.replicas,
                 "copies of every stream and KV bucket in a NATS cluster (JetStream R1/R3/R5): "
                 "3 with 3 servers or more, so that one lost loses nothing acknowledged; 1 on "
                 "one server (env TROUPE_REPLICAS; docs/deploy.md)")
      ->check(CLI::Range(1, 5));
  o.shard = !env_or("TROUPE_SHARD", "").empty() && env_or("TROUPE_SHARD", "") != "0";
  app.add_flag("--shard", o.shard,
               "act as one of several schedulers at once, each owning some pools of the config "
               "through a lease per pool; takes the pools whose shard is gone (env TROUPE_SHARD; "
               "docs/recovery.md)");
  std::string pools = env_or("TROUPE_POOLS", "");
  app.add_option("--pools", pools,
                 "a shard's pools, comma-separated: taken at once (implies --shard; env "
                 "TROUPE_POOLS)");
  auto& s = o.scheduler;
  s.checkpoint_root = env_or("TROUPE_HOME", "./.troupe") + "/checkpoints";
  app.add_option("--checkpoint-root", s.checkpoint_root,
                 "jobs get <root>/<job id> as TROUPE_CHECKPOINT_DIR (shared storage across nodes)");
  app.add_option("--metrics", o.metrics_addr,
                 "serve Prometheus /metrics on HOST:PORT (port 0: a free one; docs/metrics.md)");
  std::string policy = "troupe";
  app.add_option("--policy", policy,
                 "troupe (default) | fifo: strict FIFO, no fair share or backfill | fifo-backfill: "
                 "FIFO with EASY backfill, Slurm's default (baselines)")
      ->check(CLI::IsMember({"troupe", "fifo", "fifo-backfill"}));
  app.add_option(
         "--events-max-age", o.events_max_age_s,
         "seconds job events are kept in the TROUPE_EVENTS stream (troupe history); 0: forever")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--events-max-bytes", o.events_max_bytes,
                 "bytes of job events the TROUPE_EVENTS stream keeps, the oldest dropped first; "
                 "0 (default): half the account's JetStream storage limit, else a quarter of "
                 "the free disk under $TROUPE_HOME, 64 MiB to 1 GiB")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--logs-max-age", o.logs_max_age_s,
                 "seconds workers' output is kept in its team's TROUPE_LOGS_<team> stream "
                 "(troupe logs of an ended job, also once its node is gone) unless the config's "
                 "logs: or default_logs: says otherwise; 0: forever")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--logs-max-bytes", o.logs_max_bytes,
                 "bytes of workers' output each team's stream keeps, the oldest dropped first, "
                 "unless the config's logs: or default_logs: says otherwise; 0 (default): a "
                 "quarter of the events' bound")
      ->check(CLI::NonNegativeNumber);
  int64_t retention_s = s.job_retention_ms / 1000;
  app.add_option("--job-retention-s", retention_s,
                 "seconds an ended job stays in memory, in troupe jobs and in the KV bucket; "
                 "then it is purged and troupe status/history read its stored events "
                 "(kept --events-max-age); 0: forever")
      ->check(CLI::Range(int64_t{0}, kMaxRetentionS));
  app.add_option(
         "--snapshots", o.snapshots,
         "how actor snapshots reach the KV bucket: coalesced (default), sync (one write per "
         "change, waited for), off (memory only: no recovery after a restart)")
      ->check(CLI::IsMember({"coalesced", "sync", "off"}));
  app.add_option("--flush-ms", o.flush_ms, "coalesced snapshots: write interval")
      ->check(CLI::Range(1, 10000));
  app.add_option("--lease-ttl-ms", o.lease_ttl_ms,
                 "a leader that has not renewed its lease for this long is replaced by a standby")
      ->check(CLI::Range(300, 60000));
  o.threads = static_cast<int>(std::strtol(env_or("TROUPE_THREADS", "2").c_str(), nullptr, 10));
  app.add_option("--threads", o.threads,
                 "actor worker threads (env TROUPE_THREADS; default 2): the cores this process "
                 "may use; shards sharing a machine split its cores (docs/deploy.md)")
      ->check(CLI::Range(1, 64));
  app.add_option("--log-level", o.log_level, "trace|debug|info|warn|error|off")
      ->check(CLI::IsMember(
          std::vector<std::string>(std::begin(bus::kLogLevels), std::end(bus::kLogLevels))));
  app.add_flag(
      "--debug-crash", s.debug_crash,
      "answer troupe.sys.debug.crash: crash a chosen job, queue or node actor (for tests)");
  try {
    app.parse(argc, argv);
    s.job_retention_ms = retention_s * 1000;
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  bus::use_daemon_log("troupe-scheduler", o.log_level);
  s.baseline = policy::parse_policy(policy).value_or(policy::Baseline::none);
  std::error_code ec;
  std::filesystem::create_directories(s.checkpoint_root, ec);
  auto abs = std::filesystem::absolute(s.checkpoint_root, ec);
  if (!ec) s.checkpoint_root = abs.lexically_normal().string();
  if (!o.config.empty()) {
    std::string err;
    if (!read_config(o.config, o.config_text, err)) {
      spdlog::error("{}", err);
      return 2;
    }
  }
  for (size_t at = 0; at < pools.size();) {
    auto comma = pools.find(',', at);
    if (comma == std::string::npos) comma = pools.size();
    if (comma > at) o.pools.push_back(pools.substr(at, comma - at));
    at = comma + 1;
  }
  if (!o.pools.empty()) o.shard = true;
  if (o.shard) {
    policy::ClusterConfig cfg;
    auto err = policy::load_config_or_open(o.config_text, cfg);
    if (err.empty()) err = policy::check_shards(cfg, o.pools);
    if (!err.empty()) {
      spdlog::error("{}", err);
      return 2;
    }
  }
  return -1;
}

bool read_config(const std::string& path, std::string& text, std::string& err) {
  std::ifstream f(path);
  if (!f) {
    err = "cannot read config " + path;
    return false;
  }
  text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  policy::ClusterConfig cfg;
  err = policy::load_config(text, cfg);
  if (!err.empty()) err = path + ": " + err;
  return err.empty();
}

StopSignals::StopSignals() {
  sigemptyset(&set_);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR2}) sigaddset(&set_, sig);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
}

int StopSignals::wait(int ms) const {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  int sig = sigtimedwait(&set_, nullptr, &ts);
  return sig < 0 ? 0 : sig;
}

std::unique_ptr<Bus> Bus::open(const Options& o, std::string* err) {
  auto b = std::make_unique<Bus>();
  bus::ConnectOptions in_opts, out_opts;
  in_opts.url = out_opts.url = o.url;
  in_opts.creds_file = out_opts.creds_file = o.creds;
  in_opts.tls_ca = out_opts.tls_ca = o.tls_ca;
  in_opts.on_error = out_opts.on_error = [](const std::string& e) { spdlog::warn("nats: {}", e); };
  in_opts.name = "troupe-scheduler-in";
  in_opts.on_reconnected = [flag = &b->reconnected] { *flag = true; };
  // A shard subscribes once per node of its pools (shell/bus_ports.hpp
  // BusAgentWatch): the client library's shared thread delivers them all,
  // and every other subscription of `in`, rather than a thread each.
  in_opts.shared_delivery = o.shard;
  b->sharded = o.shard;
  out_opts.name = "troupe-scheduler-out";
  out_opts.send_asap = false;  // a busy publisher: let the client batch writes
  b->in = bus::Connection::open(in_opts, err);
  b->out = b->in ? bus::Connection::open(out_opts, err) : nullptr;
  if (!b->in || !b->out) return nullptr;
  b->js = bus::JetStream::open(*b->out, err);
  // The duplicate window may not outlast the events.
  int64_t age = o.events_max_age_s;
  int64_t window = age > 0 ? std::min<int64_t>(120000, age * 1000) : 120000;
  if (!b->js) {
    *err = "JetStream is required (nats-server -js): " + *err;
    return nullptr;
  }
  int64_t max_bytes = o.events_max_bytes;
  if (max_bytes == 0) {
    std::error_code ec;
    auto space = std::filesystem::space(env_or("TROUPE_HOME", "."), ec);
    max_bytes = policy::events_bytes_for(b->js->storage_limit(),
                                         ec ? 0 : static_cast<int64_t>(space.available));
  }
  bus::StreamConfig intake{subjects::kIntakeStream,
                           {subjects::kIntakeSubjects, subjects::kAllEnqueue}};
  intake.replicas = o.replicas;
  // A NATS cluster's JetStream answers once its servers have elected a
  // metadata leader (seconds after they start together), and places a
  // replicated stream once enough of its servers have joined ("no suitable
  // peers for placement" until then; also what more replicas than servers
  // get, after the wait); a server busy electing a stream's leader may time
  // out or say it is "temporarily unavailable". Each step below (streams,
  // buckets) is retried while its refusal says so: 30 s at most in all, 3 s
  // while nothing answers at all (a server without -js). Any other refusal is
  // the answer at once.
  const auto js_since = std::chrono::steady_clock::now();
  bool told = false;
  auto settled = [&](bool ok) {
    if (ok) return true;
    const bool silent = err->find("No responders") != std::string::npos;
    const bool forming = silent || err->find("unavailable") != std::string::npos ||
                         err->find("imeout") != std::string::npos ||
                         err->find("no suitable peers") != std::string::npos;
    if (!forming ||
        std::chrono::steady_clock::now() - js_since >= std::chrono::seconds(silent ? 3 : 30)) {
      if (silent) *err = "JetStream is required (nats-server -js): " + *err;
      return true;
    }
    if (!told) spdlog::info("waiting for JetStream ({})", *err);
    told = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    return false;
  };
  bool ok = false;
  while (!settled(ok = b->js->ensure_stream(intake, err))) {
  }
  if (!ok) return nullptr;
  // The buckets first: the events stream reserves storage. (The HTTP API's
  // tokens, troupe auth add-token, live beside them, as safe.)
  std::unique_ptr<bus::KeyValue> tokens;
  for (auto [bucket, kv] : {std::pair{subjects::kStateBucket, &b->state_kv},
                            std::pair{subjects::kLeaderBucket, &b->leader_kv},
                            std::pair{subjects::kTokenBucket, &tokens}}) {
    while (
        !settled(static_cast<bool>(*kv = bus::KeyValue::open(*b->js, bucket, err, o.replicas)))) {
    }
    if (!*kv) return nullptr;
  }
  // nats-server reserves a stream's max_bytes from its own storage and refuses
  // one it cannot reserve: a default bound is halved until it can be (64 MiB at
  // least, else none); a bound given with --events-max-bytes is not changed.
  for (;;) {
    bus::StreamConfig events{
        subjects::kEventsStream, {subjects::kAllEvents}, window, age, max_bytes};
    events.replicas = o.replicas;
    const bool ok =
        b->js->ensure_stream_fitting(events, o.events_max_bytes == 0, kMinAutoBytes, true, err);
    max_bytes = events.max_bytes;
    if (ok) break;
    if (!settled(false)) continue;  // forming: again
    if (err->rfind("JetStream is required", 0) != 0)
      *err = "JetStream is required (nats-server -js): " + *err;
    return nullptr;
  }
  spdlog::info("job events kept {} s and at most {} (--events-max-age, --events-max-bytes)", age,
               max_bytes > 0 ? std::to_string(max_bytes / (1024 * 1024)) + " MiB" : "any size");
  // Workers' output, one stream per team: without room for a team's the
  // scheduler still runs (its logs are then asked of the agents only).
  drop_legacy_logs(*b->out);
  policy::ClusterConfig cfg;
  if (auto cerr = policy::load_config_or_open(o.config_text, cfg); !cerr.empty()) {
    *err = cerr;
    return nullptr;
  }
  b->logs = std::make_unique<LogStreams>(
      *b->js, policy::LogLimits{o.logs_max_age_s, o.logs_max_bytes},
      max_bytes > 0 ? std::max(max_bytes / 4, kMinAutoBytes) : 0, o.replicas);
  b->logs->configure(cfg);
  b->logs_stream = true;
  b->events = std::make_unique<EventPublisher>(*b->js);
  // What a step that was asked again said before it succeeded (JetStream
  // forming) is not an error: the caller reads a non-empty one as one.
  err->clear();
  return b;
}

void LogStreams::configure(const policy::ClusterConfig& cfg) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cfg_ = cfg;
    tried_.clear();  // every team's stream again, with the bounds of this config
  }
  for (const auto& t : cfg.teams) ensure(t.name);
}

void LogStreams::ensure(const std::string& team) {
  policy::LogLimits l;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!tried_.insert(team).second) return;
    l = cfg_.logs_of(team, flags_);
  }
  // (outside the lock: a Launch of another team does not wait for this one)
  if (names::valid_team(team)) make(team, l);
}

void LogStreams::before_send(const std::string& subject, const void* data, size_t size) {
  const std::string_view kind = subjects::kLaunch;
  if (subject.size() <= kind.size() ||
      std::string_view(subject).substr(subject.size() - kind.size()) != kind ||
      subject[subject.size() - kind.size() - 1] != '.')
    return;
  auto* e = wire::open(static_cast<const uint8_t*>(data), size);
  if (e == nullptr || e->body_type() != wire::Body::Launch) return;
  ensure(wire::str(e->body_as_Launch()->team()));
}

bool LogStreams::make(const std::string& team, const policy::LogLimits& l) {
  const std::string name = subjects::logs_stream(team);
  // A bound from the config or --logs-max-bytes is not changed; the automatic
  // one is halved while the server cannot reserve it (16 MiB at least).
  const bool explicit_bound = l.max_bytes > 0;
  int64_t bytes = explicit_bound ? l.max_bytes : auto_bytes_;
  // The duplicate window may not outlast the output.
  const int64_t window = l.max_age_s > 0 ? std::min<int64_t>(120000, l.max_age_s * 1000) : 120000;
  bus::StreamConfig cfg{
      name, {subjects::team_log_chunks(team)}, window, l.max_age_s, bytes, false, replicas_};
  std::string err;
  if (!js_.ensure_stream_fitting(cfg, !explicit_bound, kMinAutoBytes / 4, false, &err)) {
    spdlog::warn(
        "team {}: no logs stream ({}): logs of its ended jobs come from their agents "
        "only",
        team, err);
    return false;
  }
  spdlog::info(
      "team {}: workers' output kept in {} for {} s and at most {}", team, name, l.max_age_s,
      cfg.max_bytes > 0 ? std::to_string(cfg.max_bytes / 1024) + " KiB" : std::string("any size"));
  return true;
}

Bus::~Bus() {
  // What uses JetStream first, then the connections (publisher last).
  events.reset();
  logs.reset();
  leader_kv.reset();
  state_kv.reset();
  js.reset();
  out.reset();
  in.reset();
}

}  // namespace troupe::shell

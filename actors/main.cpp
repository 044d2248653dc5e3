// troupe-scheduler: runs the actor system and binds it to NATS.
//   troupe-scheduler --nats URL [--config FILE] [--metrics HOST:PORT]
// Several may run: one takes the leader lease and schedules, the others wait
// as standbys (docs/recovery.md). A leader restores its actors from the KV
// bucket and the streams, then asks the agents what runs. Stops cleanly on
// SIGTERM / SIGINT; exits with code 3 when it finds itself deposed.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>
#include <nlohmann/json.hpp>

#include "actors/durable.hpp"
#include "actors/policy/admission.hpp"
#include "actors/policy/config.hpp"
#include "actors/scheduler.hpp"
#include "actors/bridge.hpp"
#include "bus/nats.hpp"
#include "bus/subjects.hpp"
#include "gateway/metrics.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"

namespace {

// Everything the actors publish passes the lease gate (actors/durable.hpp).
class BusOutbox : public troupe::Outbox {
 public:
  explicit BusOutbox(troupe::LeaseGate& g) : gate_(g) {}
  void send(const std::string& subject, const void* data, size_t size,
            const std::string& reply) override {
    gate_.publish(subject, data, size, reply);
  }
  void send_event(const std::string& subject, const std::string& data, Stored stored) override {
    gate_.publish(subject, data.data(), data.size(), {}, std::move(stored));
  }

 private:
  troupe::LeaseGate& gate_;
};

class StreamIntake : public troupe::Intake {
 public:
  StreamIntake(troupe::bus::JetStream& js, troupe::LeaseGate& g) : js_(js), gate_(g) {}
  void append(const std::string& subject, std::vector<uint8_t> bytes, const std::string& msg_id,
              Done done) override {
    if (!gate_.open()) {  // not known to lead right now: nothing may be accepted
      done(false, false, "this scheduler's leader lease is unconfirmed");
      return;
    }
    js_.publish_async(subject, bytes.data(), bytes.size(), msg_id, std::move(done));
  }
  void ack(uint64_t stream_seq) override {
    if (auto* c = consumer.load()) c->ack(stream_seq);
  }
  std::atomic<troupe::bus::Consumer*> consumer{nullptr};  // troupe.<team>.enqueue

 private:
  troupe::bus::JetStream& js_;
  troupe::LeaseGate& gate_;
};

// troupe.<team>.history: a job's events read from TROUPE_EVENTS (only the
// subject troupe.<team>.events.<job_id>) on a thread of its own, one read at
// a time, so no actor waits. At most kMaxWaiting reads wait; more are refused
// at once (a flood of requests is not queued without end).
class StreamHistory : public troupe::History {
 public:
  explicit StreamHistory(troupe::bus::JetStream& js) : js_(js), thread_([this] { run(); }) {}
  ~StreamHistory() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void read(const std::string& team, const std::string& job_id, Done done) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stop_ && waiting_.size() < kMaxWaiting) {
        waiting_.push_back(Read{team, job_id, std::move(done)});
        cv_.notify_one();
        return;
      }
    }
    done({}, "too many history reads waiting; retry");
  }

 private:
  static constexpr size_t kMaxWaiting = 64;
  struct Read {
    std::string team, job_id;
    Done done;
  };
  void run() {
    for (;;) {
      Read r;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !waiting_.empty(); });
        if (stop_) return;
        r = std::move(waiting_.front());
        waiting_.pop_front();
      }
      // A read stops short when the newest event it aimed at went meanwhile
      // (--events-max-age): the next read starts from what is stored now.
      bool complete = false;
      std::vector<troupe::Inbound> msgs;
      for (int tries = 0; tries < 3 && !complete; ++tries)
        msgs = js_.read_all(troupe::subjects::kEventsStream,
                            troupe::subjects::job_events(r.team, r.job_id), 2000, 0, &complete);
      std::vector<std::string> events;
      events.reserve(msgs.size());
      for (auto& m : msgs) events.emplace_back(m.data.begin(), m.data.end());
      r.done(std::move(events),
             complete ? std::string() : "the events stream did not answer in full; retry");
    }
  }
  troupe::bus::JetStream& js_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Read> waiting_;
  bool stop_ = false;
  std::thread thread_;
};

// Waits up to `ms` for one of `set`'s signals; 0 on timeout.
int wait_signal(const sigset_t& set, int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  int sig = sigtimedwait(&set, nullptr, &ts);
  return sig < 0 ? 0 : sig;
}

std::string holder_id() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return std::string(host) + ":" + std::to_string(getpid()) + ":" +
         std::to_string(troupe::now_ms());
}

// Reads and checks a config file; false (and why) when it is unusable.
bool read_config(const std::string& path, std::string& text, std::string& err) {
  std::ifstream f(path);
  if (!f) {
    err = "cannot read config " + path;
    return false;
  }
  text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  troupe::policy::ClusterConfig cfg;
  err = troupe::policy::load_config(text, cfg);
  if (!err.empty()) err = path + ": " + err;
  return err.empty();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"troupe-scheduler: the Troupe actor system on NATS"};
  std::string url =
      std::getenv("TROUPE_NATS") ? std::getenv("TROUPE_NATS") : "nats://127.0.0.1:4222";
  std::string config;
  app.add_option("--nats", url, "NATS server URL(s), comma-separated (env TROUPE_NATS)");
  // The scheduler's identity (docs/security.md): scheduler.creds.
  std::string creds = std::getenv("TROUPE_NATS_CREDS") ? std::getenv("TROUPE_NATS_CREDS") : "";
  std::string tls_ca = std::getenv("TROUPE_NATS_CA") ? std::getenv("TROUPE_NATS_CA") : "";
  app.add_option("--creds", creds, "NATS credentials file (env TROUPE_NATS_CREDS)");
  app.add_option("--tls-ca", tls_ca, "CA of the NATS server's TLS certificate (env TROUPE_NATS_CA)");
  app.add_option("--config", config, "cluster config file (YAML or JSON)");
  const char* home = std::getenv("TROUPE_HOME");
  troupe::SchedulerOptions opts;
  opts.checkpoint_root = std::string(home ? home : "./.troupe") + "/checkpoints";
  app.add_option("--checkpoint-root", opts.checkpoint_root,
                 "jobs get <root>/<job id> as TROUPE_CHECKPOINT_DIR (shared storage across nodes)");
  std::string metrics_addr;
  app.add_option("--metrics", metrics_addr,
                 "serve Prometheus /metrics on HOST:PORT (port 0: a free one; docs/metrics.md)");
  std::string policy = "troupe";
  app.add_option("--policy", policy,
                 "troupe (default) | fifo: strict FIFO, no fair share or backfill (a baseline)")
      ->check(CLI::IsMember({"troupe", "fifo"}));
  int64_t events_max_age_s = 7 * 24 * 3600;
  app.add_option(
         "--events-max-age", events_max_age_s,
         "seconds job events are kept in the TROUPE_EVENTS stream (troupe history); 0: forever")
      ->check(CLI::NonNegativeNumber);
  std::string snapshots = "coalesced";
  app.add_option(
         "--snapshots", snapshots,
         "how actor snapshots reach the KV bucket: coalesced (default), sync (one write per "
         "change, waited for), off (memory only: no recovery after a restart)")
      ->check(CLI::IsMember({"coalesced", "sync", "off"}));
  int flush_ms = 20;
  app.add_option("--flush-ms", flush_ms, "coalesced snapshots: write interval")
      ->check(CLI::Range(1, 10000));
  int lease_ttl_ms = 3000;
  app.add_option("--lease-ttl-ms", lease_ttl_ms,
                 "a leader that has not renewed its lease for this long is replaced by a standby")
      ->check(CLI::Range(300, 60000));
  app.add_flag(
      "--debug-crash", opts.debug_crash,
      "answer troupe.sys.debug.crash: crash a chosen job, queue or node actor (for tests)");
  CLI11_PARSE(app, argc, argv);
  opts.fifo = policy == "fifo";
  {
    std::error_code ec;
    std::filesystem::create_directories(opts.checkpoint_root, ec);
    auto abs = std::filesystem::absolute(opts.checkpoint_root, ec);
    if (!ec) opts.checkpoint_root = abs.lexically_normal().string();
  }
  std::string config_text;
  if (!config.empty()) {
    std::string err;
    if (!read_config(config, config_text, err)) {
      std::fprintf(stderr, "troupe-scheduler: %s\n", err.c_str());
      return 2;
    }
  }

  // Block the stop signals in every thread; main waits for them below.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGHUP);
  sigaddset(&stop, SIGUSR2);  // raised by the snapshot store when a write finds us deposed
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  troupe::bus::Library lib;
  std::string err;
  troupe::bus::ConnectOptions in_opts, out_opts;
  in_opts.url = out_opts.url = url;
  in_opts.creds_file = out_opts.creds_file = creds;
  in_opts.tls_ca = out_opts.tls_ca = tls_ca;
  in_opts.name = "troupe-scheduler-in";
  // After nats-server comes back, the agents are asked to register again (what
  // they run, what ended meanwhile); the main loop sends that hello.
  std::atomic<bool> reconnected{false};
  in_opts.on_reconnected = [&reconnected] { reconnected = true; };
  out_opts.name = "troupe-scheduler-out";
  out_opts.send_asap = false;  // a busy publisher: let the client batch writes
  // Separate connections for receiving and publishing (a connection that both
  // publishes fast and subscribes can be cut as a slow consumer).
  auto in_conn = troupe::bus::Connection::open(in_opts, &err);
  auto out_conn = in_conn ? troupe::bus::Connection::open(out_opts, &err) : nullptr;
  if (!in_conn || !out_conn) {
    std::fprintf(stderr, "troupe-scheduler: %s\n", err.c_str());
    return 1;
  }
  auto js = troupe::bus::JetStream::open(*out_conn, &err);
  if (!js ||
      !js->ensure_stream({troupe::subjects::kIntakeStream,
                          {troupe::subjects::kIntakeSubjects, troupe::subjects::kAllEnqueue}},
                         &err) ||
      !js->ensure_stream(
          {troupe::subjects::kEventsStream,
           {troupe::subjects::kAllEvents},
           // the duplicate window may not outlast the events
           events_max_age_s > 0 ? std::min<int64_t>(120000, events_max_age_s * 1000) : 120000,
           events_max_age_s},
          &err)) {
    std::fprintf(stderr, "troupe-scheduler: JetStream is required (nats-server -js): %s\n",
                 err.c_str());
    return 1;
  }
  auto state_kv = troupe::bus::KeyValue::open(*js, troupe::subjects::kStateBucket, &err);
  auto leader_kv =
      state_kv ? troupe::bus::KeyValue::open(*js, troupe::subjects::kLeaderBucket, &err) : nullptr;
  if (!state_kv || !leader_kv) {
    std::fprintf(stderr, "troupe-scheduler: %s\n", err.c_str());
    return 1;
  }
  // The metrics collector: its own connection, a projection of events and
  // troupe.sys.* replies (gateway/metrics.hpp).
  std::unique_ptr<troupe::metrics::MetricsCollector> metrics;
  if (!metrics_addr.empty()) {
    troupe::metrics::MetricsCollector::Options mo;
    mo.nats_url = url;
    mo.creds_file = creds;
    mo.tls_ca = tls_ca;
    mo.bind = metrics_addr;
    metrics = troupe::metrics::MetricsCollector::start(mo, &err);
    if (!metrics) {
      std::fprintf(stderr, "troupe-scheduler: %s\n", err.c_str());
      return 1;
    }
    std::fprintf(stderr, "troupe-scheduler: metrics on %s\n", metrics->url().c_str());
  }

  // Lead, or wait as a standby until the leader stops renewing its lease.
  troupe::LeaderLease lease(*leader_kv, holder_id(), lease_ttl_ms);
  auto events = std::make_unique<troupe::EventPublisher>(*js);
  troupe::LeaseGate gate([&](const std::string& subject, const void* data, size_t size,
                             const std::string& reply, std::function<void()> stored) {
    if (reply.empty() && troupe::subjects::token(subject, 2) == troupe::subjects::kEvents)
      events->publish(subject, data, size,  // kept by TROUPE_EVENTS: acknowledged, retried
                      std::move(stored));
    else
      out_conn->publish(subject, data, size, reply);
  });
  for (bool told = false;;) {
    int64_t asked = troupe::LeaseGate::steady_ms();
    if (lease.try_acquire()) {
      gate.extend(asked + lease_ttl_ms);
      break;
    }
    if (!told)
      std::fprintf(stderr, "troupe-scheduler: standby: another scheduler holds the leader lease\n");
    told = true;
    int sig = wait_signal(stop, 200);
    if (sig == SIGTERM || sig == SIGINT) return 0;
  }
  auto t0 = std::chrono::steady_clock::now();
  auto restored = troupe::restore_state(*state_kv, *js);
  if (!restored.complete) {
    // Acting on part of the past could place a job twice: leave it to a
    // restart (or the standby, once the lease runs out).
    std::fprintf(stderr,
                 "troupe-scheduler: cannot restore: reading the KV bucket or the streams stopped "
                 "short of their newest message %d times\n",
                 restored.tries);
    return 1;
  }
  auto& rs = restored.state;
  using Mode = troupe::KvSnapshotStore::Mode;
  auto store = std::make_shared<troupe::KvSnapshotStore>(
      *state_kv,
      snapshots == "sync"  ? Mode::sync
      : snapshots == "off" ? Mode::off
                           : Mode::coalesced,
      flush_ms, [] { kill(getpid(), SIGUSR2); }, [&lease] { return lease.still_ours(); });
  store->seed(restored.revisions);
  store->start();
  // Events the killed scheduler published but never saw stored (1 s of clock
  // margin past the start of the read): announced again, identical.
  auto unannounced = troupe::recovery::unannounced(rs, restored.since_ms + 1000);
  for (const auto& e : unannounced) {
    auto json = troupe::spec::to_json(e);
    events->publish(troupe::subjects::job_events(e.team(), e.job_id()), json.data(), json.size());
  }
  std::vector<std::string> job_records, node_records;
  size_t active = 0;
  for (const auto& [id, rec] : rs.jobs) {
    std::string bytes;
    rec.SerializeToString(&bytes);
    if (rs.changed.count(id)) store->put(troupe::job_key(id), bytes);
    active += troupe::names::is_terminal(rec.state()) ? 0 : 1;
    job_records.push_back(std::move(bytes));
  }
  for (const auto& [name, rec] : rs.nodes) {
    std::string bytes;
    rec.SerializeToString(&bytes);
    store->put(troupe::node_key(name), bytes);
    node_records.push_back(std::move(bytes));
  }
  opts.store = store;
  opts.epoch = lease.epoch();
  // Stored records that failed validation at restore: never run, kept where
  // they are (the KV bucket, the streams), shown here (docs/security.md).
  nlohmann::json quarantine = nlohmann::json::object();
  for (const auto& [where, why] : rs.quarantined) {
    std::fprintf(stderr, "troupe-scheduler: quarantined %s: %s\n", where.c_str(), why.c_str());
    if (quarantine.size() < 100) quarantine[where] = why;
  }
  opts.extra_stats = [store = store.get(), ev = events.get(), epoch = lease.epoch(),
                      quarantined = rs.quarantined.size(), quarantine] {
    const auto& n = store->counters();
    return nlohmann::json{{"leader_epoch", epoch},
                          {"quarantined", quarantined},
                          {"quarantine", quarantine},
                          {"snapshots",
                           {{"puts", n.puts.load()},
                            {"writes", n.writes.load()},
                            {"flushes", n.flushes.load()},
                            {"errors", n.errors.load()},
                            {"conflicts", n.conflicts.load()}}},
                          {"events_retried", ev->retried()}}
        .dump();
  };

  int rc = 0;
  {
    caf::actor_system_config cfg;
    troupe::configure(cfg);
    caf::actor_system sys{cfg};
    auto out = std::make_shared<BusOutbox>(gate);
    auto intake = std::make_shared<StreamIntake>(*js, gate);
    auto history = std::make_shared<StreamHistory>(*js);
    opts.history = history;
    auto w = troupe::start_scheduler(sys, out, intake, opts);
    troupe::apply_config(w, config_text);
    // The router also learns each key's spec fingerprint (idempotency_conflict)
    // and, per restored job still awaiting its first start, its team
    // (max_queued_jobs); the job supervisor tracks the same jobs.
    std::vector<std::string> fingerprints, unstarted;
    for (const auto& [id, rec] : rs.jobs) {
      if (!rec.spec().idempotency_key().empty()) {
        fingerprints.push_back(rec.spec().team() + "/" + rec.spec().idempotency_key());
        fingerprints.push_back(troupe::spec::fingerprint(rec.spec()));
      }
      if (!troupe::names::is_terminal(rec.state()) &&
          troupe::policy::awaiting_first_start(rec.state(), rec.attempts_size()))
        unstarted.push_back(rec.spec().team());
    }
    caf::anon_send(w.router, troupe::atoms::restore_atom_v, troupe::recovery::idempotency_keys(rs),
                   static_cast<uint64_t>(troupe::recovery::max_seq(rs)), std::move(fingerprints),
                   std::move(unstarted));
    caf::anon_send(w.nodes, troupe::atoms::restore_atom_v, std::move(node_records));
    caf::anon_send(w.jobs, troupe::atoms::restore_atom_v, std::move(job_records));
    auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    std::fprintf(
        stderr,
        "troupe-scheduler: leader (epoch %llu); restored %zu jobs (%zu not ended), %zu nodes "
        "in %lld ms (read since the last flush: %zu intake, %zu events; %zu moved on; %zu "
        "events announced again; %lld unreadable, %zu quarantined)\n",
        static_cast<unsigned long long>(lease.epoch()), rs.jobs.size(), active, rs.nodes.size(),
        static_cast<long long>(ms), restored.intake_read, restored.events_read, rs.changed.size(),
        unannounced.size(), static_cast<long long>(rs.bad), rs.quarantined.size());

    std::vector<troupe::bus::SubscriptionPtr> subs;
    for (const char* s :
         {troupe::subjects::kAllSubmit, troupe::subjects::kAllStatus, troupe::subjects::kAllCancel,
          troupe::subjects::kAllLogs, troupe::subjects::kAllJobs, troupe::subjects::kSysNodes,
          troupe::subjects::kSysStats, troupe::subjects::kAllAgents, troupe::subjects::kAllWhy,
          troupe::subjects::kSysQueues, troupe::subjects::kSysCordon,
          troupe::subjects::kSysUncordon, troupe::subjects::kSysDrain,
          troupe::subjects::kSysDebugCrash, troupe::subjects::kAllHistory,
          troupe::subjects::kSysFind}) {
      auto sub = troupe::bus::subscribe_actor(*in_conn, s, w.router);
      if (!sub) {
        std::fprintf(stderr, "troupe-scheduler: cannot subscribe to %s\n", s);
        rc = 1;
      }
      subs.push_back(std::move(sub));
    }
    // Submissions published with JetStream (troupe.<team>.enqueue), also
    // those stored while no scheduler ran.
    auto consumer = troupe::bus::Consumer::open(
        *js, troupe::subjects::kIntakeStream, troupe::subjects::kEnqueueConsumer,
        troupe::subjects::kAllEnqueue,
        [router = w.router](troupe::Inbound&& in) { caf::anon_send(router, std::move(in)); }, &err);
    if (!consumer) {
      std::fprintf(stderr, "troupe-scheduler: %s\n", err.c_str());
      rc = 1;
    }
    intake->consumer = consumer.get();
    in_conn->flush();
    // Agents that started before us register again (and learn our epoch).
    out->publish(troupe::subjects::kSysHello, "{\"epoch\":" + std::to_string(lease.epoch()) + "}");
    std::fprintf(stderr, "troupe-scheduler: serving on %s\n",
                 troupe::bus::redact_url(url).c_str());

    while (rc == 0) {
      int sig = wait_signal(stop, std::max(100, lease_ttl_ms / 3));
      if (reconnected.exchange(false))
        out->publish(troupe::subjects::kSysHello,
                     "{\"epoch\":" + std::to_string(lease.epoch()) + "}");
      if (sig == 0 || sig == SIGUSR2) {
        if (sig == 0) {
          int64_t asked = troupe::LeaseGate::steady_ms();
          auto r = lease.renew();
          if (r == troupe::LeaderLease::Renewal::renewed) gate.extend(asked + lease_ttl_ms);
          if (r != troupe::LeaderLease::Renewal::lost) continue;
        }
        // Deposed: another scheduler leads. Stop acting at once (no clean
        // shutdown: that would publish and write as if still leading).
        std::fprintf(stderr, "troupe-scheduler: deposed: %s; exiting\n",
                     sig == SIGUSR2 ? "a snapshot write found another scheduler's revision"
                                    : "another scheduler holds the leader lease");
        std::fflush(stderr);
        std::_Exit(3);
      }
      if (sig != SIGHUP) {
        std::fprintf(stderr, "troupe-scheduler: stopping (signal %d)\n", sig);
        break;
      }
      // Reload: a bad new config is refused and the old one stays.
      std::string text, err;
      if (config.empty()) {
        std::fprintf(stderr, "troupe-scheduler: SIGHUP without --config: nothing to reload\n");
      } else if (!read_config(config, text, err)) {
        std::fprintf(stderr, "troupe-scheduler: config reload refused, keeping the old one: %s\n",
                     err.c_str());
      } else {
        troupe::apply_config(w, text);
        std::fprintf(stderr, "troupe-scheduler: config reloaded from %s\n", config.c_str());
      }
    }
    intake->consumer = nullptr;
    consumer.reset();
    subs.clear();
    troupe::stop_scheduler(w);
    sys.await_all_actors_done();
    opts.history.reset();
    history.reset();  // (before the JetStream context: its thread reads with it)
  }
  opts.store.reset();  // (the last owner is below: its writer needs the KV bucket)
  opts.extra_stats = nullptr;
  store.reset();  // writes what is pending
  lease.release();
  metrics.reset();
  events.reset();
  js.reset();
  out_conn.reset();
  in_conn.reset();
  return rc;
}

// troupe-scheduler: runs the actor system and binds it to NATS.
//   troupe-scheduler --nats URL [--config FILE] [--metrics HOST:PORT]
// Stops cleanly on SIGTERM / SIGINT.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <CLI/CLI.hpp>

#include "actors/policy/config.hpp"
#include "actors/scheduler.hpp"
#include "bus/bridge.hpp"
#include "bus/nats.hpp"
#include "bus/subjects.hpp"
#include "gateway/metrics.hpp"

namespace {

class BusOutbox : public troupe::Outbox {
 public:
  explicit BusOutbox(troupe::bus::Connection& c) : conn_(c) {}
  void send(const std::string& subject, const void* data, size_t size,
            const std::string& reply) override {
    conn_.publish(subject, data, size, reply);
  }

 private:
  troupe::bus::Connection& conn_;
};

class StreamIntake : public troupe::Intake {
 public:
  explicit StreamIntake(troupe::bus::JetStream& js) : js_(js) {}
  void append(const std::string& subject, std::vector<uint8_t> bytes, const std::string& msg_id,
              Done done) override {
    js_.publish_async(subject, bytes.data(), bytes.size(), msg_id, std::move(done));
  }

 private:
  troupe::bus::JetStream& js_;
};

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
  std::string url = std::getenv("TROUPE_NATS") ? std::getenv("TROUPE_NATS") : "nats://127.0.0.1:4222";
  std::string config;
  app.add_option("--nats", url, "NATS server URL (env TROUPE_NATS)");
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
  app.add_option("--policy", policy, "troupe (default) | fifo: strict FIFO, no fair share or backfill (a baseline)")
      ->check(CLI::IsMember({"troupe", "fifo"}));
  int64_t events_max_age_s = 7 * 24 * 3600;
  app.add_option("--events-max-age", events_max_age_s,
                 "seconds job events are kept in the TROUPE_EVENTS stream (troupe history); 0: forever")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--debug-crash", opts.debug_crash,
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
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  troupe::bus::Library lib;
  std::string err;
  troupe::bus::ConnectOptions in_opts, out_opts;
  in_opts.url = out_opts.url = url;
  in_opts.name = "troupe-scheduler-in";
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
  if (!js || !js->ensure_stream({troupe::subjects::kIntakeStream, {troupe::subjects::kIntakeSubjects}}, &err) ||
      !js->ensure_stream({troupe::subjects::kEventsStream, {troupe::subjects::kAllEvents},
                          2 * 60 * 1000, events_max_age_s},
                         &err)) {
    std::fprintf(stderr, "troupe-scheduler: JetStream is required (nats-server -js): %s\n", err.c_str());
    return 1;
  }
  // The metrics collector: its own connection, a projection of events and
  // troupe.sys.* replies (gateway/metrics.hpp).
  std::unique_ptr<troupe::metrics::MetricsCollector> metrics;
  if (!metrics_addr.empty()) {
    troupe::metrics::MetricsCollector::Options mo;
    mo.nats_url = url;
    mo.bind = metrics_addr;
    metrics = troupe::metrics::MetricsCollector::start(mo, &err);
    if (!metrics) {
      std::fprintf(stderr, "troupe-scheduler: %s\n", err.c_str());
      return 1;
    }
    std::fprintf(stderr, "troupe-scheduler: metrics on %s\n", metrics->url().c_str());
  }

  int rc = 0;
  {
    caf::actor_system_config cfg;
    troupe::configure(cfg);
    caf::actor_system sys{cfg};
    auto out = std::make_shared<BusOutbox>(*out_conn);
    auto intake = std::make_shared<StreamIntake>(*js);
    auto w = troupe::start_scheduler(sys, out, intake, opts);
    troupe::apply_config(w, config_text);

    std::vector<troupe::bus::SubscriptionPtr> subs;
    for (const char* s : {troupe::subjects::kAllSubmit, troupe::subjects::kAllStatus,
                          troupe::subjects::kAllCancel, troupe::subjects::kAllLogs,
                          troupe::subjects::kAllJobs, troupe::subjects::kSysNodes,
                          troupe::subjects::kSysStats, troupe::subjects::kAllAgents,
                          troupe::subjects::kAllWhy, troupe::subjects::kSysQueues,
                          troupe::subjects::kSysCordon, troupe::subjects::kSysUncordon,
                          troupe::subjects::kSysDrain, troupe::subjects::kSysDebugCrash}) {
      auto sub = troupe::bus::subscribe_actor(*in_conn, s, w.router);
      if (!sub) {
        std::fprintf(stderr, "troupe-scheduler: cannot subscribe to %s\n", s);
        rc = 1;
      }
      subs.push_back(std::move(sub));
    }
    in_conn->flush();
    // Agents that started before us register again.
    out_conn->publish(troupe::subjects::kSysHello, std::string());
    std::fprintf(stderr, "troupe-scheduler: serving on %s\n", url.c_str());

    while (rc == 0) {
      int sig = 0;
      sigwait(&stop, &sig);
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
    subs.clear();
    troupe::stop_scheduler(w);
    sys.await_all_actors_done();
  }
  metrics.reset();
  js.reset();
  out_conn.reset();
  in_conn.reset();
  return rc;
}

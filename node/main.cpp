// troupe-node's entry point: the thin shell around Agent (or, with --count N,
// around a Fleet of N simulated agents). Parses flags, probes the machine,
// connects to NATS (one connection for subscriptions, one for publishing),
// feeds messages to the Agent/Fleet and waits for SIGTERM/SIGINT with sigwait
// (the signals are blocked in every thread; no handler).
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <vector>

#include "bus/log.hpp"
#include "bus/nats.hpp"
#include "bus/subjects.hpp"
#include "messages/wire.hpp"
#include "node/agent.hpp"
#include "node/cgroup.hpp"
#include "node/fleet.hpp"
#include "node/inventory.hpp"
#include "node/job_dirs.hpp"
#include "node/metrics.hpp"
#include "node/options.hpp"

extern char** environ;

namespace {

using namespace troupe;

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "node";
  return buf;
}

// What a worker inherits from the agent's environment: only the variables a
// program needs to run (PATH, locale, time zone, home, temp dir). Never the
// agent's identity (TROUPE_NATS_CREDS and the rest of TROUPE_*) nor anything
// else it was started with: a job is not trusted (docs/security.md).
// Replies (to a logs request, on the asker's _INBOX_... subject) go out on the
// connection that received the request: NATS allows a node to answer only
// there (its identity's response permission is per connection).
bus::Connection& out_for(const std::string& subject, bus::Connection& pub, bus::Connection& sub) {
  return subject.rfind("_INBOX", 0) == 0 ? sub : pub;
}

std::vector<std::string> own_environment() {
  static constexpr std::string_view kKept[] = {
      "PATH=",   "HOME=", "LANG=",    "LANGUAGE=", "LC_",  "TZ=",
      "TMPDIR=", "USER=", "LOGNAME=", "SHELL=",    "TERM="};
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view v(*e);
    for (auto k : kKept)
      if (v.substr(0, k.size()) == k) {
        out.emplace_back(v);
        break;
      }
  }
  return out;
}

// Waits up to `timeout_ms` for SIGTERM/SIGINT; true when one arrived.
bool wait_signal(const sigset_t& set, int timeout_ms) {
  timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  siginfo_t info;
  int s = ::sigtimedwait(&set, &info, timeout_ms < 0 ? nullptr : &ts);
  if (s > 0) {
    spdlog::info("received signal {}: shutting down", s);
    return true;
  }
  return false;
}

// Connects, retrying every second until it works or a signal arrives.
bus::ConnectionPtr connect(const bus::ConnectOptions& opts, const sigset_t& signals) {
  for (int attempt = 0;; ++attempt) {
    std::string err;
    if (auto c = bus::Connection::open(opts, &err)) return c;
    if (attempt == 0 || attempt % 30 == 0) spdlog::warn("{} (retrying every second)", err);
    if (wait_signal(signals, 1000)) return nullptr;
  }
}

// The publishing connection's options (`name`: its NATS connection name); a
// denied publish or subscription is reported only to on_error: logged with
// its subject.
bus::ConnectOptions connect_options(const node::Options& opt, std::string name) {
  bus::ConnectOptions copts;
  copts.on_error = [](const std::string& e) { spdlog::warn("nats: {}", e); };
  copts.url = opt.nats_url;
  copts.creds_file = opt.creds_file;
  copts.tls_ca = opt.tls_ca;
  copts.name = std::move(name);
  return copts;
}

// --count N > 1: N simulated agents sharing both connections, one wildcard
// subscription and one timer thread.
int run_fleet(const node::Options& opt, node::AgentConfig cfg, const sigset_t& signals) {
  cfg.base_env.clear();  // simulated workers never get an environment
  spdlog::info("fleet: {} simulated nodes {} .. {}, {} GPU(s) of type {} each, state under {}",
               opt.count, node::fleet_node_name(opt.name_prefix, 1, opt.count),
               node::fleet_node_name(opt.name_prefix, opt.count, opt.count),
               cfg.inventory.gpus.size(), cfg.inventory.gpu_type, cfg.state_dir);
  bus::Library library;
  auto copts = connect_options(opt, "troupe-node-fleet-" + opt.name_prefix + "-pub");
  // Every member's reports on one connection: let the client batch writes
  // (fewer syscalls, and fewer TLS records) instead of one write a message.
  copts.send_asap = false;
  // After a reconnect (nats-server restarted), every agent registers again:
  // what it runs and what ended meanwhile (its Exited may have been lost).
  std::atomic<node::Fleet*> live{nullptr};
  copts.on_reconnected = [&live] {
    if (auto* f = live.load()) f->on_message(Inbound(subjects::kSysHello, "", {}));
  };
  bus::ConnectionPtr pub = connect(copts, signals);
  if (!pub) return 0;
  copts.on_reconnected = nullptr;
  copts.name = "troupe-node-fleet-" + opt.name_prefix + "-sub";
  copts.shared_delivery = true;  // one subscription per member (see below)
  bus::ConnectionPtr sub = connect(copts, signals);
  if (!sub) return 0;
  spdlog::info("connected to {}", bus::redact_url(opt.nats_url));

  bus::Connection* pub_raw = pub.get();
  bus::Connection* sub_raw = sub.get();
  node::FleetConfig fc;
  fc.base = std::move(cfg);
  fc.prefix = opt.name_prefix;
  fc.count = opt.count;
  node::Fleet fleet(std::move(fc),
                    [pub_raw, sub_raw](const std::string& subject, const void* data, size_t size) {
                      if (!out_for(subject, *pub_raw, *sub_raw).publish(subject, data, size))
                        spdlog::warn("could not publish on {} (connection closed?)", subject);
                    });
  auto handler = [&fleet](Inbound&& in) { fleet.on_message(in); };
  // With an identity (fleet-<prefix>.creds), NATS lets the fleet subscribe to
  // its own members' subjects only, one by one; an open server takes the
  // wildcard.
  std::vector<bus::SubscriptionPtr> node_subs;
  bool subscribed = true;
  if (opt.creds_file.empty()) {
    node_subs.push_back(sub->subscribe(node::Fleet::node_wildcard(), handler));
  } else {
    for (int i = 1; i <= opt.count; ++i)
      node_subs.push_back(sub->subscribe(
          subjects::scheduler_to_agent(node::fleet_node_name(opt.name_prefix, i, opt.count), ">"),
          handler));
  }
  for (const auto& s : node_subs) subscribed = subscribed && s != nullptr;
  bus::SubscriptionPtr hello_sub = sub->subscribe(subjects::kSysHello, handler);
  if (!subscribed || !hello_sub) {
    spdlog::error("cannot subscribe on {}", opt.nats_url);
    return 1;
  }
  sub->flush();
  fleet.start();
  live = &fleet;
  spdlog::info("fleet of {} nodes registered", fleet.size());

  while (!wait_signal(signals, -1)) {
  }
  live = nullptr;
  node_subs.clear();
  hello_sub.reset();
  fleet.shutdown();
  if (!pub->flush(5000)) spdlog::warn("could not flush the last messages");
  return 0;
}

// The node's metrics, read off what the agent publishes (started, exited,
// heartbeats), so the agent itself needs no metrics code.
void count(metrics::NodeMetrics& m, const std::string& subject, const void* data, size_t size) {
  auto* env = wire::open(static_cast<const uint8_t*>(data), size);
  if (env == nullptr) return;
  if (env->body_as_Started() != nullptr) {
    m.worker_launched();
  } else if (const auto* x = env->body_as_Exited()) {
    m.worker_exited(x->exit_code(), x->signal(), wire::str(x->reason()));
  } else if (const auto* h = env->body_as_Heartbeat()) {
    m.heartbeat_sent();
    m.set_running(h->running() ? static_cast<int>(h->running()->size()) : 0);
  }
  (void)subject;
}

int run(int argc, char** argv, const sigset_t& signals) {
  std::error_code ec;
  auto cwd = std::filesystem::current_path(ec);
  auto env = [](const std::string& k) -> std::optional<std::string> {
    const char* v = std::getenv(k.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
  node::ParseResult parsed = node::parse_options(argc, argv, env, hostname(), cwd.string());
  if (!parsed.options) {
    (parsed.exit_code == 0 ? std::cout : std::cerr) << parsed.message;
    return parsed.exit_code;
  }
  const node::Options& opt = *parsed.options;
  bus::use_daemon_log(
      "troupe-node " +
          (opt.count > 1 ? opt.name_prefix + "-* x" + std::to_string(opt.count) : opt.name),
      opt.log_level);

  std::filesystem::create_directories(opt.state_dir, ec);
  if (ec) {
    spdlog::error("cannot create the state dir {}: {}", opt.state_dir, ec.message());
    return 1;
  }

  node::AgentConfig cfg;
  cfg.name = opt.name;
  cfg.host = opt.host;
  cfg.state_dir = opt.state_dir;
  cfg.simulate = opt.simulate;
  cfg.grace_s = opt.grace_s;
  cfg.log_max_bytes = opt.job_log_max_mb * 1024 * 1024;
  cfg.disk_max_bytes = opt.job_disk_max_mb * 1024 * 1024;
  cfg.disk_max_files = opt.job_disk_max_files;
  if (opt.job_disk_max_mb < 0 || opt.job_disk_max_files < 0) {
    // A quarter of the state folder's file system (0: unknown, no limit).
    const auto [bytes, files] = node::quarter_of_file_system(opt.state_dir);
    if (opt.job_disk_max_mb < 0) cfg.disk_max_bytes = bytes;
    if (opt.job_disk_max_files < 0) cfg.disk_max_files = files;
  }
  // -1 stays: a quarter of the file system each checkpoint dir is on.
  cfg.checkpoint_max_bytes =
      opt.job_checkpoint_max_mb < 0 ? -1 : opt.job_checkpoint_max_mb * 1024 * 1024;
  cfg.checkpoint_max_files = opt.job_checkpoint_max_files;
  cfg.dir_keep_ms = opt.job_dir_keep_s * 1000;
  cfg.dir_check_ms = opt.job_dir_check_ms;
  cfg.dir_gc_percent = opt.job_dir_gc_percent;
  cfg.heartbeat_ms = opt.heartbeat_ms;
  cfg.inventory = node::build_inventory(opt, node::probe_machine(opt));
  cfg.base_env = own_environment();
  cfg.isolation = opt.isolation;
  const bool root = ::geteuid() == 0;
  cfg.isolation.enabled =
      !opt.simulate && (opt.isolation_mode == "on" || (opt.isolation_mode == "auto" && root));
  if (cfg.isolation.enabled && !root) {
    spdlog::error(
        "--isolation on needs root (to run jobs as their team's user in cgroups of "
        "their own); run as root, or pass --isolation off");
    return 2;
  }
  if (cfg.isolation.default_memory_mb == 0)
    cfg.isolation.default_memory_mb = cfg.inventory.memory_mb;
  if (auto why = node::check_isolation(cfg.isolation); !why.empty()) {
    spdlog::error("{}", why);
    return 2;
  }
  if (cfg.isolation.enabled) {
    // Job users must pass through to their folders under the state dir. A
    // state dir under a private home (/root is 0700) cannot be reached: use
    // one they can (/var/lib/troupe/nodes/<name>) rather than fail every job.
    for (std::filesystem::path p = cfg.state_dir; p.has_parent_path() && p != p.root_path();
         p = p.parent_path()) {
      struct stat st {};
      auto parent = p.parent_path();
      if (::stat(parent.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0) {
        std::string moved = "/var/lib/troupe/nodes/" + cfg.name;
        spdlog::warn(
            "job users cannot reach the state dir {} ({} is not o+x): jobs' folders "
            "and logs go to {} instead",
            cfg.state_dir, parent.string(), moved);
        cfg.state_dir = moved;
        std::filesystem::create_directories(moved, ec);
        break;
      }
    }
  }
  if (cfg.isolation.enabled && cfg.isolation.io_max_mbps > 0) {
    std::string why = node::io_unsupported(node::detect_cgroups(cfg.isolation.cgroup_root));
    if (!why.empty()) {
      spdlog::error("--job-io-max-mbps: this host cannot limit a job's disk bandwidth: {}", why);
      return 2;
    }
    auto disk = node::disk_of(cfg.state_dir, &why);
    if (!disk) {
      spdlog::error("--job-io-max-mbps: cannot limit the disk of the state folder: {}", why);
      return 2;
    }
    cfg.isolation.io_disk_major = disk->major;
    cfg.isolation.io_disk_minor = disk->minor;
    spdlog::info("each worker's disk bandwidth on {}:{} (the state folder's disk): {} MiB/s",
                 disk->major, disk->minor, cfg.isolation.io_max_mbps);
  } else if (cfg.isolation.io_max_mbps > 0) {
    spdlog::warn("--job-io-max-mbps needs isolation (cgroups): not applied");
  }
  if (!cfg.simulate && !cfg.isolation.enabled)
    spdlog::warn(
        "isolation is off: jobs run as this agent's user, in its cgroup, with no limits "
        "(docs/security.md)");
  cfg.pool = opt.pool;  // a fleet's members copy both from cfg
  cfg.rack = opt.rack;
  cfg.mps = opt.mps;
  if (opt.count > 1) return run_fleet(opt, std::move(cfg), signals);
  spdlog::info("node {}: {} GPU(s) of type {}, {} CPUs, {} MB, state in {}{}", cfg.name,
               cfg.inventory.gpus.size(), cfg.inventory.gpu_type, cfg.inventory.cpus,
               cfg.inventory.memory_mb, cfg.state_dir, cfg.simulate ? ", simulating" : "");

  bus::Library library;
  auto copts = connect_options(opt, "troupe-node-" + opt.name + "-pub");
  // After a reconnect (nats-server restarted) the agent registers again: what
  // it runs and what ended meanwhile (an Exited published then may be lost).
  std::atomic<node::Agent*> live{nullptr};
  copts.on_reconnected = [&live] {
    if (auto* a = live.load()) a->publish_register();
  };
  bus::ConnectionPtr pub = connect(copts, signals);
  if (!pub) return 0;
  copts.on_reconnected = nullptr;
  copts.name = "troupe-node-" + opt.name + "-sub";
  bus::ConnectionPtr sub = connect(copts, signals);
  if (!sub) return 0;
  spdlog::info("connected to {}", bus::redact_url(opt.nats_url));

  std::unique_ptr<metrics::NodeMetrics> meter;
  if (!opt.metrics.empty()) {
    std::string err;
    metrics::NodeMetrics::Options mo{opt.metrics, opt.name};
    for (const auto& g : cfg.inventory.gpus) mo.gpus.push_back(g.index);
    meter = metrics::NodeMetrics::start(mo, &err);
    if (!meter) {
      spdlog::error("{}", err);
      return 2;
    }
    std::cerr << "troupe-node: metrics on " << meter->url() << std::endl;
  }

  bus::Connection* pub_raw = pub.get();
  bus::Connection* sub_raw = sub.get();
  metrics::NodeMetrics* meter_raw = meter.get();
  node::Agent agent(cfg, [pub_raw, sub_raw, meter_raw](const std::string& subject, const void* data,
                                                       size_t size) {
    if (meter_raw != nullptr) {
      count(*meter_raw, subject, data, size);
      meter_raw->observe(data, size);
    }
    if (!out_for(subject, *pub_raw, *sub_raw).publish(subject, data, size))
      spdlog::warn("could not publish on {} (connection closed?)", subject);
  });

  // The agent's own counters on /metrics, read until the agent goes.
  struct CountsFrom {
    metrics::NodeMetrics* meter;
    ~CountsFrom() {
      if (meter != nullptr) meter->count_from(nullptr);
    }
  } counts_from{meter_raw};
  if (meter_raw != nullptr)
    meter_raw->count_from([&agent] { return node::named(agent.counters()); });

  auto handler = [&agent, meter_raw](Inbound&& in) {
    if (meter_raw != nullptr) meter_raw->observe(in.data.data(), in.data.size());  // Launch
    agent.on_message(in);
  };
  bus::SubscriptionPtr node_sub =
      sub->subscribe(subjects::scheduler_to_agent(opt.name, ">"), handler);
  bus::SubscriptionPtr hello_sub = sub->subscribe(subjects::kSysHello, handler);
  if (!node_sub || !hello_sub) {
    spdlog::error("cannot subscribe on {}", opt.nats_url);
    return 1;
  }
  sub->flush();
  agent.start();
  live = &agent;

  while (!wait_signal(signals, -1)) {
  }

  // Stop taking messages, stop the workers (their Exited go out), then close.
  live = nullptr;
  node_sub.reset();
  hello_sub.reset();
  agent.shutdown();
  if (!pub->flush(2000)) spdlog::warn("could not flush the last messages");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Block the shutdown signals in every thread (threads inherit the mask);
  // main() takes them with sigtimedwait. Workers get a clean mask in the child.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  try {
    return run(argc, argv, signals);
  } catch (const std::exception& e) {
    spdlog::critical("fatal: {}", e.what());
    return 1;
  }
}

// The process shell of troupe-scheduler, first part: what it is told (the
// command line), the signals it stops and reloads on, and its bus — the two
// NATS connections, JetStream, the streams, the KV buckets and the event
// publisher, opened once and closed in the right order. No actor here.
// Leadership (shell/leadership.hpp), restore (shell/restore.hpp) and the bus
// ports the actors talk through (shell/bus_ports.hpp) build on it.
#pragma once

#include <signal.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "actors/policy/config.hpp"
#include "actors/ports.hpp"
#include "actors/shell/store.hpp"
#include "bus/nats.hpp"

namespace troupe::shell {

// The command line (troupe-scheduler --help).
struct Options {
  std::string url;  // --nats, one URL or several comma-separated
  std::string creds, tls_ca;
  std::string config;       // --config: the cluster config file ("" = open config)
  std::string config_text;  // its text, as read and checked at start
  std::string metrics_addr;
  int64_t events_max_age_s = 7 * 24 * 3600;
  int64_t events_max_bytes = 0;  // 0: sized to the storage (events_bytes_for)
  // Workers' output shipped by the agents (one stream per team,
  // TROUPE_LOGS_<team>): kept this long and at most this many bytes (0: a
  // quarter of the events' bound) unless the config's `logs:` or
  // `default_logs:` says otherwise (ClusterConfig::logs_of).
  int64_t logs_max_age_s = 7 * 24 * 3600;
  int64_t logs_max_bytes = 0;
  std::string snapshots = "coalesced";
  int flush_ms = 20;
  int lease_ttl_ms = 3000;
  int threads = 2;                 // --threads: CAF worker threads
  std::string log_level = "info";  // --log-level (bus/log.hpp)
  // --replicas: copies of every stream and KV bucket in a NATS cluster
  // (JetStream R1/R3/R5); existing ones are scaled to it at start.
  int replicas = 1;
  // A shard (--shard, or --pools naming the pools it takes at once): one of
  // several schedulers acting at once, each owning some pools
  // (actors/policy/shards.hpp, shell/leadership.hpp).
  bool shard = false;
  std::vector<std::string> pools;
  SchedulerOptions scheduler;  // what the actors are started with
};

// Parses the command line into `o` and sets up the log (bus/log.hpp).
// Returns -1 to go on, or the exit code (0 after --help, 2 on a bad argument
// or an unreadable config).
int parse_options(int argc, char** argv, Options& o);

// Reads and checks a config file; false (and why) when it is unusable.
bool read_config(const std::string& path, std::string& text, std::string& err);

// SIGTERM, SIGINT, SIGHUP (reload) and SIGUSR2 (raised by the snapshot
// store when a write finds this process deposed), blocked in every thread
// from construction on and waited for by the main thread.
class StopSignals {
 public:
  StopSignals();
  // Waits up to `ms` for one of them; 0 on timeout.
  int wait(int ms) const;

 private:
  sigset_t set_;
};

// Workers' output, one stream per team (subjects::logs_stream(team), on
// subjects::team_log_chunks(team)), with the team's retention
// (ClusterConfig::logs_of over --logs-max-age, --logs-max-bytes). A team's
// stream is made (or updated) at most once per process and config: the
// configured teams' when the config is applied, any other team's before the
// first Launch for it goes out (an open config takes any team). Thread-safe.
class LogStreams {
 public:
  // `auto_bytes`: the bound of a team whose max_bytes resolves to 0 (the
  // automatic one; 0: none), halved while the server cannot reserve it.
  LogStreams(bus::JetStream& js, const policy::LogLimits& flags, int64_t auto_bytes,
             int replicas = 1)
      : js_(js), flags_(flags), auto_bytes_(auto_bytes), replicas_(replicas) {}
  // Takes the config (from now on, and again for every team) and makes the
  // streams of its teams now. Blocks for a JetStream request per team.
  void configure(const policy::ClusterConfig& cfg);
  // Makes the team's stream unless this process already tried since the last
  // configure(): blocks for one JetStream request the first time only. A
  // failure is logged (the team's logs then come from its agents only).
  void ensure(const std::string& team);
  // Every message the scheduler publishes passes here first: a Launch (to
  // troupe.sys.node.<node>.launch) ensures its team's stream.
  void before_send(const std::string& subject, const void* data, size_t size);

 private:
  // The one place a team's logs stream is made; false (logged) when it is not.
  bool make(const std::string& team, const policy::LogLimits& l);
  bus::JetStream& js_;
  const policy::LogLimits flags_;
  const int64_t auto_bytes_;
  const int replicas_;
  std::mutex mu_;
  policy::ClusterConfig cfg_ = policy::open_config();
  std::set<std::string> tried_;  // teams whose stream this process made, or failed to
};

// The scheduler's bus. Separate connections for receiving and publishing
// (a connection that both publishes fast and subscribes can be cut as a slow
// consumer).
struct Bus {
  bus::Library lib;
  bus::ConnectionPtr in, out;
  // A shard: `in` delivers on the client library's shared thread, also the
  // subscription per node of its pools (shell/bus_ports.hpp BusAgentWatch).
  bool sharded = false;
  bus::JetStreamPtr js;
  bus::KeyValuePtr state_kv, leader_kv;
  std::unique_ptr<EventPublisher> events;  // job events into TROUPE_EVENTS
  bool logs_stream = false;  // workers' output is kept per team (else it comes from agents only)
  std::unique_ptr<LogStreams> logs;  // the teams' logs streams (set with logs_stream)
  // Set (on a NATS thread) when `in` reconnected: the agents are asked to
  // register again (what they run, what ended meanwhile).
  std::atomic<bool> reconnected{false};

  // Connects, makes sure the streams and buckets exist. Null and `err` when
  // anything is missing (JetStream is required).
  static std::unique_ptr<Bus> open(const Options& o, std::string* err);
  ~Bus();
};

}  // namespace troupe::shell

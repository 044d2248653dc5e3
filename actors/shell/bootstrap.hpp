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
#include <string>

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
  // TROUPE_LOGS (workers' output shipped by the agents): kept this long and
  // at most this many bytes (0: a quarter of the events' bound).
  int64_t logs_max_age_s = 7 * 24 * 3600;
  int64_t logs_max_bytes = 0;
  std::string snapshots = "coalesced";
  int flush_ms = 20;
  int lease_ttl_ms = 3000;
  std::string log_level = "info";  // --log-level (bus/log.hpp)
  SchedulerOptions scheduler;      // what the actors are started with
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

// The scheduler's bus. Separate connections for receiving and publishing
// (a connection that both publishes fast and subscribes can be cut as a slow
// consumer).
struct Bus {
  bus::Library lib;
  bus::ConnectionPtr in, out;
  bus::JetStreamPtr js;
  bus::KeyValuePtr state_kv, leader_kv;
  std::unique_ptr<EventPublisher> events;  // job events into TROUPE_EVENTS
  bool logs_stream = false;                // TROUPE_LOGS exists (else logs come from agents only)
  // Set (on a NATS thread) when `in` reconnected: the agents are asked to
  // register again (what they run, what ended meanwhile).
  std::atomic<bool> reconnected{false};

  // Connects, makes sure the streams and buckets exist. Null and `err` when
  // anything is missing (JetStream is required).
  static std::unique_ptr<Bus> open(const Options& o, std::string* err);
  ~Bus();
};

}  // namespace troupe::shell

// troupe-load's command line: the load run (default) and `replay TRACE...`,
// parsed (CLI11) into plain structs. Pure: no environment, no I/O.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "load/mix.hpp"
#include "load/trace.hpp"

namespace troupe::load {

struct LoadOptions {
  std::string nats = "nats://127.0.0.1:4222";
  size_t jobs = 1000;
  double rate = 0;  // submissions per second; 0: as fast as possible
  std::string mix_text = "1gpu:0.8,gang2x4:0.1,8gpu:0.1";
  std::vector<MixEntry> mix;
  std::vector<std::string> teams{"load"};
  double duration_s = 0.1;  // simulated run time of every job
  double deadline_s = 300;  // wait for terminal states at most this long after the last submit
  size_t max_inflight = 2000;  // submissions awaiting their reply at once
  unsigned long long seed = 1;
  std::string gpu_type;
  bool json = false;
  std::optional<int> scheduler_pid;
  bool progress = true;  // still only when stderr is a TTY
};

struct ReplayOptions {
  std::string nats = "nats://127.0.0.1:4222";
  std::vector<std::string> traces;
  TraceFormat format = TraceFormat::tiresias;
  double speedup = 1;
  int nodes = 16;
  int gpus_per_node = 8;
  size_t limit = 0;  // 0: every job
  bool json = false;
  bool no_fleet = false;
  std::string fleet_prefix;  // default: rp<pid>
  int fleet_heartbeat_ms = 1000;
  std::string gpu_type = "sim";
  // --policy as given ("" when not): one policy, or "A,B" to run both.
  std::string policy;
  // The policies to run, in order: --policy split at commas; --compare makes
  // it {"troupe", "fifo"}. Empty: one run against whatever scheduler is there.
  std::vector<std::string> policies;
  // Start an own nats-server and troupe-scheduler --policy P for each run
  // (implied by more than one policy).
  bool self_host = false;
  bool nats_given = false;   // --nats on the command line
  std::string nats_server;   // path of nats-server ("" finds it)
  std::string scheduler_config;  // troupe-scheduler --config FILE when self-hosting
  double deadline_s = 0;     // 0: derived from the trace
  double min_duration_s = 0; // simulated durations below this are raised to it
  std::optional<int> scheduler_pid;
  size_t max_inflight = 2000;
  bool progress = true;
};

struct Command {
  enum Kind { run_load, run_replay, exit_now } kind = exit_now;
  LoadOptions load;
  ReplayOptions replay;
  int exit_code = 0;     // with exit_now
  std::string message;   // with exit_now: help or error text
};

// `env_nats` is $TROUPE_NATS (the default of --nats) when set.
Command parse_command_line(int argc, const char* const* argv,
                           const std::optional<std::string>& env_nats);

}  // namespace troupe::load

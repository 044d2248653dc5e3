// troupe-load's command line: the load run (default), `replay TRACE...` and
// `simulate TRACE...` (the trace in virtual time against the pure policy),
// parsed (CLI11) into plain structs. Pure: the environment comes in as
// `Environment`; the only I/O is CLI11's checks that named files exist.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "load/mix.hpp"
#include "load/trace.hpp"

namespace troupe::load {

// Who troupe-load is on the bus (docs/security.md, docs/load.md).
struct IdentityOptions {
  // --creds FILE (default $TROUPE_NATS_CREDS): without --creds-dir, the one
  // identity of every connection; with it, the identity of the requests
  // only an admin may make (troupe.sys.*). "" for none.
  std::string creds;
  // --tls-ca FILE (default $TROUPE_NATS_CA, then <creds_dir>/ca.pem when it
  // exists: effective_tls_ca). "" for plain TCP.
  std::string tls_ca;
  // --creds-dir DIR: submit as each team with DIR/team-<t>.creds. "" for none.
  std::string creds_dir;
};

// DIR/team-<team>.creds.
std::string team_creds_path(const std::string& creds_dir, const std::string& team);
// The CA bundle to trust: `id.tls_ca` when set, else <creds_dir>/ca.pem when
// there is a creds dir and `exists` says that file is there, else "".
std::string effective_tls_ca(const IdentityOptions& id,
                             const std::function<bool(const std::string&)>& exists);

// Parses --fleet TYPE:NxG[,TYPE:NxG...] (e.g. "a100:40x8,t4:100x2": 40 nodes
// of 8 a100 GPUs, 100 nodes of 2 t4 GPUs). TYPE is a subject token (it is part
// of the node names); N is 1..1000000 and G 1..1024, whole numbers; a type
// appears once. nullopt, with `error` saying why, when the text is not that.
std::optional<std::vector<FleetGroup>> parse_fleet(const std::string& text, std::string* error);

struct LoadOptions {
  std::string nats = "nats://127.0.0.1:4222";
  IdentityOptions identity;
  size_t jobs = 1000;
  double rate = 0;  // submissions per second; 0: as fast as possible
  std::string mix_text = "1gpu:0.8,gang2x4:0.1,8gpu:0.1";
  std::vector<MixEntry> mix;
  std::vector<std::string> teams{"load"};
  double duration_s = 0.1;     // simulated run time of every job
  double deadline_s = 300;     // wait for terminal states at most this long after the last submit
  size_t max_inflight = 2000;  // submissions awaiting their reply at once
  unsigned long long seed = 1;
  std::string gpu_type;
  std::string pool;     // --pool: the spec's pool, and submissions addressed to it
  std::string command;  // --command: what each job runs (sh -c), for real agents
  bool json = false;
  std::optional<int> scheduler_pid;
  bool progress = true;  // still only when stderr is a TTY
};

struct ReplayOptions {
  std::string nats = "nats://127.0.0.1:4222";
  // Unused when self-hosting (its own nats-server is open): explicit flags
  // are refused there, the environment's defaults dropped.
  IdentityOptions identity;
  std::vector<std::string> traces;
  TraceFormat format = TraceFormat::tiresias;
  double speedup = 1;
  // With --fleet: the total nodes and the largest GPUs per node of its
  // groups (the replay itself reads `fleet`).
  int nodes = 16;
  int gpus_per_node = 8;
  // The fleet, one group per troupe-node process: --fleet when given
  // (`fleet_given`), else the one group {gpu_type, nodes, gpus_per_node}.
  // Sizing (too wide, --skip-idle, the default deadline) uses these groups.
  std::vector<FleetGroup> fleet;
  bool fleet_given = false;
  // --ignore-priority: submit every job in the default class, whatever the
  // trace's priority columns say.
  bool ignore_priority = false;
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
  bool nats_given = false;       // --nats on the command line
  std::string nats_server;       // path of nats-server ("" finds it)
  std::string scheduler_config;  // troupe-scheduler --config FILE when self-hosting
  double deadline_s = 0;         // 0: derived from the trace
  double min_duration_s = 0;     // simulated durations below this are raised to it
  // max_runtime_s of each job: this x its trace duration, / speedup
  // (runtime_limit_s in load/jobspec.hpp).
  double runtime_limit_factor = 2;
  // --skip-idle: shorten idle stretches of the trace longer than idle_gap_s
  // (trace seconds) to idle_gap_s (skip_idle in load/trace.hpp).
  bool skip_idle = false;
  double idle_gap_s = 3600;
  std::optional<int> scheduler_pid;
  size_t max_inflight = 2000;
  bool progress = true;
  // simulate only: recorded in the report (the simulation has no randomness),
  // and the allocation sample period in trace seconds (0: automatic).
  unsigned long long seed = 1;
  double sample_s = 0;
  bool resume_on_preempt = false;  // SimulateOptions::resume_on_preempt
};

struct Command {
  enum Kind { run_load, run_replay, run_simulate, exit_now } kind = exit_now;
  LoadOptions load;
  ReplayOptions replay;  // replay, and simulate (its trace, fleet and policy options)
  int exit_code = 0;     // with exit_now
  std::string message;   // with exit_now: help or error text
};

// The environment variables that give options their defaults, when set.
struct Environment {
  std::optional<std::string> nats;    // $TROUPE_NATS: --nats
  std::optional<std::string> creds;   // $TROUPE_NATS_CREDS: --creds
  std::optional<std::string> tls_ca;  // $TROUPE_NATS_CA: --tls-ca
};

Command parse_command_line(int argc, const char* const* argv, const Environment& env);

}  // namespace troupe::load

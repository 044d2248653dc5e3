// The JSON job specs troupe-load submits: simulated jobs (run by
// `troupe-node --simulate`, which ends each worker after
// TROUPE_SIM_DURATION_S seconds). Pure.
#pragma once

#include <string>

namespace troupe::load {

struct SimJob {
  std::string team;
  std::string name;
  int workers = 1;
  int gpus_per_worker = 0;
  double duration_s = 0.1;      // TROUPE_SIM_DURATION_S
  long long max_runtime_s = 0;  // 0: default_max_runtime_s(duration_s)
  std::string gpu_type;         // empty: any
  std::string pool;             // empty: the pool of gpu_type
  std::string priority;         // priority class (high, normal, low); empty: the default
  // What the job runs. Empty: `troupe-sim <name>`, which a --simulate agent
  // "runs" for duration_s and real agents cannot execute (exit 127); else
  // `sh -c <command>` (real agents; TROUPE_SIM_DURATION_S is in its env).
  std::string command;
};

// A max_runtime_s that a healthy simulated run never reaches, but that stops
// a stuck one: 2 x duration + 60 s, rounded up.
long long default_max_runtime_s(double duration_s);

// max_runtime_s of a replayed job: `factor` x its trace duration, in trace
// time, scaled to wall time (/ speedup), with no fixed margin; rounded up to
// whole seconds, at least 1. When the simulated run was raised to
// `min_duration_s` (wall), the limit is `factor` x that instead, so that a
// raised run is not killed. A factor or speedup that is not positive counts
// as 1.
long long runtime_limit_s(double trace_duration_s, double factor, double speedup,
                          double min_duration_s = 0);

// "0.1" style decimal text of a duration (at most 6 decimals, no exponent).
std::string duration_text(double seconds);

// The job spec as JSON (protobuf JSON field names, docs/api.md).
std::string sim_job_json(const SimJob& job);

}  // namespace troupe::load

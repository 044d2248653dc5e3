// A replay's (or simulation's) plan: the traces read, merged and ordered, each
// job's fit on the fleet, and the counts the report's config gives. Shared by
// troupe-load replay (load/replay.cpp) and simulate (load/simulate.hpp).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "load/options.hpp"
#include "load/report.hpp"
#include "load/trace.hpp"

namespace troupe::load {

// The trace, read once, for every run.
struct Plan {
  std::vector<TraceJob> runnable;
  std::vector<FleetFit> fits;  // fits[i]: how runnable[i] is submitted
  size_t trace_jobs = 0, skipped_rows = 0, too_wide = 0, type_missing = 0, typed = 0;
  size_t priority_unknown = 0;
  std::vector<std::string> priority_columns;  // "file: column", of the files that have one
  size_t by_priority_high = 0, by_priority_normal = 0, by_priority_low = 0, by_priority_none = 0;
  size_t zero_gpu_rows = 0, bad_rows = 0, gpus_rounded = 0, censored = 0;
  std::vector<std::string> bad_lines;  // "file:line", the first few of each file
  IdleSkip idle;
  double last_arrival = 0, deadline_s = 0;
};

// The fleet's groups: --fleet, else the one group of --nodes, --gpus-per-node
// and --gpu-type.
std::vector<FleetGroup> groups_of(const ReplayOptions& opt);
Json fleet_json(const std::vector<FleetGroup>& groups);

// Reads, merges and orders the traces; 0, or the exit code (2) after saying why.
int make_plan(const ReplayOptions& opt, Plan& plan, std::ostream& err);

// The report's config fields that come from the options and the plan (the
// trace, the fleet, the counts of rows and jobs left out).
Json plan_config_json(const ReplayOptions& opt, const Plan& plan);
// Its part that tells what was read of the trace (counts of rows kept and
// left out, priorities, censored jobs, idle gaps): in both commands' config.
Json plan_trace_json(const ReplayOptions& opt, const Plan& plan);

}  // namespace troupe::load

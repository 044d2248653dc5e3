// troupe-load simulate: a trace replayed in virtual time against the pure
// scheduling policy (actors/policy: the round, admission, fair share, las
// bands and promotion, backfill holds, preemption, the fifo baselines), with
// no NATS, no actors and no processes. Event-driven: jobs arrive at their
// trace times; a round runs at each arrival and completion, at each las
// promotion and each time a running las job's service crosses a band
// threshold; a placed job ends at its start + trace duration (failed at its
// runtime limit when that comes first); a victim of the round's preemption
// plan stops at once (as a simulated worker does), loses the work of its
// attempt and waits in line again, and runs its whole duration again when
// placed (simulated jobs have no checkpoints; --resume-on-preempt: it runs
// only what is left). Deterministic: no clocks, no
// randomness; the same input gives the same report. The report has the keys
// of replay_report (load/report.hpp) with exact trace times (speedup 1: the
// wall figures are the trace figures), so compare_report and the tables work
// on it. Unit tests: tests/unit/load_simulate_test.cpp.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "actors/policy/config.hpp"
#include "load/options.hpp"
#include "load/report.hpp"
#include "load/trace.hpp"

namespace troupe::load {

struct SimulateOptions {
  std::string policy = "troupe";  // troupe | fifo | fifo-backfill
  // The cluster config (teams, pools, quotas, order las, las bands, classes,
  // preemption budget); the open config by default.
  policy::ClusterConfig config = policy::open_config();
  std::vector<FleetGroup> fleet;
  // A job's max_runtime_s: runtime_limit_s(duration, factor) (load/jobspec.hpp).
  double runtime_limit_factor = 2;
  // Allocation samples every this many trace seconds (0: the span / 20000,
  // at least 1 s).
  double sample_s = 0;
  // How many jobs of each team's line (per pool) a round sees, and how many
  // grants a team may hold in flight: the team queue's and the arbiter's
  // values (kDemandDepth, kMaxInflight).
  int demand_depth = 16;
  int max_inflight = 256;
  // A preempted job checkpoints as it stops and its next attempt runs only
  // what is left (as Tiresias's and Muri's simulators assume); without it
  // (the default, what `troupe-node --simulate` does) the attempt's work is
  // lost and the next attempt runs the whole duration again.
  bool resume_on_preempt = false;
};

// Runs the jobs (ordered by arrival, first at 0; fits[i]: how jobs[i] is
// shaped and which GPU type it asks for) on the fleet and returns the report
// ("mode": "simulate"), with `config` as its config plus the policy and the
// simulation's own figures (`simulation`: events, rounds, samples).
Json simulate(const std::vector<TraceJob>& jobs, const std::vector<FleetFit>& fits,
              const SimulateOptions& opt, const Json& config);

// troupe-load simulate TRACE...: reads the traces (load/plan.hpp), runs one
// simulation per policy of opt.policies (troupe when none), prints the report
// (or, for two, the compare report). 0 when every job ended; 1 when some
// never could; 2 for bad input.
int run_simulate(const ReplayOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace troupe::load

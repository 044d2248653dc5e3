// troupe-load's two runs, wired to NATS, /proc and child processes: the load
// run (submit N simulated jobs of a mix, wait for them, report) and the trace
// replay (start a simulated fleet, submit a trace's jobs at their scaled
// arrival times, sample GPU allocation, report). Each returns the exit code:
// 0 when every job was acknowledged and ended before the deadline, 1
// otherwise (the report is printed either way), 2 for bad input.
#pragma once

#include <ostream>

#include "load/options.hpp"

namespace troupe::load {

int run_load(const LoadOptions& opt, std::ostream& out, std::ostream& err);
int run_replay(const ReplayOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace troupe::load

// Least attained service (Tiresias's discretized 2D-LAS, NSDI'19) for teams
// with `order: las`: a job's band is how many of the cluster's thresholds
// (`las.thresholds_gpu_s`, policy::LasCfg) its GPU-seconds so far have crossed. Within a
// priority class a lower band goes first (short jobs finish first without a
// runtime estimate); a waiting job is promoted to band 0 once it has waited
// `las.promote_after_s` (the starvation guard); a running job whose service
// crossed into a band above a waiting job's of its own team may be preempted
// for it (policy/preemption.hpp). Pure.
// Unit tests: tests/unit/policy_las_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

namespace troupe::policy {

// The band of `attained_gpu_s`: how many thresholds it reached (0 with none).
int las_band(double attained_gpu_s, const std::vector<double>& thresholds);

// Where a job waiting since `queued_ms` stands at `now_ms`: its band, and when
// the starvation guard moves it to band 0 (0: never, or already there).
struct WaitingBand {
  int band = 0;
  int64_t promote_at_ms = 0;
};
WaitingBand waiting_band(double attained_gpu_s, const std::vector<double>& thresholds,
                         int64_t promote_after_s, int64_t queued_ms, int64_t now_ms);

// GPU-seconds a running attempt has added since `started_ms` (all ranks).
double attempt_gpu_s(int gpus_per_worker, int workers, int64_t started_ms, int64_t now_ms);

}  // namespace troupe::policy

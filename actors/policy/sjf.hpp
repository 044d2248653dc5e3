// Shortest declared job first, for teams with `order: sjf`: a waiting job's
// band is its declared work, max_runtime_s x all its GPUs, in bands that
// double from one GPU-second (band 0: up to 1 GPU-second, 1: up to 2, 2: up
// to 4, ...: a 1-GPU hour is band 12); a job without max_runtime_s is in the
// last band. Within a priority class a lower band goes first (the queue
// key's band, as `order: las`), and a job waiting `sjf.promote_after_s`
// since its submit moves to band 0 (the starvation guard).
// Nothing is preempted for it: the band is known at submit and never grows.
// Like Slurm's job-size and age factors and its backfill, it trusts the
// user's time limit; docs/scheduling.md says what a poor limit costs. Pure.
// Unit tests: tests/unit/policy_sjf_test.cpp.
#pragma once

#include <cstdint>
#include <string>

namespace troupe::policy {

// The band of a job with no max_runtime_s (or none that can be read).
inline constexpr int kSjfUnknownBand = 48;

// The band of `max_runtime_s` x `gpus` (all workers' GPUs; a job with none
// counts one): 0 up to 1 GPU-second, then one more per doubling, at most
// kSjfUnknownBand - 1; kSjfUnknownBand when max_runtime_s <= 0.
int sjf_band(int64_t max_runtime_s, int64_t gpus);

// What band `band` means, for `troupe why`: "band 12: declared work up to
// 4096 GPU-seconds"; the last: "band 48: no max_runtime_s, the last band".
std::string sjf_band_text(int band);

}  // namespace troupe::policy

// Order between teams in one pool, and quota admission. Pure.
//   1. teams below their guarantee first (they are owed capacity);
//   2. then weighted dominant-resource share (DRF over GPUs, CPUs, memory of
//      the pool), lowest first;
//   3. then name, for determinism.
// Work placed beyond a team's guarantee is borrowed (reclaimable later); a
// team never goes beyond its hard limit, nor beyond its guarantee unless it
// may borrow. Unit tests: tests/unit/policy_fair_share_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::policy {

struct Usage {
  int gpus = 0;  // whole GPUs
  int cpus = 0;
  int64_t memory_mb = 0;
  // Shared GPUs: the parts shared workers hold, in thousandths of a GPU
  // (policy::shared_milli: memory asked / the GPU's memory).
  int64_t shared_milli = 0;
};
// Whole and shared GPUs together, in thousandths of a GPU.
inline int64_t gpu_milli(const Usage& u) {
  return int64_t{u.gpus} * 1000 + u.shared_milli;
}
// Thousandths of a GPU as a user reads them: "3", "2.25".
std::string gpus_text(int64_t milli);

struct PoolTotals {
  int gpus = 0;
  int cpus = 0;
  int64_t memory_mb = 0;
};

struct TeamStanding {
  std::string team;
  double weight = 1.0;
  int guaranteed = 0;
  int limit = -1;  // -1: none
  bool borrow = true;
  Usage used;
};

// max over resources of used / total (0 when the pool is empty).
double dominant_share(const Usage& used, const PoolTotals& totals);
// dominant_share / weight.
double weighted_share(const TeamStanding& t, const PoolTotals& totals);
bool below_guarantee(const TeamStanding& t);

// Indices of `teams` in scheduling order.
std::vector<size_t> team_order(const std::vector<TeamStanding>& teams, const PoolTotals& totals);

struct QuotaVerdict {
  bool ok = false;
  bool borrowed = false;  // part of it lies beyond the guarantee
  std::string reason;     // when !ok, as a user reads it
};

// Whether the team may take `gpus` more GPUs in this pool (`milli`: in
// thousandths of a GPU, for shared workers).
QuotaVerdict admit_quota(const TeamStanding& t, int gpus);
QuotaVerdict admit_quota_milli(const TeamStanding& t, int64_t milli);

}  // namespace troupe::policy

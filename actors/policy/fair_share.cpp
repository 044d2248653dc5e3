#include "actors/policy/fair_share.hpp"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace troupe::policy {

double dominant_share(const Usage& u, const PoolTotals& t) {
  double s = 0;
  if (t.gpus > 0) s = std::max(s, static_cast<double>(u.gpus) / t.gpus);
  if (t.cpus > 0) s = std::max(s, static_cast<double>(u.cpus) / t.cpus);
  if (t.memory_mb > 0) s = std::max(s, static_cast<double>(u.memory_mb) / static_cast<double>(t.memory_mb));
  return s;
}

double weighted_share(const TeamStanding& t, const PoolTotals& totals) {
  return dominant_share(t.used, totals) / (t.weight > 0 ? t.weight : 1.0);
}

bool below_guarantee(const TeamStanding& t) { return t.used.gpus < t.guaranteed; }

std::vector<size_t> team_order(const std::vector<TeamStanding>& teams, const PoolTotals& totals) {
  std::vector<size_t> idx(teams.size());
  std::iota(idx.begin(), idx.end(), size_t{0});
  std::vector<double> share(teams.size());
  for (size_t i = 0; i < teams.size(); ++i) share[i] = weighted_share(teams[i], totals);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    bool ga = below_guarantee(teams[a]), gb = below_guarantee(teams[b]);
    return std::make_tuple(!ga, share[a], teams[a].team) < std::make_tuple(!gb, share[b], teams[b].team);
  });
  return idx;
}

QuotaVerdict admit_quota(const TeamStanding& t, int gpus) {
  QuotaVerdict v;
  int after = t.used.gpus + gpus;
  if (t.limit >= 0 && after > t.limit) {
    v.reason = "team " + t.team + " is at its hard limit: " + std::to_string(t.used.gpus) + "/" +
               std::to_string(t.limit) + " GPUs in use, the job needs " + std::to_string(gpus) + " more";
    return v;
  }
  if (after > t.guaranteed && !t.borrow) {
    v.reason = "team " + t.team + " may not borrow beyond its guarantee: " +
               std::to_string(t.used.gpus) + "/" + std::to_string(t.guaranteed) +
               " GPUs in use, the job needs " + std::to_string(gpus) + " more";
    return v;
  }
  v.ok = true;
  v.borrowed = after > t.guaranteed;
  return v;
}

}  // namespace troupe::policy

#include "actors/policy/fair_share.hpp"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace troupe::policy {

double dominant_share(const Usage& u, const PoolTotals& t) {
  double s = 0;
  if (t.gpus > 0) s = std::max(s, static_cast<double>(gpu_milli(u)) / (1000.0 * t.gpus));
  if (t.cpus > 0) s = std::max(s, static_cast<double>(u.cpus) / t.cpus);
  if (t.memory_mb > 0)
    s = std::max(s, static_cast<double>(u.memory_mb) / static_cast<double>(t.memory_mb));
  return s;
}

double weighted_share(const TeamStanding& t, const PoolTotals& totals) {
  return dominant_share(t.used, totals) / (t.weight > 0 ? t.weight : 1.0);
}

bool below_guarantee(const TeamStanding& t) {
  return gpu_milli(t.used) < int64_t{t.guaranteed} * 1000;
}

std::string gpus_text(int64_t milli) {
  std::string s = std::to_string(milli / 1000);
  int64_t frac = milli % 1000;
  if (frac == 0) return s;
  std::string f = std::to_string(frac + 1000).substr(1);
  while (!f.empty() && f.back() == '0') f.pop_back();
  return s + "." + f;
}

std::vector<size_t> team_order(const std::vector<TeamStanding>& teams, const PoolTotals& totals) {
  std::vector<size_t> idx(teams.size());
  std::iota(idx.begin(), idx.end(), size_t{0});
  std::vector<double> share(teams.size());
  for (size_t i = 0; i < teams.size(); ++i) share[i] = weighted_share(teams[i], totals);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    bool ga = below_guarantee(teams[a]), gb = below_guarantee(teams[b]);
    return std::make_tuple(!ga, share[a], teams[a].team) <
           std::make_tuple(!gb, share[b], teams[b].team);
  });
  return idx;
}

QuotaVerdict admit_quota(const TeamStanding& t, int gpus) {
  return admit_quota_milli(t, int64_t{gpus} * 1000);
}

QuotaVerdict admit_quota_milli(const TeamStanding& t, int64_t milli) {
  QuotaVerdict v;
  int64_t used = gpu_milli(t.used);
  int64_t after = used + milli;
  if (t.limit >= 0 && after > int64_t{t.limit} * 1000) {
    v.reason = "team " + t.team + " is at its hard limit: " + gpus_text(used) + "/" +
               std::to_string(t.limit) + " GPUs in use, the job needs " + gpus_text(milli) +
               " more";
    return v;
  }
  int64_t guaranteed = int64_t{t.guaranteed} * 1000;
  if (after > guaranteed && !t.borrow) {
    v.reason = "team " + t.team + " may not borrow beyond its guarantee: " + gpus_text(used) + "/" +
               std::to_string(t.guaranteed) + " GPUs in use, the job needs " + gpus_text(milli) +
               " more";
    return v;
  }
  v.ok = true;
  v.borrowed = after > guaranteed;
  return v;
}

}  // namespace troupe::policy

#include "actors/policy/preemption.hpp"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace troupe::policy {

double work_lost_gpu_s(const PreemptCandidate& c, int64_t now_ms) {
  int64_t since = std::max(c.started_ms, c.last_checkpoint_ms);
  double secs = std::max<int64_t>(0, now_ms - since) / 1000.0;
  return secs * c.gpus * static_cast<double>(c.nodes.size());
}

bool may_preempt(const Preemptor& p, const PreemptCandidate& c, int64_t now_ms) {
  if (!c.preemptible || c.protected_until_ms > now_ms || c.job_id == p.job_id) return false;
  if (c.priority < p.priority) return true;
  return p.below_guarantee && c.borrowed && c.team != p.team;
}

namespace {
void give_back(std::vector<NodeCapacity>& nodes, const PreemptCandidate& c) {
  for (size_t n : c.nodes) {
    if (n >= nodes.size()) continue;
    nodes[n].gpus_free += c.gpus;
    nodes[n].cpus_free += c.cpus;
    nodes[n].memory_free_mb += c.memory_mb;
  }
}
}  // namespace

VictimPlan choose_victims(const std::vector<NodeCapacity>& nodes,
                          const std::vector<PreemptCandidate>& candidates, const Preemptor& p,
                          int64_t now_ms) {
  VictimPlan plan;
  std::vector<size_t> order;
  for (size_t i = 0; i < candidates.size(); ++i)
    if (may_preempt(p, candidates[i], now_ms)) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& x = candidates[a];
    const auto& y = candidates[b];
    return std::make_tuple(work_lost_gpu_s(x, now_ms), x.priority, -x.started_ms, x.job_id) <
           std::make_tuple(work_lost_gpu_s(y, now_ms), y.priority, -y.started_ms, y.job_id);
  });
  auto future = nodes;
  std::vector<size_t> chosen;
  std::vector<size_t> ranks;
  for (size_t i : order) {
    give_back(future, candidates[i]);
    chosen.push_back(i);
    ranks = place(future, p.req);
    if (!ranks.empty()) break;
  }
  if (ranks.empty()) return plan;
  // Drop victims the fit does not need (latest added are the costliest).
  for (size_t k = chosen.size(); k-- > 0;) {
    auto without = nodes;
    for (size_t j = 0; j < chosen.size(); ++j)
      if (j != k) give_back(without, candidates[chosen[j]]);
    auto r = place(without, p.req);
    if (!r.empty()) {
      chosen.erase(chosen.begin() + static_cast<std::ptrdiff_t>(k));
      ranks = r;
    }
  }
  plan.victims = chosen;
  plan.nodes = ranks;
  for (size_t i : chosen) plan.gpu_s_lost += work_lost_gpu_s(candidates[i], now_ms);
  return plan;
}

int64_t protected_until(const std::vector<int64_t>& preempted_ms, int protect_after,
                        int64_t window_ms, int64_t protect_ms) {
  if (protect_after <= 0 || preempted_ms.empty()) return 0;
  int64_t last = preempted_ms.back();
  int recent = 0;
  for (int64_t t : preempted_ms) recent += (last - t <= window_ms) ? 1 : 0;
  return recent >= protect_after ? last + protect_ms : 0;
}

int preempt_grace_s(std::optional<int> spec_grace_s, int max_grace_s) {
  int grace = spec_grace_s.value_or(kDefaultPreemptGraceS);
  return max_grace_s > 0 ? std::min(grace, max_grace_s) : grace;
}

}  // namespace troupe::policy

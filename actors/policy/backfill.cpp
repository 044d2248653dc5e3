#include "actors/policy/backfill.hpp"

#include <algorithm>
#include <set>

namespace troupe::policy {

Hold plan_hold(const std::vector<NodeCapacity>& nodes, const std::vector<RunningWork>& running,
               const PlacementRequest& req, const std::string& job_id, int64_t now_ms) {
  Hold h;
  auto future = nodes;
  auto fill = [&](int64_t at) {
    auto ranks = place(future, req);
    if (ranks.empty()) return false;
    std::set<size_t> distinct(ranks.begin(), ranks.end());
    h.job_id = job_id;
    h.nodes.assign(distinct.begin(), distinct.end());
    h.start_ms = at;
    return true;
  };
  if (fill(now_ms)) return h;
  std::vector<const RunningWork*> order;
  for (const auto& r : running) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(), [](const RunningWork* a, const RunningWork* b) {
    return a->ends_ms < b->ends_ms;
  });
  for (size_t k = 0; k < order.size(); ++k) {
    const auto* r = order[k];
    for (size_t n : r->nodes) {
      if (n >= future.size()) continue;
      future[n].gpus_free += r->gpus;
      future[n].cpus_free += r->cpus;
      future[n].memory_free_mb += r->memory_mb;
    }
    // Release everything that ends at the same moment before checking.
    if (k + 1 < order.size() && order[k + 1]->ends_ms == r->ends_ms) continue;
    if (fill(std::max(r->ends_ms, now_ms))) return h;
  }
  return Hold{};
}

NodeMask usable_under_hold(const Hold& hold, size_t node_count, int64_t now_ms,
                           int64_t max_runtime_s) {
  if (!hold.active()) return {};  // empty: every node usable (no allocation per demand)
  bool ends_before = max_runtime_s > 0 && hold.start_ms != kNever &&
                     now_ms + max_runtime_s * 1000 <= hold.start_ms;
  if (ends_before) return {};
  NodeMask m(node_count, 1);
  for (size_t n : hold.nodes)
    if (n < node_count) m[n] = 0;
  return m;
}

int held_idle_gpus(const Hold& hold, const std::vector<NodeCapacity>& nodes) {
  int idle = 0;
  if (!hold.active()) return 0;
  for (size_t n : hold.nodes)
    if (n < nodes.size()) idle += std::max(0, nodes[n].gpus_free);
  return idle;
}

}  // namespace troupe::policy

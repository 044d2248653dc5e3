#include "actors/policy/overlay.hpp"

#include <algorithm>

#include "actors/policy/fit.hpp"
#include "actors/policy/ledger.hpp"

namespace troupe::policy {

void GrantOverlay::add(size_t node, const std::string& job_id, int attempt, int rank,
                       const PlacementRequest& req) {
  nodes_of_[job_id].push_back(node);
  by_node_[node].push_back({hold_id(job_id, attempt, rank), job_id, req.gpus, req.cpus,
                            req.memory_mb, req.shared() ? req.gpu_memory_mb : 0, req.share_key});
  ++shares_;
}

void GrantOverlay::apply(size_t node, const std::vector<std::string>& holds, NodeCapacity& report) {
  auto it = by_node_.find(node);
  if (it == by_node_.end()) return;
  auto& shares = it->second;
  auto listed = [&holds](const Share& s) {
    return std::find(holds.begin(), holds.end(), s.hold_id) != holds.end();
  };
  size_t before = shares.size();
  shares.erase(std::remove_if(shares.begin(), shares.end(), listed), shares.end());
  shares_ -= before - shares.size();
  for (const auto& s : shares) {
    if (s.gpu_memory_mb > 0) {
      PlacementRequest r;
      r.gpus = 1;
      r.gpu_memory_mb = s.gpu_memory_mb;
      r.share_key = s.share_key;
      if (report.gpus_free > 0 || join_shared(report, r) >= 0) add_shared(report, r, +1);
    } else {
      report.gpus_free = std::max(0, report.gpus_free - s.gpus);
    }
    report.cpus_free = std::max(0, report.cpus_free - s.cpus);
    report.memory_free_mb = std::max<int64_t>(0, report.memory_free_mb - s.memory_mb);
  }
  if (shares.empty()) by_node_.erase(it);
}

void GrantOverlay::forget(const std::string& job_id) {
  auto it = nodes_of_.find(job_id);
  if (it == nodes_of_.end()) return;
  for (size_t node : it->second) {
    auto n = by_node_.find(node);
    if (n == by_node_.end()) continue;  // counted by the node already
    auto& shares = n->second;
    size_t before = shares.size();
    shares.erase(std::remove_if(shares.begin(), shares.end(),
                                [&](const Share& s) { return s.job_id == job_id; }),
                 shares.end());
    shares_ -= before - shares.size();
    if (shares.empty()) by_node_.erase(n);
  }
  nodes_of_.erase(it);
}

}  // namespace troupe::policy

#include "actors/policy/placement.hpp"

namespace troupe::policy {

namespace {
bool type_matches(const NodeCapacity& n, const PlacementRequest& req) {
  return req.gpu_type.empty() || req.gpus == 0 || n.gpu_type == req.gpu_type;
}
}  // namespace

bool eligible(const NodeCapacity& n, const PlacementRequest& req) {
  return type_matches(n, req) && (!req.needs_runtime() || !n.runtime.empty());
}

bool fits(const NodeCapacity& n, const PlacementRequest& req) {
  return n.alive && eligible(n, req) && n.gpus_free >= req.gpus &&
         (req.cpus == 0 || n.cpus_free >= req.cpus) &&
         (req.memory_mb == 0 || n.memory_free_mb >= req.memory_mb);
}

bool could_fit(const NodeCapacity& n, const PlacementRequest& req) {
  return eligible(n, req) && n.gpus_total >= req.gpus &&
         (req.cpus == 0 || n.cpus_total >= req.cpus) &&
         (req.memory_mb == 0 || n.memory_total_mb >= req.memory_mb);
}

const char* no_fit_reason(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req) {
  if (nodes.empty()) return kNoNodes;
  bool any_type = false, any_eligible = false;
  for (const auto& n : nodes) {
    any_type = any_type || type_matches(n, req);
    any_eligible = any_eligible || eligible(n, req);
  }
  if (!any_type) return kNoNodeOfType;
  if (!any_eligible) return kNoRuntime;
  return req.workers > 1 ? kGangDoesNotFit : kNoFreeCapacity;
}

Candidates single_candidates(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
                             size_t max_candidates) {
  Candidates out;
  for (size_t i = 0; i < nodes.size() && out.nodes.size() < max_candidates; ++i)
    if (fits(nodes[i], req)) out.nodes.push_back(i);
  if (out.nodes.empty()) out.reason = no_fit_reason(nodes, req);
  return out;
}

Candidates gang_assignment(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req) {
  Candidates out;
  for (size_t i = 0; i < nodes.size() && static_cast<int>(out.nodes.size()) < req.workers; ++i) {
    NodeCapacity left = nodes[i];
    while (static_cast<int>(out.nodes.size()) < req.workers && fits(left, req)) {
      out.nodes.push_back(i);
      left.gpus_free -= req.gpus;
      left.cpus_free -= req.cpus;
      left.memory_free_mb -= req.memory_mb;
    }
  }
  if (static_cast<int>(out.nodes.size()) < req.workers) {
    out.nodes.clear();
    out.reason = no_fit_reason(nodes, req);
  }
  return out;
}

}  // namespace troupe::policy

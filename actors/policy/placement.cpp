#include "actors/policy/placement.hpp"

#include <tuple>

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

bool same_report(const NodeCapacity& a, const NodeCapacity& b) {
  auto key = [](const NodeCapacity& n) {
    return std::tie(n.name, n.host, n.gpu_type, n.pool, n.rack, n.runtime, n.schedulable,
                    n.gpus_total, n.gpus_free, n.gpus_reserved, n.gpus_allocated, n.cpus_total,
                    n.cpus_free, n.memory_total_mb, n.memory_free_mb, n.alive, n.running, n.holds);
  };
  return key(a) == key(b);
}

bool could_fit(const NodeCapacity& n, const PlacementRequest& req) {
  return eligible(n, req) && n.gpus_total >= req.gpus &&
         (req.cpus == 0 || n.cpus_total >= req.cpus) &&
         (req.memory_mb == 0 || n.memory_total_mb >= req.memory_mb);
}

}  // namespace troupe::policy

#include "actors/policy/placement.hpp"

#include <algorithm>
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

int64_t shared_milli(int64_t mem_mb, int64_t gpu_mb) {
  if (gpu_mb <= 0 || mem_mb >= gpu_mb) return 1000;
  return std::max<int64_t>(1, (mem_mb * 1000 + gpu_mb - 1) / gpu_mb);
}

int join_shared(const NodeCapacity& n, const PlacementRequest& req) {
  int best = -1;
  int64_t best_left = 0;
  for (size_t i = 0; i < n.shared.size(); ++i) {
    const auto& g = n.shared[i];
    if (g.key != req.share_key) continue;
    int64_t left = n.gpu_memory_mb - g.used_mb - req.gpu_memory_mb;
    if (left < 0) continue;
    if (best < 0 || left < best_left) {
      best = static_cast<int>(i);
      best_left = left;
    }
  }
  return best;
}

int64_t stranded_mb(const NodeCapacity& n) {
  int64_t s = 0;
  for (const auto& g : n.shared) s += std::max<int64_t>(0, n.gpu_memory_mb - g.used_mb);
  return s;
}

int64_t shared_used_mb(const NodeCapacity& n) {
  int64_t s = 0;
  for (const auto& g : n.shared) s += g.used_mb;
  return s;
}

namespace {
// A shared worker's GPU: room on a shared GPU of its key, or a whole free
// one; never a GPU as large as what it asks or of unknown memory.
bool gpu_room(const NodeCapacity& n, const PlacementRequest& req) {
  if (!req.shared()) return n.gpus_free >= req.gpus;
  if (n.gpu_memory_mb <= req.gpu_memory_mb) return false;
  return n.gpus_free >= 1 || join_shared(n, req) >= 0;
}
}  // namespace

bool fits(const NodeCapacity& n, const PlacementRequest& req) {
  return n.alive && eligible(n, req) && gpu_room(n, req) &&
         (req.cpus == 0 || n.cpus_free >= req.cpus) &&
         (req.memory_mb == 0 || n.memory_free_mb >= req.memory_mb);
}

bool same_report(const NodeCapacity& a, const NodeCapacity& b) {
  auto key = [](const NodeCapacity& n) {
    return std::tie(n.name, n.host, n.gpu_type, n.pool, n.rack, n.runtime, n.schedulable,
                    n.gpus_total, n.gpus_free, n.gpus_reserved, n.gpus_allocated, n.cpus_total,
                    n.cpus_free, n.memory_total_mb, n.memory_free_mb, n.alive, n.running, n.holds,
                    n.gpu_memory_mb, n.shared, n.draining, n.reason);
  };
  return key(a) == key(b);
}

bool could_fit(const NodeCapacity& n, const PlacementRequest& req) {
  if (req.shared() && n.gpu_memory_mb <= req.gpu_memory_mb) return false;
  return eligible(n, req) && n.gpus_total >= req.gpus &&
         (req.cpus == 0 || n.cpus_total >= req.cpus) &&
         (req.memory_mb == 0 || n.memory_total_mb >= req.memory_mb);
}

}  // namespace troupe::policy

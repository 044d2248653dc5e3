#include "actors/policy/fit.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace troupe::policy {

namespace {
bool usable_at(const NodeMask& m, size_t i) { return m.empty() || m[i]; }
}  // namespace

bool fits_in_pool(const NodeCapacity& n, const PlacementRequest& req) {
  return n.schedulable && !n.pool.empty() && (req.pool.empty() || n.pool == req.pool) &&
         fits(n, req);
}

std::optional<size_t> best_fit(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
                               const NodeMask& usable) {
  std::optional<size_t> best;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!usable_at(usable, i) || !fits_in_pool(nodes[i], req)) continue;
    if (!best || nodes[i].gpus_free < nodes[*best].gpus_free) best = i;
  }
  return best;
}

std::vector<size_t> gang_fit(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
                             const NodeMask& usable) {
  // How many ranks each usable node can take.
  auto slots = [&](const NodeCapacity& n) {
    if (!fits_in_pool(n, req)) return 0;
    int by_gpu = req.gpus > 0 ? n.gpus_free / req.gpus : req.workers;
    int by_cpu = req.cpus > 0 ? n.cpus_free / req.cpus : req.workers;
    int by_mem = req.memory_mb > 0 ? static_cast<int>(n.memory_free_mb / req.memory_mb) : req.workers;
    return std::min({by_gpu, by_cpu, by_mem, req.workers});
  };
  // Candidate groups: each rack, then the whole pool.
  std::map<std::string, std::vector<size_t>> racks;
  std::vector<size_t> all;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!usable_at(usable, i) || slots(nodes[i]) == 0) continue;
    racks[nodes[i].rack].push_back(i);
    all.push_back(i);
  }
  // Greedy in a group: nodes with the most slots first (fewest nodes), ties
  // -> fewest free GPUs (best fit), then index.
  auto pack = [&](std::vector<size_t> group) {
    std::sort(group.begin(), group.end(), [&](size_t a, size_t b) {
      return std::make_tuple(-slots(nodes[a]), nodes[a].gpus_free, a) <
             std::make_tuple(-slots(nodes[b]), nodes[b].gpus_free, b);
    });
    std::vector<size_t> ranks;
    for (size_t i : group) {
      for (int k = slots(nodes[i]); k > 0 && static_cast<int>(ranks.size()) < req.workers; --k)
        ranks.push_back(i);
      if (static_cast<int>(ranks.size()) == req.workers) break;
    }
    if (static_cast<int>(ranks.size()) < req.workers) ranks.clear();
    return ranks;
  };
  auto distinct = [](const std::vector<size_t>& r) {
    std::vector<size_t> d = r;
    std::sort(d.begin(), d.end());
    return static_cast<size_t>(std::unique(d.begin(), d.end()) - d.begin());
  };
  std::vector<size_t> best;
  for (const auto& [rack, group] : racks) {
    auto r = pack(group);
    if (!r.empty() && (best.empty() || distinct(r) < distinct(best))) best = r;
  }
  if (!best.empty()) return best;
  return pack(all);  // spans racks
}

std::vector<size_t> place(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
                          const NodeMask& usable) {
  if (req.workers > 1) return gang_fit(nodes, req, usable);
  auto one = best_fit(nodes, req, usable);
  return one ? std::vector<size_t>{*one} : std::vector<size_t>{};
}

void take(std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
          const std::vector<size_t>& ranks) {
  for (size_t i : ranks) {
    nodes[i].gpus_free -= req.gpus;
    nodes[i].cpus_free -= req.cpus;
    nodes[i].memory_free_mb -= req.memory_mb;
  }
}

}  // namespace troupe::policy

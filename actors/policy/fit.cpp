#include "actors/policy/fit.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace troupe::policy {

namespace {
bool usable_at(const NodeMask& m, size_t i) {
  return m.empty() || m[i];
}
}  // namespace

bool fits_in_pool(const NodeCapacity& n, const PlacementRequest& req) {
  return n.schedulable && !n.pool.empty() && (req.pool.empty() || n.pool == req.pool) &&
         fits(n, req);
}

void CapacityIndex::rebuild(const std::vector<NodeCapacity>& nodes) {
  where_.clear();
  buckets_.clear();
  for (size_t i = 0; i < nodes.size(); ++i) set(i, nodes[i]);
}

void CapacityIndex::set(size_t i, const NodeCapacity& n) {
  if (i >= where_.size()) where_.resize(i + 1);
  Slot& s = where_[i];
  int free = std::max(0, n.gpus_free);
  if (s.indexed && s.pool == n.pool && s.free == free) return;
  if (s.indexed) buckets_[s.pool][static_cast<size_t>(s.free)].erase(i);
  s.indexed = !n.pool.empty();
  s.pool = n.pool;
  s.free = free;
  if (!s.indexed) return;
  auto& by_free = buckets_[n.pool];
  if (by_free.size() <= static_cast<size_t>(free)) by_free.resize(static_cast<size_t>(free) + 1);
  by_free[static_cast<size_t>(free)].insert(i);
}

std::vector<size_t> CapacityIndex::with_free(const std::string& pool, int min_free) const {
  std::vector<size_t> out;
  auto p = buckets_.find(pool);
  if (p == buckets_.end()) return out;
  for (size_t f = static_cast<size_t>(std::max(0, min_free)); f < p->second.size(); ++f)
    out.insert(out.end(), p->second[f].begin(), p->second[f].end());
  std::sort(out.begin(), out.end());
  return out;
}

bool CapacityIndex::matches(const std::vector<NodeCapacity>& nodes) const {
  CapacityIndex fresh(nodes);
  auto trimmed = [](const std::map<std::string, std::vector<std::set<size_t>>>& b) {
    std::map<std::pair<std::string, size_t>, std::set<size_t>> m;
    for (const auto& [pool, by_free] : b)
      for (size_t f = 0; f < by_free.size(); ++f)
        if (!by_free[f].empty()) m[{pool, f}] = by_free[f];
    return m;
  };
  return trimmed(fresh.buckets_) == trimmed(buckets_) && nodes.size() <= where_.size();
}

std::optional<size_t> best_fit(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
                               const NodeMask& usable, const CapacityIndex* index) {
  if (index != nullptr && !req.pool.empty()) {
    // The lowest bucket first, lowest index first: the scan's answer.
    auto p = index->buckets_.find(req.pool);
    if (p == index->buckets_.end()) return std::nullopt;
    for (size_t f = static_cast<size_t>(std::max(0, req.gpus)); f < p->second.size(); ++f)
      for (size_t i : p->second[f])
        if (usable_at(usable, i) && fits_in_pool(nodes[i], req)) return i;
    return std::nullopt;
  }
  std::optional<size_t> best;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!usable_at(usable, i) || !fits_in_pool(nodes[i], req)) continue;
    if (!best || nodes[i].gpus_free < nodes[*best].gpus_free) best = i;
  }
  return best;
}

std::vector<size_t> gang_fit(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
                             const NodeMask& usable, const CapacityIndex* index) {
  // How many ranks each usable node can take.
  auto slots = [&](const NodeCapacity& n) {
    if (!fits_in_pool(n, req)) return 0;
    int by_gpu = req.gpus > 0 ? n.gpus_free / req.gpus : req.workers;
    int by_cpu = req.cpus > 0 ? n.cpus_free / req.cpus : req.workers;
    int by_mem =
        req.memory_mb > 0 ? static_cast<int>(n.memory_free_mb / req.memory_mb) : req.workers;
    return std::min({by_gpu, by_cpu, by_mem, req.workers});
  };
  // Candidate groups: each rack, then the whole pool.
  std::map<std::string, std::vector<size_t>> racks;
  std::vector<size_t> all;
  // With an index, only nodes with room for one rank's GPUs are looked at.
  std::vector<size_t> scan;
  if (index != nullptr && !req.pool.empty() && req.gpus > 0) {
    scan = index->with_free(req.pool, req.gpus);
  } else {
    scan.resize(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) scan[i] = i;
  }
  for (size_t i : scan) {
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
                          const NodeMask& usable, const CapacityIndex* index) {
  if (req.workers > 1) return gang_fit(nodes, req, usable, index);
  auto one = best_fit(nodes, req, usable, index);
  return one ? std::vector<size_t>{*one} : std::vector<size_t>{};
}

namespace {
void add(std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
         const std::vector<size_t>& ranks, int sign, CapacityIndex* index) {
  for (size_t i : ranks) {
    nodes[i].gpus_free -= sign * req.gpus;
    nodes[i].cpus_free -= sign * req.cpus;
    nodes[i].memory_free_mb -= sign * req.memory_mb;
    if (index != nullptr) index->set(i, nodes[i]);
  }
}
}  // namespace

void take(std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
          const std::vector<size_t>& ranks, CapacityIndex* index) {
  add(nodes, req, ranks, +1, index);
}

void give_back(std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
               const std::vector<size_t>& ranks, CapacityIndex* index) {
  add(nodes, req, ranks, -1, index);
}

}  // namespace troupe::policy

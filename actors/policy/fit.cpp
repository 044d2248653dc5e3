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

namespace {
// A shared worker (req.shared()), in the spirit of FGD (Alibaba, ATC'23):
// place it where the fragmentation it adds is least. Joining a shared GPU
// adds none (it uses memory that whole-GPU jobs cannot), and the least left
// over packs tightest; breaking a whole GPU strands the rest of its memory,
// so it is done only where no shared GPU has room, on the node with the
// fewest free GPUs (empty nodes stay whole). Ties -> index.
std::optional<size_t> shared_fit(const std::vector<NodeCapacity>& nodes,
                                 const PlacementRequest& req, const NodeMask& usable) {
  std::optional<size_t> best;
  std::tuple<int, int64_t, int> best_key{};
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto& n = nodes[i];
    if (!usable_at(usable, i) || !fits_in_pool(n, req)) continue;
    int j = join_shared(n, req);
    std::tuple<int, int64_t, int> key =
        j >= 0
            ? std::make_tuple(
                  0, n.gpu_memory_mb - n.shared[static_cast<size_t>(j)].used_mb - req.gpu_memory_mb,
                  n.gpus_free)
            : std::make_tuple(1, n.gpu_memory_mb - req.gpu_memory_mb, n.gpus_free);
    if (!best || key < best_key) {
      best = i;
      best_key = key;
    }
  }
  return best;
}
}  // namespace

std::optional<size_t> best_fit(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
                               const NodeMask& usable, const CapacityIndex* index) {
  if (req.shared()) return shared_fit(nodes, req, usable);
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
  // One node that takes every rank is the fewest nodes there are: the gang
  // goes there by best fit, as one worker asking for all of it would (with
  // the index: a bucket lookup).
  if (req.workers > 1) {
    PlacementRequest whole = req;
    whole.gpus *= req.workers;
    whole.cpus *= req.workers;
    whole.memory_mb *= req.workers;
    whole.workers = 1;
    if (auto n = best_fit(nodes, whole, usable, index))
      return std::vector<size_t>(static_cast<size_t>(req.workers), *n);
  }
  // How many ranks each usable node can take, worked out once per node.
  struct Candidate {
    const std::string* rack;
    int slots;
    int free;  // GPUs
    size_t i;
  };
  auto slots = [&](const NodeCapacity& n) {
    if (!fits_in_pool(n, req)) return 0;
    int by_gpu = req.gpus > 0 ? n.gpus_free / req.gpus : req.workers;
    int by_cpu = req.cpus > 0 ? n.cpus_free / req.cpus : req.workers;
    int by_mem =
        req.memory_mb > 0 ? static_cast<int>(n.memory_free_mb / req.memory_mb) : req.workers;
    return std::min({by_gpu, by_cpu, by_mem, req.workers});
  };
  std::vector<Candidate> all;
  auto consider = [&](size_t i) {
    if (!usable_at(usable, i)) return;
    if (int k = slots(nodes[i]); k > 0) all.push_back({&nodes[i].rack, k, nodes[i].gpus_free, i});
  };
  // With an index, only nodes with room for one rank's GPUs are looked at.
  if (index != nullptr && !req.pool.empty() && req.gpus > 0) {
    index->each_with_free(req.pool, req.gpus, consider);
  } else {
    for (size_t i = 0; i < nodes.size(); ++i) consider(i);
  }
  // The order inside a group: nodes with the most slots first (fewest
  // nodes), ties -> fewest free GPUs (best fit), then index.
  auto before = [](const Candidate& a, const Candidate& b) {
    return std::make_tuple(-a.slots, a.free, a.i) < std::make_tuple(-b.slots, b.free, b.i);
  };
  // Greedy in a group [first, last), sorted by `before`.
  auto pack = [&](auto first, auto last) {
    std::vector<size_t> ranks;
    for (auto it = first; it != last; ++it) {
      for (int k = it->slots; k > 0 && static_cast<int>(ranks.size()) < req.workers; --k)
        ranks.push_back(it->i);
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
  // Candidate groups: each rack (by name), then the whole pool.
  std::sort(all.begin(), all.end(), [&](const Candidate& a, const Candidate& b) {
    if (*a.rack != *b.rack) return *a.rack < *b.rack;
    return before(a, b);
  });
  std::vector<size_t> best;
  for (auto first = all.begin(); first != all.end();) {
    auto last =
        std::find_if(first, all.end(), [&](const Candidate& c) { return *c.rack != *first->rack; });
    auto r = pack(first, last);
    if (!r.empty() && (best.empty() || distinct(r) < distinct(best))) best = std::move(r);
    first = last;
  }
  if (!best.empty()) return best;
  std::sort(all.begin(), all.end(), before);
  return pack(all.begin(), all.end());  // spans racks
}

std::vector<size_t> place(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
                          const NodeMask& usable, const CapacityIndex* index) {
  if (req.workers > 1) return gang_fit(nodes, req, usable, index);
  auto one = best_fit(nodes, req, usable, index);
  return one ? std::vector<size_t>{*one} : std::vector<size_t>{};
}

void add_shared(NodeCapacity& n, const PlacementRequest& req, int sign) {
  if (sign > 0) {
    int j = join_shared(n, req);
    if (j >= 0) {
      n.shared[static_cast<size_t>(j)].used_mb += req.gpu_memory_mb;
    } else {
      n.gpus_free -= 1;
      n.shared.push_back(SharedGpu{-1, req.gpu_memory_mb, req.share_key});
    }
    return;
  }
  int pick = -1;
  for (size_t i = 0; i < n.shared.size(); ++i) {
    const auto& g = n.shared[i];
    if (g.key != req.share_key || g.used_mb < req.gpu_memory_mb) continue;
    bool taken_here = g.index < 0 && g.used_mb == req.gpu_memory_mb;
    if (pick < 0 || taken_here) pick = static_cast<int>(i);
    if (taken_here) break;
  }
  if (pick < 0) return;
  auto& g = n.shared[static_cast<size_t>(pick)];
  g.used_mb -= req.gpu_memory_mb;
  if (g.used_mb <= 0) {
    n.shared.erase(n.shared.begin() + pick);
    n.gpus_free += 1;
  }
}

namespace {
void add(std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
         const std::vector<size_t>& ranks, int sign, CapacityIndex* index) {
  for (size_t i : ranks) {
    if (req.shared())
      add_shared(nodes[i], req, sign);
    else
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

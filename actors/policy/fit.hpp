// Where a job goes once it may run: pure fit functions over a capacity
// snapshot, in the shape of kube-scheduler's filter + score.
//   filter: fits() (alive, schedulable, pool, GPU type, free GPUs/CPUs/memory)
//           and the caller's mask (e.g. nodes held for a reservation);
//   score (one worker): best fit — the node left with the fewest free GPUs,
//           so large free blocks stay whole and an empty node is never broken
//           for a small job while a partly used node fits it; ties -> index;
//   gang:   fewest nodes (ranks share a node when it has room): a gang one
//           node can take goes there by best fit, as one worker asking for
//           all of it (a bucket lookup with the index); else all on one
//           topology label (rack) when possible, then best fit.
// Unit tests: tests/unit/policy_fit_test.cpp.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/policy/placement.hpp"

namespace troupe::policy {

// `usable[i] == false` excludes node i (empty mask: every node usable).
using NodeMask = std::vector<char>;

bool fits_in_pool(const NodeCapacity& n, const PlacementRequest& req);

// Nodes by (pool, free GPUs): best fit is a bucket lookup — the lowest bucket
// with a node that fits, lowest index first — instead of a scan of every
// node, and a gang's candidates are the nodes with room for one rank. It
// indexes one node vector and is told of every change to a node's pool or
// free GPUs (set()); the answers equal the scans' (tested).
class CapacityIndex {
 public:
  CapacityIndex() = default;
  explicit CapacityIndex(const std::vector<NodeCapacity>& nodes) { rebuild(nodes); }
  void rebuild(const std::vector<NodeCapacity>& nodes);
  // Node i is now `n` (added when i is new).
  void set(size_t i, const NodeCapacity& n);
  // Nodes of `pool` with at least `min_free` free GPUs, by index.
  std::vector<size_t> with_free(const std::string& pool, int min_free) const;
  // Calls `f(i)` for each of them, in no set order (no list, no sort).
  template <class F>
  void each_with_free(const std::string& pool, int min_free, F&& f) const {
    auto p = buckets_.find(pool);
    if (p == buckets_.end()) return;
    for (size_t free = static_cast<size_t>(std::max(0, min_free)); free < p->second.size(); ++free)
      for (size_t i : p->second[free]) f(i);
  }
  // Whether it indexes exactly `nodes` (tests).
  bool matches(const std::vector<NodeCapacity>& nodes) const;

 private:
  friend std::optional<size_t> best_fit(const std::vector<NodeCapacity>&, const PlacementRequest&,
                                        const NodeMask&, const CapacityIndex*);
  struct Slot {
    std::string pool;
    int free = 0;
    bool indexed = false;  // a node of no pool is not (it takes nothing)
  };
  std::vector<Slot> where_;                                       // per node: its bucket
  std::map<std::string, std::vector<std::set<size_t>>> buckets_;  // pool -> free -> nodes
};

// With `index` (over `nodes`): a bucket lookup, the same answer.
std::optional<size_t> best_fit(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
                               const NodeMask& usable = {}, const CapacityIndex* index = nullptr);

// A node per rank, or empty when the gang does not fit.
std::vector<size_t> gang_fit(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
                             const NodeMask& usable = {}, const CapacityIndex* index = nullptr);

// Both, by req.workers.
std::vector<size_t> place(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
                          const NodeMask& usable = {}, const CapacityIndex* index = nullptr);

// A shared worker's part of a GPU, taken from `n` (sign +1) or given back
// (-1): it joins the shared GPU it fills best, else takes a whole free GPU
// as a new shared one (index -1 until the node reports); given back, it
// leaves a shared GPU of its key (the one it took in this overlay when it
// can tell), the GPU whole again once nothing is left on it.
void add_shared(NodeCapacity& n, const PlacementRequest& req, int sign);

// Subtracts one placement from the snapshot (an overlay for the rest of a
// round), and gives it back; `index`, when given, follows.
void take(std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
          const std::vector<size_t>& ranks, CapacityIndex* index = nullptr);
void give_back(std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
               const std::vector<size_t>& ranks, CapacityIndex* index = nullptr);

}  // namespace troupe::policy

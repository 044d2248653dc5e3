// Where a job goes once it may run: pure fit functions over a capacity
// snapshot, in the shape of kube-scheduler's filter + score.
//   filter: fits() (alive, schedulable, pool, GPU type, free GPUs/CPUs/memory)
//           and the caller's mask (e.g. nodes held for a reservation);
//   score (one worker): best fit — the node left with the fewest free GPUs,
//           so large free blocks stay whole and an empty node is never broken
//           for a small job while a partly used node fits it; ties -> index;
//   gang:   fewest nodes (ranks share a node when it has room), then all on
//           one topology label (rack) when possible, then best fit.
// Unit tests: tests/unit/policy_fit_test.cpp.
#pragma once

#include <optional>
#include <vector>

#include "actors/policy/placement.hpp"

namespace troupe::policy {

// `usable[i] == false` excludes node i (empty mask: every node usable).
using NodeMask = std::vector<char>;

bool fits_in_pool(const NodeCapacity& n, const PlacementRequest& req);

std::optional<size_t> best_fit(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
                               const NodeMask& usable = {});

// A node per rank, or empty when the gang does not fit.
std::vector<size_t> gang_fit(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
                             const NodeMask& usable = {});

// Both, by req.workers.
std::vector<size_t> place(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
                          const NodeMask& usable = {});

// Subtracts one placement from the snapshot (an overlay for the rest of a round).
void take(std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
          const std::vector<size_t>& ranks);

}  // namespace troupe::policy

// Backfill with a reservation, so that no large job starves. Pure.
// When the head job of the most deserving queue does not fit, plan_hold()
// computes when it will (running work ends by its max_runtime_s) and on which
// nodes; those nodes are held for it. Other jobs may start on a held node only
// when they are promised to end (by their max_runtime_s) before the hold
// begins. GPUs left idle on held nodes are counted as reserved-idle.
// Unit tests: tests/unit/policy_backfill_test.cpp.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "actors/policy/fit.hpp"

namespace troupe::policy {

inline constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

// Work that holds GPUs now and when it is promised to end.
struct RunningWork {
  std::vector<size_t> nodes;  // node index per rank
  int gpus = 0;               // per rank
  int cpus = 0;
  int64_t memory_mb = 0;
  int64_t ends_ms = kNever;  // start + max_runtime_s; kNever when unbounded
};

struct Hold {
  std::string job_id;         // "" = no hold
  std::vector<size_t> nodes;  // distinct node indices held
  int64_t start_ms = kNever;  // when the job is expected to fit
  bool active() const { return !job_id.empty(); }
};

// Where and when `req` fits if the running work ends as promised. Returns a
// hold with an empty job id when it can never fit on these nodes.
Hold plan_hold(const std::vector<NodeCapacity>& nodes, const std::vector<RunningWork>& running,
               const PlacementRequest& req, const std::string& job_id, int64_t now_ms);

// The nodes another job (promised to run `max_runtime_s`, 0 = unbounded) may
// use while `hold` stands (empty: every node, as NodeMask means).
NodeMask usable_under_hold(const Hold& hold, size_t node_count, int64_t now_ms,
                           int64_t max_runtime_s);

// Free GPUs on held nodes (idle because of the hold).
int held_idle_gpus(const Hold& hold, const std::vector<NodeCapacity>& nodes);

}  // namespace troupe::policy

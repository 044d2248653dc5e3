// One scheduling round of one pool, as a plan over a snapshot (the shape of
// Nomad's scheduler: compute a plan from state; the queues and node actors
// then carry it out through the negotiation, and the node actors re-check).
//
// The chain, in order (cheap and unconditional first, quota before fit):
//   1. order teams: below guarantee first, then weighted DRF share (fair_share);
//   2. in passes: each team with free negotiation slots, in that order, takes
//      its first demand (queue order: priority class, then submit time) that
//        a. passes quota: hard limit, borrowing (admit_quota);
//        b. fits: best fit / gang fit (fit), restricted by the hold;
//      which is granted and subtracted from the snapshot (overlay); the order
//      is computed again before the next pass (usage changed). A demand that
//      failed stays failed for the round (capacity only shrinks within it);
//   3. the first head job (of the most deserving team) that fits nowhere and
//      needs a block (several GPUs or workers) gets the hold (backfill);
//   4. every demand not granted gets a reason, with numbers, as a user reads it
//      (a job that no node of its pool could ever take says why: its GPU
//      type, its size, or its image where no node runs images).
// Unit tests: tests/unit/policy_round_test.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "actors/policy/backfill.hpp"
#include "actors/policy/baseline.hpp"
#include "actors/policy/fair_share.hpp"
#include "actors/policy/fit.hpp"
#include "actors/policy/why.hpp"

namespace troupe::policy {

struct Demand {
  std::string job_id;
  PlacementRequest req;
  int64_t max_runtime_s = 0;
  uint64_t seq = 0;  // submit order (FIFO baseline)
  // An any-type job offered to this pool though it is not its first
  // candidate (req.pools): it never takes the pool's hold, and while it fits
  // now in one of `prefer` (its candidates before this pool) it is left to
  // that pool. The arbiter empties `prefer` once the job was left so for
  // kPreferWaitMs (that pool refuses it for another reason: quota, a hold).
  bool guest = false;
  std::vector<std::string> prefer;
};

// How long a pool leaves an any-type job to a pool it prefers where it fits.
inline constexpr int64_t kPreferWaitMs = 3000;

struct TeamInput {
  TeamStanding standing;
  int slots = 1;                // grants it may still take (negotiations it may start)
  std::vector<Demand> demands;  // queue order (the first K of the queue)
};

struct RoundInput {
  std::string pool;
  std::vector<NodeCapacity> nodes;  // every node known (any pool)
  std::vector<TeamInput> teams;
  std::vector<RunningWork> running;  // in this pool
  // Instead of `running`: asked only when a hold is planned (at most once a
  // round), so a round does not list every running job.
  std::function<std::vector<RunningWork>()> running_of;
  // An index over `nodes` that plan_round_live keeps up to date (the pool
  // arbiter's, kept between rounds); plan_round builds its own.
  CapacityIndex* index = nullptr;
  Hold hold;  // the standing hold, if any
  // Borrowed GPUs of this pool are being taken back for a team below its
  // guarantee (policy/preemption.hpp): nothing new is lent until they are.
  bool reclaiming = false;
  int64_t now_ms = 0;
  // Baseline for comparisons (troupe-scheduler --policy fifo): one queue in
  // submit order across teams, first fit, no fair share, quotas or
  // preemption; the first job that does not fit blocks every later one...
  bool fifo = false;
  // ... unless `backfill` (--policy fifo-backfill, EASY): the first job that
  // does not fit gets a reservation (a hold, policy/backfill.hpp), and later
  // jobs start when they fit without delaying it.
  bool backfill = false;
};

// Named reason codes (counted; the text carries the numbers). The free-GPU
// histogram of a job that fits nowhere is not built each round (it scans
// every node): `histogram` says reason_text adds it, from the capacity of
// the moment someone asks why.
struct Reason {
  Reason() = default;
  Reason(std::string c, std::string t) : code(std::move(c)), text(std::move(t)) {}
  Reason(std::string c, std::string t, const PlacementRequest& r)
      : code(std::move(c)), text(std::move(t)), histogram(true), req(r) {}
  std::string code;
  std::string text;
  bool histogram = false;
  PlacementRequest req;  // for the histogram
};

struct Grant {
  size_t team = 0;            // index into RoundInput::teams
  size_t demand = 0;          // index into that team's demands
  std::vector<size_t> nodes;  // node index per rank
  bool borrowed = false;
  int64_t shared_milli = 0;  // a shared worker: its charge (policy::shared_milli)
};

// What a shared worker would be charged now: its part of the GPU best fit
// picks, else of the largest GPU of its pool.
int64_t shared_charge(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
                      const CapacityIndex* index = nullptr);

struct RoundOutput {
  std::vector<Grant> grants;
  Hold hold;                                        // the hold after this round
  std::unordered_map<std::string, Reason> reasons;  // by job id, for demands not granted
};

PoolTotals pool_totals(const std::vector<NodeCapacity>& nodes, const std::string& pool);

// Plans on a copy of in.nodes.
RoundOutput plan_round(const RoundInput& in);
// Plans on in.nodes in place, with in.index over them (no copy of the
// capacity): the grants are taken from them (the overlay until the nodes
// report), and the index follows.
RoundOutput plan_round_live(RoundInput& in);
RoundOutput plan_fifo(const RoundInput& in);

// "fits nowhere" detail: how many nodes of the pool have how many free GPUs.
std::string free_histogram(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req);
// A reason's text as a user reads it (with its histogram, from `nodes`).
std::string reason_text(const Reason& r, const std::vector<NodeCapacity>& nodes);

}  // namespace troupe::policy

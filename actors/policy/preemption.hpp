// Preemption victim choice: pure.
// The rule (as in Kueue; docs/scheduling.md "Preemption"):
//   - work within its team's guarantee (not borrowed) may be preempted only
//     by higher-priority work of the same team;
//   - work a team borrowed may be preempted by another team's higher-priority
//     work (a priority preemption), or taken back by a team below its
//     guarantee whatever the priorities (a reclaim);
//   - under `order: las` (policy/las.hpp), work of a team whose service so
//     far put it in a higher band than a waiting job of the same team and
//     class may be preempted for it (budgeted, as a priority preemption).
// Only preemptible work (its class) is ever a victim. Churn protection
// shields a job from priority preemption, never borrowed work from its
// lender's reclaim. Priority preemptions count against the pool's budget
// (preemption.max_per_minute); reclaims do not.
// Victims are taken in order of least work lost (GPU-seconds since their last
// checkpoint, or since start), then lowest priority, then most recently
// started; a gang is one victim (whole or not at all). Victims are added until
// the preemptor fits, then any victim not needed for the fit is dropped.
// A victim's grace to checkpoint is its spec's, capped by the config.
// Unit tests: tests/unit/policy_preemption_test.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/policy/fit.hpp"
#include "messages/names.hpp"

namespace troupe::policy {

struct PreemptCandidate {
  std::string job_id;
  std::string team;
  int priority = 50;
  bool preemptible = true;
  bool borrowed = false;
  int64_t started_ms = 0;
  int64_t last_checkpoint_ms = 0;  // 0: none
  int64_t protected_until_ms = 0;  // churn protection
  std::vector<size_t> nodes;       // node per rank
  int gpus = 0;                    // per rank
  int cpus = 0;
  int64_t memory_mb = 0;
  // Its band now under `order: las` (policy/las.hpp), from its GPU-seconds
  // so far; -1: its team orders by submit time.
  int las_band = -1;
};

struct Preemptor {
  std::string job_id;
  std::string team;
  int priority = 50;
  bool below_guarantee = false;  // its team is owed capacity
  PlacementRequest req;
  int las_band = -1;  // its band in line under `order: las`; -1: fifo
};

// GPU-seconds of work lost if `c` stops now.
double work_lost_gpu_s(const PreemptCandidate& c, int64_t now_ms);

// `p`'s team is owed capacity and `c` is work another team borrowed.
bool is_reclaim(const Preemptor& p, const PreemptCandidate& c);

bool may_preempt(const Preemptor& p, const PreemptCandidate& c, int64_t now_ms);

struct VictimPlan {
  std::vector<size_t> victims;  // indices into the candidates
  std::vector<size_t> nodes;    // where the preemptor goes (node per rank) once they stop
  double gpu_s_lost = 0;
};

// Empty victims: no preemption can make room.
VictimPlan choose_victims(const std::vector<NodeCapacity>& nodes,
                          const std::vector<PreemptCandidate>& candidates, const Preemptor& p,
                          int64_t now_ms);

// Churn: protected when preempted `protect_after` times within `window_ms`.
int64_t protected_until(const std::vector<int64_t>& preempted_ms, int protect_after,
                        int64_t window_ms, int64_t protect_ms);

// A victim's time to checkpoint and exit: its spec's grace_s, else
// kDefaultPreemptGraceS, at most `max_grace_s` (the config's
// preemption.max_grace_s, kept on the job's record; <= 0: no cap).
inline constexpr int kDefaultPreemptGraceS = 30;
int preempt_grace_s(std::optional<int> spec_grace_s, int max_grace_s);

// --- one pool's decision after a round (the pool arbiter runs it) ---------------

// A pending job that fits nowhere and may preempt for room.
struct PreemptWant {
  std::string job_id;
  std::string team;
  int priority = 50;
  uint64_t seq = 0;              // submit order
  bool below_guarantee = false;  // its team is owed capacity
  PlacementRequest req;
  int las_band = -1;  // its band in line under `order: las`; -1: fifo
};

// Which of one team's jobs the round did not place look for victims, asked
// in queue order (the pool arbiter and troupe-load simulate both use it).
// A job looks when it fits nowhere, waits for a reservation, or waits behind
// another job's hold (`reason_code`), and its own hold does not start before
// victims would be gone. What its team is owed (guarantee - use) goes to its
// jobs in order: a job within it reclaims (below_guarantee); one beyond it
// preempts by priority only while the pool's budget lasts. A job already
// waiting for victims takes its part of what is owed and looks no further.
class WantGate {
 public:
  WantGate(int owed_gpus, bool budget_left) : owed_(owed_gpus), budget_left_(budget_left) {}
  // nullopt: it does not look for victims; else whether it is below its
  // team's guarantee.
  std::optional<bool> admit(int need_gpus, bool waiting_for_victims, const std::string* reason_code,
                            bool own_hold_soon);

 private:
  int owed_;
  bool budget_left_;
};

// What one pool's running work offers preemptors, kept as jobs start and
// end: the pool arbiter asks it before it builds candidates for every
// running job (most rounds of a full cluster have wants, and most of those
// can preempt nothing: same priority, no guarantee owed). may_preempt's rule
// without churn protection, so it may say yes where choose_victims then
// finds none, never no where it would find one (tested).
class VictimPool {
 public:
  void add(const std::string& team, int priority, bool preemptible, bool borrowed);
  void remove(const std::string& team, int priority, bool preemptible, bool borrowed);
  bool may_have_victim(const PreemptWant& w) const;
  bool empty() const { return all_of_.empty(); }

 private:
  // Priorities of preemptible running jobs, by team: all of them, and those
  // borrowed (the only ones another team may preempt).
  std::map<std::string, std::multiset<int>> all_of_;
  std::map<std::string, std::multiset<int>> borrowed_of_;
};

// How long a team below its guarantee, with work waiting in the pool, takes
// to get back to it (troupe_guarantee_restore_seconds): a histogram per
// team and pool, kept by the pool arbiter.
// Its buckets: names::kRestoreBucketsS.
struct RestoreWait {
  int64_t since_ms = 0;          // below its guarantee with work waiting since (0: not)
  std::vector<int64_t> buckets;  // observations per bound of the buckets, then +Inf
  double sum_s = 0;
  int64_t count = 0;
  // One look at the team. Back at its guarantee: the wait is observed (and
  // returned, in seconds). Nothing waiting any more: the wait is dropped.
  std::optional<double> step(bool below, bool waiting, int64_t now_ms);
};

// The per-pool budget counts preemptions over the last minute.
inline constexpr int64_t kBudgetWindowMs = 60000;
// Drops from `recent` (times of the pool's preemptions) what left the window.
void forget_old(std::vector<int64_t>& recent, int64_t now_ms);

struct PoolPreemption {
  Preemptor preemptor;
  VictimPlan plan;  // victims: indices into the candidates
  // Every victim is work another team borrowed, taken back for a team below
  // its guarantee: no budget, no hold (the pool lends nothing new until the
  // preemptor is placed: RoundInput::reclaiming).
  bool reclaim = false;
  size_t budgeted = 0;  // victims that count against the per-minute budget
  // The nodes the victims free (distinct), held for the preemptor from
  // `hold_start_ms` on (a backfill hold, policy/backfill.hpp); a priority
  // preemption only.
  std::vector<size_t> held_nodes;
  int64_t hold_start_ms = 0;
  int64_t preempting_until_ms = 0;  // its other reasons wait until then
  std::string why;                  // told to every victim
  std::string reason_code;          // the preemptor's reason (why::kPreempting, kReclaiming)
  std::string reason_text;
};

// The plans of one pool after a round. The wants are tried highest priority
// first (then those below their guarantee, then submit order), each on the
// capacity the earlier plans leave (what their victims free, less what their
// preemptors take), so no more is stopped than the wants need:
//   - reclaims: every want below its guarantee that borrowed work of other
//     teams makes room for, however many, outside the budget;
//   - at most one priority preemption, unless its budgeted victims would
//     overrun the budget (`recent_count` of `max_per_minute` already used):
//     then none (a preemptor below its guarantee then takes back only
//     borrowed work, if that is enough).
// The victims get `victims_grace_ms` to checkpoint and exit, so a hold
// starts then, and the preemptor's reasons are left alone for twice that.
std::vector<PoolPreemption> plan_preemption(const std::vector<NodeCapacity>& nodes,
                                            const std::vector<PreemptCandidate>& candidates,
                                            std::vector<PreemptWant> wants, size_t recent_count,
                                            int max_per_minute, int64_t victims_grace_ms,
                                            int64_t now_ms);

}  // namespace troupe::policy

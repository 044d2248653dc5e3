// Preemption victim choice: pure.
// A job that cannot fit may preempt running work that is
//   - preemptible (its class) and not protected against churn, and
//   - of a lower priority class, or — when the preemptor's team is below its
//     guarantee — borrowed by another team.
// Victims are taken in order of least work lost (GPU-seconds since their last
// checkpoint, or since start), then lowest priority, then most recently
// started; a gang is one victim (whole or not at all). Victims are added until
// the preemptor fits, then any victim not needed for the fit is dropped.
// A victim's grace to checkpoint is its spec's, capped by the config.
// Unit tests: tests/unit/policy_preemption_test.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/policy/fit.hpp"

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
};

struct Preemptor {
  std::string job_id;
  std::string team;
  int priority = 50;
  bool below_guarantee = false;  // its team is owed capacity
  PlacementRequest req;
};

// GPU-seconds of work lost if `c` stops now.
double work_lost_gpu_s(const PreemptCandidate& c, int64_t now_ms);

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
  bool empty() const { return priorities_.empty(); }

 private:
  std::multiset<int> priorities_;           // of preemptible running jobs
  std::map<std::string, int> borrowed_of_;  // preemptible borrowed running jobs, by team
  int borrowed_ = 0;
};

// The per-pool budget counts preemptions over the last minute.
inline constexpr int64_t kBudgetWindowMs = 60000;
// Drops from `recent` (times of the pool's preemptions) what left the window.
void forget_old(std::vector<int64_t>& recent, int64_t now_ms);

struct PoolPreemption {
  Preemptor preemptor;
  VictimPlan plan;  // victims: indices into the candidates
  // The nodes the victims free (distinct), held for the preemptor from
  // `hold_start_ms` on (a backfill hold, policy/backfill.hpp).
  std::vector<size_t> held_nodes;
  int64_t hold_start_ms = 0;
  int64_t preempting_until_ms = 0;  // its other reasons wait until then
  std::string why;                  // told to every victim
  std::string reason_text;          // the preemptor's reason (why::kPreempting)
};

// At most one plan per pool per round: the wants are tried highest priority
// first (then those below their guarantee, then submit order); the first
// that some victims make room for wins, unless its victims would overrun
// the budget (`recent_count` of `max_per_minute` already used): then none.
// The victims get `victims_grace_ms` to checkpoint and exit, so the hold
// starts then, and the preemptor's reasons are left alone for twice that.
std::optional<PoolPreemption> plan_preemption(const std::vector<NodeCapacity>& nodes,
                                              const std::vector<PreemptCandidate>& candidates,
                                              std::vector<PreemptWant> wants, size_t recent_count,
                                              int max_per_minute, int64_t victims_grace_ms,
                                              int64_t now_ms);

}  // namespace troupe::policy

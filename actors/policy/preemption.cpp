#include "actors/policy/preemption.hpp"

#include <algorithm>
#include <numeric>
#include <set>
#include <tuple>

#include "actors/policy/why.hpp"

namespace troupe::policy {

double work_lost_gpu_s(const PreemptCandidate& c, int64_t now_ms) {
  int64_t since = std::max(c.started_ms, c.last_checkpoint_ms);
  double secs = std::max<int64_t>(0, now_ms - since) / 1000.0;
  return secs * c.gpus * static_cast<double>(c.nodes.size());
}

bool is_reclaim(const Preemptor& p, const PreemptCandidate& c) {
  return p.below_guarantee && c.borrowed && c.team != p.team;
}

bool may_preempt(const Preemptor& p, const PreemptCandidate& c, int64_t now_ms) {
  if (!c.preemptible || c.job_id == p.job_id) return false;
  if (c.team != p.team && !c.borrowed) return false;  // within its team's guarantee
  if (is_reclaim(p, c)) return true;  // churn protection never shields it from its lender
  if (c.protected_until_ms > now_ms) return false;
  if (c.priority < p.priority) return true;
  // Least attained service: same team, same class, a higher band now.
  return p.las_band >= 0 && c.las_band > p.las_band && c.team == p.team && c.priority == p.priority;
}

namespace {
void give_back(std::vector<NodeCapacity>& nodes, const PreemptCandidate& c) {
  for (size_t n : c.nodes) {
    if (n >= nodes.size()) continue;
    nodes[n].gpus_free += c.gpus;
    nodes[n].cpus_free += c.cpus;
    nodes[n].memory_free_mb += c.memory_mb;
  }
}
}  // namespace

VictimPlan choose_victims(const std::vector<NodeCapacity>& nodes,
                          const std::vector<PreemptCandidate>& candidates, const Preemptor& p,
                          int64_t now_ms) {
  VictimPlan plan;
  std::vector<size_t> order;
  for (size_t i = 0; i < candidates.size(); ++i)
    if (may_preempt(p, candidates[i], now_ms)) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& x = candidates[a];
    const auto& y = candidates[b];
    return std::make_tuple(work_lost_gpu_s(x, now_ms), x.priority, -x.started_ms, x.job_id) <
           std::make_tuple(work_lost_gpu_s(y, now_ms), y.priority, -y.started_ms, y.job_id);
  });
  auto future = nodes;
  std::vector<size_t> chosen;
  std::vector<size_t> ranks;
  for (size_t i : order) {
    give_back(future, candidates[i]);
    chosen.push_back(i);
    ranks = place(future, p.req);
    if (!ranks.empty()) break;
  }
  if (ranks.empty()) return plan;
  // Drop victims the fit does not need (latest added are the costliest).
  for (size_t k = chosen.size(); k-- > 0;) {
    auto without = nodes;
    for (size_t j = 0; j < chosen.size(); ++j)
      if (j != k) give_back(without, candidates[chosen[j]]);
    auto r = place(without, p.req);
    if (!r.empty()) {
      chosen.erase(chosen.begin() + static_cast<std::ptrdiff_t>(k));
      ranks = r;
    }
  }
  plan.victims = chosen;
  plan.nodes = ranks;
  for (size_t i : chosen) plan.gpu_s_lost += work_lost_gpu_s(candidates[i], now_ms);
  return plan;
}

int64_t protected_until(const std::vector<int64_t>& preempted_ms, int protect_after,
                        int64_t window_ms, int64_t protect_ms) {
  if (protect_after <= 0 || preempted_ms.empty()) return 0;
  int64_t last = preempted_ms.back();
  int recent = 0;
  for (int64_t t : preempted_ms) recent += (last - t <= window_ms) ? 1 : 0;
  return recent >= protect_after ? last + protect_ms : 0;
}

int preempt_grace_s(std::optional<int> spec_grace_s, int max_grace_s) {
  int grace = spec_grace_s.value_or(kDefaultPreemptGraceS);
  return max_grace_s > 0 ? std::min(grace, max_grace_s) : grace;
}

std::optional<double> RestoreWait::step(bool below, bool waiting, int64_t now_ms) {
  if (below && waiting) {
    if (since_ms == 0) since_ms = now_ms;
    return std::nullopt;
  }
  if (since_ms == 0) return std::nullopt;
  int64_t since = since_ms;
  since_ms = 0;
  if (below) return std::nullopt;  // it stopped waiting before it got there
  double s = static_cast<double>(std::max<int64_t>(0, now_ms - since)) / 1000.0;
  buckets.resize(names::kRestoreBucketsS.size() + 1, 0);
  size_t b = 0;
  while (b < names::kRestoreBucketsS.size() && s > names::kRestoreBucketsS[b]) ++b;
  ++buckets[b];
  sum_s += s;
  ++count;
  return s;
}

void forget_old(std::vector<int64_t>& recent, int64_t now_ms) {
  recent.erase(std::remove_if(recent.begin(), recent.end(),
                              [&](int64_t t) { return now_ms - t > kBudgetWindowMs; }),
               recent.end());
}

void VictimPool::add(const std::string& team, int priority, bool preemptible, bool borrowed) {
  if (!preemptible) return;
  all_of_[team].insert(priority);
  if (borrowed) borrowed_of_[team].insert(priority);
}

namespace {
void drop(std::map<std::string, std::multiset<int>>& by_team, const std::string& team,
          int priority) {
  auto t = by_team.find(team);
  if (t == by_team.end()) return;
  if (auto it = t->second.find(priority); it != t->second.end()) t->second.erase(it);
  if (t->second.empty()) by_team.erase(t);
}
}  // namespace

void VictimPool::remove(const std::string& team, int priority, bool preemptible, bool borrowed) {
  if (!preemptible) return;
  drop(all_of_, team, priority);
  if (borrowed) drop(borrowed_of_, team, priority);
}

bool VictimPool::may_have_victim(const PreemptWant& w) const {
  // Bands move as work runs: a las want looks at its team's candidates.
  if (w.las_band >= 0 && all_of_.count(w.team)) return true;
  if (auto own = all_of_.find(w.team); own != all_of_.end() && *own->second.begin() < w.priority)
    return true;
  for (const auto& [team, priorities] : borrowed_of_)
    if (team != w.team && (w.below_guarantee || *priorities.begin() < w.priority)) return true;
  return false;
}

namespace {
// The capacity a plan leaves to the next: its victims' given back, its
// preemptor's taken.
void apply(std::vector<NodeCapacity>& future, const std::vector<PreemptCandidate>& candidates,
           const PoolPreemption& out) {
  for (size_t v : out.plan.victims) give_back(future, candidates[v]);
  take(future, out.preemptor.req, out.plan.nodes);
}

std::string reclaim_text(const std::vector<PreemptCandidate>& candidates, const VictimPlan& plan,
                         int64_t victims_grace_ms) {
  int gpus = 0;
  std::set<std::string> teams;
  for (size_t v : plan.victims) {
    gpus += candidates[v].gpus * static_cast<int>(candidates[v].nodes.size());
    teams.insert(candidates[v].team);
  }
  std::string from;
  for (const auto& t : teams) from += (from.empty() ? "" : ", ") + t;
  return "reclaiming " + std::to_string(gpus) + " GPU(s) borrowed by team(s) " + from + " (" +
         std::to_string(plan.victims.size()) + " job(s)); they have up to " +
         std::to_string(victims_grace_ms / 1000) + " s to stop, then this job runs";
}
}  // namespace

std::vector<PoolPreemption> plan_preemption(const std::vector<NodeCapacity>& nodes,
                                            const std::vector<PreemptCandidate>& candidates,
                                            std::vector<PreemptWant> wants, size_t recent_count,
                                            int max_per_minute, int64_t victims_grace_ms,
                                            int64_t now_ms) {
  std::sort(wants.begin(), wants.end(), [](const PreemptWant& a, const PreemptWant& b) {
    return std::make_tuple(-a.priority, !a.below_guarantee, a.seq) <
           std::make_tuple(-b.priority, !b.below_guarantee, b.seq);
  });
  std::vector<PoolPreemption> plans;
  auto future = nodes;
  auto left = candidates;  // those chosen are no longer candidates
  bool priority_done = static_cast<int>(recent_count) >= max_per_minute;
  for (auto& want : wants) {
    PoolPreemption out;
    auto& p = out.preemptor;
    p.job_id = want.job_id;
    p.team = want.team;
    p.priority = want.priority;
    p.below_guarantee = want.below_guarantee;
    p.las_band = want.las_band;
    p.req = want.req;
    // Room an earlier plan frees: no victim of its own.
    if (!plans.empty()) {
      auto ranks = place(future, p.req);
      if (!ranks.empty()) {
        take(future, p.req, ranks);
        continue;
      }
    }
    out.plan = choose_victims(future, left, p, now_ms);
    for (size_t v : out.plan.victims) out.budgeted += is_reclaim(p, left[v]) ? 0 : 1;
    bool over = priority_done || static_cast<int>(recent_count + out.budgeted) > max_per_minute;
    if (out.budgeted > 0 && over) {
      priority_done = true;  // a higher want the budget stops stops the lower ones too
      if (!p.below_guarantee) continue;
      auto borrowed_only = left;  // take back only what was borrowed
      for (auto& c : borrowed_only) c.preemptible = c.preemptible && is_reclaim(p, c);
      out.plan = choose_victims(future, borrowed_only, p, now_ms);
      out.budgeted = 0;
    }
    if (out.plan.victims.empty()) continue;
    out.reclaim = out.budgeted == 0;
    if (!out.reclaim) priority_done = true;  // one priority preemption a round
    out.why = "for job " + p.job_id + " of team " + p.team +
              (p.below_guarantee ? " (below its guarantee)"
               : p.las_band >= 0 ? " (higher priority, or less GPU time so far: order las)"
                                 : " (higher priority)");
    out.preempting_until_ms = now_ms + 2 * victims_grace_ms;
    if (out.reclaim) {
      out.reason_code = why::kReclaiming;
      out.reason_text = reclaim_text(left, out.plan, victims_grace_ms);
    } else {
      std::set<size_t> distinct(out.plan.nodes.begin(), out.plan.nodes.end());
      out.held_nodes.assign(distinct.begin(), distinct.end());
      out.hold_start_ms = now_ms + victims_grace_ms;
      out.reason_code = why::kPreempting;
      out.reason_text = "preempting " + std::to_string(out.plan.victims.size()) +
                        " job(s) to make room; their GPUs are held for this job";
    }
    apply(future, left, out);
    for (size_t v : out.plan.victims) left[v].preemptible = false;
    recent_count += out.budgeted;
    plans.push_back(std::move(out));
  }
  return plans;
}

std::optional<bool> WantGate::admit(int need_gpus, bool waiting_for_victims,
                                    const std::string* reason_code, bool own_hold_soon) {
  if (waiting_for_victims) {
    owed_ -= need_gpus;
    return std::nullopt;
  }
  if (reason_code == nullptr) return std::nullopt;
  const auto& code = *reason_code;
  if (code != why::kFitsNowhere && code != why::kReservation && code != why::kHeldForOther)
    return std::nullopt;
  if (own_hold_soon) return std::nullopt;  // waiting for its hold is faster
  bool below = need_gpus <= owed_;
  if (below) owed_ -= need_gpus;
  if (!below && !budget_left_) return std::nullopt;
  return below;
}

}  // namespace troupe::policy

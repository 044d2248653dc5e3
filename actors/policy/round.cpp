#include "actors/policy/round.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>

namespace troupe::policy {

namespace {

bool in_pool(const NodeCapacity& n, const std::string& pool) {
  return !n.pool.empty() && (pool.empty() || n.pool == pool);
}

std::string fmt_share(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", x * 100);
  return buf;
}

std::string fmt_time(int64_t ms, int64_t now) {
  if (ms == kNever) return "an unknown time (running work has no max_runtime_s)";
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%02d:%02d:%02dZ (in %llds)", tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long long>((ms - now + 999) / 1000));
  return buf;
}

bool any_node_could_fit(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req) {
  for (const auto& n : nodes)
    if (in_pool(n, req.pool) && could_fit(n, req)) return true;
  return false;
}

}  // namespace

PoolTotals pool_totals(const std::vector<NodeCapacity>& nodes, const std::string& pool) {
  PoolTotals t;
  for (const auto& n : nodes) {
    if (!in_pool(n, pool) || !n.alive) continue;
    t.gpus += n.gpus_total;
    t.cpus += n.cpus_total;
    t.memory_mb += n.memory_total_mb;
  }
  return t;
}

std::string free_histogram(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req) {
  std::map<int, int, std::greater<int>> by_free;  // free GPUs -> node count
  int total = 0;
  for (const auto& n : nodes) {
    if (!in_pool(n, req.pool) || !n.alive) continue;
    if (!req.gpu_type.empty() && req.gpus > 0 && n.gpu_type != req.gpu_type) continue;
    ++by_free[std::max(0, n.gpus_free)];
    ++total;
  }
  std::string s;
  for (const auto& [free, count] : by_free) {
    if (!s.empty()) s += ", ";
    s += std::to_string(count) + (count == 1 ? " node has " : " nodes have ") + std::to_string(free) + " free";
  }
  return std::to_string(total) + " nodes in pool" + (s.empty() ? "" : ": " + s);
}

RoundOutput plan_round(const RoundInput& in) {
  RoundOutput out;
  out.hold = in.hold;
  auto nodes = in.nodes;  // overlay for this round
  std::vector<TeamStanding> standings;
  for (const auto& t : in.teams) standings.push_back(t.standing);
  auto totals = pool_totals(nodes, in.pool);
  auto order = team_order(standings, totals);

  // A hold whose job is no longer demanded (placed, canceled) lapses.
  if (out.hold.active()) {
    bool wanted = false;
    for (const auto& t : in.teams)
      for (const auto& d : t.demands) wanted = wanted || d.job_id == out.hold.job_id;
    if (!wanted) out.hold = Hold{};
  }

  std::vector<std::string> ahead;  // teams granted this round, in order (for fair-share reasons)
  for (size_t rank_in_order = 0; rank_in_order < order.size(); ++rank_in_order) {
    size_t ti = order[rank_in_order];
    const auto& team = in.teams[ti];
    auto& standing = standings[ti];
    if (team.demands.empty()) continue;
    if (team.busy) {
      for (const auto& d : team.demands)
        out.reasons[d.job_id] = {why::kNegotiating, "team " + standing.team +
                                                        " is placing a job now; this one is next in line"};
      continue;
    }
    bool granted = false;
    for (size_t di = 0; di < team.demands.size() && !granted; ++di) {
      const auto& d = team.demands[di];
      const auto& req = d.req;
      int need = req.gpus * req.workers;
      auto quota = admit_quota(standing, need);
      if (!quota.ok) {
        out.reasons[d.job_id] = {standing.limit >= 0 && standing.used.gpus + need > standing.limit
                                     ? why::kOverLimit
                                     : why::kNoBorrow,
                                 quota.reason};
        continue;
      }
      if (!any_node_could_fit(nodes, req)) {
        std::string type = req.gpu_type.empty() ? "any type" : req.gpu_type;
        out.reasons[d.job_id] = {why::kNoNodeOfType,
                                 "no node in pool " + req.pool + " of GPU type " + type + " can ever hold " +
                                     std::to_string(req.gpus) + " GPUs per worker"};
        continue;
      }
      bool is_hold_job = out.hold.active() && out.hold.job_id == d.job_id;
      NodeMask mask = is_hold_job ? NodeMask{}
                                  : usable_under_hold(out.hold, nodes.size(), in.now_ms, d.max_runtime_s);
      auto ranks = place(nodes, req, mask);
      if (!ranks.empty()) {
        take(nodes, req, ranks);
        standing.used.gpus += need;
        standing.used.cpus += req.cpus * req.workers;
        standing.used.memory_mb += req.memory_mb * req.workers;
        out.grants.push_back({ti, di, ranks, quota.borrowed});
        if (is_hold_job) out.hold = Hold{};
        granted = true;
        ahead.push_back(standing.team);
        break;
      }
      // Does not fit now. Would it fit without the hold, or before the
      // more deserving teams took their share this round?
      if (!place(nodes, req).empty()) {
        out.reasons[d.job_id] = {why::kHeldForOther,
                                 "the free capacity is held for job " + out.hold.job_id +
                                     " (reservation from " + fmt_time(out.hold.start_ms, in.now_ms) +
                                     "); this job's max_runtime_s does not end before then"};
      } else if (!place(in.nodes, req, mask).empty() && !ahead.empty()) {
        std::string others;
        for (const auto& a : ahead) others += (others.empty() ? "" : ", ") + a;
        out.reasons[d.job_id] = {why::kFairShare,
                                 "waiting for fair share: team " + standing.team + " has share " +
                                     fmt_share(weighted_share(standing, totals)) +
                                     " (weight-adjusted); teams served first this round: " + others};
      } else {
        out.reasons[d.job_id] = {why::kFitsNowhere,
                                 "fits nowhere now: needs " + std::to_string(req.workers) + " x " +
                                     std::to_string(req.gpus) + " GPUs; " + free_histogram(nodes, req)};
        if (di == 0 && !out.hold.active()) {
          out.hold = plan_hold(nodes, in.running, req, d.job_id, in.now_ms);
        }
      }
      if (out.hold.active() && out.hold.job_id == d.job_id)
        out.reasons[d.job_id] = {why::kReservation,
                                 "waiting for its reservation: " + std::to_string(out.hold.nodes.size()) +
                                     " node(s) held, expected to fit at " +
                                     fmt_time(out.hold.start_ms, in.now_ms) + "; " +
                                     free_histogram(nodes, req)};
    }
    // Jobs behind the granted one stay queued this round.
    if (granted) {
      for (size_t di = 0; di < team.demands.size(); ++di) {
        const auto& d = team.demands[di];
        bool is_granted = false;
        for (const auto& g : out.grants) is_granted = is_granted || (g.team == ti && g.demand == di);
        if (!is_granted && !out.reasons.count(d.job_id))
          out.reasons[d.job_id] = {why::kBehind, "behind " + std::to_string(di) +
                                                     " job(s) of higher priority or earlier submission in team " +
                                                     standing.team + "'s queue"};
      }
    }
  }
  return out;
}

}  // namespace troupe::policy

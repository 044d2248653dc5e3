#include "actors/policy/round.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>

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
  // ISO 8601 in UTC: a client shows it in its own time zone (troupe why).
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ (in %llds)", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long long>((ms - now + 999) / 1000));
  return buf;
}

bool any_node_could_fit(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req) {
  for (const auto& n : nodes)
    if (in_pool(n, req.pool) && could_fit(n, req)) return true;
  return false;
}

// Why no node of the pool could ever hold `req` (any_node_could_fit is false).
// An image is the cause when the same job without one could fit somewhere.
Reason never_fits(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req) {
  if (req.needs_runtime()) {
    PlacementRequest on_host = req;
    on_host.image.clear();
    if (any_node_could_fit(nodes, on_host)) {
      bool any_runtime = false;
      for (const auto& n : nodes)
        any_runtime = any_runtime || (in_pool(n, req.pool) && !n.runtime.empty());
      std::string head =
          "needs a container runtime for image " + req.image + ": no node in pool " + req.pool;
      return {why::kNoRuntime,
              any_runtime
                  ? head + " that runs images (troupe-node --runtime podman) can ever hold " +
                        std::to_string(req.gpus) + " GPUs per worker" +
                        (req.gpu_type.empty() ? "" : " of GPU type " + req.gpu_type)
                  : head + " runs images (troupe-node --runtime podman)"};
    }
  }
  std::string type = req.gpu_type.empty() ? "any type" : req.gpu_type;
  if (req.shared()) {
    PlacementRequest whole = req;
    whole.gpu_memory_mb = 0;
    if (any_node_could_fit(nodes, whole))
      return {why::kNoNodeOfType,
              "shares a GPU (" + std::to_string(req.gpu_memory_mb) +
                  " MB of its memory): no node in pool " + req.pool + " of GPU type " + type +
                  " declares GPUs with more memory than that (troupe-node --gpu-memory-mb, else "
                  "nvidia-smi)"};
  }
  return {why::kNoNodeOfType, "no node in pool " + req.pool + " of GPU type " + type +
                                  " can ever hold " + std::to_string(req.gpus) +
                                  " GPUs per worker"};
}

}  // namespace

int64_t shared_charge(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
                      const CapacityIndex* index) {
  if (auto at = best_fit(nodes, req, {}, index))
    return shared_milli(req.gpu_memory_mb, nodes[*at].gpu_memory_mb);
  int64_t largest = 0;
  for (const auto& n : nodes)
    if (n.pool == req.pool) largest = std::max(largest, n.gpu_memory_mb);
  return shared_milli(req.gpu_memory_mb, largest);
}

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
  int total = 0, closed = 0;                      // schedulable; cordoned or draining
  for (const auto& n : nodes) {
    if (!in_pool(n, req.pool) || !n.alive || !eligible(n, req)) continue;
    if (!n.schedulable) {
      ++closed;  // its free GPUs take no work: not counted as free
      continue;
    }
    ++by_free[std::max(0, n.gpus_free)];
    ++total;
  }
  std::string shut = closed == 0
                         ? std::string()
                         : std::to_string(closed) + (closed == 1 ? " node is" : " nodes are") +
                               " cordoned or draining";
  if (total == 0 && closed > 0)
    return "every node of pool " + req.pool + " that could run it is cordoned or draining (" +
           std::to_string(closed) + ")";
  std::string s;
  for (const auto& [free, count] : by_free) {
    if (!s.empty()) s += ", ";
    s += std::to_string(count) + (count == 1 ? " node has " : " nodes have ") +
         std::to_string(free) + " free";
  }
  return std::to_string(total) + " nodes in pool" + (s.empty() ? "" : ": " + s) +
         (shut.empty() ? "" : "; " + shut);
}

RoundOutput plan_fifo(const RoundInput& in) {
  RoundOutput out;
  auto nodes = in.nodes;
  struct Item {
    uint64_t seq;
    size_t ti, di;
  };
  std::vector<Item> items;
  for (size_t ti = 0; ti < in.teams.size(); ++ti)
    for (size_t di = 0; di < in.teams[ti].demands.size(); ++di)
      items.push_back({in.teams[ti].demands[di].seq, ti, di});
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.seq < b.seq; });
  std::vector<int> slots;
  for (const auto& t : in.teams) slots.push_back(t.slots);
  std::string blocker;
  for (const auto& it : items) {
    const auto& d = in.teams[it.ti].demands[it.di];
    if (d.guest) {  // the baseline places an any-type job in its first pool only
      out.reasons[d.job_id] = {why::kPreferred, "fifo: placed in its first candidate pool only"};
      continue;
    }
    if (blocker.empty() && slots[it.ti] > 0) {
      auto ranks = place(nodes, d.req);  // same fit as Troupe's: the baseline differs in order only
      if (!ranks.empty()) {
        take(nodes, d.req, ranks);
        --slots[it.ti];
        out.grants.push_back({it.ti, it.di, ranks, false});
        continue;
      }
      blocker = d.job_id;
      if (in.backfill) {
        // EASY: the head gets a reservation from the running work's promised ends.
        if (!in.hold.active() || in.hold.job_id != d.job_id)
          out.hold = plan_hold(nodes, in.running_of ? in.running_of() : in.running, d.req, d.job_id,
                               in.now_ms);
        else
          out.hold = in.hold;
        out.reasons[d.job_id] = {
            why::kReservation,
            "fifo-backfill: the first in line; " + std::to_string(out.hold.nodes.size()) +
                " node(s) held, expected to fit at " + fmt_time(out.hold.start_ms, in.now_ms),
            d.req};
        continue;
      }
      out.reasons[d.job_id] = {why::kFitsNowhere,
                               "fifo: fits nowhere now; " + free_histogram(nodes, d.req)};
      continue;
    }
    if (in.backfill && !blocker.empty() && slots[it.ti] > 0) {
      // Behind the head: only where it does not delay the head's reservation.
      auto mask = usable_under_hold(out.hold, nodes.size(), in.now_ms, d.max_runtime_s);
      auto ranks = place(nodes, d.req, mask);
      if (!ranks.empty()) {
        take(nodes, d.req, ranks);
        --slots[it.ti];
        out.grants.push_back({it.ti, it.di, ranks, false});
        continue;
      }
    }
    out.reasons[d.job_id] = {
        why::kBehind, "fifo: behind job " + (blocker.empty() ? std::string("(placing)") : blocker)};
    if (blocker.empty()) blocker = d.job_id;
  }
  return out;
}

std::string reason_text(const Reason& r, const std::vector<NodeCapacity>& nodes) {
  return r.histogram ? r.text + "; " + free_histogram(nodes, r.req) : r.text;
}

RoundOutput plan_round(const RoundInput& in) {
  RoundInput copy = in;
  CapacityIndex index(copy.nodes);
  copy.index = &index;
  return plan_round_live(copy);
}

RoundOutput plan_round_live(RoundInput& in) {
  if (in.fifo) {
    RoundOutput out = plan_fifo(in);
    for (const auto& g : out.grants)
      take(in.nodes, in.teams[g.team].demands[g.demand].req, g.nodes, in.index);
    return out;
  }
  RoundOutput out;
  out.hold = in.hold;
  auto& nodes = in.nodes;  // planned on in place: the grants are taken from it
  CapacityIndex* index = in.index;
  std::vector<TeamStanding> standings;
  for (const auto& t : in.teams) standings.push_back(t.standing);
  auto totals = pool_totals(nodes, in.pool);

  // A hold whose job is no longer demanded (placed, canceled) lapses.
  if (out.hold.active()) {
    bool wanted = false;
    for (const auto& t : in.teams)
      for (const auto& d : t.demands) wanted = wanted || d.job_id == out.hold.job_id;
    if (!wanted) out.hold = Hold{};
  }

  std::vector<std::string> ahead;  // teams granted earlier this round (for fair-share reasons)
  bool hold_decided = false;       // the most deserving head that fits nowhere has the hold
  std::vector<int> slots;
  std::vector<std::vector<char>> done;  // per team, per demand: granted or failed this round
  for (const auto& t : in.teams) {
    slots.push_back(t.slots);
    done.emplace_back(t.demands.size(), 0);
  }
  for (size_t ti = 0; ti < in.teams.size(); ++ti) {
    if (slots[ti] > 0) continue;
    for (const auto& d : in.teams[ti].demands)
      out.reasons[d.job_id] = {
          why::kNegotiating,
          "team " + in.teams[ti].standing.team + " is placing its jobs now; this one is in line"};
  }

  // One demand of one team: grant it, or give its reason. Returns whether granted.
  auto consider = [&](size_t ti, size_t di) {
    auto& standing = standings[ti];
    const auto& d = in.teams[ti].demands[di];
    const auto& req = d.req;
    for (const auto& other : d.prefer) {
      PlacementRequest there = req;
      there.pool = other;
      if (!place(nodes, there, {}, index).empty()) {
        out.reasons[d.job_id] = {why::kPreferred, "fits now in pool " + other +
                                                      ", which it prefers to pool " + in.pool +
                                                      ": it is placed there"};
        return false;
      }
    }
    // A shared worker is charged its part of the GPU it would get (the one
    // best fit picks now; the pool's largest GPU when none has room).
    int64_t shared = req.shared() ? shared_charge(nodes, req, index) : 0;
    int64_t need = req.shared() ? shared : int64_t{req.gpus} * req.workers * 1000;
    auto quota = admit_quota_milli(standing, need);
    if (!quota.ok) {
      out.reasons[d.job_id] = {
          standing.limit >= 0 && gpu_milli(standing.used) + need > int64_t{standing.limit} * 1000
              ? why::kOverLimit
              : why::kNoBorrow,
          quota.reason};
      return false;
    }
    if (quota.borrowed && in.reclaiming) {
      out.reasons[d.job_id] = {why::kNoBorrow,
                               "team " + standing.team +
                                   " would borrow, and borrowed GPUs of this pool are being "
                                   "given back to a team below its guarantee"};
      return false;
    }
    if (!any_node_could_fit(nodes, req)) {
      out.reasons[d.job_id] = never_fits(nodes, req);
      return false;
    }
    bool is_hold_job = out.hold.active() && out.hold.job_id == d.job_id;
    NodeMask mask = is_hold_job
                        ? NodeMask{}
                        : usable_under_hold(out.hold, nodes.size(), in.now_ms, d.max_runtime_s);
    auto ranks = place(nodes, req, mask, index);
    if (!ranks.empty()) {
      if (req.shared()) shared = shared_milli(req.gpu_memory_mb, nodes[ranks[0]].gpu_memory_mb);
      take(nodes, req, ranks, index);
      if (req.shared())
        standing.used.shared_milli += shared;
      else
        standing.used.gpus += req.gpus * req.workers;
      standing.used.cpus += req.cpus * req.workers;
      standing.used.memory_mb += req.memory_mb * req.workers;
      out.grants.push_back({ti, di, ranks, quota.borrowed, shared});
      out.reasons.erase(d.job_id);
      if (is_hold_job) out.hold = Hold{};
      ahead.push_back(standing.team);
      return true;
    }
    // Does not fit now. Would it without the hold, or before the more
    // deserving teams took their share this round (their grants given back
    // for the question)?
    auto fits_before_grants = [&] {
      auto req_of = [&](const Grant& g) -> const PlacementRequest& {
        return in.teams[g.team].demands[g.demand].req;
      };
      for (const auto& g : out.grants) give_back(nodes, req_of(g), g.nodes, index);
      bool fits = !place(nodes, req, mask, index).empty();
      for (const auto& g : out.grants) take(nodes, req_of(g), g.nodes, index);
      return fits;
    };
    if (!place(nodes, req, {}, index).empty()) {
      out.reasons[d.job_id] = {why::kHeldForOther,
                               "the free capacity is held for job " + out.hold.job_id +
                                   " (reservation from " + fmt_time(out.hold.start_ms, in.now_ms) +
                                   "); this job's max_runtime_s does not end before then"};
    } else if (!ahead.empty() && fits_before_grants()) {
      std::set<std::string> others(ahead.begin(), ahead.end());
      std::string list;
      for (const auto& a : others) list += (list.empty() ? "" : ", ") + a;
      out.reasons[d.job_id] = {why::kFairShare,
                               "waiting for fair share: team " + standing.team + " has share " +
                                   fmt_share(weighted_share(standing, totals)) +
                                   " (weight-adjusted); served first this round: " + list};
    } else {
      out.reasons[d.job_id] = {why::kFitsNowhere,
                               "fits nowhere now: needs " + std::to_string(req.workers) + " x " +
                                   std::to_string(req.gpus) + " GPUs",
                               req};
      bool head = true;
      for (size_t k = 0; k < di; ++k) head = head && done[ti][k] == 2;  // only failures before it
      // The hold goes to the head of the most deserving queue that fits
      // nowhere; it moves when a more deserving head needs it. A 1-GPU job
      // needs none: the next GPU that frees anywhere fits it, and fair share
      // already decides whose it is.
      bool needs_block = (req.workers > 1 || req.gpus > 1) && !d.guest;
      if (head && !hold_decided && needs_block) {
        hold_decided = true;
        if (!out.hold.active() || out.hold.job_id != d.job_id)
          out.hold = plan_hold(nodes, in.running_of ? in.running_of() : in.running, req, d.job_id,
                               in.now_ms);
      }
    }
    if (out.hold.active() && out.hold.job_id == d.job_id)
      out.reasons[d.job_id] = {
          why::kReservation,
          "waiting for its reservation: " + std::to_string(out.hold.nodes.size()) +
              " node(s) held, expected to fit at " + fmt_time(out.hold.start_ms, in.now_ms),
          req};
    return false;
  };

  for (bool progress = true; progress;) {
    progress = false;
    for (size_t ti : team_order(standings, totals)) {
      if (slots[ti] <= 0) continue;
      for (size_t di = 0; di < in.teams[ti].demands.size(); ++di) {
        if (done[ti][di]) continue;
        bool granted = consider(ti, di);
        done[ti][di] = granted ? 1 : 2;
        if (granted) {
          --slots[ti];
          progress = true;
          break;  // one grant per team per pass
        }
      }
    }
  }
  // Demands never reached this round stay queued behind the others.
  for (size_t ti = 0; ti < in.teams.size(); ++ti) {
    for (size_t di = 0; di < in.teams[ti].demands.size(); ++di) {
      const auto& d = in.teams[ti].demands[di];
      if (done[ti][di] || out.reasons.count(d.job_id)) continue;
      out.reasons[d.job_id] = {why::kBehind,
                               "behind " + std::to_string(di) +
                                   " job(s) of higher priority or earlier submission in team " +
                                   in.teams[ti].standing.team + "'s queue"};
    }
  }
  return out;
}

}  // namespace troupe::policy

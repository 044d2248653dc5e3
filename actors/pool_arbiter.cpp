#include "actors/pool_arbiter.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "actors/policy/books.hpp"
#include "actors/policy/config.hpp"
#include "actors/policy/demand.hpp"
#include "actors/policy/las.hpp"
#include "actors/policy/overlay.hpp"
#include "actors/policy/preemption.hpp"
#include "actors/policy/round.hpp"
#include "actors/policy/shards.hpp"
#include "actors/shrink.hpp"
#include "actors/views.hpp"
#include "job_spec.pb.h"
#include "messages/names.hpp"
#include "messages/spec.hpp"

namespace troupe {

using namespace troupe::atoms;
using nlohmann::json;

namespace {

constexpr auto kTick = std::chrono::milliseconds(500);
// Grants a team may have in flight (gang reservations placing its jobs at once).
constexpr int kMaxInflight = 256;
// A grant not answered (placed or unplaced) after this is dropped: negotiations
// time out well before (a few seconds per node asked).
constexpr int64_t kInflightExpiryMs = 60000;

struct TeamDemand {
  TeamQueueActor queue;
  std::vector<JobTicket> tickets;
  int32_t pending_jobs = 0;
  int32_t pending_gpus = 0;
  int32_t pending_flexible = 0;  // of pending_jobs, any-type jobs (first candidate here)
  struct Inflight {
    JobTicket ticket;
    bool borrowed = false;
    int64_t granted_ms = 0;
  };
  std::unordered_map<std::string, Inflight> inflight;  // grants being carried out, by job id
};

struct Running {
  std::string team;
  std::string pool;
  std::vector<std::string> nodes;  // by rank
  // Their places in the capacity (the index only grows, so they stay right),
  // looked up once: planning a hold lists every running job.
  std::vector<size_t> at;
  policy::PlacementRequest req;
  int64_t ends_ms = policy::kNever;
  bool borrowed = false;
  int priority = 50;
  bool preemptible = true;
  int64_t started_ms = 0;
  int64_t last_checkpoint_ms = 0;
  bool preempting = false;  // asked to stop for a preemptor
  // `order: las`: GPU-seconds of its ended attempts and the band thresholds
  // (empty: fifo); its band now adds this attempt's service.
  double attained_gpu_s = 0;
  std::vector<double> las_thresholds;
};

struct Figures {
  int64_t preemptions = 0;      // victim jobs asked to stop
  int64_t reclaims = 0;         // ... of them, borrowed work taken back by its lender
  double gpu_seconds_lost = 0;  // work since their last checkpoint x GPUs
};

struct ArbiterState {
  std::string pool;  // the one pool this arbiter plans
  Wiring w;
  OutboxPtr out;
  Figures figures;
  std::unordered_map<std::string, std::vector<int64_t>> preempted_at;  // job -> when (churn)
  std::map<std::string, std::vector<int64_t>> pool_preemptions;        // pool -> when (rate limit)
  std::unordered_map<std::string, int64_t> preempting_for;             // preemptor -> until
  policy::ClusterConfig cfg = policy::open_config();
  std::vector<policy::NodeCapacity> caps;
  policy::CapacityIndex capidx;  // caps by (pool, free GPUs): best fit is a lookup
  policy::GrantOverlay overlay;  // grants the nodes' reports do not count yet (kept off caps)
  std::vector<std::string> named_pool;  // what each node asked for (--pool)
  std::vector<NodeActor> actors;
  std::unordered_map<std::string, size_t> index;
  std::map<std::string, TeamDemand> teams;
  std::unordered_map<std::string, Running> running;   // by job id
  std::map<std::string, policy::VictimPool> victims;  // by pool: what running work may be preempted
  policy::Books books;  // every grant in flight and running job: usage per (team, pool)
  std::map<std::string, policy::Hold> holds;  // by pool
  // Jobs that borrowed work was stopped for, until placed (or their wait is
  // over, or they left the queue): meanwhile the pool lends nothing new, so
  // the GPUs go to them.
  struct TeamJobTime {
    std::string team;
    int64_t ms = 0;
  };
  std::unordered_map<std::string, TeamJobTime> reclaim_for;  // by preemptor job id: until
  // Any-type jobs this pool left to a pool they prefer, since when (by job
  // id): after policy::kPreferWaitMs this pool takes them too.
  std::unordered_map<std::string, TeamJobTime> left_to_preferred;
  std::map<std::string, policy::RestoreWait> restore;  // by team: back to its guarantee
  std::unordered_map<std::string, policy::Reason> reasons;
  bool round_pending = false;
  double reserved_idle_gpu_s = 0;
  int64_t last_tick_ms = 0;
  int64_t grants = 0;
  policy::Baseline baseline = policy::Baseline::none;  // --policy fifo | fifo-backfill
  // Rounds at most one per round_gap, on CAF's clock (the timers' clock).
  std::chrono::microseconds round_gap{0};
  std::optional<caf::actor_clock::time_point> last_round;
  policy::PoolRoom told_room;  // what the router last heard of this pool's room
  bool room_told = false;
  static inline const char* name = "pool_arbiter";
};

using Self = ArbiterActor::stateful_pointer<ArbiterState>;

// A round after the messages already queued (they coalesce into it), and no
// sooner than round_gap after the last one: under load a round plans for
// what a millisecond brought, not for each message.
void schedule_round(Self self) {
  auto& st = self->state;
  if (st.round_pending) return;
  st.round_pending = true;
  if (st.last_round && st.round_gap.count() > 0) {
    auto wait = *st.last_round + st.round_gap - self->clock().now();
    if (wait.count() > 0) {
      self->delayed_send(self, std::chrono::duration_cast<std::chrono::microseconds>(wait),
                         round_atom_v);
      return;
    }
  }
  self->send(self, round_atom_v);
}

// What (team, pool) holds, in flight and running: kept by the books as
// grants, placements and ends happen (no recount).
policy::Usage usage_of(const ArbiterState& st, const std::string& team, const std::string& pool,
                       int* borrowed = nullptr) {
  auto a = st.books.account(team, pool);
  if (borrowed) *borrowed += a.borrowed_gpus;
  return a.used;
}

// A grant no longer in flight (unplaced, expired, lost with its queue).
void forget_grant(ArbiterState& st, TeamDemand& td, const std::string& job_id) {
  td.inflight.erase(job_id);
  shrink_if_sparse(td.inflight);
  st.books.unplaced(job_id);
  st.overlay.forget(job_id);
}

// An any-type job offered to `pool` though it prefers another pool first.
bool is_guest(const policy::PlacementRequest& req, const std::string& pool) {
  return req.flexible() && req.pools.front() != pool;
}

// `job` is still in `team`'s demand or being granted (not canceled meanwhile).
bool still_wanted(const ArbiterState& st, const std::string& team, const std::string& job) {
  auto td = st.teams.find(team);
  if (td == st.teams.end()) return false;
  if (td->second.inflight.count(job)) return true;
  const auto& ts = td->second.tickets;
  return std::any_of(ts.begin(), ts.end(), [&](const JobTicket& t) { return t.job_id == job; });
}

policy::TeamStanding standing_of(const ArbiterState& st, const std::string& team,
                                 const std::string& pool) {
  auto cfg = st.cfg.team_or_default(team);
  auto q = cfg.quota(pool);
  policy::TeamStanding s;
  s.team = team;
  s.weight = cfg.weight;
  s.guaranteed = q.guaranteed;
  s.limit = q.limit;
  s.borrow = cfg.borrow;
  s.used = usage_of(st, team, pool);
  return s;
}

void account_idle(Self self) {
  auto& st = self->state;
  int64_t now = self->state.w.now_ms();
  if (st.last_tick_ms > 0) {
    int idle = 0;
    for (const auto& [pool, h] : st.holds) idle += policy::held_idle_gpus(h, st.caps);
    st.reserved_idle_gpu_s += idle * (now - st.last_tick_ms) / 1000.0;
  }
  st.last_tick_ms = now;
}

// Where a running job's ranks are in the capacity (nodes not known are left
// out), found once.
const std::vector<size_t>& nodes_at(ArbiterState& st, Running& r) {
  if (r.at.size() == r.nodes.size()) return r.at;
  r.at.clear();
  for (const auto& n : r.nodes)
    if (auto it = st.index.find(n); it != st.index.end()) r.at.push_back(it->second);
  return r.at;
}

// After a round: a pending job that fits nowhere may preempt lower-priority
// work, or borrowed work of other teams when its own team is below its
// guarantee (policy::plan_preemption). The arbiter gathers the wants and the
// candidates, and carries the plan out: victims asked to stop, the freed
// nodes held for the preemptor.
void preempt_if_needed(Self self, const std::string& pool, const policy::RoundOutput& out) {
  auto& st = self->state;
  int64_t now = self->state.w.now_ms();
  const auto& pc = st.cfg.preemption;
  auto& recent = st.pool_preemptions[pool];
  policy::forget_old(recent, now);
  // Past the budget only reclaims remain (they are not counted against it).
  bool budget_left = static_cast<int>(recent.size()) < pc.max_per_minute;
  // The victims' time to stop: the default grace, within the config's cap.
  int64_t grace_ms = 1000LL * policy::preempt_grace_s(std::nullopt, pc.max_grace_s);
  const auto& hold = st.holds[pool];
  std::vector<policy::PreemptWant> wants;
  for (const auto& [team, td] : st.teams) {
    auto standing = standing_of(st, team, pool);
    // Owed: what its guarantee still lacks, less what its wants before this
    // one (and its jobs waiting for victims) take of it.
    policy::WantGate gate(standing.guaranteed - standing.used.gpus, budget_left);
    for (const auto& t : td.tickets) {
      if (t.req.pool != pool || td.inflight.count(t.job_id)) continue;
      if (is_guest(t.req, pool)) continue;  // it preempts, if at all, in its first pool
      // A shared job (part of a GPU) waits for room; it never preempts.
      if (t.req.shared()) continue;
      auto p = st.preempting_for.find(t.job_id);
      auto r = out.reasons.find(t.job_id);
      auto below =
          gate.admit(t.req.gpus * t.req.workers, p != st.preempting_for.end() && p->second > now,
                     r == out.reasons.end() ? nullptr : &r->second.code,
                     hold.active() && hold.job_id == t.job_id && hold.start_ms <= now + grace_ms);
      if (!below) continue;
      policy::PreemptWant want{t.job_id, t.team, t.priority,           t.seq,
                               *below,   t.req,  t.las() ? t.band : -1};
      if (st.victims[pool].may_have_victim(want)) wants.push_back(std::move(want));
    }
  }
  if (wants.empty()) return;  // the common case: build no candidates
  std::vector<policy::PreemptCandidate> cands;
  std::vector<std::string> ids;
  for (auto& [id, r] : st.running) {
    // A shared job is no victim: its part frees no whole GPU for anyone.
    if (r.pool != pool || r.preempting || r.req.shared()) continue;
    policy::PreemptCandidate c;
    c.job_id = id;
    c.team = r.team;
    c.priority = r.priority;
    c.preemptible = r.preemptible;
    c.borrowed = r.borrowed;
    c.started_ms = r.started_ms;
    c.last_checkpoint_ms = r.last_checkpoint_ms;
    if (auto p = st.preempted_at.find(id); p != st.preempted_at.end())
      c.protected_until_ms = policy::protected_until(p->second, pc.protect_after,
                                                     pc.window_s * 1000LL, pc.protect_s * 1000LL);
    c.nodes = nodes_at(st, r);
    c.gpus = r.req.gpus;
    c.cpus = r.req.cpus;
    c.memory_mb = r.req.memory_mb;
    if (!r.las_thresholds.empty())
      c.las_band = policy::las_band(
          r.attained_gpu_s + policy::attempt_gpu_s(r.req.gpus, r.req.workers, r.started_ms, now),
          r.las_thresholds);
    cands.push_back(std::move(c));
    ids.push_back(id);
  }
  auto plans = policy::plan_preemption(st.caps, cands, std::move(wants), recent.size(),
                                       pc.max_per_minute, grace_ms, now);
  for (const auto& plan : plans) {
    for (size_t v : plan.plan.victims) {
      const auto& id = ids[v];
      auto& victim = st.running[id];
      victim.preempting = true;
      st.preempted_at[id].push_back(now);
      ++st.figures.preemptions;
      if (policy::is_reclaim(plan.preemptor, cands[v])) {
        ++st.figures.reclaims;
      } else {
        recent.push_back(now);
      }
      self->send(st.w.jobs, preempt_atom_v, id, plan.why);
    }
    st.figures.gpu_seconds_lost += plan.plan.gpu_s_lost;
    const auto& job = plan.preemptor.job_id;
    if (!plan.reclaim) {
      policy::Hold& h = st.holds[pool];
      h.job_id = job;
      h.nodes = plan.held_nodes;
      h.start_ms = plan.hold_start_ms;
    }
    st.preempting_for[job] = plan.preempting_until_ms;
    if (plan.reclaim) st.reclaim_for[job] = {plan.preemptor.team, plan.preempting_until_ms};
    st.reasons[job] = {plan.reason_code, plan.reason_text};
  }
}

void run_round(Self self) {
  auto& st = self->state;
  st.round_pending = false;
  st.last_round = self->clock().now();
  account_idle(self);
  int64_t now = self->state.w.now_ms();
  bool wanted = false;
  for (const auto& [team, td] : st.teams) {
    wanted = wanted || !td.tickets.empty();
    auto standing = standing_of(st, team, st.pool);
    if (standing.guaranteed > 0 || st.restore.count(team))
      st.restore[team].step(standing.used.gpus < standing.guaranteed, !td.tickets.empty(), now);
  }
  if (wanted) {
    const std::string& pool = st.pool;
    policy::RoundInput in;
    in.pool = pool;
    in.nodes = std::move(st.caps);  // lent to the round, taken back below (no copy)
    in.index = &st.capidx;          // the round takes its grants from both
    in.now_ms = now;
    in.hold = st.holds[pool];
    for (auto it = st.reclaim_for.begin(); it != st.reclaim_for.end();)
      it = it->second.ms <= now || !still_wanted(st, it->second.team, it->first)
               ? st.reclaim_for.erase(it)
               : std::next(it);
    in.reclaiming = !st.reclaim_for.empty();
    in.fifo = st.baseline != policy::Baseline::none;
    in.backfill = st.baseline == policy::Baseline::fifo_backfill;
    if (in.hold.active() && in.hold.start_ms != policy::kNever && in.hold.start_ms < now)
      in.hold = policy::Hold{};  // overdue: plan it again from what runs now
    std::vector<std::string> team_names;
    std::vector<std::vector<size_t>> ticket_index;  // per team input: demand -> ticket
    for (const auto& [team, td] : st.teams) {
      policy::TeamInput ti;
      ti.slots = kMaxInflight - static_cast<int>(td.inflight.size());
      std::vector<size_t> ticket_of;  // demand -> index in td.tickets
      for (size_t k = 0; k < td.tickets.size(); ++k) {
        const auto& t = td.tickets[k];
        if (t.req.pool != pool || td.inflight.count(t.job_id)) continue;
        ti.demands.push_back({t.job_id, t.req, t.max_runtime_s, t.seq, false, {}});
        if (is_guest(t.req, pool)) {
          auto& d = ti.demands.back();
          d.guest = true;
          auto left = st.left_to_preferred.find(t.job_id);
          if (left == st.left_to_preferred.end() || now - left->second.ms < policy::kPreferWaitMs)
            for (const auto& p : t.req.pools) {
              if (p == pool) break;
              d.prefer.push_back(p);
            }
        }
        ticket_of.push_back(k);
      }
      if (ti.demands.empty()) continue;
      ti.standing = standing_of(st, team, pool);
      in.teams.push_back(std::move(ti));
      team_names.push_back(team);
      ticket_index.push_back(std::move(ticket_of));
    }
    // Only a hold being planned needs the running work (at most once a round).
    in.running_of = [&st, &pool] {
      std::vector<policy::RunningWork> running;
      running.reserve(st.running.size());
      for (auto& [id, r] : st.running) {
        // A shared job's end frees no whole GPU to plan a hold on.
        if (r.pool != pool || r.req.shared()) continue;
        policy::RunningWork w;
        w.nodes = nodes_at(st, r);
        w.gpus = r.req.gpus;
        w.cpus = r.req.cpus;
        w.memory_mb = r.req.memory_mb;
        w.ends_ms = r.ends_ms;
        running.push_back(std::move(w));
      }
      return running;
    };
    auto out =
        policy::plan_round_live(in);  // grants taken from caps: an overlay until the nodes report
    st.caps = std::move(in.nodes);
    st.holds[pool] = out.hold;
    if (st.baseline == policy::Baseline::none) preempt_if_needed(self, pool, out);
    for (auto& [id, why] : out.reasons) {
      if (why.code == policy::why::kPreferred && !st.left_to_preferred.count(id))
        for (size_t t = 0; t < in.teams.size(); ++t)
          if (std::any_of(in.teams[t].demands.begin(), in.teams[t].demands.end(),
                          [&](const policy::Demand& d) { return d.job_id == id; }))
            st.left_to_preferred[id] = {team_names[t], now};
      if (!st.preempting_for.count(id) || st.preempting_for[id] <= now)
        st.reasons[id] = std::move(why);
    }
    // Each queue hears of its grants before any can be answered (placed or
    // unplaced), and leaves them out of its demand meanwhile.
    std::map<std::string, std::vector<std::string>> granted;
    for (const auto& g : out.grants)
      granted[team_names[g.team]].push_back(
          st.teams[team_names[g.team]].tickets[ticket_index[g.team][g.demand]].job_id);
    for (auto& [team, jobs] : granted)
      if (auto& q = st.teams[team].queue) self->send(q, granted_atom_v, pool, std::move(jobs));
    std::vector<Grant> batch;
    batch.reserve(out.grants.size());
    for (const auto& g : out.grants) {
      auto& td = st.teams[team_names[g.team]];
      JobTicket ticket = td.tickets[ticket_index[g.team][g.demand]];
      CandidateList c;
      for (size_t rank = 0; rank < g.nodes.size(); ++rank) {
        size_t n = g.nodes[rank];
        st.overlay.add(n, ticket.job_id, ticket.attempt, static_cast<int>(rank), ticket.req);
        c.names.push_back(st.caps[n].name);
        c.hosts.push_back(st.caps[n].host);
        c.actors.push_back(st.actors[n]);
      }
      st.books.grant(ticket.job_id, team_names[g.team], ticket.req, g.borrowed, g.shared_milli);
      st.left_to_preferred.erase(ticket.job_id);
      td.inflight[ticket.job_id] = TeamDemand::Inflight{ticket, g.borrowed, self->state.w.now_ms()};
      st.reasons.erase(ticket.job_id);
      shrink_if_sparse(st.reasons);
      shrink_if_sparse(st.left_to_preferred);
      ++st.grants;
      // The grant goes to the one placement path: a gang reservation (one
      // worker or many) reserves and commits on these nodes, then tells the
      // team's queue placed/unplaced, which tells this actor.
      batch.push_back(Grant{std::move(ticket), std::move(c), td.queue});
    }
    if (!batch.empty()) self->send(st.w.gangs, spawn_atom_v, std::move(batch));
  }
}

void reply(Self self, const std::string& to, const std::string& json) {
  if (!to.empty()) self->state.out->publish(to, json);
}

// This pool's part of what troupe.sys.queues shows (the front puts the
// pools' parts together; actors/views.hpp builds the JSON): its row and its
// teams' rows, when the config names the pool.
// The pool's room, to the router when it changed (a shard tells the others:
// policy::pick_pool): free GPUs less those granted and not yet counted by
// the nodes, and the GPUs waiting in the queues' lines here.
void tell_room(Self self) {
  auto& st = self->state;
  if (!st.w.router || !st.cfg.pool(st.pool)) return;
  int64_t waiting = 0;
  for (const auto& [team, td] : st.teams) {
    waiting += td.pending_gpus;
    for (const auto& [id, g] : td.inflight)
      waiting += int64_t{std::max(g.ticket.req.workers, 1)} * g.ticket.req.gpus;
  }
  auto room = policy::room_of(
      st.caps, st.pool,
      static_cast<int32_t>(std::min<int64_t>(waiting, std::numeric_limits<int32_t>::max())));
  if (st.room_told && room == st.told_room) return;
  st.told_room = room;
  st.room_told = true;
  self->send(st.w.router, room_atom_v, st.pool, room.free_gpus, room.largest_free,
             room.pending_gpus, room.total_gpus);
}

views::Queues queues_view(const ArbiterState& st) {
  views::Queues v;
  std::set<std::string> pool_names;
  if (st.cfg.pool(st.pool)) pool_names.insert(st.pool);
  for (const auto& pool : pool_names) {
    views::PoolRow row;
    row.pool = pool;
    row.gpus_total = policy::pool_totals(st.caps, pool).gpus;
    for (const auto& c : st.caps)
      if (c.pool == pool && c.alive)
        row.gpus_free += c.gpus_total - c.gpus_reserved - c.gpus_allocated;
    auto it = st.holds.find(pool);
    if (it != st.holds.end() && it->second.active()) {
      row.has_hold = true;
      row.hold.job_id = it->second.job_id;
      for (size_t n : it->second.nodes) row.hold.nodes.push_back(st.caps[n].name);
      row.hold.start_ms = it->second.start_ms == policy::kNever ? -1 : it->second.start_ms;
      row.hold.idle_gpus = policy::held_idle_gpus(it->second, st.caps);
    }
    v.pools.push_back(std::move(row));
  }
  std::set<std::string> teams;
  for (const auto& t : st.cfg.teams) teams.insert(t.name);
  for (const auto& [team, td] : st.teams) teams.insert(team);
  for (const auto& [id, r] : st.running) teams.insert(r.team);
  for (const auto& team : teams) {
    for (const auto& pool : pool_names) {
      auto cfg = st.cfg.team_or_default(team);
      auto q = cfg.quota(pool);
      views::TeamRow row;
      row.team = team;
      row.pool = pool;
      auto used = usage_of(st, team, pool, &row.borrowed);
      auto td = st.teams.find(team);
      if (td != st.teams.end()) {
        row.pending_jobs = td->second.pending_jobs;
        row.pending_gpus = td->second.pending_gpus;
        row.pending_flexible = td->second.pending_flexible;
      }
      if (policy::gpu_milli(used) == 0 && row.pending_jobs == 0 && !st.cfg.team(team)) continue;
      auto totals = policy::pool_totals(st.caps, pool);
      if (td != st.teams.end()) {
        std::set<std::tuple<int, std::string, std::string>> seen;
        for (const auto& t : td->second.tickets)
          if (t.req.pool == pool && seen.insert({t.req.gpus, t.req.gpu_type, t.req.pool}).second)
            row.pending_shapes.push_back({t.req.gpus, t.req.gpu_type, t.req.pool});
      }
      row.weight = cfg.weight;
      row.borrow = cfg.borrow;
      row.guaranteed = q.guaranteed;
      row.limit = q.limit;
      row.in_use = used.gpus;
      row.in_use_shared = static_cast<double>(used.shared_milli) / 1000.0;
      row.dominant_share = policy::dominant_share(used, totals);
      row.weighted_share = policy::weighted_share(standing_of(st, team, pool), totals);
      if (auto r = st.restore.find(team); r != st.restore.end()) {
        row.restore_buckets = r->second.buckets;
        row.restore_sum_s = r->second.sum_s;
        row.restore_count = r->second.count;
      }
      v.teams.push_back(std::move(row));
    }
  }
  v.policy = policy::policy_name(st.baseline);
  v.reserved_idle_gpu_seconds = st.reserved_idle_gpu_s;
  v.grants = st.grants;
  v.preemptions = st.figures.preemptions;
  v.gpu_seconds_lost = st.figures.gpu_seconds_lost;
  v.reclaims = st.figures.reclaims;
  return v;
}

void apply_config(Self self, const std::string& text) {
  auto& st = self->state;
  if (auto err = policy::load_config_or_open(text, st.cfg); !err.empty()) {
    spdlog::error("pool arbiter: config refused: {}", err);  // (the front checked it)
    return;
  }
  for (size_t i = 0; i < st.caps.size(); ++i)
    st.caps[i].pool = st.cfg.pool_of_node(st.named_pool[i], st.caps[i].gpu_type);
  st.capidx.rebuild(st.caps);
  schedule_round(self);
}

ArbiterActor::behavior_type arbiter_behavior(Self self, OutboxPtr out, policy::Baseline baseline,
                                             int64_t round_gap_us, std::string pool) {
  self->state.pool = std::move(pool);
  self->state.round_gap = std::chrono::microseconds(round_gap_us);
  self->state.out = std::move(out);
  self->state.baseline = baseline;
  self->delayed_send(self, kTick, tick_atom_v);
  return {
      [=](capacity_atom, policy::NodeCapacity c, const NodeActor& node) {
        auto& st = self->state;
        std::string named = c.pool;
        c.pool = st.cfg.pool_of_node(named, c.gpu_type);
        auto holds = std::move(c.holds);
        c.holds = {};
        auto it = st.index.find(c.name);
        // What the node said, less the grants it has not heard of yet.
        if (it != st.index.end()) st.overlay.apply(it->second, holds, c);
        // Every pool's arbiter knows every node (a config may move one to
        // another pool); only a change in its own pool asks for a round.
        bool more = c.pool == st.pool;
        if (it == st.index.end()) {
          st.index.emplace(c.name, st.caps.size());
          st.capidx.set(st.caps.size(), c);
          st.caps.push_back(c);
          st.actors.push_back(node);
          st.named_pool.push_back(named);
        } else {
          auto& old = st.caps[it->second];
          more =
              (more || old.pool == st.pool) &&
              (c.pool != old.pool || c.gpus_free > old.gpus_free || c.cpus_free > old.cpus_free ||
               c.memory_free_mb > old.memory_free_mb || c.alive != old.alive ||
               c.schedulable != old.schedulable || c.runtime != old.runtime);
          old = c;
          st.capidx.set(it->second, c);
          st.actors[it->second] = node;
          st.named_pool[it->second] = named;
        }
        if (more) schedule_round(self);
      },
      [=](remove_atom, const std::string& node) {
        // A removed node (lost, nothing held) stays a place with nothing
        // free, so that the index keeps its positions; it is never listed.
        auto& st = self->state;
        auto it = st.index.find(node);
        if (it == st.index.end()) return;
        auto& c = st.caps[it->second];
        c.removed = true;
        c.alive = false;
        c.schedulable = false;
        c.gpus_total = c.gpus_free = c.gpus_reserved = c.gpus_allocated = 0;
        c.cpus_total = c.cpus_free = 0;
        c.memory_total_mb = c.memory_free_mb = 0;
        c.shared.clear();
        c.running = 0;
        st.capidx.set(it->second, c);
      },
      [=](demand_atom, const std::string& team, const std::string&, std::vector<JobTicket>& added,
          const std::vector<std::string>& removed, bool full, int32_t jobs, int32_t gpus,
          int32_t flexible, const TeamQueueActor& sender) {
        auto& st = self->state;
        auto& td = st.teams[team];
        // A new queue actor (the old one crashed): the grants it was carrying
        // out died with it. Their jobs are in the new queue's demand again.
        if (td.queue && sender != td.queue) {
          for (const auto& [id, g] : td.inflight) {
            self->state.books.unplaced(id);
            self->state.overlay.forget(id);
          }
          td.inflight.clear();
        }
        td.queue = sender;
        if (full) td.tickets.clear();  // a line's first demand (a new queue's among them)
        policy::apply_demand(
            td.tickets, std::move(added), removed,
            [](const JobTicket& t) {
              return policy::QueueKey{t.priority, t.seq, t.band};
            },
            [](const JobTicket& t) -> const std::string& { return t.job_id; });
        td.pending_jobs = jobs;
        td.pending_gpus = gpus;
        td.pending_flexible = flexible;
        for (const auto& id : removed) st.left_to_preferred.erase(id);
        schedule_round(self);
      },
      [=](placed_atom, const std::string& team, const Assignment& a) {
        auto& st = self->state;
        auto& td = st.teams[team];
        auto it = td.inflight.find(a.job_id);
        if (it == td.inflight.end()) return;
        const auto& t = it->second.ticket;
        Running r;
        r.team = team;
        r.pool = t.req.pool;
        r.nodes = a.nodes;
        r.req = t.req;
        r.borrowed = it->second.borrowed;
        r.ends_ms =
            t.max_runtime_s > 0 ? self->state.w.now_ms() + t.max_runtime_s * 1000 : policy::kNever;
        r.priority = t.priority;
        r.preemptible = t.preemptible;
        r.started_ms = self->state.w.now_ms();
        r.attained_gpu_s = t.attained_gpu_s;
        r.las_thresholds = t.las_thresholds;
        st.preempting_for.erase(a.job_id);
        st.reclaim_for.erase(a.job_id);
        if (auto old = st.running.find(a.job_id); old != st.running.end()) {
          const auto& o = old->second;  // an attempt whose end was not heard yet
          st.victims[o.pool].remove(o.team, o.priority, o.preemptible, o.borrowed);
        }
        st.victims[r.pool].add(r.team, r.priority, r.preemptible, r.borrowed);
        st.running[a.job_id] = r;
        st.books.placed(a.job_id);
        st.overlay.forget(a.job_id);
        td.inflight.erase(it);
        // The queue's next demand will not list it; until then, neither may
        // the one we hold (a round in between would grant it a second time).
        td.tickets.erase(std::remove_if(td.tickets.begin(), td.tickets.end(),
                                        [&](const JobTicket& t) { return t.job_id == a.job_id; }),
                         td.tickets.end());
        schedule_round(self);
      },
      [=](unplaced_atom, const std::string& team, const std::string&, const std::string& job_id) {
        forget_grant(self->state, self->state.teams[team], job_id);
        schedule_round(self);
      },
      [=](done_atom, const std::string& job_id, const std::string&) {
        auto& st = self->state;
        if (auto it = st.running.find(job_id); it != st.running.end()) {
          const auto& r = it->second;
          st.victims[r.pool].remove(r.team, r.priority, r.preemptible, r.borrowed);
          st.running.erase(it);
          self->state.books.ended(job_id);
          schedule_round(self);
        }
      },
      [=](config_atom, const std::string& text) { apply_config(self, text); },
      [=](const Wiring& w) { self->state.w = w; },
      [=](checkpoint_atom, const std::string& job_id, const std::string&, int64_t ts) {
        if (auto it = self->state.running.find(job_id); it != self->state.running.end())
          it->second.last_checkpoint_ms = ts;
      },
      [=](retried_atom, const std::string&, const std::string&) {
        // Counted by the front.
      },
      [=](round_atom) { run_round(self); },
      [=](tick_atom) {
        // A grant whose answer never came (lost with a crashed actor) frees
        // its job for another round.
        int64_t now = self->state.w.now_ms();
        auto& st = self->state;
        for (auto& [team, td] : st.teams) {
          std::vector<std::string> expired;
          for (const auto& [id, g] : td.inflight)
            if (now - g.granted_ms > kInflightExpiryMs) expired.push_back(id);
          for (const auto& id : expired) {
            forget_grant(st, td, id);
            // Its queue put it back in its demand.
            if (td.queue)
              self->send(td.queue, unplaced_atom_v, id, st.pool, std::string("grant expired"));
          }
        }
        for (auto it = st.left_to_preferred.begin(); it != st.left_to_preferred.end();)
          it = still_wanted(st, it->second.team, it->first) ? std::next(it)
                                                            : st.left_to_preferred.erase(it);
        schedule_round(self);
        tell_room(self);
        self->delayed_send(self, kTick, tick_atom_v);
      },
      [=](why_atom, const std::string& job_id, const std::string& team,
          const std::string&) -> caf::result<std::string, std::string> {
        auto& st = self->state;
        if (auto it = st.reasons.find(job_id); it != st.reasons.end())
          return {it->second.code, policy::reason_text(it->second, st.caps)};
        if (auto td = st.teams.find(team);
            td != st.teams.end() && td->second.inflight.count(job_id))
          return {std::string(policy::why::kNegotiating), std::string("being placed right now")};
        return {std::string(), std::string()};
      },
      [=](why_atom, const std::string& job_id, const std::string& team, const std::string&,
          const std::string& to) {
        auto& st = self->state;
        auto td = st.teams.find(team);
        if (auto it = st.reasons.find(job_id); it != st.reasons.end()) {
          std::string band;  // its place in line under order las or sjf
          if (td != st.teams.end())
            for (const auto& t : td->second.tickets)
              if (t.job_id == job_id)
                band = views::band_text(t.las(), t.band, t.attained_gpu_s, t.promote_at_ms);
          reply(self, to,
                views::why_json(job_id, names::kQueued, true, it->second.code,
                                policy::reason_text(it->second, st.caps) + band));
          return;
        }
        if (td != st.teams.end() && td->second.inflight.count(job_id)) {
          reply(self, to,
                views::why_json(job_id, names::kQueued, true, policy::why::kNegotiating,
                                "being placed right now (reserving on its node(s))"));
          return;
        }
        if (td != st.teams.end() && td->second.queue) {
          self->send(td->second.queue, why_atom_v, job_id, to);  // the queue knows its position
          return;
        }
        reply(self, to,
              views::why_json(job_id, names::kQueued, true, policy::why::kNotYetConsidered,
                              "not yet considered by the scheduler; ask again in a moment"));
      },
      [=](queues_atom, const std::string& to) {
        reply(self, to, views::queues_json(queues_view(self->state)));
      },
      [=](queues_atom) { return queues_view(self->state); },
      [=](list_atom, const std::string& to) {
        pb::NodeList list;
        for (const auto& c : self->state.caps) {
          if (c.removed) continue;
          auto* v = list.add_nodes();
          v->set_node(c.name);
          v->set_host(c.host);
          v->set_gpu_type(c.gpu_type);
          v->set_gpus_total(c.gpus_total);
          v->set_gpus_free(c.gpus_total - c.gpus_reserved - c.gpus_allocated);
          v->set_gpus_reserved(c.gpus_reserved);
          v->set_gpus_allocated(c.gpus_allocated);
          v->set_cpus(c.cpus_total);
          v->set_memory_mb(c.memory_total_mb);
          v->set_alive(c.alive);
          v->set_last_heartbeat_ms(c.last_heartbeat_ms);
          v->set_running(c.running);
          v->set_pool(c.pool);
          v->set_rack(c.rack);
          v->set_schedulable(c.schedulable);
          v->set_draining(c.draining);
          v->set_reason(c.reason);
          v->set_runtime(c.runtime);
          v->set_gpu_memory_mb(c.gpu_memory_mb);
          v->set_gpus_shared(static_cast<int32_t>(c.shared.size()));
          v->set_gpu_memory_shared_mb(policy::shared_used_mb(c));
          v->set_gpu_memory_stranded_mb(policy::stranded_mb(c));
        }
        self->state.out->publish(to, spec::to_json(list));
      },
  };
}

}  // namespace

ArbiterActor spawn_pool_arbiter(caf::local_actor* parent, OutboxPtr out, policy::Baseline baseline,
                                int64_t round_gap_us, std::string pool) {
  return parent->spawn<caf::linked>(arbiter_behavior, std::move(out), baseline, round_gap_us,
                                    std::move(pool));
}

}  // namespace troupe

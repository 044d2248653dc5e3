// Owns troupe-load simulate: the event loop that drives the pure policy
// functions in virtual trace time (what the team queues, the pool arbiter and
// the node actors do with them, without messages), and its report.
#include "load/simulate.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <queue>
#include <set>
#include <sstream>
#include <unordered_map>

#include "actors/policy/baseline.hpp"
#include "actors/policy/las.hpp"
#include "actors/policy/preemption.hpp"
#include "actors/policy/queue_order.hpp"
#include "actors/policy/round.hpp"
#include "actors/policy/sjf.hpp"
#include "actors/policy/why.hpp"
#include "load/jobspec.hpp"
#include "load/plan.hpp"

namespace troupe::load {

namespace {

// The policy code treats times <= 0 as "none" (an attempt started at 0 has
// attained nothing), so the virtual clock runs from this epoch: trace time t
// (ms) is kEpochMs + t.
constexpr int64_t kEpochMs = 1000000000000LL;
constexpr int64_t kNsPerMs = 1000000;
// Rounds at one instant stop after this many (a guard; counted when reached).
constexpr int kMaxRoundsPerInstant = 100000;

enum class JobState { future, pending, running, done, refused };

struct SimJob {
  std::string id;
  std::string team;
  policy::PlacementRequest req;
  int priority = 50;
  bool preemptible = true;
  uint64_t seq = 0;
  int64_t arrival_ms = 0, duration_ms = 0;  // trace ms
  int64_t max_runtime_s = 0;
  std::vector<double> las_thresholds;  // empty: its team orders by submit time
  int sjf_band = 0;                    // > 0: its team's order is sjf (policy/sjf.hpp)
  int64_t promote_after_s = 0;
  JobState state = JobState::future;
  int gen = 0;  // bumped at each start and stop: stale events are ignored
  int64_t first_start_ms = -1, start_ms = -1, end_ms = -1;  // clock ms
  double attained_gpu_s = 0;
  policy::QueueKey key;
  int64_t promote_at_ms = 0;
  std::vector<size_t> ranks;
  bool borrowed = false;
  int64_t done_ms = 0;  // run kept across attempts (resume_on_preempt)
  std::vector<std::pair<int64_t, int64_t>> preempted_ms;  // attempts: (start, stop), clock ms
  std::string final_state, error;
  int total_gpus() const { return req.gpus * std::max(1, req.workers); }
};

enum class EventKind { end = 0, arrival = 1, promote = 2, band = 3 };
struct Event {
  int64_t t = 0;
  EventKind kind = EventKind::arrival;
  size_t job = 0;
  int gen = 0;
  bool operator>(const Event& o) const {
    if (t != o.t) return t > o.t;
    if (kind != o.kind) return kind > o.kind;
    return job > o.job;
  }
};

using Line = std::set<std::pair<policy::QueueKey, size_t>>;

class Simulator {
 public:
  Simulator(const std::vector<TraceJob>& trace, const std::vector<FleetFit>& fits,
            const SimulateOptions& opt)
      : opt_(opt), cfg_(opt.config) {
    fifo_ = opt.policy != "troupe";
    backfill_ = opt.policy == "fifo-backfill";
    for (const auto& g : opt.fleet) {
      for (int i = 0; i < g.nodes; ++i) {
        policy::NodeCapacity n;
        n.name = g.gpu_type + "-" + std::to_string(i + 1);
        n.host = n.name;
        n.gpu_type = g.gpu_type;
        n.pool = cfg_.pool_of_node("", g.gpu_type);
        n.gpus_total = n.gpus_free = g.gpus_per_node;
        n.cpus_total = n.cpus_free = 1 << 20;
        n.memory_total_mb = n.memory_free_mb = int64_t{1} << 40;
        caps_.push_back(n);
        if (!n.pool.empty()) pools_.insert(n.pool);
        sample_nodes_.push_back(
            SampleNode{n.gpu_type, n.pool, g.gpus_per_node, 0, g.gpus_per_node, false});
      }
    }
    capidx_.rebuild(caps_);
    int64_t span_ms = 0;
    for (size_t i = 0; i < trace.size() && i < fits.size(); ++i) {
      const TraceJob& t = trace[i];
      SimJob j;
      j.id = "s" + std::to_string(i + 1);
      j.team = t.team;
      j.seq = i + 1;
      j.arrival_ms = static_cast<int64_t>(std::llround(t.arrival_s * 1000.0));
      j.duration_ms = std::max<int64_t>(0, std::llround(t.duration_s * 1000.0));
      j.max_runtime_s = runtime_limit_s(t.duration_s, opt.runtime_limit_factor, 1.0);
      j.req.gpus = fits[i].shape.gpus_per_worker;
      j.req.workers = fits[i].shape.workers;
      j.req.gpu_type = fits[i].gpu_type;
      auto a = policy::admit(cfg_, j.team, "", j.req.gpu_type, j.total_gpus(), t.priority);
      if (!a.error.empty()) {
        j.state = JobState::refused;
        j.error = a.error;
      } else {
        j.req.pool = a.pool;  // an any-type job waits in its first candidate pool only
        j.priority = a.priority_value;
        j.preemptible = a.preemptible;
        if (cfg_.team_or_default(j.team).las) {
          j.las_thresholds = cfg_.las.thresholds_gpu_s;
          j.promote_after_s = cfg_.las.promote_after_s;
        } else if (cfg_.team_or_default(j.team).sjf) {
          j.sjf_band = policy::sjf_band(j.max_runtime_s, j.total_gpus());
          j.promote_after_s = cfg_.sjf.promote_after_s;
        }
        push({kEpochMs + j.arrival_ms, EventKind::arrival, i, 0});
      }
      span_ms = std::max(span_ms, j.arrival_ms + j.duration_ms);
      jobs_.push_back(std::move(j));
    }
    double sample_s = opt.sample_s > 0 ? opt.sample_s : std::max(1.0, span_ms / 1000.0 / 20000.0);
    sample_ms_ = std::max<int64_t>(1, std::llround(sample_s * 1000.0));
  }

  void run() {
    int64_t next_sample = kEpochMs;
    while (!events_.empty()) {
      const int64_t t = events_.top().t;
      for (; next_sample < t; next_sample += sample_ms_) take_sample(next_sample);
      now_ = t;
      while (!events_.empty() && events_.top().t == t) {
        Event e = events_.top();
        events_.pop();
        ++event_count_;
        handle(e);
      }
      rounds_at_instant();
    }
    take_sample(std::max(next_sample, now_));
  }

  Json report(const Json& config) const {
    std::vector<JobResult> results;
    results.reserve(jobs_.size());
    size_t done = 0, refused = 0;
    for (const auto& j : jobs_) {
      JobResult r;
      r.team = j.team;
      r.gpus = j.total_gpus();
      r.trace_arrival_s = static_cast<double>(j.arrival_ms) / 1000.0;
      r.trace_duration_s = static_cast<double>(j.duration_ms) / 1000.0;
      r.sent_ns = j.arrival_ms * kNsPerMs;
      if (j.state == JobState::refused) {
        r.error = j.error;
        ++refused;
        results.push_back(std::move(r));
        continue;
      }
      r.job_id = j.id;
      r.acked_ns = r.sent_ns;
      if (j.first_start_ms >= 0)
        r.placed_ns = r.running_ns = (j.first_start_ms - kEpochMs) * kNsPerMs;
      if (j.state == JobState::done) {
        r.ended_ns = (j.end_ms - kEpochMs) * kNsPerMs;
        r.final_state = j.final_state;
        ++done;
      }
      for (const auto& [run, stop] : j.preempted_ms)
        r.preempted_ns.emplace_back((run - kEpochMs) * kNsPerMs, (stop - kEpochMs) * kNsPerMs);
      if (j.state == JobState::running || j.state == JobState::done)
        r.last_running_ns = (j.start_ms - kEpochMs) * kNsPerMs;
      results.push_back(std::move(r));
    }
    RunInfo info;
    info.config = config;
    info.config["policy"] = opt_.policy;
    info.config["policy_applied"] = true;
    info.config["speedup"] = 1;
    info.complete = done + refused == jobs_.size();
    info.preemptions = preemptions_;
    info.exact_trace_times = true;
    Json r = replay_report(results, samples_, 1.0, info);
    r["mode"] = "simulate";
    if (opt_.resume_on_preempt)  // the preempted attempts' work was kept: nothing lost
      r["preemption_loss"]["gpu_s"] = r["preemption_loss"]["gpu_s_scaled"] = 0.0;
    r["simulation"] = Json{{"events", event_count_},
                           {"rounds", round_count_},
                           {"instants_round_capped", capped_},
                           {"samples", samples_.size()},
                           {"sample_s", static_cast<double>(sample_ms_) / 1000.0},
                           {"reclaims", reclaims_},
                           {"resume_on_preempt", opt_.resume_on_preempt},
                           {"preempted_attempts", preempted_attempts_},
                           {"pending_at_end", pending_count()}};
    return r;
  }

 private:
  void push(Event e) { events_.push(e); }

  // Job ids are "s<index + 1>".
  static size_t index_of(const std::string& id) { return std::stoul(id.substr(1)) - 1; }

  size_t pending_count() const {
    size_t n = 0;
    for (const auto& j : jobs_) n += j.state == JobState::pending ? 1 : 0;
    return n;
  }

  Line& line_of(const SimJob& j) { return lines_[j.team][j.req.pool]; }

  // Into its team's line, in its band (las: from its service so far; the
  // starvation guard from now).
  void enqueue(size_t i) {
    SimJob& j = jobs_[i];
    j.state = JobState::pending;
    int band = 0;
    j.promote_at_ms = 0;
    if (!j.las_thresholds.empty()) {
      auto w =
          policy::waiting_band(j.attained_gpu_s, j.las_thresholds, j.promote_after_s, now_, now_);
      band = w.band;
      j.promote_at_ms = w.promote_at_ms;
      if (w.promote_at_ms > 0) push({w.promote_at_ms, EventKind::promote, i, j.gen});
    } else if (j.sjf_band > 0) {
      // order: sjf: its declared work's band; the guard counts from its arrival.
      const int64_t at =
          j.promote_after_s > 0 ? kEpochMs + j.arrival_ms + j.promote_after_s * 1000 : 0;
      if (at == 0 || at > now_) {
        band = j.sjf_band;
        j.promote_at_ms = at;
        if (at > 0) push({at, EventKind::promote, i, j.gen});
      }
    }
    j.key = policy::QueueKey{j.priority, j.seq, band};
    line_of(j).insert({j.key, i});
  }

  void handle(const Event& e) {
    SimJob& j = jobs_[e.job];
    switch (e.kind) {
      case EventKind::arrival:
        enqueue(e.job);
        break;
      case EventKind::end:
        if (j.state == JobState::running && j.gen == e.gen) finish(e.job);
        break;
      case EventKind::promote:
        if (j.state == JobState::pending && j.gen == e.gen && j.key.band > 0 &&
            now_ >= j.promote_at_ms) {
          Line& l = line_of(j);
          l.erase({j.key, e.job});
          j.key.band = 0;
          j.promote_at_ms = 0;
          l.insert({j.key, e.job});
        }
        break;
      case EventKind::band:
        break;  // only a round: a running las job crossed into a higher band
    }
  }

  policy::Usage& usage(const std::string& team, const std::string& pool) {
    return used_[{team, pool}];
  }

  void add_usage(const SimJob& j, int sign) {
    auto& u = usage(j.team, j.req.pool);
    u.gpus += sign * j.total_gpus();
    u.cpus += sign * j.req.cpus * j.req.workers;
    u.memory_mb += sign * j.req.memory_mb * j.req.workers;
  }

  void start(size_t i, const std::vector<size_t>& ranks, bool borrowed) {
    SimJob& j = jobs_[i];
    line_of(j).erase({j.key, i});
    j.state = JobState::running;
    ++j.gen;
    j.ranks = ranks;
    j.borrowed = borrowed;
    j.start_ms = now_;
    if (j.first_start_ms < 0) j.first_start_ms = now_;
    add_usage(j, +1);
    running_[j.req.pool].insert(i);
    victims_[j.req.pool].add(j.team, j.priority, j.preemptible, j.borrowed);
    const int64_t limit_ms = j.max_runtime_s * 1000;
    const int64_t run_ms = std::min(j.duration_ms - j.done_ms, limit_ms);
    push({now_ + run_ms, EventKind::end, i, j.gen});
    // Each band threshold its service will cross while it runs: a round then
    // (a waiting job of its team may now preempt it).
    const double g = j.total_gpus();
    for (double th : j.las_thresholds) {
      if (th <= j.attained_gpu_s || g <= 0) continue;
      auto at = now_ + static_cast<int64_t>(std::ceil((th - j.attained_gpu_s) / g * 1000.0));
      if (at < now_ + run_ms) push({at, EventKind::band, i, j.gen});
    }
  }

  // Its GPUs back to the node snapshot and the books.
  void release(size_t i) {
    SimJob& j = jobs_[i];
    running_[j.req.pool].erase(i);
    policy::give_back(caps_, j.req, j.ranks, &capidx_);
    add_usage(j, -1);
    victims_[j.req.pool].remove(j.team, j.priority, j.preemptible, j.borrowed);
    j.attained_gpu_s += policy::attempt_gpu_s(j.req.gpus, j.req.workers, j.start_ms, now_);
    j.ranks.clear();
  }

  void finish(size_t i) {
    release(i);
    SimJob& j = jobs_[i];
    ++j.gen;
    j.state = JobState::done;
    j.end_ms = now_;
    j.final_state = j.duration_ms - j.done_ms <= j.max_runtime_s * 1000 ? "succeeded" : "failed";
  }

  void stop_preempted(size_t i) {
    SimJob& j = jobs_[i];
    ++preempted_attempts_;
    if (opt_.resume_on_preempt) j.done_ms += now_ - j.start_ms;  // checkpointed as it stopped
    j.preempted_ms.emplace_back(j.start_ms, now_);
    release(i);
    ++j.gen;
    preempted_at_[i].push_back(now_);
    enqueue(i);
  }

  policy::TeamStanding standing_of(const std::string& team, const std::string& pool) {
    auto tc = cfg_.team_or_default(team);
    auto q = tc.quota(pool);
    policy::TeamStanding s;
    s.team = team;
    s.weight = tc.weight;
    s.guaranteed = q.guaranteed;
    s.limit = q.limit;
    s.borrow = tc.borrow;
    s.used = usage(team, pool);
    return s;
  }

  // Rounds of every pool at this instant until one changes nothing (the
  // queues then show the next jobs of their lines, as a demand update does).
  void rounds_at_instant() {
    for (int k = 0;; ++k) {
      if (k == kMaxRoundsPerInstant) {
        ++capped_;
        return;
      }
      bool changed = false;
      for (const auto& pool : pools_) changed = round(pool) || changed;
      if (!changed) return;
    }
  }

  // One round of `pool`, as the pool arbiter runs it; true when it granted or
  // preempted something.
  bool round(const std::string& pool) {
    policy::RoundInput in;
    in.pool = pool;
    std::vector<std::vector<size_t>> demand_jobs;  // per team input: demand -> job
    for (auto& [team, by_pool] : lines_) {
      auto it = by_pool.find(pool);
      if (it == by_pool.end() || it->second.empty()) continue;
      policy::TeamInput ti;
      ti.slots = opt_.max_inflight;
      std::vector<size_t> of;
      for (const auto& [key, i] : it->second) {
        if (static_cast<int>(of.size()) == opt_.demand_depth) break;
        const SimJob& j = jobs_[i];
        ti.demands.push_back(
            policy::Demand{j.id, j.req, j.max_runtime_s, j.seq, false, std::vector<std::string>{}});
        of.push_back(i);
      }
      ti.standing = standing_of(team, pool);
      in.teams.push_back(std::move(ti));
      demand_jobs.push_back(std::move(of));
    }
    if (in.teams.empty()) return false;
    ++round_count_;
    auto& reclaim = reclaim_for_[pool];
    for (auto it = reclaim.begin(); it != reclaim.end();)
      it = it->second <= now_ || jobs_[it->first].state != JobState::pending ? reclaim.erase(it)
                                                                             : std::next(it);
    in.reclaiming = !reclaim.empty();
    in.fifo = fifo_;
    in.backfill = backfill_;
    in.now_ms = now_;
    in.hold = holds_[pool];
    if (in.hold.active() && in.hold.start_ms != policy::kNever && in.hold.start_ms < now_)
      in.hold = policy::Hold{};  // overdue: planned again from what runs now
    in.running_of = [this, &pool] {
      std::vector<policy::RunningWork> running;
      for (size_t i : running_[pool]) {
        const SimJob& j = jobs_[i];
        policy::RunningWork w;
        w.nodes = j.ranks;
        w.gpus = j.req.gpus;
        w.cpus = j.req.cpus;
        w.memory_mb = j.req.memory_mb;
        w.ends_ms = j.max_runtime_s > 0 ? j.start_ms + j.max_runtime_s * 1000 : policy::kNever;
        running.push_back(std::move(w));
      }
      return running;
    };
    in.nodes = std::move(caps_);
    in.index = &capidx_;
    policy::RoundOutput out = policy::plan_round_live(in);  // grants taken from the nodes
    caps_ = std::move(in.nodes);
    holds_[pool] = out.hold;
    // As the arbiter: the preemption step sees the round's grants taken from
    // the nodes but not yet in the books or the running work (they are
    // placed after it), then the grants start.
    size_t stopped = 0;
    if (!fifo_) stopped = preempt(pool, in, demand_jobs, out);
    for (const auto& g : out.grants) start(demand_jobs[g.team][g.demand], g.nodes, g.borrowed);
    return !out.grants.empty() || stopped > 0;
  }

  // The arbiter's preempt_if_needed on this round's wants: victims stop at
  // once (a simulated worker does) and wait in line again.
  size_t preempt(const std::string& pool, const policy::RoundInput& in,
                 const std::vector<std::vector<size_t>>& demand_jobs,
                 const policy::RoundOutput& out) {
    const auto& pc = cfg_.preemption;
    auto& recent = pool_preemptions_[pool];
    policy::forget_old(recent, now_);
    bool budget_left = static_cast<int>(recent.size()) < pc.max_per_minute;
    int64_t grace_ms = 1000LL * policy::preempt_grace_s(std::nullopt, pc.max_grace_s);
    const auto& hold = holds_[pool];
    std::vector<policy::PreemptWant> wants;
    for (size_t t = 0; t < in.teams.size(); ++t) {
      const auto& team = in.teams[t].standing.team;
      auto standing = standing_of(team, pool);
      policy::WantGate gate(standing.guaranteed - standing.used.gpus, budget_left);
      for (size_t i : demand_jobs[t]) {
        const SimJob& j = jobs_[i];
        auto p = preempting_for_.find(i);
        auto r = out.reasons.find(j.id);
        auto below =
            gate.admit(j.total_gpus(), p != preempting_for_.end() && p->second > now_,
                       r == out.reasons.end() ? nullptr : &r->second.code,
                       hold.active() && hold.job_id == j.id && hold.start_ms <= now_ + grace_ms);
        if (!below) continue;
        policy::PreemptWant want{j.id,
                                 j.team,
                                 j.priority,
                                 j.seq,
                                 *below,
                                 j.req,
                                 j.las_thresholds.empty() ? -1 : j.key.band};
        if (victims_[pool].may_have_victim(want)) wants.push_back(std::move(want));
      }
    }
    if (wants.empty()) return 0;
    std::vector<policy::PreemptCandidate> cands;
    std::vector<size_t> ids;
    for (size_t i : running_[pool]) {
      const SimJob& j = jobs_[i];
      policy::PreemptCandidate c;
      c.job_id = j.id;
      c.team = j.team;
      c.priority = j.priority;
      c.preemptible = j.preemptible;
      c.borrowed = j.borrowed;
      c.started_ms = j.start_ms;
      if (opt_.resume_on_preempt) c.last_checkpoint_ms = now_;  // it would lose nothing
      if (auto p = preempted_at_.find(i); p != preempted_at_.end())
        c.protected_until_ms = policy::protected_until(p->second, pc.protect_after,
                                                       pc.window_s * 1000LL, pc.protect_s * 1000LL);
      c.nodes = j.ranks;
      c.gpus = j.req.gpus;
      c.cpus = j.req.cpus;
      c.memory_mb = j.req.memory_mb;
      if (!j.las_thresholds.empty())
        c.las_band = policy::las_band(
            j.attained_gpu_s + policy::attempt_gpu_s(j.req.gpus, j.req.workers, j.start_ms, now_),
            j.las_thresholds);
      cands.push_back(std::move(c));
      ids.push_back(i);
    }
    if (cands.empty()) return 0;
    auto plans = policy::plan_preemption(caps_, cands, std::move(wants), recent.size(),
                                         pc.max_per_minute, grace_ms, now_);
    size_t stopped = 0;
    for (const auto& plan : plans) {
      for (size_t v : plan.plan.victims) {
        size_t i = ids[v];
        if (jobs_[i].state != JobState::running) continue;
        stop_preempted(i);
        ++stopped;
        ++preemptions_;
        if (policy::is_reclaim(plan.preemptor, cands[v]))
          ++reclaims_;
        else
          recent.push_back(now_);
      }
      const size_t preemptor = index_of(plan.preemptor.job_id);
      if (!plan.reclaim) {
        policy::Hold& h = holds_[pool];
        h.job_id = plan.preemptor.job_id;
        h.nodes = plan.held_nodes;
        h.start_ms = plan.hold_start_ms;
      }
      preempting_for_[preemptor] = plan.preempting_until_ms;
      if (plan.reclaim) reclaim_for_[pool][preemptor] = plan.preempting_until_ms;
    }
    return stopped;
  }

  void take_sample(int64_t at_ms) {
    std::vector<char> held(caps_.size(), 0);
    for (const auto& [pool, h] : holds_)
      if (h.active())
        for (size_t n : h.nodes)
          if (n < held.size()) held[n] = 1;
    for (size_t n = 0; n < caps_.size(); ++n) {
      SampleNode& s = sample_nodes_[n];
      s.free = std::max(0, caps_[n].gpus_free);
      s.allocated = s.total - s.free;
      s.held = held[n] != 0;
    }
    std::vector<SampleWant> wants;
    std::set<std::tuple<int, std::string, std::string>> seen;
    std::vector<SampleTeam> teams;
    for (const auto& [team, by_pool] : lines_) {
      SampleTeam st;
      st.weight = cfg_.team_or_default(team).weight;
      for (const auto& [pool, line] : by_pool) {
        st.pending = st.pending || !line.empty();
        int k = 0;
        for (const auto& [key, i] : line) {
          if (k++ == opt_.demand_depth) break;
          const auto& r = jobs_[i].req;
          if (r.gpus > 0 && seen.insert({r.gpus, r.gpu_type, r.pool}).second)
            wants.push_back(SampleWant{r.gpus, r.gpu_type, r.pool});
        }
      }
      for (const auto& [key, u] : used_)
        if (key.first == team) st.in_use += u.gpus;
      teams.push_back(st);
    }
    AllocSample s = make_sample(sample_nodes_, wants, teams, true);
    s.t_ns = (at_ms - kEpochMs) * kNsPerMs;
    samples_.push_back(s);
  }

  const SimulateOptions& opt_;
  const policy::ClusterConfig& cfg_;
  bool fifo_ = false, backfill_ = false;
  std::vector<SimJob> jobs_;
  std::vector<policy::NodeCapacity> caps_;
  policy::CapacityIndex capidx_;
  std::set<std::string> pools_;
  std::map<std::string, std::map<std::string, Line>> lines_;           // team -> pool -> line
  std::map<std::pair<std::string, std::string>, policy::Usage> used_;  // (team, pool)
  std::map<std::string, std::set<size_t>> running_;                    // by pool: jobs
  std::map<std::string, policy::VictimPool> victims_;                  // by pool
  std::map<std::string, policy::Hold> holds_;                          // by pool
  std::map<std::string, std::vector<int64_t>> pool_preemptions_;       // by pool: when
  std::unordered_map<size_t, std::vector<int64_t>> preempted_at_;      // job -> when (churn)
  std::unordered_map<size_t, int64_t> preempting_for_;                 // preemptor -> until
  std::map<std::string, std::map<size_t, int64_t>> reclaim_for_;       // pool -> job -> until
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  int64_t now_ = kEpochMs;
  int64_t sample_ms_ = 1000;
  std::vector<SampleNode> sample_nodes_;
  std::vector<AllocSample> samples_;
  size_t event_count_ = 0, round_count_ = 0, capped_ = 0;
  long long preemptions_ = 0, reclaims_ = 0, preempted_attempts_ = 0;
};

}  // namespace

Json simulate(const std::vector<TraceJob>& jobs, const std::vector<FleetFit>& fits,
              const SimulateOptions& opt, const Json& config) {
  Simulator sim(jobs, fits, opt);
  sim.run();
  return sim.report(config);
}

int run_simulate(const ReplayOptions& opt, std::ostream& out, std::ostream& err) {
  Plan plan;
  if (int rc = make_plan(opt, plan, err); rc != 0) return rc;
  SimulateOptions so;
  so.fleet = groups_of(opt);
  so.runtime_limit_factor = opt.runtime_limit_factor;
  so.sample_s = opt.sample_s;
  so.resume_on_preempt = opt.resume_on_preempt;
  if (!opt.scheduler_config.empty()) {
    std::ifstream f(opt.scheduler_config);
    std::stringstream text;
    text << f.rdbuf();
    if (!f) {
      err << "troupe-load: cannot read " << opt.scheduler_config << "\n";
      return 2;
    }
    if (auto why = policy::load_config_or_open(text.str(), so.config); !why.empty()) {
      err << "troupe-load: " << opt.scheduler_config << ": " << why << "\n";
      return 2;
    }
  }
  Json config = plan_config_json(opt, plan);
  config["scheduler_config"] = opt.scheduler_config;
  config["seed"] = opt.seed;
  std::vector<std::string> policies = opt.policies;
  if (policies.empty()) policies = {"troupe"};
  std::vector<std::pair<std::string, Json>> runs;
  int rc = 0;
  for (const auto& p : policies) {
    so.policy = p;
    const auto began = std::chrono::steady_clock::now();
    Json r = simulate(plan.runnable, plan.fits, so, config);
    r["total_s"] =
        std::round(std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count() *
                   1000.0) /
        1000.0;
    if (!r.value("complete", false)) {
      err << "troupe-load: " << p << ": " << r["simulation"]["pending_at_end"]
          << " job(s) never ran (they fit nowhere the policy would place them)\n";
      rc = 1;
    }
    if (r.value("rejected", 0) > 0) {
      err << "troupe-load: " << p << ": " << r["rejected"]
          << " job(s) refused by the config's admission (see errors)\n";
      rc = 1;
    }
    runs.emplace_back(p, std::move(r));
  }
  out << runs_text(runs, opt.json, "simulate_compare");
  return rc;
}

}  // namespace troupe::load

#include "actors/team_queue_actor.hpp"

#include <chrono>
#include <map>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "actors/policy/demand.hpp"
#include "actors/policy/queue_order.hpp"
#include "actors/policy/why.hpp"
#include "actors/shrink.hpp"
#include "actors/views.hpp"
#include "messages/names.hpp"

namespace troupe {

using namespace troupe::atoms;

namespace {

// How many jobs from the front of each pool's line the arbiter of that pool
// considers per round (the head, and what may backfill behind it), not
// counting the jobs being placed (granted): those are left out, so a team can
// have many negotiations under way (the arbiter's limit), not only this many.
constexpr size_t kDemandDepth = 16;

// In line: priority, then submit order. Two jobs may share a seq (a standby's
// records restored beside the leader's, records from another version's
// store): each keeps its own entry, in arrival order.
using Line = std::multimap<policy::QueueKey, JobTicket>;

// The team's jobs for one pool. A line per pool: a pool with no room holds up
// no job of another pool, and each pool's arbiter hears only of its own. An
// any-type job (several candidate pools) waits in the line of its first
// candidate, where it is counted, and as a guest in the lines of the others
// (not counted): each of their arbiters may place it, the first grant wins.
struct PoolLine {
  Line pending;          // its own jobs and its guests
  int64_t jobs = 0;      // its own jobs
  int64_t flexible = 0;  // ... of them, any-type jobs
  int64_t gpus = 0;      // GPUs its own jobs ask for, all ranks
  bool dirty = false;    // its arbiter has not heard the last change
  // The ids its arbiter holds as this line's first jobs (policy::diff_demand);
  // none told yet: the next demand is full.
  std::unordered_set<std::string> told;
  bool told_once = false;
};

struct QueueState {
  std::string team;
  Wiring w;
  std::map<std::string, PoolLine> lines;  // by pool (a map: entries stay put)
  struct Entry {
    PoolLine* line;
    Line::iterator at;
  };
  // By job id: a view of the id in the entry's own ticket (no copy).
  std::unordered_map<std::string_view, Entry> index;
  // An any-type job's guest entries in its other candidates' lines.
  std::unordered_map<std::string, std::vector<Entry>> guests;
  // Being placed (not in the demand), with its pool: the answer goes to the
  // arbiter of that pool even when the job left the line meanwhile.
  std::unordered_map<std::string, std::string> granted;
  bool flush_armed = false;  // a demand update is on its way
  static inline const char* name = "team_queue";
};

using Self = TeamQueueActor::stateful_pointer<QueueState>;

void changed(Self self, PoolLine& line) {
  line.dirty = true;
  if (self->state.flush_armed) return;
  self->state.flush_armed = true;
  self->send(self, tick_atom_v);  // after the messages already queued: coalesces bursts
}

// The demand of each pool whose line changed; a line left empty is dropped
// once its arbiter has heard so.
void send_demand(Self self) {
  auto& st = self->state;
  st.flush_armed = false;
  for (auto it = st.lines.begin(); it != st.lines.end();) {
    auto& [pool, line] = *it;
    if (line.dirty) {
      line.dirty = false;
      std::vector<std::string_view> now;
      std::vector<const JobTicket*> first;
      for (const auto& [k, t] : line.pending) {
        if (first.size() == kDemandDepth) break;
        if (st.granted.count(t.job_id)) continue;
        now.push_back(t.job_id);
        first.push_back(&t);
      }
      bool full = !line.told_once;
      line.told_once = true;
      auto diff = policy::diff_demand(line.told, now);
      std::vector<JobTicket> added;
      added.reserve(diff.added.size());
      for (size_t i : diff.added) added.push_back(*first[i]);
      self->send(st.w.arbiter, demand_atom_v, st.team, pool, std::move(added),
                 std::move(diff.removed), full, static_cast<int32_t>(line.jobs),
                 static_cast<int32_t>(line.gpus), static_cast<int32_t>(line.flexible),
                 TeamQueueActor{self});
    }
    if (line.pending.empty())
      it = st.lines.erase(it);
    else
      ++it;
  }
}

void erase(Self self, const std::string& job_id) {
  auto& st = self->state;
  auto it = st.index.find(job_id);
  if (it == st.index.end()) return;
  auto [line, p] = it->second;
  line->gpus -= static_cast<int64_t>(p->second.req.gpus) * p->second.req.workers;
  --line->jobs;
  if (p->second.req.flexible()) {
    --line->flexible;
    if (auto g = st.guests.find(job_id); g != st.guests.end()) {
      for (auto& e : g->second) {
        e.line->pending.erase(e.at);
        changed(self, *e.line);
      }
      st.guests.erase(g);
      shrink_if_sparse(st.guests);
    }
  }
  st.granted.erase(job_id);
  st.index.erase(it);  // (its key views into the entry: first)
  line->pending.erase(p);
  shrink_if_sparse(st.granted);
  shrink_if_sparse(st.index);
  changed(self, *line);
}

// An `order: las` job that waited long enough moves to band 0 in every line
// it waits in (policy/las.hpp). Each line's arbiter hears of it as added
// again (it takes the ticket's new place in line).
void promote(Self self, const std::string& job_id) {
  auto& st = self->state;
  auto it = st.index.find(job_id);
  if (it == st.index.end() || it->second.at->second.band == 0) return;
  if (st.w.now_ms() < it->second.at->second.promote_at_ms) return;  // a later attempt's ticket
  auto move = [&](QueueState::Entry& e) {
    JobTicket t = std::move(e.at->second);
    e.line->pending.erase(e.at);
    t.band = 0;
    t.promote_at_ms = 0;
    policy::QueueKey key{t.priority, t.seq, 0};
    e.at = e.line->pending.emplace(key, std::move(t));
    e.line->told.erase(job_id);
    changed(self, *e.line);
  };
  QueueState::Entry home = it->second;
  st.index.erase(it);  // its key views into the entry being moved
  move(home);
  st.index.emplace(std::string_view(home.at->second.job_id), home);
  if (auto g = st.guests.find(job_id); g != st.guests.end())
    for (auto& e : g->second) move(e);
}

// Every line an any-type job waits in hears of it again (granted, or not).
void changed_everywhere(Self self, const std::string& job_id) {
  auto& st = self->state;
  if (auto it = st.index.find(job_id); it != st.index.end()) changed(self, *it->second.line);
  if (auto g = st.guests.find(job_id); g != st.guests.end())
    for (auto& e : g->second) changed(self, *e.line);
}

// A grant was carried out: hand the job over. The job actor takes it from
// here, and gives it back if it moved on (canceled while it was placed: no
// longer in this queue).
void placed(Self self, const Assignment& a) {
  auto& st = self->state;
  erase(self, a.job_id);
  self->send(st.w.jobs, placed_atom_v, a);
  self->send(st.w.arbiter, placed_atom_v, st.team, a);
}

TeamQueueActor::behavior_type queue_behavior(Self self, Wiring w, std::string team) {
  self->state.w = std::move(w);
  self->state.team = std::move(team);
  return {
      [=](enqueue_atom, JobTicket t) {
        auto& st = self->state;
        if (st.index.count(t.job_id)) return;
        if (t.band > 0 && t.promote_at_ms > 0) {  // the las starvation guard
          int64_t wait = t.promote_at_ms - st.w.now_ms();
          if (wait <= 0) {
            t.band = 0;
            t.promote_at_ms = 0;
          } else {
            self->delayed_send(self, std::chrono::milliseconds(wait), promote_atom_v, t.job_id);
          }
        }
        auto& line = st.lines[t.req.pool];
        policy::QueueKey key{t.priority, t.seq, t.band};
        auto at = line.pending.emplace(key, t);
        st.index.emplace(std::string_view(at->second.job_id), QueueState::Entry{&line, at});
        line.gpus += static_cast<int64_t>(t.req.gpus) * t.req.workers;
        ++line.jobs;
        changed(self, line);
        if (!t.req.flexible()) return;
        ++line.flexible;
        auto& mine = st.guests[t.job_id];
        for (const auto& pool : t.req.pools) {
          if (pool == t.req.pool) continue;
          auto& other = st.lines[pool];
          JobTicket guest = t;
          guest.req.pool = pool;  // planned there by that pool's arbiter
          mine.push_back({&other, other.pending.emplace(key, std::move(guest))});
          changed(self, other);
        }
      },
      [=](dequeue_atom, const std::string& job_id) { erase(self, job_id); },
      [=](promote_atom, const std::string& job_id) { promote(self, job_id); },
      [=](tick_atom) { send_demand(self); },
      [=](granted_atom, const std::string& pool, const std::vector<std::string>& jobs) {
        // The first grant of a job wins; another pool's grant of an any-type
        // job meanwhile is refused by the gang supervisor (one placement of
        // an attempt at a time) or, placed after it, released by its job.
        auto& st = self->state;
        for (const auto& id : jobs)
          if (st.index.count(id) && st.granted.emplace(id, pool).second && st.guests.count(id))
            changed_everywhere(self, id);  // its other pools' arbiters drop it
      },
      [=](placed_atom, const Assignment& a) { placed(self, a); },
      [=](unplaced_atom, const std::string& job_id, const std::string& pool, const std::string&) {
        // The arbiter plans it again from fresh capacity (it stays in line
        // here, and is in the next demand again).
        auto& st = self->state;
        if (auto g = st.granted.find(job_id); g != st.granted.end() && g->second == pool) {
          st.granted.erase(g);
          changed_everywhere(self, job_id);
        }
        self->send(st.w.arbiter, unplaced_atom_v, st.team, pool, job_id);
      },
      [=](why_atom, const std::string& job_id, const std::string& reply) {
        auto& st = self->state;
        auto it = st.index.find(job_id);
        std::string json;
        if (it == st.index.end()) {
          json =
              views::why_json(job_id, names::kQueued, true, policy::why::kNotInQueue,
                              "not in team " + st.team + "'s queue (being placed or just ended)");
        } else {
          const auto& [line, at] = it->second;
          size_t ahead = 0;
          for (auto p = line->pending.begin(); p != at; ++p) ++ahead;
          json = views::why_json(
              job_id, names::kQueued, true, policy::why::kBehind,
              "behind " + std::to_string(ahead) +
                  " job(s) ahead of it (higher priority, a lower band, or "
                  "earlier submission) in team " +
                  st.team + "'s queue for pool " + at->second.req.pool + " (" +
                  std::to_string(line->jobs) + " pending there)" +
                  views::band_text(at->second.las(), at->second.band, at->second.attained_gpu_s,
                                   at->second.promote_at_ms));
        }
        self->send(st.w.router, why_atom_v, reply, std::move(json));
      },
  };
}

}  // namespace

TeamQueueActor spawn_team_queue(caf::local_actor* parent, Wiring w, std::string team) {
  return parent->spawn(queue_behavior, std::move(w), std::move(team));
}

}  // namespace troupe

#include "actors/team_queue_actor.hpp"

#include <map>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "actors/policy/queue_order.hpp"
#include "actors/policy/why.hpp"
#include "actors/views.hpp"
#include "messages/names.hpp"

namespace troupe {

using namespace troupe::atoms;

namespace {

// How many jobs from the front of the queue the arbiter considers per round
// (the head, and what may backfill behind it), not counting the jobs being
// placed (granted): those are left out, so a team can have many negotiations
// under way (the arbiter's limit), not only this many.
constexpr size_t kDemandDepth = 16;

struct QueueState {
  std::string team;
  Wiring w;
  // In line: priority, then submit order. Two jobs may share a seq (a
  // standby's records restored beside the leader's, records from another
  // version's store): each keeps its own entry, in arrival order.
  using Line = std::multimap<policy::QueueKey, JobTicket>;
  Line pending;
  // By job id: a view of the id in the entry's own ticket (no copy).
  std::unordered_map<std::string_view, Line::iterator> index;
  int64_t pending_gpus = 0;
  std::unordered_set<std::string> granted;  // being placed: not in the demand
  bool flush_armed = false;                 // a demand update is on its way
  static inline const char* name = "team_queue";
};

using Self = TeamQueueActor::stateful_pointer<QueueState>;

void changed(Self self) {
  if (self->state.flush_armed) return;
  self->state.flush_armed = true;
  self->send(self, tick_atom_v);  // after the messages already queued: coalesces bursts
}

void send_demand(Self self) {
  auto& st = self->state;
  st.flush_armed = false;
  std::vector<JobTicket> first;
  for (const auto& [k, t] : st.pending) {
    if (first.size() == kDemandDepth) break;
    if (!st.granted.count(t.job_id)) first.push_back(t);
  }
  self->send(st.w.arbiter, demand_atom_v, st.team, std::move(first),
             static_cast<int32_t>(st.pending.size()), static_cast<int32_t>(st.pending_gpus),
             TeamQueueActor{self});
}

void erase(Self self, const std::string& job_id) {
  auto& st = self->state;
  auto it = st.index.find(job_id);
  if (it == st.index.end()) return;
  auto p = it->second;
  st.pending_gpus -= static_cast<int64_t>(p->second.req.gpus) * p->second.req.workers;
  st.granted.erase(job_id);
  st.index.erase(it);  // (its key views into the entry: first)
  st.pending.erase(p);
  changed(self);
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
      [=](enqueue_atom, const JobTicket& t) {
        auto& st = self->state;
        if (st.index.count(t.job_id)) return;
        auto at = st.pending.emplace(policy::QueueKey{t.priority, t.seq}, t);
        st.index.emplace(std::string_view(at->second.job_id), at);
        st.pending_gpus += static_cast<int64_t>(t.req.gpus) * t.req.workers;
        changed(self);
      },
      [=](dequeue_atom, const std::string& job_id) { erase(self, job_id); },
      [=](tick_atom) { send_demand(self); },
      [=](granted_atom, const std::vector<std::string>& jobs) {
        auto& st = self->state;
        for (const auto& id : jobs)
          if (st.index.count(id)) st.granted.insert(id);
      },
      [=](placed_atom, const Assignment& a) { placed(self, a); },
      [=](unplaced_atom, const std::string& job_id, const std::string&) {
        // The arbiter plans it again from fresh capacity (it stays in line
        // here, and is in the next demand again).
        auto& st = self->state;
        if (st.granted.erase(job_id) > 0) changed(self);
        self->send(st.w.arbiter, unplaced_atom_v, st.team, job_id);
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
          size_t ahead = 0;
          for (auto p = st.pending.begin(); p != it->second; ++p) ++ahead;
          json = views::why_json(job_id, names::kQueued, true, policy::why::kBehind,
                                 "behind " + std::to_string(ahead) +
                                     " job(s) of higher priority or earlier submission in team " +
                                     st.team + "'s queue (" + std::to_string(st.pending.size()) +
                                     " pending)");
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

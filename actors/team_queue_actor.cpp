#include "actors/team_queue_actor.hpp"

#include <chrono>
#include <map>
#include <unordered_map>

#include "actors/policy/ledger.hpp"
#include "actors/policy/queue_order.hpp"
#include "messages/wire.hpp"

namespace troupe {

using namespace troupe::atoms;

namespace {

constexpr int64_t kLeaseMs = 2000;
constexpr auto kAskTimeout = std::chrono::seconds(5);
constexpr auto kBackoff = std::chrono::milliseconds(50);

struct QueueState {
  std::string team;
  Wiring w;
  std::map<policy::QueueKey, JobTicket> pending;
  std::unordered_map<std::string, policy::QueueKey> index;
  bool busy = false;        // a negotiation is under way
  bool waiting = false;     // nothing fits; the arbiter wakes us
  bool retry_armed = false; // a back-off timer is pending
  std::string inflight;     // job id under negotiation
  bool inflight_dropped = false;
  static inline const char* name = "team_queue";
};

using Self = caf::stateful_actor<QueueState>;

void kick(Self* self);

void backoff(Self* self) {
  auto& st = self->state;
  st.busy = false;
  if (!st.retry_armed) {
    st.retry_armed = true;
    self->delayed_send(self, kBackoff, retry_atom_v);
  }
}

void release(Self* self, const caf::actor& node, const std::string& id) {
  flatbuffers::FlatBufferBuilder fbb;
  auto body = wire::CreateRelease(fbb, fbb.CreateString(id), fbb.CreateString("not committed"));
  self->send(node, Envelope{wire::seal(fbb, body)});
}

// The head job is committed (or the negotiation failed): hand it over, go on.
void committed(Self* self, const JobTicket& t, const Assignment& a) {
  auto& st = self->state;
  st.busy = false;
  if (st.inflight_dropped) {
    // Canceled while we negotiated: the job actor frees what it was given.
    st.inflight_dropped = false;
  }
  if (auto it = st.index.find(t.job_id); it != st.index.end()) {
    st.pending.erase(it->second);
    st.index.erase(it);
  }
  self->send(st.w.jobs, route_atom_v, t.job_id, caf::make_message(placed_atom_v, a));
  kick(self);
}

void propose(Self* self, JobTicket t, CandidateList c, size_t i) {
  if (i >= c.actors.size()) {
    backoff(self);
    return;
  }
  auto node = c.actors[i];
  auto id = policy::hold_id(t.job_id, t.attempt, 0);
  flatbuffers::FlatBufferBuilder fbb;
  auto res = wire::CreateResources(fbb, t.req.gpus, fbb.CreateString(t.req.gpu_type), t.req.cpus,
                                   t.req.memory_mb);
  auto body = wire::CreatePropose(fbb, fbb.CreateString(id), fbb.CreateString(t.job_id),
                                  fbb.CreateString(t.team), res, kLeaseMs);
  self->request(node, kAskTimeout, Envelope{wire::seal(fbb, body)})
      .then(
          [=](const Envelope& answer) {
            auto* e = wire::open(answer.bytes);
            if (e == nullptr || e->body_as_Accept() == nullptr) {
              propose(self, t, c, i + 1);
              return;
            }
            flatbuffers::FlatBufferBuilder cb;
            auto commit = wire::CreateCommit(cb, cb.CreateString(id));
            self->request(node, kAskTimeout, Envelope{wire::seal(cb, commit)})
                .then(
                    [=](const Envelope& done) {
                      auto* d = wire::open(done.bytes);
                      auto* ok = d ? d->body_as_Accept() : nullptr;
                      if (ok == nullptr) {
                        propose(self, t, c, i + 1);
                        return;
                      }
                      Assignment a;
                      a.job_id = t.job_id;
                      a.attempt = t.attempt;
                      a.nodes = {c.names[i]};
                      a.hosts = {c.hosts[i]};
                      a.gpus = {wire::ints(ok->gpu_indices())};
                      committed(self, t, a);
                    },
                    [=](const caf::error&) {
                      release(self, node, id);
                      propose(self, t, c, i + 1);
                    });
          },
          [=](const caf::error&) {
            release(self, node, id);
            propose(self, t, c, i + 1);
          });
}

void kick(Self* self) {
  auto& st = self->state;
  if (st.busy || st.waiting || st.pending.empty()) return;
  st.busy = true;
  JobTicket t = st.pending.begin()->second;
  st.inflight = t.job_id;
  st.inflight_dropped = false;
  self->request(st.w.arbiter, kAskTimeout, candidates_atom_v, t.req)
      .then(
          [=](const CandidateList& c) {
            auto& st = self->state;
            if (st.inflight_dropped || !st.index.count(t.job_id)) {
              st.busy = false;
              kick(self);
              return;
            }
            if (c.actors.empty()) {
              st.busy = false;
              st.waiting = true;
              return;
            }
            if (t.req.workers <= 1) {
              propose(self, t, c, 0);
            } else {
              self->send(st.w.gangs, spawn_atom_v, t, c, caf::actor{self});
            }
          },
          [=](const caf::error&) { backoff(self); });
}

caf::behavior queue_behavior(Self* self, Wiring w, std::string team) {
  self->state.w = std::move(w);
  self->state.team = std::move(team);
  return {
      [=](enqueue_atom, const JobTicket& t) {
        auto& st = self->state;
        if (st.index.count(t.job_id)) return;
        policy::QueueKey k{t.priority, t.seq};
        st.pending.emplace(k, t);
        st.index.emplace(t.job_id, k);
        st.waiting = false;
        kick(self);
      },
      [=](dequeue_atom, const std::string& job_id) {
        auto& st = self->state;
        if (auto it = st.index.find(job_id); it != st.index.end()) {
          st.pending.erase(it->second);
          st.index.erase(it);
        }
        if (st.busy && st.inflight == job_id) st.inflight_dropped = true;
      },
      [=](wake_atom) {
        self->state.waiting = false;
        kick(self);
      },
      [=](retry_atom) {
        self->state.retry_armed = false;
        kick(self);
      },
      [=](placed_atom, const Assignment& a) {
        auto& st = self->state;
        auto it = st.index.find(a.job_id);
        JobTicket t;
        if (it != st.index.end()) t = st.pending[it->second];
        t.job_id = a.job_id;
        t.attempt = a.attempt;
        committed(self, t, a);
      },
      [=](unplaced_atom, const std::string&, const std::string&) { backoff(self); },
      [=](count_atom) { return static_cast<int64_t>(self->state.pending.size()); },
  };
}

}  // namespace

caf::actor spawn_team_queue(caf::event_based_actor* parent, Wiring w, std::string team) {
  return parent->spawn(queue_behavior, std::move(w), std::move(team));
}

}  // namespace troupe

#include "actors/gang_reservation_actor.hpp"

#include "actors/policy/ledger.hpp"
#include "messages/wire.hpp"

namespace troupe {

using namespace troupe::atoms;

namespace {

// A single worker commits right after its one Reserve; a gang holds its first
// ranks while the others are asked, so its lease is longer.
constexpr int64_t kSingleLeaseMs = 2000;
constexpr int64_t kGangLeaseMs = 5000;
// How long its answers may take, all of them (a gang: both phases).
constexpr int64_t kSingleTimeoutMs = 5000;
constexpr int64_t kGangTimeoutMs = 8000;

// Where each rank's Reserve stands. An asked or held rank may hold something
// (reserved, or its answer is still on its way or timed out): it is released
// when the gang gives up. A refused one holds nothing of this gang's (a
// refusal "already allocated" may be a running attempt's hold of the same
// id), nor does one never asked (a gang restarted after a crash).
enum class Rank { not_asked, asked, held, refused };

struct GangState {
  JobTicket t;
  CandidateList c;
  TeamQueueActor queue;
  std::vector<std::vector<int32_t>> gpus;  // by rank, once accepted
  std::vector<Rank> ranks;
  size_t reserved = 0;
  size_t committed = 0;
  // What it waits for, as its give-up reason when the supervisor says time
  // is up (lease_atom); null: waiting for nothing.
  const char* waiting = nullptr;
  static inline const char* name = "gang_reservation";
};

using Self = GangActor::stateful_pointer<GangState>;

bool single(const GangState& st) {
  return st.c.actors.size() == 1;
}

int64_t lease_ms(const GangState& st) {
  return single(st) ? kSingleLeaseMs : kGangLeaseMs;
}

std::string id_of(const GangState& st, size_t rank) {
  return policy::hold_id(st.t.job_id, st.t.attempt, static_cast<int>(rank));
}

// What this gang may hold: every rank asked and not refused. A Release reaches a node
// after the Reserve this actor sent it (one sender, one receiver: in order).
void release_all(Self self) {
  auto& st = self->state;
  for (size_t rank = 0; rank < st.c.actors.size(); ++rank)
    if (st.ranks[rank] == Rank::asked || st.ranks[rank] == Rank::held)
      caf::anon_send(st.c.actors[rank],
                     Envelope{wire::release(id_of(st, rank), "gang not placed", true)});
}

void give_up(Self self, const std::string& reason) {
  release_all(self);
  self->send(self->state.queue, unplaced_atom_v, self->state.t.job_id, self->state.t.req.pool,
             reason);
  self->quit();
}

// Every rank is committed: the queue hands the job over.
void placed(Self self) {
  auto& st = self->state;
  Assignment a;
  a.job_id = st.t.job_id;
  a.attempt = st.t.attempt;
  a.nodes = st.c.names;
  a.hosts = st.c.hosts;
  a.gpus = st.gpus;
  a.pool = st.t.req.pool;
  self->send(st.queue, placed_atom_v, std::move(a));
  self->quit();
}

void commit_all(Self self) {
  auto& st = self->state;
  st.waiting = "a commit timed out";
  for (size_t rank = 0; rank < st.c.actors.size(); ++rank) {
    // (no timeout of its own: the supervisor's deadline, lease_atom)
    self->request(st.c.actors[rank], caf::infinite, Envelope{wire::commit(id_of(st, rank))})
        .then(
            [=](const Envelope& answer) {
              auto* e = wire::open(answer.bytes);
              auto* ok = e ? e->body_as_Accept() : nullptr;
              if (ok == nullptr) {
                give_up(self, "a node refused the commit");
                return;
              }
              auto& st = self->state;
              st.gpus[rank] = wire::ints(ok->gpu_indices());  // as allocated
              if (++st.committed == st.c.actors.size()) placed(self);
            },
            [=](const caf::error&) { give_up(self, "a node is gone"); });
  }
}

// Asks the node of `rank` for its Reserve (with `allocate`: reserve and
// commit at once). An Accept records the rank's GPUs and goes on with
// `accepted`; a Reject or a bad answer gives up (nothing held on that node);
// a timeout gives up releasing it too (it may have reserved after all), as
// every rank still being asked.
template <class Accepted>
void ask_node(Self self, size_t rank, bool allocate, const char* timed_out, Accepted accepted) {
  auto& st = self->state;
  wire::Ask ask{st.t.req.gpus,      st.t.req.gpu_type,      st.t.req.cpus,
                st.t.req.memory_mb, st.t.req.gpu_memory_mb, st.t.req.share_key == "*"};
  Envelope req{wire::reserve(id_of(st, rank), st.t.job_id, st.t.job_id, st.t.team, ask,
                             lease_ms(st), static_cast<int>(rank), allocate)};
  st.ranks[rank] = Rank::asked;
  st.waiting = timed_out;
  self->request(st.c.actors[rank], caf::infinite, std::move(req))
      .then(
          [=](const Envelope& answer) {
            auto* e = wire::open(answer.bytes);
            auto* ok = e ? e->body_as_Accept() : nullptr;
            if (ok == nullptr) {
              auto* no = e ? e->body_as_Reject() : nullptr;
              self->state.ranks[rank] = Rank::refused;
              give_up(self, no ? wire::str(no->reason()) : "bad answer");
              return;
            }
            self->state.gpus[rank] = wire::ints(ok->gpu_indices());
            self->state.ranks[rank] = Rank::held;
            accepted();
          },
          [=](const caf::error&) { give_up(self, "a node is gone"); });
}

// A gang: every rank's Reserve at once, then, once all hold, the commits.
// All or nothing: the first refusal or timeout releases every rank not
// refused. No deadlock: a node answers a Reserve at once (it never waits for
// room), and the arbiter grants no two gangs the same room.
void reserve_all(Self self) {
  auto& st = self->state;
  for (size_t rank = 0; rank < st.c.actors.size(); ++rank)
    ask_node(self, rank, false, "a reservation timed out", [=] {
      if (++self->state.reserved == self->state.c.actors.size()) commit_all(self);
    });
}

// A single worker waits for no other rank: its Reserve and Commit are one
// Allocate (Reserve.allocate: reserve and commit at once, answered Accept
// with the GPUs as allocated, or Reject). One round trip, the same answers to
// the queue as a gang's two phases: no second path.
void allocate(Self self) {
  ask_node(self, 0, true, "an allocation timed out", [=] { placed(self); });
}

// The first step of a placement: a gang reserves on every node at once
// (reserve_all), then commits on all (commit_all); a single worker allocates.
void begin(Self self) {
  if (single(self->state))
    allocate(self);
  else
    reserve_all(self);
}

GangActor::behavior_type gang_behavior(Self self, JobTicket t, CandidateList c,
                                       TeamQueueActor queue, bool recovering) {
  auto& st = self->state;
  st.t = std::move(t);
  st.c = std::move(c);
  st.queue = std::move(queue);
  st.gpus.resize(st.c.actors.size());
  st.ranks.assign(st.c.actors.size(), Rank::not_asked);
  if (recovering || st.c.actors.empty()) {
    give_up(self, recovering ? "gang reservation restarted" : "no node granted");
    return GangActor::behavior_type::make_empty_behavior();
  }
  begin(self);
  return {
      [=](crash_atom) { self->quit(caf::sec::runtime_error); },
      [=](lease_atom) {
        if (self->state.waiting) give_up(self, self->state.waiting);
      },
  };
}

}  // namespace

int64_t placement_timeout_ms(const CandidateList& c) {
  return c.actors.size() == 1 ? kSingleTimeoutMs : kGangTimeoutMs;
}

GangActor spawn_gang_reservation(caf::local_actor* parent, JobTicket t, CandidateList c,
                                 TeamQueueActor queue, bool recovering) {
  return parent->spawn(gang_behavior, std::move(t), std::move(c), std::move(queue), recovering);
}

}  // namespace troupe

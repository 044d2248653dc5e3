// Unit tests for the one placement path, actors/gang_reservation_actor.cpp:
// a grant of one worker or many is reserved on every node at once,
// committed, and answered to the team queue placed or unplaced; what it may
// hold is released when it gives up. Fake node actors answer its Reserve and
// Commit as told. Runs on CAF's test coordinator: one thread, no waits (a
// silent node's deadline, kept by the gang supervisor, is triggered on a
// manual clock, not waited for).
#include <catch2/catch.hpp>

#include "actor_test_kit.hpp"
#include "actors/gang_reservation_actor.hpp"
#include "actors/supervisors.hpp"
#include "messages/wire.hpp"

using namespace troupe;
using namespace troupe::atoms;

namespace {

enum class Answer { accept, reject, silent, silent_commit };

// A node actor's ledger, reduced to what the gang sees: it answers Reserve
// and Commit as `answer` says (GPU 3 when it accepts) and records every body.
struct FakeNodeState {
  std::string name;
  Answer answer = Answer::accept;
  std::vector<std::string> got;  // "Reserve r lease", "Allocate r", "Commit r", "Release r"
  std::vector<caf::response_promise> unanswered;
};
using FakeNode = caf::stateful_actor<FakeNodeState>;

caf::behavior fake_node(FakeNode* self, std::string name, Answer answer) {
  self->state.name = std::move(name);
  self->state.answer = answer;
  return {
      [=](const Envelope& env) -> caf::result<Envelope> {
        auto& st = self->state;
        auto* e = wire::open(env.bytes);
        CHECK(e != nullptr);
        if (e == nullptr) return Envelope{};
        std::string id;
        if (auto* r = e->body_as_Reserve()) {
          id = wire::str(r->reservation_id());
          st.got.push_back(r->allocate() ? "Allocate " + id
                                         : "Reserve " + id + " " + std::to_string(r->lease_ms()));
        } else if (auto* c = e->body_as_Commit()) {
          id = wire::str(c->reservation_id());
          st.got.push_back("Commit " + id);
        } else if (auto* x = e->body_as_Release()) {
          st.got.push_back("Release " + wire::str(x->reservation_id()) +
                           (x->if_unlaunched() ? " if unlaunched" : ""));
          return Envelope{};
        }
        if (st.answer == Answer::silent_commit && e->body_as_Commit() == nullptr)
          return Envelope{wire::accept(st.name, id, {3}, 0)};
        switch (st.answer) {
          case Answer::accept:
            return Envelope{wire::accept(st.name, id, {3}, 0)};
          case Answer::reject:
            return Envelope{wire::reject(st.name, id, "not enough free GPUs")};
          case Answer::silent:
          case Answer::silent_commit:
            st.unanswered.push_back(self->make_response_promise());
            return caf::delegated<Envelope>{};
        }
        return Envelope{};
      },
  };
}

// The team queue: what the gang told it.
struct FakeQueueState {
  std::vector<std::string> got;    // "placed job" or "unplaced job: reason"
  std::vector<std::string> pools;  // the pool each unplaced names (its grant's)
  Assignment placed;
};
using FakeQueue = caf::stateful_actor<FakeQueueState>;

caf::behavior fake_queue(FakeQueue* self) {
  return {
      [=](placed_atom, const Assignment& a) {
        self->state.got.push_back("placed " + a.job_id);
        self->state.placed = a;
      },
      [=](unplaced_atom, const std::string& job, const std::string& pool,
          const std::string& reason) {
        self->state.got.push_back("unplaced " + job + ": " + reason);
        self->state.pools.push_back(pool);
      },
  };
}

// Starts gang reservations as the gang supervisor does.
caf::behavior parent(caf::event_based_actor* self) {
  return {
      [=](const JobTicket& t, const CandidateList& c, const TeamQueueActor& queue,
          bool recovering) { spawn_gang_reservation(self, t, c, queue, recovering); },
  };
}

using testing::state_of;

struct Fixture : testing::TestSystem {
  caf::actor spawner, queue;
  std::vector<caf::actor> nodes;
  GangSupervisorActor gangs;  // only for supervised()

  Fixture() {
    spawner = sys->spawn(parent);
    queue = sys->spawn(fake_queue);
    sched->run();
  }
  ~Fixture() {
    for (const auto& a : nodes) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    if (gangs) caf::anon_send_exit(gangs, caf::exit_reason::user_shutdown);
    stop(spawner, queue);
  }
  // A grant of `job`, one worker on each named node (rank order), each node
  // answering as told.
  void grant(const std::vector<std::pair<std::string, Answer>>& on, bool recovering = false) {
    caf::anon_send(spawner, ticket(on.size()), candidates(on),
                   caf::actor_cast<TeamQueueActor>(queue), recovering);
    sched->run();
  }
  // The same grant through the real gang supervisor, which keeps the gang's
  // deadline on the returned clock.
  std::shared_ptr<ManualClock> supervised(const std::vector<std::pair<std::string, Answer>>& on) {
    auto clock = std::make_shared<ManualClock>(1'000'000);
    gangs = spawn_gang_supervisor(*sys);
    Wiring w;
    w.clock = clock;
    caf::anon_send(gangs, w);
    Grant g{ticket(on.size()), candidates(on), caf::actor_cast<TeamQueueActor>(queue)};
    caf::anon_send(gangs, spawn_atom_v, std::vector<Grant>{g});
    sched->run();
    return clock;
  }
  JobTicket ticket(size_t workers) {
    JobTicket t;
    t.job_id = "j1";
    t.team = "t";
    t.attempt = 2;
    t.req.gpus = 1;
    t.req.workers = static_cast<int>(workers);
    t.req.pool = "p";
    return t;
  }
  CandidateList candidates(const std::vector<std::pair<std::string, Answer>>& on) {
    CandidateList c;
    for (const auto& [name, answer] : on) {
      nodes.push_back(sys->spawn(fake_node, name, answer));
      c.names.push_back(name);
      c.hosts.push_back("host-" + name);
      // The fakes take only what a gang sends a node or a queue: seen
      // through the real interfaces, as the gang sees them.
      c.actors.push_back(caf::actor_cast<NodeActor>(nodes.back()));
    }
    return c;
  }
  std::vector<std::string>& node_got(size_t rank) {
    return state_of<FakeNodeState>(nodes[rank]).got;
  }
  std::vector<std::string>& queue_got() { return state_of<FakeQueueState>(queue).got; }
};

using V = std::vector<std::string>;

}  // namespace

TEST_CASE_METHOD(Fixture, "a single worker is allocated in one round trip and placed",
                 "[gang_reservation]") {
  grant({{"n1", Answer::accept}});
  CHECK(node_got(0) == V{"Allocate j1/2/0"});
  REQUIRE(queue_got() == V{"placed j1"});
  const auto& a = state_of<FakeQueueState>(queue).placed;
  CHECK(a.attempt == 2);
  CHECK(a.nodes == V{"n1"});
  CHECK(a.hosts == V{"host-n1"});
  CHECK(a.gpus == std::vector<std::vector<int32_t>>{{3}});
}

TEST_CASE_METHOD(Fixture, "a single worker refused its allocation holds nothing and is unplaced",
                 "[gang_reservation]") {
  grant({{"n1", Answer::reject}});
  CHECK(node_got(0) == V{"Allocate j1/2/0"});  // no Release: nothing was held
  CHECK(queue_got() == V{"unplaced j1: not enough free GPUs"});
}

TEST_CASE_METHOD(Fixture, "a gang reserves every rank at once (5 s lease), then commits every rank",
                 "[gang_reservation]") {
  grant({{"n2", Answer::accept}, {"n1", Answer::accept}});
  CHECK(node_got(1) == V{"Reserve j1/2/1 5000", "Commit j1/2/1"});
  CHECK(node_got(0) == V{"Reserve j1/2/0 5000", "Commit j1/2/0"});
  REQUIRE(queue_got() == V{"placed j1"});
  CHECK(state_of<FakeQueueState>(queue).placed.nodes == V{"n2", "n1"});
}

TEST_CASE_METHOD(Fixture, "a reject releases what was reserved and reports its reason",
                 "[gang_reservation]") {
  grant({{"n1", Answer::accept}, {"n2", Answer::reject}});
  CHECK(node_got(0) == V{"Reserve j1/2/0 5000", "Release j1/2/0 if unlaunched"});
  CHECK(node_got(1) == V{"Reserve j1/2/1 5000"});  // it holds nothing: no release
  CHECK(queue_got() == V{"unplaced j1: not enough free GPUs"});
}

TEST_CASE_METHOD(Fixture, "a reject releases the ranks still being asked too, not the refused one",
                 "[gang_reservation]") {
  grant({{"n1", Answer::silent}, {"n2", Answer::reject}, {"n3", Answer::accept}});
  CHECK(node_got(0) == V{"Reserve j1/2/0 5000", "Release j1/2/0 if unlaunched"});
  CHECK(node_got(1) == V{"Reserve j1/2/1 5000"});
  CHECK(node_got(2) == V{"Reserve j1/2/2 5000", "Release j1/2/2 if unlaunched"});
  CHECK(queue_got() == V{"unplaced j1: not enough free GPUs"});
  sched->trigger_timeouts();  // n1's answer never comes: nothing more is said
  sched->run();
  CHECK(queue_got().size() == 1);
}

TEST_CASE_METHOD(Fixture, "a node that does not answer in time is released too",
                 "[gang_reservation]") {
  auto clock = supervised({{"n1", Answer::silent}});
  CHECK(node_got(0) == V{"Allocate j1/2/0"});
  clock->advance(5000 - 1);
  sched->trigger_timeouts();  // the supervisor's check: not yet
  sched->run();
  CHECK(queue_got().empty());
  clock->advance(1);
  sched->trigger_timeouts();  // now
  sched->run();
  CHECK(node_got(0) == V{"Allocate j1/2/0", "Release j1/2/0 if unlaunched"});
  CHECK(queue_got() == V{"unplaced j1: an allocation timed out"});
}

TEST_CASE_METHOD(Fixture, "a gang whose commit is not answered in time releases every rank",
                 "[gang_reservation]") {
  auto clock = supervised({{"n1", Answer::accept}, {"n2", Answer::silent_commit}});
  CHECK(node_got(1) == V{"Reserve j1/2/1 5000", "Commit j1/2/1"});
  clock->advance(8000);  // a gang's time: both phases
  sched->trigger_timeouts();
  sched->run();
  CHECK(node_got(0) == V{"Reserve j1/2/0 5000", "Commit j1/2/0", "Release j1/2/0 if unlaunched"});
  CHECK(node_got(1) == V{"Reserve j1/2/1 5000", "Commit j1/2/1", "Release j1/2/1 if unlaunched"});
  CHECK(queue_got() == V{"unplaced j1: a commit timed out"});
}

TEST_CASE_METHOD(Fixture, "a gang placed in time is not told its time is up",
                 "[gang_reservation]") {
  auto clock = supervised({{"n1", Answer::accept}});
  CHECK(queue_got() == V{"placed j1"});
  clock->advance(60000);
  sched->trigger_timeouts();
  sched->run();
  CHECK(node_got(0) == V{"Allocate j1/2/0"});
  CHECK(queue_got() == V{"placed j1"});
}

TEST_CASE_METHOD(Fixture, "a gang reservation restarted after a crash reports unplaced at once",
                 "[gang_reservation]") {
  grant({{"n1", Answer::accept}}, true);
  CHECK(node_got(0).empty());
  CHECK(queue_got() == V{"unplaced j1: gang reservation restarted"});
  // It names the pool of its grant: the queue tells that pool's arbiter.
  CHECK(state_of<FakeQueueState>(queue).pools == V{"p"});
}

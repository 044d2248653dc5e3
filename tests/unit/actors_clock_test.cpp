// The timer-driven mends of the node actor, with time stopped: CAF's test
// coordinator runs every actor on this thread and fires timers only when
// told, and a ManualClock (actors/ports.hpp) is the only time the actors
// read. Nothing here waits for real time to pass.
//   - the hold check: a hold committed but never launched is asked about
//     (hold_atom to its job) once it has waited hold_check_ms, and again
//     only after another hold_check_ms;
//   - the heartbeat timeout: a node whose agent went silent for longer than
//     heartbeat_timeout_ms is lost, and its running worker ends;
//   - the job actor's stop re-send: a Stop its worker has not answered is
//     sent again every 15 s until the worker's Exited arrives.
#include <algorithm>
#include <catch2/catch.hpp>

#include "actor_test_kit.hpp"
#include "actors/job_actor.hpp"
#include "actors/node_actor.hpp"
#include "messages/wire.hpp"
#include "records.pb.h"

using namespace troupe;
using namespace troupe::atoms;

namespace {

// A supervisor (of jobs or of nodes), reduced to what it is asked to route.
// It stands in for a JobSupervisorActor or a NodeSupervisorActor (through
// caf::actor_cast): it takes the messages of theirs that the actor under test
// sends.
struct FakeJobsState {
  // "hold <node> <hold id> launched=<0|1>", "<Body> <id>" for an envelope,
  // "sync <node>"
  std::vector<std::string> got;
};
using FakeJobs = caf::stateful_actor<FakeJobsState>;

caf::behavior fake_jobs(FakeJobs* self) {
  return {
      [=](route_atom, const std::string& id, const Envelope& env) {
        auto* e = wire::open(env.bytes);
        self->state.got.push_back(std::string(e ? wire::body_name(e->body_type()) : "bad") + " " +
                                  id);
      },
      [=](hold_atom, const std::string&, const std::string& node, const std::string& hold, int32_t,
          int32_t, bool launched) {
        self->state.got.push_back("hold " + node + " " + hold +
                                  " launched=" + std::to_string(launched));
      },
      [=](sync_atom, const std::string& node, const std::string&, int32_t, int32_t) {
        self->state.got.push_back("sync " + node);
      },
      [=](const Envelope&) {},
  };
}

// A fake as the handle type the actor under test sends to.
template <class Handle>
Handle as(const caf::actor& fake) {
  return caf::actor_cast<Handle>(fake);
}

// The Wiring of an actor under test: every well-known actor `others`,
// except those set after.
Wiring wiring_to(const caf::actor& others, ClockPtr clock) {
  Wiring w;
  w.router = as<RouterActor>(others);
  w.jobs = as<JobSupervisorActor>(others);
  w.queues = as<QueueSupervisorActor>(others);
  w.nodes = as<NodeSupervisorActor>(others);
  w.gangs = as<GangSupervisorActor>(others);
  w.arbiter = as<ArbiterActor>(others);
  w.clock = std::move(clock);
  return w;
}

// Everything else the node actor sends (its capacity, its snapshots) is
// left unread. (caf::drop would answer each with an error message, which ends
// the sender.)
caf::behavior sink(caf::event_based_actor* self) {
  self->set_default_handler(caf::skip);
  return {[](const Envelope&) {}};
}

// The pool arbiter, reduced to the capacity reports it is sent.
struct FakeArbiterState {
  std::vector<policy::NodeCapacity> reports;
};
using FakeArbiter = caf::stateful_actor<FakeArbiterState>;

caf::behavior fake_arbiter(FakeArbiter* self) {
  self->set_default_handler(caf::skip);
  return {
      [=](capacity_atom, const policy::NodeCapacity& c, const NodeActor&) {
        self->state.reports.push_back(c);
      },
  };
}

class NullOutbox : public Outbox {
 protected:
  void send(const std::string&, const void*, size_t, const std::string&) override {}
};

struct Fixture : testing::TestSystem {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(1'800'000'000'000);
  caf::actor jobs, others, arbiter;
  NodeActor node;
  std::shared_ptr<NullOutbox> out = std::make_shared<NullOutbox>();
  NodeOptions opts;

  Fixture() {
    jobs = sys->spawn(fake_jobs);
    others = sys->spawn(sink);
    arbiter = sys->spawn(fake_arbiter);
    opts.tick_ms = 1000;
    opts.hold_check_ms = 10000;
    opts.heartbeat_timeout_ms = 30000;
  }
  ~Fixture() { stop(jobs, others, arbiter, node); }
  // A node restored from its snapshot: 4 GPUs, job j1's rank 0 committed on
  // GPU 0, launched or not yet.
  void start_node(bool restored, bool launched) {
    pb::NodeRecord rec;
    rec.set_node("n1");
    rec.set_gpus(4);
    rec.set_gpu_type("a100");
    rec.set_pool("a100");
    rec.set_restored(restored);
    auto* h = rec.add_holds();
    h->set_id("j1/1/0");
    h->set_job_id("j1");
    h->set_attempt(1);
    h->add_gpus(0);
    h->set_committed(true);
    h->set_launched(launched);
    Wiring w = wiring_to(others, clock);
    w.jobs = as<JobSupervisorActor>(jobs);
    w.arbiter = as<ArbiterActor>(arbiter);
    std::string snapshot = rec.SerializeAsString();
    auto parent = sys->spawn([&](caf::event_based_actor* self) {
      node = spawn_node(self, w, out, "n1", snapshot, opts);
    });
    sched->run();
  }
  // Lets `ms` pass: the clock moves, then every timer due fires once.
  void pass(int64_t ms) {
    clock->advance(ms);
    sched->trigger_timeouts();
    sched->run();
  }
  std::vector<std::string>& got() { return testing::state_of<FakeJobsState>(jobs).got; }
  std::vector<policy::NodeCapacity>& reports() {
    return testing::state_of<FakeArbiterState>(arbiter).reports;
  }
};

using V = std::vector<std::string>;

}  // namespace

TEST_CASE_METHOD(Fixture, "hold check: an unlaunched hold is asked about after hold_check_ms",
                 "[actors][clock]") {
  start_node(false, false);
  REQUIRE(node);
  pass(1000);
  pass(1000);
  CHECK(got().empty());  // 2 s: too early
  pass(8000);            // 10 s since the hold last changed
  CHECK(got() == V{"hold n1 j1/1/0 launched=0"});
  pass(1000);
  pass(5000);
  CHECK(got().size() == 1);  // asked again only after another hold_check_ms
  pass(4000);
  CHECK(got() == V{"hold n1 j1/1/0 launched=0", "hold n1 j1/1/0 launched=0"});
}

TEST_CASE_METHOD(Fixture, "heartbeat timeout: a silent node is lost after heartbeat_timeout_ms",
                 "[actors][clock]") {
  // Rebuilt after a restart, its worker running: alive until its agent has
  // been silent too long.
  start_node(true, true);
  pass(29000);
  for (const auto& g : got()) CHECK(g != "Exited j1");  // nothing ended yet
  pass(2000);
  // Lost: its running worker ends (told to its job as Exited), so the job can move.
  bool ended = false;
  for (const auto& g : got()) ended = ended || g == "Exited j1";
  CHECK(ended);
}

namespace {

// A job actor restored running on n1 (rank 0), its node supervisor a recorder.
struct JobFixture : testing::TestSystem {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(1'800'000'000'000);
  caf::actor nodes, others;
  JobActor job;

  JobFixture() {
    nodes = sys->spawn(fake_jobs);
    others = sys->spawn(sink);
    pb::JobRecord rec;
    rec.set_job_id("j1");
    rec.set_state("running");
    rec.set_attempt(1);
    rec.mutable_spec()->set_team("t");
    auto* p = rec.add_placement();
    p->set_rank(0);
    p->set_node("n1");
    p->add_gpus(0);
    Wiring w = wiring_to(others, clock);
    w.nodes = as<NodeSupervisorActor>(nodes);
    std::string snapshot = rec.SerializeAsString();
    sys->spawn([&](caf::event_based_actor* self) {
      job = spawn_job(self, w, std::make_shared<NullOutbox>(), snapshot);
    });
    sched->run();
  }
  ~JobFixture() { stop(nodes, others, job); }
  size_t stops() {
    auto& got = testing::state_of<FakeJobsState>(nodes).got;
    return static_cast<size_t>(std::count(got.begin(), got.end(), "Stop n1"));
  }
};

}  // namespace

TEST_CASE_METHOD(JobFixture, "stop re-send: an unanswered Stop goes again until the worker exits",
                 "[actors][clock]") {
  REQUIRE(job);
  CHECK(stops() == 0);
  caf::anon_send(job, cancel_atom_v, std::string("_INBOX.cancel"), false);
  sched->run();
  CHECK(stops() == 1);
  // No answer: the Stop goes again at every re-send timer.
  sched->trigger_timeouts();
  sched->run();
  CHECK(stops() == 2);
  sched->trigger_timeouts();
  sched->run();
  CHECK(stops() == 3);
  // The worker's Exited arrives: the job ends, and no Stop follows.
  caf::anon_send(job, Envelope{wire::exited("n1", "j1", 1, 0, -1, 15, "stopped")});
  sched->run();
  sched->trigger_timeouts();
  sched->run();
  CHECK(stops() == 3);
}

TEST_CASE_METHOD(Fixture, "capacity reports: a node tells the arbiter what changed, not every tick",
                 "[actors][clock]") {
  start_node(true, true);
  REQUIRE(!reports().empty());
  size_t first = reports().size();
  for (int i = 0; i < 4; ++i) pass(1000);
  CHECK(reports().size() == first);  // four ticks, nothing changed: nothing sent
  pass(1000);
  CHECK(reports().size() == first + 1);  // told again after 5 s, unchanged
  caf::anon_send(node, cordon_atom_v, true, false, std::string(), std::string());
  sched->run();
  REQUIRE(reports().size() == first + 2);  // cordoned: told at once
  CHECK_FALSE(reports().back().schedulable);
  pass(1000);
  CHECK(reports().size() == first + 2);
  pass(25000);  // 31 s without a heartbeat: lost, and told
  CHECK_FALSE(reports().back().alive);
}

TEST_CASE_METHOD(Fixture, "capacity reports: a refused Reserve is told at once, though unchanged",
                 "[actors][clock]") {
  start_node(true, true);
  size_t first = reports().size();
  wire::Ask ask;
  ask.gpus = 8;  // the node has 4
  Envelope answer;
  auto asker = sys->spawn([&, n = node](caf::event_based_actor* self) {
    self->request(n, caf::infinite,
                  Envelope{wire::reserve("j2/1/0", "j2", "j2", "t", ask, 5000, 0, true)})
        .then([&](const Envelope& a) { answer = a; });
  });
  sched->run();
  auto* e = wire::open(answer.bytes);
  REQUIRE(e != nullptr);
  CHECK(e->body_as_Reject() != nullptr);
  // The arbiter counted on room that is not there: it hears the truth now.
  CHECK(reports().size() == first + 1);
}

namespace {
// What a node actor answers the node supervisor's (remove_atom) request.
struct Removal {
  bool answered = false;
  std::string code, text;
  std::vector<std::string> dirs;
};
Removal ask_remove(Fixture& f) {
  Removal r;
  f.sys->spawn([&, n = f.node](caf::event_based_actor* self) {
    self->request(n, caf::infinite, remove_atom_v)
        .then([&](const std::string& code, const std::string& text,
                  const std::vector<std::string>& dirs) {
          r = {true, code, text, dirs};
        });
  });
  f.sched->run();
  return r;
}
}  // namespace

TEST_CASE_METHOD(Fixture,
                 "remove: a node is let go only once lost and holding nothing, and then quits",
                 "[actors][clock]") {
  start_node(true, true);  // restored, j1's worker running: alive until the timeout
  Removal alive = ask_remove(*this);
  REQUIRE(alive.answered);
  CHECK(alive.code == "node_alive");
  CHECK(alive.text.find("stop its agent") != std::string::npos);
  pass(31000);  // lost: its worker ends, but j1 has not given its GPU back yet
  Removal busy = ask_remove(*this);
  REQUIRE(busy.answered);
  CHECK(busy.code == "node_busy");
  caf::anon_send(node, Envelope{wire::release("j1/1/0", "attempt ended")});
  sched->run();
  Removal done = ask_remove(*this);
  REQUIRE(done.answered);
  CHECK(done.code.empty());
  CHECK(done.dirs.empty());
  // It quit: asked again, nobody answers.
  CHECK_FALSE(ask_remove(*this).answered);
}

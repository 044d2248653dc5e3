// Unit tests for actors/children.hpp, the one owner of a supervisor's live
// children: start and find by id, for_each over the live ones, a normal end
// forgets the child (and its snapshot unless kept), a crash restarts it from
// its last snapshot up to the restart limit. Runs on CAF's test coordinator:
// one thread, no waits.
#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <catch2/catch.hpp>
#include <set>

#include "actors/children.hpp"

using namespace troupe;

namespace {

// A child that ends when told: 0 normally, anything else as a crash.
caf::behavior child(caf::event_based_actor* self) {
  return {[=](int code) {
    if (code == 0)
      self->quit();
    else
      self->quit(caf::sec::runtime_error);
  }};
}

struct ParentState {
  Children<caf::actor> children{"thing", false};
  std::vector<std::string> made;                    // "id:snapshot" for every child made
  std::vector<std::pair<std::string, bool>> downs;  // (id, restarted)
  int64_t now_ms = 1000000;                         // the supervisor's clock, moved by the test
};
using Parent = caf::stateful_actor<ParentState>;

// (id, snapshot) starts a child; (id, "snapshot", bytes) keeps its snapshot.
caf::behavior parent(Parent* self) {
  auto make = [=](const std::string& id, const std::string& snap) {
    self->state.made.push_back(id + ":" + snap);
    return self->spawn(child);
  };
  self->set_down_handler([=](caf::down_msg& dm) {
    bool restarted = false;
    auto id = self->state.children.on_down(self, dm, make, self->state.now_ms, &restarted);
    self->state.downs.emplace_back(id, restarted);
  });
  return {
      [=](const std::string& id, const std::string& snap) {
        self->state.children.start(self, id, snap, make);
      },
      [=](const std::string& id, const std::string&, const std::string& bytes) {
        self->state.children.snapshot(id, bytes);
      },
  };
}

struct Fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  caf::actor p;

  Fixture() {
    cfg.set("scheduler.policy", caf::atom("testing"));
    cfg.set("logger.verbosity", caf::atom("quiet"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
    p = sys->spawn(parent);
    sched->run();
  }
  ~Fixture() {
    caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
    sched->run();
  }
  ParentState& state() {
    return dynamic_cast<Parent&>(*caf::actor_cast<caf::abstract_actor*>(p)).state;
  }
  std::set<std::string> live_ids() {
    std::set<std::string> ids;
    state().children.for_each([&](const std::string& id, const caf::actor& a) {
      CHECK(a == state().children.find(id));
      ids.insert(id);
    });
    return ids;
  }
  void crash(const std::string& id, int code = 1) {
    caf::anon_send(state().children.find(id), code);
    sched->run();
  }
};

}  // namespace

TEST_CASE_METHOD(Fixture, "children are started once by id and walked with for_each",
                 "[children]") {
  caf::anon_send(p, std::string("a"), std::string());
  caf::anon_send(p, std::string("b"), std::string("snap-b"));
  caf::anon_send(p, std::string("a"), std::string("again"));  // already live
  sched->run();
  CHECK(state().made == std::vector<std::string>{"a:", "b:snap-b"});
  CHECK(live_ids() == std::set<std::string>{"a", "b"});
  CHECK(state().children.live() == 2);
  CHECK(state().children.kind() == "thing");
  CHECK(*state().children.snapshot_of("b") == "snap-b");
  CHECK(state().children.snapshot_of("a") == nullptr);
  CHECK_FALSE(state().children.find("c"));
}

TEST_CASE_METHOD(Fixture, "a normal end forgets the child and its snapshot", "[children]") {
  caf::anon_send(p, std::string("a"), std::string("snap-a"));
  sched->run();
  crash("a", 0);
  CHECK(state().downs == std::vector<std::pair<std::string, bool>>{{"a", false}});
  CHECK(live_ids().empty());
  CHECK(state().children.snapshot_of("a") == nullptr);
  CHECK(state().children.total_restarts() == 0);
}

TEST_CASE_METHOD(Fixture, "a crash restarts the child from its last snapshot, up to the limit",
                 "[children]") {
  caf::anon_send(p, std::string("a"), std::string("one"));
  caf::anon_send(p, std::string("a"), std::string("snapshot"), std::string("two"));
  sched->run();
  for (int i = 1; i <= Children<caf::actor>::max_restarts; ++i) {
    crash("a");
    CHECK(state().downs.back() == std::make_pair(std::string("a"), true));
    CHECK(live_ids() == std::set<std::string>{"a"});
    CHECK(state().made.back() == "a:two");
    CHECK(state().children.total_restarts() == static_cast<size_t>(i));
  }
  crash("a");  // one crash too many within the window
  CHECK(state().downs.back() == std::make_pair(std::string("a"), false));
  CHECK(live_ids().empty());
  CHECK(state().children.total_restarts() ==
        static_cast<size_t>(Children<caf::actor>::max_restarts));
  // Its snapshot stays, for whoever starts it again.
  CHECK(*state().children.snapshot_of("a") == "two");
}

TEST_CASE_METHOD(Fixture, "crashes farther apart than the restart window are each restarted",
                 "[children]") {
  caf::anon_send(p, std::string("a"), std::string("one"));
  sched->run();
  for (int i = 1; i <= 3 * Children<caf::actor>::max_restarts; ++i) {
    state().now_ms += Children<caf::actor>::restart_window_ms / 4;
    crash("a");
    INFO("crash " << i);
    CHECK(state().downs.back() == std::make_pair(std::string("a"), true));
  }
  CHECK(live_ids() == std::set<std::string>{"a"});
}

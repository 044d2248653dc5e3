// What the actor unit tests share: an actor system on CAF's test coordinator
// (every actor runs on the test's thread, a timer fires only when the test
// triggers it; with a ManualClock, actors/ports.hpp, time stands still until
// the test moves it), and a look into a stateful actor's state.
#pragma once

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <memory>

#include "actors/scheduler.hpp"

namespace troupe::testing {

struct TestSystem {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;

  TestSystem() {
    configure(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
  }
  // Stops `actors` (any handles, typed or not) and runs what that leaves to do.
  template <class... Handles>
  void stop(const Handles&... actors) {
    auto exit = [](const auto& a) {
      if (a) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    };
    (exit(actors), ...);
    sched->run();
  }
};

// The state of a stateful actor (the test runs on the actors' only thread).
// `Base`: its actor class (caf::event_based_actor, or a typed actor's
// `Handle::base`).
template <class State, class Base = caf::event_based_actor, class Handle>
State& state_of(const Handle& a) {
  return dynamic_cast<caf::stateful_actor<State, Base>&>(*caf::actor_cast<caf::abstract_actor*>(a))
      .state;
}

}  // namespace troupe::testing

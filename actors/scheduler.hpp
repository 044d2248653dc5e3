// Wiring of one scheduler's actors: the router, the pool arbiter and the four
// supervisors. Used by troupe-scheduler (actors/main.cpp) and by in-process
// tests with fake ports.
#pragma once

#include "actors/ports.hpp"
#include "actors/protocol.hpp"

namespace troupe {

// CAF settings for the scheduler: `threads` worker threads (--threads).
void configure(caf::actor_system_config& cfg, int threads = 2);

// Spawns and wires every top-level actor.
Wiring start_scheduler(caf::actor_system& sys, OutboxPtr out, IntakePtr intake,
                       SchedulerOptions opts = {});

// Hands a checked cluster config (YAML/JSON text; "" = open config) to the
// actors that apply it.
void apply_config(const Wiring& w, const std::string& text);

// Asks every top-level actor (and with them their children) to stop.
void stop_scheduler(const Wiring& w);

}  // namespace troupe

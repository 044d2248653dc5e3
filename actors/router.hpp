// Router — the scheduler's edge actor, one per scheduler.
// Owns: intake of submissions (parse, validate, idempotency keys, durable
//   append to the intake stream before the job exists), job id assignment,
//   and the bad-input counters. It stamps on each new record what the config
//   says at submit: infra requeue cap, the team's run_as uid, job_defaults'
//   memory limit and preemption.max_grace_s.
// Handles: Inbound from every bus subscription of the scheduler
//   (troupe.*.submit|status|cancel|logs|jobs|why|history, troupe.sys.nodes|
//   stats|find, troupe.sys.agent.>); (intake_atom, job id, ok, error) when the
//   intake stream acknowledged; (history_atom, id, team, reply) from the job
//   supervisor once it checked the job is the team's: the History port reads
//   the events and the reply is published from its thread.
// Emits: replies on the request's reply subject; (spawn_atom, ...) to the job
//   supervisor; requests routed to the job supervisor, the arbiter, and agent
//   messages to the node supervisor.
#pragma once

#include "actors/ports.hpp"
#include "actors/caf_types.hpp"

namespace troupe {

caf::actor spawn_router(caf::actor_system& sys, OutboxPtr out, IntakePtr intake,
                        SchedulerOptions opts);

}  // namespace troupe

// Router — the scheduler's edge actor, one per scheduler.
// Owns: intake of submissions (idempotency keys, the team's limits that need
//   its state, durable append to the intake stream before the job exists;
//   reading and checking a spec is its intake readers' work,
//   actors/intake_reader.hpp, which it spawns), job id assignment, and the
//   bad-input counters. It stamps on each new record what the config
//   says at submit: infra requeue cap, the team's run_as uid, job_defaults'
//   memory limit and preemption.max_grace_s.
// Interface: RouterActor (actors/protocol.hpp).
// Accepts: Inbound from every bus subscription of the scheduler
//   (troupe.*.submit|status|cancel|logs|jobs|why|history, troupe.sys.nodes|
//   stats|find, troupe.sys.agent.> (a shard: its own nodes' agents and every
//   register); a shard also troupe.sys.shard.read|submit.<its pools>.*, the
//   submissions another shard read and handed over, and it hands those of
//   another's pool on there, an enqueued one with the reply subject
//   troupe.sys.shard.answer.<this>.<seq>, whose answer it acknowledges
//   in the stream; and troupe.sys.shard.rate, the other shards' reports of
//   what they admitted, handed to the teams' intake readers as debit_atom);
//   Wiring; (config_atom, text); (heard_atom, n)
//   from a shard's node supervisor;
//   (restore_atom, keys, next seq, fingerprints, queued teams) after a
//   restart; (intake_atom, job id, ok, duplicate, error, original) when the
//   intake stream acknowledged (from the Intake port's thread; a duplicate is
//   answered with its original's job id); (history_atom, id, team,
//   reply) from the job supervisor once it checked the job is the team's:
//   the History port reads the events and the reply is published from its
//   thread; (shape_atom, NodeCapacity) from the node supervisor;
//   (unqueued_atom, team) from the job supervisor; (stats_atom, kind,
//   restarts) from the supervisors; (distrust_atom, what); (why_atom, reply,
//   body) from team queues; ReadSubmission from its intake readers;
//   (fire_atom, team, name, tick, spec) from the schedule keeper: a run
//   submitted as the team's job, answered with (fired_atom, team, name,
//   tick, job, error); troupe.<team>.schedule requests go on to the keeper
//   as (schedule_atom, team, request, reply).
// Sends: a team's submissions (Inbound) and the config to its intake readers;
//   replies on the request's reply subject; (spawn_atom, id, record),
//   the verbs (status, cancel, why, logs, list, find, history) to the job
//   supervisor; (route_atom, node, Envelope) of an agent's message and
//   (cordon_atom, ...) to the node supervisor; (queues_atom) and (list_atom)
//   to the arbiter; (crash_atom, id) to a supervisor (--debug-crash).
#pragma once

#include "actors/ports.hpp"
#include "actors/protocol.hpp"

namespace troupe {

RouterActor spawn_router(caf::actor_system& sys, OutboxPtr out, IntakePtr intake,
                         SchedulerOptions opts);

}  // namespace troupe

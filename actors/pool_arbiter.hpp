// PoolArbiter — one per scheduler; plans for every pool of the cluster config.
// Owns: the capacity index (what each node actor last reported, resolved to
//   its pool, less the grants the node's report does not count yet:
//   policy::GrantOverlay, until the report lists the grant's hold or the
//   grant is answered); what running work each pool could preempt
//   (policy::VictimPool: candidates are built only when some may go); each team's usage
//   per pool (from the work it granted, until the job gives it back); the
//   demands of the team queues (their first jobs in order); the backfill hold
//   of each pool; the last reason each pending job was not placed; the
//   reserved-idle GPU-seconds.
// Interface: ArbiterActor (actors/protocol.hpp).
// Accepts: (capacity_atom, NodeCapacity, NodeActor) from node actors;
//   (demand_atom, team, tickets, pending jobs, pending GPUs, TeamQueueActor)
//   from queues (a new queue handle: the old queue crashed and the grants it
//   carried out died with it); (placed_atom, team, Assignment) /
//   (unplaced_atom, team, job id) from queues when a grant was carried out or
//   failed; (done_atom, job id) from a job when its attempt gave its GPUs
//   back; (checkpoint_atom, job, ts) and (retried_atom, cause, kind) from
//   jobs; (config_atom, text) on reload; Wiring; (why_atom, job id, team,
//   reply); (queues_atom, reply); (list_atom, reply); (round_atom) and
//   (tick_atom), its own triggers.
// Sends: (spawn_atom, JobTicket, CandidateList, TeamQueueActor) to the gang
//   supervisor: a GangReservationActor places the job (the node actors
//   re-check), and the queue reports placed/unplaced; (preempt_atom, job,
//   why) to the job supervisor; (why_atom, job, reply) to a queue.
// Policy: actors/policy/round.hpp (pure); this actor only gathers its inputs
//   and carries its output.
#pragma once

#include "actors/ports.hpp"
#include "actors/protocol.hpp"

namespace troupe {

// `fifo`: plan with the FIFO baseline (policy::plan_fifo) instead of Troupe's policy.
ArbiterActor spawn_pool_arbiter(caf::actor_system& sys, OutboxPtr out, bool fifo = false);

}  // namespace troupe

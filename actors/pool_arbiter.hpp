// PoolArbiter — one per pool, spawned (and linked) by the arbiter front
// (actors/arbiter_front.hpp), which hands it the messages of its pool: pools
// plan in parallel.
// Owns: the capacity index of every node (what each node actor last reported,
//   resolved to its pool, less the grants the node's report does not count
//   yet: policy::GrantOverlay, until the report lists the grant's hold or the
//   grant is answered; every pool's arbiter knows every node, so that a config
//   that moves a node to another pool needs no hand-over); what running work
//   of its pool could be preempted (policy::VictimPool: candidates are built
//   only when some may go); each team's usage of its pool (from the work it
//   granted, until the job gives it back); the demands of the team queues for
//   its pool (their first jobs in order); its pool's backfill hold; the last
//   reason each of its pending jobs was not placed; the reserved-idle
//   GPU-seconds.
// Interface: ArbiterActor (actors/protocol.hpp), from the front.
// Accepts: (capacity_atom, NodeCapacity, NodeActor) of every node;
//   (remove_atom, node): a node removed (troupe.sys.remove_node), kept as a
//   place with nothing free and not listed, until its agent registers again;
//   (demand_atom, team, pool, added tickets, removed ids, full, pending
//   jobs, pending GPUs, any-type jobs, TeamQueueActor) from queues (an
//   any-type job that prefers another pool is a guest here): the changes to their
//   first jobs (policy::apply_demand; a new queue handle: the old queue
//   crashed and the grants it carried out died with it); (placed_atom, team,
//   Assignment) / (unplaced_atom, team, pool, job id) from queues when a
//   grant was carried out or failed; (done_atom, job id, pool) from a job
//   when its attempt gave its GPUs back; (checkpoint_atom, job, pool, ts)
//   from jobs; (config_atom, text) on reload; Wiring; (why_atom, job id,
//   team, pool, reply); (why_atom, job id, team, pool) -> (code, text), its
//   reason (an any-type job's why); (queues_atom) -> its pool's rows; (list_atom, reply);
//   (round_atom) and (tick_atom), its own triggers (a round at most once per
//   SchedulerOptions::round_gap_us, 1 ms).
// Sends: (spawn_atom, grants) to the gang supervisor, one message per round:
//   a GangReservationActor places each job (the node actors re-check), and
//   the queue reports placed/unplaced; (granted_atom, pool, jobs) to each queue
//   first; (preempt_atom, job, why) to the job supervisor; (why_atom, job,
//   reply) to a queue.
// Policy: actors/policy/round.hpp (pure); this actor only gathers its inputs
//   and carries its output.
#pragma once

#include <string>

#include "actors/ports.hpp"
#include "actors/protocol.hpp"

namespace troupe {

// `fifo`: plan with the FIFO baseline (policy::plan_fifo) instead of Troupe's
// policy. Linked to `parent` (the front): they stop together.
// `round_gap_us`: SchedulerOptions::round_gap_us.
ArbiterActor spawn_pool_arbiter(caf::local_actor* parent, OutboxPtr out, policy::Baseline baseline,
                                int64_t round_gap_us, std::string pool);

}  // namespace troupe

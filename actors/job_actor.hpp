// JobActor — one per job.
// Owns: the job's lifecycle state machine (sole writer of its JobRecord),
//   its attempts (numbered, with nodes and cause), retry and requeue
//   decisions (policy/retry.hpp), and its checkpoint pointer. Its Launches
//   carry the worker's isolation from the record: image, cpus, memory limit
//   (the spec's, else the config's job_defaults) and the team's run_as uid;
//   a preemption's grace is the spec's, capped by preemption.max_grace_s.
// Handles: (placed_atom, Assignment) from its queue; Envelope{Started|Exited|
//   Checkpointed} forwarded by node actors (a lost node's ranks arrive as
//   Exited "node lost"); (cancel_atom, reply); (preempt_atom, reason) from the
//   arbiter; (requeue_atom) from its supervisor; (retry_atom) its back-off
//   timer; (hold_atom, node, hold, attempt, rank, launched) from a node's hold
//   check (answered with Release or the Launch again, policy::judge_hold);
//   (crash_atom) for supervision tests; (done_atom) its end timer. Restarted
//   in starting/running, it sends (sync_atom, id, attempt, rank) to its nodes
//   and asks again for a stop it had asked for; (restop_atom, attempt) sends
//   an unanswered stop again every 15 s; (stored_atom, attempt, seq) once the
//   events stream holds its `starting` event: only then do its Launches go
//   (written ahead, docs/recovery.md).
// Emits: JobEvent JSON on troupe.<team>.events.<id>; (enqueue_atom, JobTicket)
//   and (dequeue_atom, id) to its team queue; Envelope{Launch|Stop|Release}
//   to node actors; (done_atom, id), (checkpoint_atom, ...), (retried_atom,
//   ...) to the arbiter; its snapshot to the job supervisor on every change.
//
//   queued --placed--> starting --all Started--> running --all Exited--> succeeded
//     |                   |                         |                  \-> failed
//     |                   +---- cancel -------------+--> (Stop all) ------> canceled
//     |                   +---- preempt ------------+--> (SIGUSR1, grace) -> preempted -> queued
//     +-- cancel --> canceled     user failure with retries left, or any
//                                 infrastructure failure under the cap ----> queued (attempt+1)
#pragma once

#include <string>

#include "actors/ports.hpp"
#include "actors/caf_types.hpp"

namespace troupe {

// `snapshot`: a serialized pb::JobRecord. A record with an empty state is a
// new job (it is queued and announced); any other is a restart.
caf::actor spawn_job(caf::event_based_actor* parent, Wiring w, OutboxPtr out, std::string snapshot);

}  // namespace troupe

// JobActor — one per job.
// Owns: the job's lifecycle state machine (sole writer of its JobRecord),
//   its attempts (numbered, with nodes and cause), retry and requeue
//   decisions (policy/retry.hpp), and its checkpoint pointer. Its Launches
//   carry the worker's isolation from the record: image, cpus, memory limit
//   (the spec's, else the config's job_defaults) and the team's run_as uid;
//   a preemption's grace is the spec's, capped by preemption.max_grace_s.
//   A front door's job (spec.dispatch) starts only once that front door
//   granted it (DispatchGate, actors/ports.hpp; the record's
//   dispatch_granted, asked once): placed, it stays queued holding the
//   placement until the verdict; withdrawn: canceled; not granted (or no
//   answer): the placement goes back, queued again 2 s later.
// Interface: JobActor (actors/protocol.hpp). A queued job has no actor until
//   its placement comes (below: the job supervisor keeps its record).
// Accepts: (placed_atom, Assignment) from its queue (via the job supervisor);
//   Envelope{Started|Exited|Checkpointed} from its nodes (via the job
//   supervisor; a lost node's ranks arrive as Exited "node lost");
//   (cancel_atom, reply, if_queued); (preempt_atom, reason) from the arbiter;
//   (requeue_atom) from its supervisor; (hold_atom, node, hold, attempt, rank,
//   launched) from a node's hold check (answered with Release or the Launch
//   again, policy::judge_hold); (stored_atom, attempt, seq) once the events
//   stream holds its `starting` event: only then do its Launches go (written
//   ahead, docs/recovery.md); its timers: (retry_atom) back-off over,
//   (restop_atom, attempt) an unanswered stop again every 15 s; (done_atom)
//   from its supervisor: linger over; (dispatch_atom, claim, granted, withdrawn, reason) its front
//   door's verdict; (crash_atom) for supervision tests. Restarted in
//   starting/running, it sends (sync_atom, node, id, attempt, rank) to the
//   node supervisor for each rank and asks again for a stop it had asked for.
// Sends: a claim to its front door (DispatchGate::claim); JobEvent JSON on
//   troupe.<team>.events.<id>, and (ended_atom, id) to
//   the job supervisor once its end event is stored; (enqueue_atom,
//   JobTicket) and (dequeue_atom, team, id) to the queue supervisor;
//   (route_atom, node, Envelope{Launch|Stop|Release}) and (sync_atom, ...) to
//   the node supervisor; (done_atom, id), (checkpoint_atom, ...),
//   (retried_atom, ...) to the arbiter; (snapshot_atom, id, record) to the job
//   supervisor on every change.
//
// Its phase is one enum (job_actor.cpp, Phase); the record, the events and
// the replies carry its name (messages/names.hpp):
//   queued --placed--> starting --all Started--> running --all Exited--> succeeded
//     |                   |                         |                  \-> failed
//     |                   +---- cancel -------------+--> (Stop all) ------> canceled
//     |                   +---- preempt ------------+--> (SIGUSR1, grace) -> preempted -> queued
//     +-- cancel --> canceled     user failure with retries left, or any
//                                 infrastructure failure under the cap ----> queued (attempt+1)
//   a front door's job, before its grant: queued --placed--> (claim) --granted--> starting
//                                                            \-withdrawn--> canceled
//                                                            \-no grant--> queued (2 s)
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "actors/ports.hpp"
#include "actors/protocol.hpp"
#include "records.pb.h"

namespace troupe {

// `snapshot`: a serialized pb::JobRecord. A record with an empty state is a
// new job (it is queued and announced); any other is a restart. `woken`: a
// queued job that waited without an actor (below) and whose placement comes
// next: it is not enqueued again.
JobActor spawn_job(caf::local_actor* parent, Wiring w, OutboxPtr out, std::string snapshot,
                   bool woken = false);

// A queued job waits without an actor: the job supervisor keeps its record,
// its team's queue its ticket. Its actor starts when its placement comes
// (spawn_job, woken) and goes when the job has ended. The record's changes
// while it waits are these, the same an actor makes (one code path).
//
// Whether the job in `r` may wait without an actor: queued before its first
// attempt ran, not waiting for a retry's back-off, no cancel asked.
bool may_wait_asleep(const pb::JobRecord& r, int64_t now_ms);
// A new job (state ""): its record enters `queued` (attempt 1).
void enter_first_queued(pb::JobRecord& r, int64_t now_ms);
// A queued job canceled by request: its record enters `canceled`.
void enter_canceled_queued(pb::JobRecord& r, int64_t now_ms);
// A new job with depends_on: its record enters `blocked` (attempt 0) and
// waits for the job supervisor to queue it (enter_first_queued) or end it.
void enter_blocked(pb::JobRecord& r, int64_t now_ms);
// A blocked job whose dependency can never be met: `canceled`, its cause
// dependency_failed, `reason` naming the upstream job (policy/dependencies.hpp).
void enter_dependency_failed(pb::JobRecord& r, std::string reason, int64_t now_ms);
// An array's or sweep's own record (it never has an actor; its tasks are
// jobs): it enters `state` (queued, running, or its end), with the reason and
// cause of its event.
void enter_array(pb::JobRecord& r, std::string_view state, std::string reason,
                 const std::string& cause, int64_t now_ms);
// The ticket of a queued job for its team's queue.
JobTicket ticket_of(const pb::JobRecord& r);
// The event of the record's last change: subject and JobEvent JSON.
std::pair<std::string, std::string> last_event_message(const pb::JobRecord& r);

}  // namespace troupe

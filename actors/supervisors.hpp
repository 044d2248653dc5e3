// The supervisors, one per actor kind. Each starts its children, routes
// messages to them by id, keeps each child's last snapshot, and restarts a
// child that crashed from that snapshot (actors/children.hpp), and hands job
// and node snapshots to the durable SnapshotStore (KV, coalesced). After a
// scheduler restart, (restore_atom, records) brings the children back.
//
// Every supervisor (one skeleton, actors/supervisors.cpp; its interface is
// SupervisorActor of actors/protocol.hpp, extended): an exit stops its
// children, then itself; a crashed child restarts from its snapshot and the
// router hears (stats_atom, kind, restarts); Wiring; (stats_atom) -> restarts.
// A supervisor routes by id: each message for a child carries the child's id
// (or it is in the payload) and goes on typed; none is forwarded type-erased.
//
// job supervisor    — JobActors by job id (JobSupervisorActor). Also answers
//                     status, list and logs from the snapshots (an ended
//                     job's actor is gone). Owns the queued jobs that wait
//                     without an actor (new ones, restored ones before their
//                     first attempt; actors/job_actor.hpp): their record, its
//                     queued and canceled changes, their ticket to the queue;
//                     their placement starts their actor. Owns the blocked
//                     jobs (depends_on) too: each waits, without an actor
//                     or ticket, until its upstream jobs end; then it is
//                     queued, or canceled (dependency_failed).
//                     Owns the arrays and sweeps (spec array/sweep;
//                     policy/arrays.hpp): one record each, no actor, a byte
//                     per task; a task starts as a job of its own
//                     (<array id>-<index>) only while fewer than the
//                     array's parallelism are started; each task's end is
//                     counted in it (ended_atom) and the array ends with
//                     its last task.
//   accepts: Wiring; (spawn_atom, id, record); (handoff_atom, id, record) ->
//   taken (a standby's record: a new job unless known); (snapshot_atom, id, bytes);
//   for a job: (placed_atom, Assignment) from its queue, (route_atom, id,
//   Envelope) from its nodes, (hold_atom, id, node, hold, attempt, rank,
//   launched) from a node's hold check, (preempt_atom, id, why) from the
//   arbiter — a placement or hold of a job that is gone is handed back
//   (Release to its nodes, done_atom to the arbiter);
//   (status_atom, id, team, reply); (cancel_atom, id, team, reply, if_queued);
//   (why_atom, id, team, reply): queued jobs go to the arbiter;
//   (logs_atom, id, team, rank, offset, max, reply);
//   (list_atom, team, limit, after, state, label, reply): one page, submit order;
//   (find_atom, id, reply); (history_atom, id, team, reply): checked, then
//   handed back to the router to read; (requeue_atom, team); (crash_atom, id);
//   (stats_atom); (restore_atom, JobRecords); (ended_atom, id) from a job
//   whose end event is stored: its blocked jobs are judged again;
//   (done_atom, id) from a job that ended: it is sent done_atom (its actor
//   goes) once Wiring::linger_ms passed, by the sweep below;
//   (deps_atom, team, ids) -> error from the router: a submission's
//   depends_on names jobs of its team it knows; (tick_atom), its own, every
//   second while there is something to sweep: a job
//   ended longer than the retention ago is forgotten (its snapshot, its place
//   in the lists, its KV key purged, its idempotency key at the router:
//   purged_atom; its checkpoint dir: Forget routed to each node it ran on);
//   status and history of a job it does not know go to the
//   router, which answers from the job's stored events.
// queue supervisor  — TeamQueueActors by team, created on first use
//                     (QueueSupervisorActor). A restarted queue is refilled
//                     by its queued jobs (requeue).
//   accepts: Wiring; (enqueue_atom, JobTicket) for the ticket's team;
//   (dequeue_atom, team, id); (crash_atom, team); (stats_atom).
// node supervisor   — NodeActors by node name, created when an agent speaks
//                     (NodeSupervisorActor).
//   accepts: Wiring; (route_atom, node, Envelope): an agent's message or a
//   job's Launch/Stop/Release, passed on one-way; (sync_atom, node, job,
//   attempt, rank); (snapshot_atom, node, bytes); (config_atom, text): its
//   roster; (cordon_atom, node, on, drain, reason, reply); (remove_atom,
//   node, reply): a lost node its actor lets go is forgotten (its record
//   purged from the store, (remove_atom, node) to the router and the
//   arbiter); (crash_atom, node);
//   (stats_atom); (restore_atom, NodeRecords). A shard: keeps its pools'
//   nodes only, has the bus listen to their agents (AgentWatch) and tells
//   the router (heard_atom) of another pool's agent messages that reached it.
// gang supervisor   — GangReservationActors by job id/attempt
//                     (GangSupervisorActor). Owns every live gang's
//                     deadline (placement_timeout_ms after its start).
//   accepts: Wiring; (spawn_atom, Grants) from a pool arbiter: one round's
//   grants, a gang each; (stats_atom); (tick_atom), its own, every second
//   while gangs live: a gang past its deadline is told (lease_atom) time is up.
#pragma once

#include "actors/node_actor.hpp"
#include "actors/ports.hpp"
#include "actors/protocol.hpp"

namespace troupe {

// `retention_ms`: SchedulerOptions::job_retention_ms; `logs`: its logs.
JobSupervisorActor spawn_job_supervisor(caf::actor_system& sys, OutboxPtr out,
                                        SnapshotStorePtr store = nullptr, int64_t retention_ms = 0,
                                        StoredLogsPtr logs = nullptr);
QueueSupervisorActor spawn_queue_supervisor(caf::actor_system& sys);
// `shards`: the pools whose nodes it keeps (a shard: the agents of other
// pools are left to their owner; empty: every pool).
NodeSupervisorActor spawn_node_supervisor(caf::actor_system& sys, OutboxPtr out,
                                          SnapshotStorePtr store = nullptr, NodeOptions opts = {},
                                          policy::ShardScope shards = {},
                                          AgentWatchPtr agents = nullptr);
GangSupervisorActor spawn_gang_supervisor(caf::actor_system& sys);

}  // namespace troupe

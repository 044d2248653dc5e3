// The supervisors, one per actor kind. Each starts its children, routes
// messages to them by id, keeps each child's last snapshot, and restarts a
// child that crashed from that snapshot (actors/children.hpp), and hands job
// and node snapshots to the durable SnapshotStore (KV, coalesced). After a
// scheduler restart, (restore_atom, records) brings the children back.
//
// Every supervisor (one skeleton, actors/supervisors.cpp): an exit stops its
// children, then itself; a crashed child restarts from its snapshot and the
// router hears (stats_atom, kind, restarts); Wiring; (stats_atom) -> restarts.
//
// job supervisor    — JobActors by job id. Also answers status, list and logs
//                     from the snapshots (an ended job's actor is gone).
//   handles: Wiring; (spawn_atom, id, record); (route_atom, id, message);
//   (snapshot_atom, id, bytes); (status_atom, id, team, reply);
//   (cancel_atom, id, team, reply); (why_atom, id, team, reply): queued jobs go
//   to the arbiter; (logs_atom, id, team, rank, offset, max, reply);
//   (list_atom, team, limit, after, state, reply): one page, submit order;
//   (find_atom, id, reply); (history_atom, id, team, reply): checked, then
//   handed back to the router to read; (requeue_atom, team); (crash_atom, id);
//   (stats_atom); (restore_atom, JobRecords).
// queue supervisor  — TeamQueueActors by team, created on first use. A
//                     restarted queue is refilled by its queued jobs (requeue).
//   handles: Wiring; (route_atom, team, message); (crash_atom, team); (stats_atom).
// node supervisor   — NodeActors by node name, created when an agent speaks.
//   handles: Wiring; (route_atom, node, message); (snapshot_atom, node, bytes);
//   (config_atom, text): its roster; (cordon_atom, node, on, drain, reply);
//   (crash_atom, node); (stats_atom); (restore_atom, NodeRecords).
// gang supervisor   — GangReservationActors by job id/attempt.
//   handles: Wiring; (spawn_atom, JobTicket, CandidateList, queue); (stats_atom).
#pragma once

#include "actors/caf_types.hpp"
#include "actors/node_actor.hpp"
#include "actors/ports.hpp"

namespace troupe {

caf::actor spawn_job_supervisor(caf::actor_system& sys, OutboxPtr out,
                                SnapshotStorePtr store = nullptr);
caf::actor spawn_queue_supervisor(caf::actor_system& sys);
caf::actor spawn_node_supervisor(caf::actor_system& sys, OutboxPtr out,
                                 SnapshotStorePtr store = nullptr, NodeOptions opts = {});
caf::actor spawn_gang_supervisor(caf::actor_system& sys);

}  // namespace troupe

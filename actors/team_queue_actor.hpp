// TeamQueueActor — one per team.
// Owns: the team's pending jobs in order (priority class value, then submit
//   order) and the placement negotiation of the job the arbiter granted.
// Handles: (enqueue_atom, JobTicket), (dequeue_atom, id) from job actors;
//   (grant_atom, JobTicket, CandidateList) from the pool arbiter;
//   (placed_atom, Assignment) / (unplaced_atom, id, reason) from gang
//   reservations; (why_atom, id, reply): its place in line; (count_atom):
//   how many jobs wait; (tick_atom) from itself: one demand for a burst of
//   changes.
// Emits: (demand_atom, team, first jobs, pending jobs, pending GPUs) to the
//   arbiter when the queue changes; for a granted single worker
//   Envelope{Propose} -> Accept|Reject -> Envelope{Commit} -> Accept|Reject
//   with the node actor; for a gang a GangReservationActor (via its
//   supervisor); then (placed_atom, Assignment) to the job and
//   (placed_atom, team, Assignment) or (unplaced_atom, team, id) to the arbiter.
#pragma once

#include <string>

#include "actors/caf_types.hpp"

namespace troupe {

caf::actor spawn_team_queue(caf::event_based_actor* parent, Wiring w, std::string team);

}  // namespace troupe

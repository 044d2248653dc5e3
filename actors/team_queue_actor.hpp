// TeamQueueActor — one per team.
// Owns: the team's pending jobs in order (priority, then submit order) and the
//   one placement negotiation it runs at a time for its head job.
// Handles: (enqueue_atom, JobTicket), (dequeue_atom, id) from job actors;
//   (wake_atom) from the pool arbiter when capacity frees; (retry_atom) its
//   back-off timer; (placed_atom, Assignment) / (unplaced_atom, id, reason)
//   from gang reservations.
// Negotiates: asks the arbiter for candidates, then for one worker
//   Envelope{Propose} -> Accept|Reject -> Envelope{Commit} -> Accept|Reject
//   with the node actor; for a gang spawns a GangReservationActor. On commit
//   sends (placed_atom, Assignment) to the job.
#pragma once

#include <string>

#include "messages/caf_types.hpp"

namespace troupe {

caf::actor spawn_team_queue(caf::event_based_actor* parent, Wiring w, std::string team);

}  // namespace troupe

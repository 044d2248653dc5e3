// TeamQueueActor — one per team.
// Owns: the team's pending jobs in order (priority class value, then submit
//   order). It does not place them: the pool arbiter's grants go straight to
//   a GangReservationActor (via the gang supervisor), which answers here.
// Handles: (enqueue_atom, JobTicket), (dequeue_atom, id) from job actors;
//   (placed_atom, Assignment) / (unplaced_atom, id, reason) from gang
//   reservations (every placement, one worker or many); (why_atom, id,
//   reply): its place in line; (count_atom): how many jobs wait; (tick_atom)
//   from itself: one demand for a burst of changes.
// Emits: (demand_atom, team, first jobs, pending jobs, pending GPUs) to the
//   arbiter when the queue changes; on placed: (placed_atom, Assignment) to
//   the job (via the job supervisor) and (placed_atom, team, Assignment) to
//   the arbiter; on unplaced: (unplaced_atom, team, id) to the arbiter.
#pragma once

#include <string>

#include "actors/caf_types.hpp"

namespace troupe {

caf::actor spawn_team_queue(caf::event_based_actor* parent, Wiring w, std::string team);

}  // namespace troupe

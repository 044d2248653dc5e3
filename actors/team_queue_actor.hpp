// TeamQueueActor — one per team.
// Owns: the team's pending jobs in order (priority class value, then submit
//   order), a line per pool; an any-type job (several candidate pools) in
//   its first candidate's line and as a guest in the others'. It does not
//   place them: the pool arbiter's grants go straight to a
//   GangReservationActor (via the gang supervisor), which answers here.
// Interface: TeamQueueActor (actors/protocol.hpp).
// Accepts: (enqueue_atom, JobTicket), (dequeue_atom, id) from job actors (via
//   the queue supervisor); (granted_atom, pool, jobs) from an arbiter (the
//   first grant of a job wins); (placed_atom, Assignment) / (unplaced_atom,
//   id, pool, reason) from gang reservations (every placement, one worker or
//   many);
//   (why_atom, id, reply) from the arbiter: its place in line, answered to
//   the router; (tick_atom) from itself: one demand for a burst of changes.
// Sends: (demand_atom, team, pool, added tickets, removed ids, full, pending
//   jobs, pending GPUs, of them any-type, itself) to the arbiter when a pool's line changed:
//   what changed among its first jobs not being placed (policy/demand.hpp;
//   `full` on a line's first message); on placed: (placed_atom,
//   Assignment) to the job supervisor (for the job) and (placed_atom, team,
//   Assignment) to the arbiter; on unplaced: (unplaced_atom, team, pool, id)
//   to the arbiter; (why_atom, reply, body) to the router.
#pragma once

#include <string>

#include "actors/protocol.hpp"

namespace troupe {

TeamQueueActor spawn_team_queue(caf::local_actor* parent, Wiring w, std::string team);

}  // namespace troupe

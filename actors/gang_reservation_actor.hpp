// GangReservationActor — one per placement attempt the pool arbiter granted,
// of any number of workers (a single worker is a gang of one: there is no
// other placement path).
// Owns: the tentative reservations of one attempt (one per rank).
// Protocol: two-phase, all or nothing. Phase 1 sends Envelope{Reserve} to the
//   granted node actors one at a time in a fixed order (node name, rank), so
//   two gangs never hold parts of each other's nodes in a cycle. Any Reject,
//   timeout or lease expiry -> Release what it may hold (if unlaunched),
//   report (unplaced_atom, job id, reason) to the queue. All accepted ->
//   phase 2: Envelope{Commit} to each; all confirmed -> (placed_atom,
//   Assignment) to the queue. Lease: 2 s for one worker, 5 s for a gang.
//   The seam for a single worker's one round trip (Allocate): begin().
// Handles: the answers to its requests (Accept|Reject); (crash_atom) for
//   supervision tests. A restarted one (after a crash) holds nothing it knows
//   of: it reports unplaced at once, so the queue's job is granted again (its
//   leases expire; a committed hold is mended by the node's hold check).
#pragma once

#include "actors/caf_types.hpp"

namespace troupe {

// `queue`: the team queue that hears placed/unplaced. `recovering`: started
// by the gang supervisor after a crash.
caf::actor spawn_gang_reservation(caf::event_based_actor* parent, JobTicket t, CandidateList c,
                                  caf::actor queue, bool recovering);

}  // namespace troupe

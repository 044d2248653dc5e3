// GangReservationActor — one per placement attempt the pool arbiter granted,
// of any number of workers (a single worker is a gang of one: there is no
// other placement path).
// Owns: the tentative reservations of one attempt (one per rank).
// Interface: GangActor (actors/protocol.hpp).
// Protocol: two-phase, all or nothing. Phase 1 requests Envelope{Reserve} of
//   every granted NodeActor at once (a node answers at once, never waiting
//   for room, so no two gangs can wait on each other). Any Reject, time up
//   or lease expiry -> Envelope{Release} (if unlaunched, anon_send) of every
//   rank not refused, (unplaced_atom, job id, pool, reason) to the
//   TeamQueueActor. All accepted -> phase 2: Envelope{Commit} requested of
//   each; all confirmed -> (placed_atom, Assignment) to the queue. Lease: 5 s
//   for a gang. A single worker has nothing to wait for: one round trip, an
//   Envelope{Reserve} with `allocate` (reserve and commit at once) answered
//   Accept -> placed, Reject or time up -> Release and unplaced, as above.
//   Time up: its requests have no timeout of their own (on CAF 0.17 each
//   would wake the clock's thread twice); the gang supervisor keeps every
//   gang's deadline (placement_timeout_ms) and checks them once a second.
// Accepts: (crash_atom) for supervision tests; (lease_atom) from the gang
//   supervisor: time is up, it gives up if it still waits for an answer;
//   the answers to its requests (Accept|Reject) come back as their responses. A restarted one
//   (after a crash) holds nothing it knows of: it reports unplaced at once, so the queue's job is
//   granted again (its leases expire; a committed hold is mended by the node's hold check).
#pragma once

#include "actors/protocol.hpp"

namespace troupe {

// How long the answers of a placement over `c` may take in all: 5 s for a
// single worker, 8 s for a gang (its two phases).
int64_t placement_timeout_ms(const CandidateList& c);

// `queue`: the team queue that hears placed/unplaced. `recovering`: started
// by the gang supervisor after a crash.
GangActor spawn_gang_reservation(caf::local_actor* parent, JobTicket t, CandidateList c,
                                 TeamQueueActor queue, bool recovering);

}  // namespace troupe

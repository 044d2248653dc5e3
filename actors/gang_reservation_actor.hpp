// GangReservationActor — one per multi-node placement attempt of a gang.
// Owns: the set of tentative reservations of one gang (one per rank).
// Protocol: two-phase, all or nothing. Phase 1 sends Envelope{Reserve} to the
//   chosen node actors one at a time in a fixed order (node name, rank), so
//   two gangs never hold parts of each other's nodes in a cycle. Any Reject,
//   timeout or lease expiry -> Release everything held, report
//   (unplaced_atom, job id, reason) to the queue. All accepted -> phase 2:
//   Envelope{Commit} to each; all confirmed -> (placed_atom, Assignment) to
//   the queue. A restarted gang reservation (after a crash) releases every
//   reservation of its plan and reports unplaced, so the queue tries again.
#pragma once

#include "actors/caf_types.hpp"

namespace troupe {

// `recovering`: started by the supervisor after a crash.
caf::actor spawn_gang_reservation(caf::event_based_actor* parent, JobTicket t, CandidateList c,
                                  caf::actor queue, bool recovering);

}  // namespace troupe

// JobActor — one per job.
// Owns: the job's lifecycle state machine (sole writer of its JobRecord),
//   its attempts and retry decisions, and its events.
// Handles: (placed_atom, Assignment) from its queue; Envelope{Started|Exited}
//   forwarded by node actors; (cancel_atom, reply); (requeue_atom);
//   (crash_atom) for supervision tests; (done_atom) its own end timer.
// Emits: JobEvent JSON on troupe.<team>.events.<id>; (enqueue_atom, JobTicket)
//   and (dequeue_atom, id) to its team queue; Envelope{Launch|Stop|Release}
//   to node actors; its snapshot to the job supervisor on every change.
//
//   queued --placed--> starting --all Started--> running --all Exited--> succeeded
//     |                   |                         |                  \-> failed
//     |                   +---- cancel -------------+--> (Stop all) ------> canceled
//     +-- cancel --> canceled            failed with retries left --> queued (attempt+1)
#pragma once

#include <string>

#include "actors/ports.hpp"
#include "messages/caf_types.hpp"

namespace troupe {

// `snapshot`: a serialized pb::JobRecord. A record with an empty state is a
// new job (it is queued and announced); any other is a restart.
caf::actor spawn_job(caf::event_based_actor* parent, Wiring w, OutboxPtr out,
                     std::string snapshot);

}  // namespace troupe

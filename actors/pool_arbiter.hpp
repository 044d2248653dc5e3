// PoolArbiter — one per scheduler (one pool until the policy issue adds pools).
// Owns: the capacity index (what each node actor last reported, plus an
//   overlay of candidates handed out since) and the queues waiting for room.
// Handles: (capacity_atom, NodeCapacity, node actor) from node actors;
//   (candidates_atom, PlacementRequest) from queues -> CandidateList;
//   (list_atom, reply subject) -> NodeList JSON for troupe.sys.nodes.
// Emits: (wake_atom) to waiting queues when capacity frees.
#pragma once

#include "actors/ports.hpp"
#include "messages/caf_types.hpp"

namespace troupe {

caf::actor spawn_pool_arbiter(caf::actor_system& sys, OutboxPtr out);

}  // namespace troupe

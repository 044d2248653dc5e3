// IntakeReader — reads submissions off the router, so that parsing them is
// spread over the actor system's threads instead of one actor. The router
// spawns SchedulerOptions::intake_readers of them (linked) and hands each a
// team's troupe.<team>.submit|enqueue|pipeline messages by a hash of the team: one team
// is always read by the same reader, so its submissions keep their order.
// Owns: the submit-rate buckets of its teams (a flood is refused before it is
//   parsed; a shard counts the submissions of its own pools, after the
//   parse that names the pool, so a team's rate holds per pool owner
//   whichever shard of the queue group read them), its copy of the config
//   and the spec limits.
// Interface: IntakeReaderActor (actors/protocol.hpp).
// Accepts: Inbound (a submission, from the router); (config_atom, text)
//   from the router (a refused config keeps the old one).
// Sends: ReadSubmission to the router for every submission it was handed,
//   refused ones included (the router counts and answers every submission,
//   and acknowledges the enqueued ones).
#pragma once

#include "actors/ports.hpp"
#include "actors/protocol.hpp"

namespace troupe {

IntakeReaderActor spawn_intake_reader(caf::local_actor* parent, RouterActor router, ClockPtr clock,
                                      policy::ShardScope shards = {});

}  // namespace troupe

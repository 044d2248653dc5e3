// IntakeReader — reads submissions off the router, so that parsing them is
// spread over the actor system's threads instead of one actor. The router
// spawns SchedulerOptions::intake_readers of them (linked) and hands each a
// team's troupe.<team>.submit|enqueue|pipeline messages by a hash of the team: one team
// is always read by the same reader, so its submissions keep their order.
// Owns: the submit-rate buckets of its teams (a flood is refused before it is
//   parsed; a shard counts the submissions of its own pools, after the
//   parse that names the pool, reports them to the other shards every
//   250 ms on troupe.sys.shard.rate and debits theirs, so a team's rate
//   holds across the shards together), its copy of the config and the
//   spec limits.
// Interface: IntakeReaderActor (actors/protocol.hpp).
// Accepts: Inbound (a submission, from the router); (config_atom, text)
//   from the router (a refused config keeps the old one); (debit_atom, team,
//   tokens) from the router (another shard's report); tick_atom (itself: a
//   shard's report is due).
// Sends: ReadSubmission to the router for every submission it was handed,
//   refused ones included (the router counts and answers every submission,
//   and acknowledges the enqueued ones); a shard publishes pb::ShardRate
//   on troupe.sys.shard.rate.
#pragma once

#include "actors/ports.hpp"
#include "actors/protocol.hpp"

namespace troupe {

// A shard (`out` and `shard_id` given) reports what it admitted on
// troupe.sys.shard.rate and debits what the other shards report.
IntakeReaderActor spawn_intake_reader(caf::local_actor* parent, RouterActor router, ClockPtr clock,
                                      policy::ShardScope shards = {}, OutboxPtr out = nullptr,
                                      std::string shard_id = {});

}  // namespace troupe

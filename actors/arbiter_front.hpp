// ArbiterFront — one per scheduler: the pool arbiters' front door. The other
// actors know one arbiter (Wiring::arbiter); the front hands each message to
// the PoolArbiter of its pool (actors/pool_arbiter.hpp), one per pool, which
// it spawns (linked) for every pool of the config and for any pool a message
// names, so pools plan in parallel.
// Owns: the pool arbiters by pool; the Wiring, the config and each node's
//   last capacity report (a pool arbiter spawned later is given all three);
//   the retries by cause.
// Interface: ArbiterActor (actors/protocol.hpp).
// Accepts, and hands on: (capacity_atom, ...) to every pool arbiter (each
//   knows every node); (demand_atom, team, pool, ...), (placed_atom, team,
//   Assignment), (unplaced_atom, team, pool, job), (done_atom, job, pool),
//   (checkpoint_atom, job, pool, ts), (why_atom, job, team, pool, reply) to
//   the arbiter of that pool (an unplaced, done or checkpoint without a pool
//   to every one); (config_atom, text), Wiring and (remove_atom, node) (a
//   node removed: its last report forgotten here) to every one.
//   (queues_atom, reply) and (queues_atom): the pools' rows put together
//   (views::merge); (list_atom, reply): one pool arbiter answers (each knows
//   every node); (retried_atom, cause, kind): counted here.
#pragma once

#include "actors/ports.hpp"
#include "actors/protocol.hpp"

namespace troupe {

// `fifo`: every pool plans with the FIFO baseline (policy::plan_fifo);
// `round_gap_us`: SchedulerOptions::round_gap_us.
ArbiterActor spawn_arbiter_front(caf::actor_system& sys, OutboxPtr out, policy::Baseline baseline,
                                 int64_t round_gap_us);

}  // namespace troupe

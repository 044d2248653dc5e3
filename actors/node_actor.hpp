// NodeActor — one per machine running troupe-node.
// Owns: the ledger of that machine's GPUs (by index), CPUs and memory — free,
//   reserved under a lease, allocated — and its liveness from heartbeats. It
//   is the only place a GPU is handed out. Also what its agent can run: its
//   container runtime (NodeRegister.runtime; part of its shape, kept in its
//   snapshot), which the arbiter needs to place jobs with an image.
// Interface: NodeActor (actors/protocol.hpp).
// Accepts (Envelope bodies): NodeRegister, Heartbeat, Started, Exited,
//   Checkpointed from the agent (via the node supervisor); Reserve and Commit
//   (requests, answered with Accept or Reject) and Release from gang
//   reservations (every placement, one worker or many); Launch, Stop,
//   Release from job actors, Forget from the job supervisor (via the node
//   supervisor; held while its agent is not heard, sent once it is). (sync_atom, job,
//   attempt, rank) from a restarted job (Started/Exited told again; a rank
//   not held here is stopped and ends as agent lost); (cordon_atom, on,
//   drain, reason, reply); the request (remove_atom) from the node
//   supervisor (troupe.sys.remove_node): refused while its agent is heard
//   or anything is held, else it answers the dirs of the Forgets it held
//   and quits. Timers: (lease_atom), (tick_atom), which also runs the
//   hold check: a hold committed but unlaunched, or exited but unreleased,
//   for hold_check_ms is asked about ((hold_atom, job, ...) to the job
//   supervisor, policy::judge_hold). (crash_atom) for supervision tests.
//   After a scheduler restart (snapshot marked restored) and on every
//   register it reconciles the ledger with what the agent runs and saw end;
//   each heartbeat re-sends lost Launches and asks again for exits it missed
//   (reconcile, adopt_or_lose, fence).
// Phases: its liveness is one enum (unknown, alive, silent) and so is
//   whether it takes work (schedulable, cordoned, draining): node_actor.cpp.
// Sends: Launch/Stop/Forget/hello to the agent on troupe.sys.node.<node>.*;
//   (route_atom, job, Envelope{Started|Exited|Checkpointed}) and (hold_atom,
//   job, ...) to the job supervisor; (capacity_atom, NodeCapacity, itself) to
//   the pool arbiter; (snapshot_atom, node, pb::NodeRecord) to the node
//   supervisor: at once on commit, launch, exit and release; coalesced per
//   tick otherwise; (distrust_atom, what) to the router.
#pragma once

#include <string>

#include "actors/policy/ledger.hpp"
#include "actors/ports.hpp"
#include "actors/protocol.hpp"

namespace troupe {

struct NodeOptions {
  int64_t heartbeat_timeout_ms = 10000;
  int64_t tick_ms = 1000;
  int64_t hold_check_ms = policy::kHoldCheckMs;  // see policy::hold_needs_check
};

NodeActor spawn_node(caf::local_actor* parent, Wiring w, OutboxPtr out, std::string name,
                     std::string snapshot, NodeOptions opts = {});

}  // namespace troupe

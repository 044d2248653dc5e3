// Every message type and atom that travels between CAF actors, named once.
// Protocol payloads are FlatBuffers envelopes (`Inbound::data`, `Envelope`
// bytes); atoms tag the few control messages that carry no protocol body.
#pragma once

#include <caf/all.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/policy/placement.hpp"
#include "actors/ports.hpp"
#include "bus/inbound.hpp"

namespace troupe {

// Inbound (bus/inbound.hpp): one message from the bus (or an actor).

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Inbound& x) {
  return f(caf::meta::type_name("Inbound"), x.subject, x.reply, x.data, x.msg_id, x.stream_seq);
}

// A FlatBuffers Envelope passed between actors inside the scheduler.
struct Envelope {
  std::vector<uint8_t> bytes;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Envelope& x) {
  return f(caf::meta::type_name("Envelope"), x.bytes);
}

// A pending job as its team queue sees it.
struct JobTicket {
  std::string job_id;
  std::string team;
  int32_t attempt = 1;
  int32_t priority = 50;
  uint64_t seq = 0;
  int64_t max_runtime_s = 0;
  bool preemptible = true;
  policy::PlacementRequest req;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, JobTicket& x) {
  return f(caf::meta::type_name("JobTicket"), x.job_id, x.team, x.attempt, x.priority, x.seq,
           x.max_runtime_s, x.preemptible, x.req);
}

// Where each rank of one attempt was committed.
struct Assignment {
  std::string job_id;
  int32_t attempt = 1;
  std::vector<std::string> nodes;          // by rank
  std::vector<std::string> hosts;          // by rank
  std::vector<std::vector<int32_t>> gpus;  // by rank
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Assignment& x) {
  return f(caf::meta::type_name("Assignment"), x.job_id, x.attempt, x.nodes, x.hosts, x.gpus);
}

// The pool arbiter's answer to a candidate search.
struct CandidateList {
  std::vector<std::string> names;
  std::vector<std::string> hosts;
  std::vector<caf::actor> actors;
  std::string reason;  // set when empty
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, CandidateList& x) {
  return f(caf::meta::type_name("CandidateList"), x.names, x.hosts, x.actors, x.reason);
}

// The well-known actors of one scheduler, handed to each at spawn.
struct Wiring {
  caf::actor router;
  caf::actor jobs;    // job supervisor (routes by job id)
  caf::actor queues;  // team queue supervisor (routes by team)
  caf::actor nodes;   // node supervisor (routes by node name)
  caf::actor gangs;   // gang reservation supervisor
  caf::actor arbiter;
  uint64_t epoch = 0;  // leader lease revision: stamped on Launch and Stop (fencing)
  // The actors' time (actors/ports.hpp). Process-local: not in inspect(),
  // never serialized; null (before the Wiring arrives): the system clock.
  ClockPtr clock;
  int64_t now_ms() const { return clock ? clock->now_ms() : system_now_ms(); }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Wiring& x) {
  return f(caf::meta::type_name("Wiring"), x.router, x.jobs, x.queues, x.nodes, x.gangs, x.arbiter,
           x.epoch);
}

namespace policy {
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PlacementRequest& x) {
  return f(caf::meta::type_name("PlacementRequest"), x.pool, x.gpus, x.gpu_type, x.cpus,
           x.memory_mb, x.workers, x.image);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, NodeCapacity& x) {
  return f(caf::meta::type_name("NodeCapacity"), x.name, x.host, x.gpu_type, x.pool, x.rack,
           x.runtime, x.schedulable, x.gpus_total, x.gpus_free, x.gpus_reserved, x.gpus_allocated,
           x.cpus_total, x.cpus_free, x.memory_total_mb, x.memory_free_mb, x.alive,
           x.last_heartbeat_ms, x.running);
}
}  // namespace policy

}  // namespace troupe

CAF_BEGIN_TYPE_ID_BLOCK(troupe, caf::first_custom_type_id)

CAF_ADD_TYPE_ID(troupe, (troupe::Inbound))
CAF_ADD_TYPE_ID(troupe, (troupe::Envelope))
CAF_ADD_TYPE_ID(troupe, (std::vector<uint8_t>))
CAF_ADD_TYPE_ID(troupe, (std::vector<std::string>))
CAF_ADD_TYPE_ID(troupe, (troupe::JobTicket))
CAF_ADD_TYPE_ID(troupe, (std::vector<troupe::JobTicket>))
CAF_ADD_TYPE_ID(troupe, (troupe::Assignment))
CAF_ADD_TYPE_ID(troupe, (troupe::CandidateList))
CAF_ADD_TYPE_ID(troupe, (troupe::Wiring))
CAF_ADD_TYPE_ID(troupe, (troupe::policy::PlacementRequest))
CAF_ADD_TYPE_ID(troupe, (troupe::policy::NodeCapacity))

// Supervision and routing.
CAF_ADD_ATOM(troupe, troupe::atoms, route_atom, "route")
CAF_ADD_ATOM(troupe, troupe::atoms, snapshot_atom, "snapshot")
CAF_ADD_ATOM(troupe, troupe::atoms, crash_atom, "crash")
CAF_ADD_ATOM(troupe, troupe::atoms, spawn_atom, "spawn")
CAF_ADD_ATOM(troupe, troupe::atoms, list_atom, "list")
CAF_ADD_ATOM(troupe, troupe::atoms, count_atom, "count")
// Timers.
CAF_ADD_ATOM(troupe, troupe::atoms, tick_atom, "tick")
CAF_ADD_ATOM(troupe, troupe::atoms, lease_atom, "lease")
CAF_ADD_ATOM(troupe, troupe::atoms, retry_atom, "retry")
// Placement between queues, the pool arbiter, gangs and jobs.
CAF_ADD_ATOM(troupe, troupe::atoms, enqueue_atom, "enqueue")
CAF_ADD_ATOM(troupe, troupe::atoms, dequeue_atom, "dequeue")
CAF_ADD_ATOM(troupe, troupe::atoms, capacity_atom, "capacity")
CAF_ADD_ATOM(troupe, troupe::atoms, placed_atom, "placed")
CAF_ADD_ATOM(troupe, troupe::atoms, unplaced_atom, "unplaced")
CAF_ADD_ATOM(troupe, troupe::atoms, done_atom, "done")
CAF_ADD_ATOM(troupe, troupe::atoms, cancel_atom, "cancel")
CAF_ADD_ATOM(troupe, troupe::atoms, status_atom, "status")
CAF_ADD_ATOM(troupe, troupe::atoms, logs_atom, "logs")
CAF_ADD_ATOM(troupe, troupe::atoms, intake_atom, "intake")
CAF_ADD_ATOM(troupe, troupe::atoms, stats_atom, "stats")
CAF_ADD_ATOM(troupe, troupe::atoms, requeue_atom, "requeue")
// Admission (router): a node's shape on every register (node supervisor), a
// job that left `queued` for good (job supervisor).
CAF_ADD_ATOM(troupe, troupe::atoms, shape_atom, "shape")
CAF_ADD_ATOM(troupe, troupe::atoms, unqueued_atom, "unqueued")
// troupe.sys.find and troupe.<team>.history (router <-> job supervisor).
CAF_ADD_ATOM(troupe, troupe::atoms, find_atom, "find")
CAF_ADD_ATOM(troupe, troupe::atoms, history_atom, "history")
// Scheduling policy: queues <-> pool arbiter.
CAF_ADD_ATOM(troupe, troupe::atoms, demand_atom, "demand")
CAF_ADD_ATOM(troupe, troupe::atoms, round_atom, "round")
CAF_ADD_ATOM(troupe, troupe::atoms, why_atom, "why")
CAF_ADD_ATOM(troupe, troupe::atoms, queues_atom, "queues")
CAF_ADD_ATOM(troupe, troupe::atoms, config_atom, "config")
// Preemption, retries, node operations.
CAF_ADD_ATOM(troupe, troupe::atoms, preempt_atom, "preempt")
CAF_ADD_ATOM(troupe, troupe::atoms, checkpoint_atom, "checkpt")
CAF_ADD_ATOM(troupe, troupe::atoms, retried_atom, "retried")
CAF_ADD_ATOM(troupe, troupe::atoms, cordon_atom, "cordon")
CAF_ADD_ATOM(troupe, troupe::atoms, restore_atom, "restore")
// Holds that wait too long (node -> job) and a restarted job's resync (job -> node).
CAF_ADD_ATOM(troupe, troupe::atoms, hold_atom, "hold")
CAF_ADD_ATOM(troupe, troupe::atoms, sync_atom, "sync")
CAF_ADD_ATOM(troupe, troupe::atoms, restop_atom, "restop")
// An event is in the events stream (Outbox::publish_event -> job): a Launch waits for it.
CAF_ADD_ATOM(troupe, troupe::atoms, stored_atom, "stored")
// (distrust_atom, what): a message refused because its sender may not say it
// (an unlisted node, a capacity change with work held): counted by the router.
CAF_ADD_ATOM(troupe, troupe::atoms, distrust_atom, "distrust")

CAF_END_TYPE_ID_BLOCK(troupe)

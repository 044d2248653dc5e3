// Every message type and atom that travels between CAF actors, named once.
// Protocol payloads are FlatBuffers envelopes (`Inbound::data`, `Envelope`
// bytes); atoms tag the few control messages that carry no protocol body.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/all.hpp>

namespace troupe {

// One message from the bus (or an actor), as bytes plus routing. `reply` is
// the NATS reply subject of a request ("" for plain publishes).
struct Inbound {
  std::string subject;
  std::string reply;
  std::vector<uint8_t> data;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Inbound& x) {
  return f(caf::meta::type_name("Inbound"), x.subject, x.reply, x.data);
}

// A FlatBuffers Envelope passed between actors inside the scheduler.
struct Envelope {
  std::vector<uint8_t> bytes;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Envelope& x) {
  return f(caf::meta::type_name("Envelope"), x.bytes);
}

}  // namespace troupe

CAF_BEGIN_TYPE_ID_BLOCK(troupe, caf::first_custom_type_id)

  CAF_ADD_TYPE_ID(troupe, (troupe::Inbound))
  CAF_ADD_TYPE_ID(troupe, (troupe::Envelope))
  CAF_ADD_TYPE_ID(troupe, (std::vector<uint8_t>))
  CAF_ADD_TYPE_ID(troupe, (std::vector<std::string>))

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
  CAF_ADD_ATOM(troupe, troupe::atoms, candidates_atom, "candidates")
  CAF_ADD_ATOM(troupe, troupe::atoms, capacity_atom, "capacity")
  CAF_ADD_ATOM(troupe, troupe::atoms, wake_atom, "wake")
  CAF_ADD_ATOM(troupe, troupe::atoms, placed_atom, "placed")
  CAF_ADD_ATOM(troupe, troupe::atoms, unplaced_atom, "unplaced")
  CAF_ADD_ATOM(troupe, troupe::atoms, done_atom, "done")
  CAF_ADD_ATOM(troupe, troupe::atoms, cancel_atom, "cancel")
  CAF_ADD_ATOM(troupe, troupe::atoms, status_atom, "status")
  CAF_ADD_ATOM(troupe, troupe::atoms, logs_atom, "logs")

CAF_END_TYPE_ID_BLOCK(troupe)

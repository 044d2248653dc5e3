// Subscription -> actor bridge: every message on a subject becomes an
// `Inbound` sent to an actor that accepts it (InboundActor, e.g. the router;
// anon_send from the NATS thread).
#pragma once

#include <caf/all.hpp>

#include "actors/protocol.hpp"
#include "bus/nats.hpp"

namespace troupe::bus {

inline SubscriptionPtr subscribe_actor(Connection& conn, const std::string& subject,
                                       InboundActor dest, const std::string& queue = {}) {
  return conn.subscribe(
      subject, [dest](Inbound&& in) { caf::anon_send(dest, std::move(in)); }, queue);
}

}  // namespace troupe::bus

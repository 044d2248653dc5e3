// One message from the bus, as bytes plus routing: what a subscription
// handler gets (bus/nats.hpp) and what the scheduler's actors receive
// (actors/protocol.hpp registers it with CAF). No CAF and no NATS here, so
// the node agent, the CLI and the load tool use it as plain C++.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace troupe {

// `reply` is the NATS reply subject of a request ("" for plain publishes).
struct Inbound {
  Inbound() = default;
  Inbound(std::string s, std::string r, std::vector<uint8_t> d)
      : subject(std::move(s)), reply(std::move(r)), data(std::move(d)) {}
  std::string subject;
  std::string reply;
  std::vector<uint8_t> data;
  std::string msg_id;       // Nats-Msg-Id header (JetStream publishers)
  uint64_t stream_seq = 0;  // from a JetStream consumer: acknowledge via Intake::ack
  // The server's "no responders" status (503) to a request sent with this
  // message's subject as its reply subject (bus::Requester).
  bool no_responders = false;
};

}  // namespace troupe

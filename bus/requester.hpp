// Many requests out at once on one connection, without a thread each: the
// replies come to one subscription (a wildcard under a fresh inbox) and each
// is handed to its request's callback. What a caller that would otherwise
// block a thread per request uses (troupe-dispatch's submissions).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bus/nats.hpp"

namespace troupe::bus {

class Requester {
 public:
  // `reply` is the answer; nullopt with `error` when none came (no
  // responders, a timeout, or the request could not be sent).
  using Done =
      std::function<void(std::optional<std::vector<uint8_t>> reply, const std::string& error)>;

  // nullptr (and `error`) when the reply subscription cannot be made.
  // `conn` must outlive it.
  static std::unique_ptr<Requester> open(Connection& conn, std::string* error);
  // Requests still out are dropped: their callbacks are not called.
  ~Requester();
  Requester(const Requester&) = delete;
  Requester& operator=(const Requester&) = delete;

  // Sends `data` on `subject`; `done` is called exactly once, with the reply
  // (on the reply subscription's thread) or why none came (on this
  // requester's timer thread after `timeout_ms`; at once, before this
  // returns, when the request cannot be sent). In a NATS cluster "no
  // responders" is asked again within the request's time (5 s at most), as
  // Connection::request does: the responder may be moving between servers.
  void request(const std::string& subject, std::string data, int timeout_ms, Done done);

  // Requests sent and not answered yet.
  size_t out() const;

 private:
  Requester() = default;
  struct State;
  std::shared_ptr<State> state_;
  SubscriptionPtr replies_;
};

}  // namespace troupe::bus

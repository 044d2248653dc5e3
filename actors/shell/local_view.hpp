// The scheduler's own views for its metrics collector, read in-process
// (actors/metrics/scheduler_metrics.hpp): ask() hands the router a request as
// if it came from the bus, with a reply subject under kReplyPrefix, and the
// bus outbox (shell/bus_ports.hpp) gives answers to such subjects back here
// instead of publishing them. Job events the job actors publish are passed on
// to a listener the same way. Nothing of this goes over NATS.
#pragma once

#include <caf/all.hpp>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>

#include "actors/metrics/scheduler_metrics.hpp"
#include "actors/protocol.hpp"

namespace troupe::shell {

class LocalView : public metrics::Source {
 public:
  using Listener = std::function<void(const std::string& subject, const std::string& json)>;
  // Never a subject on the bus: a reply subject of an in-process request. Its
  // ids are random, so no request from outside can answer one.
  static constexpr std::string_view kReplyPrefix = "_TROUPE_LOCAL.";

  std::optional<std::string> ask(const std::string& subject, int timeout_ms) override;

  // While serving, the router that answers (a null handle: none, ask() says
  // nothing at once).
  void serve(InboundActor router);
  // An answer the actors published to `subject`: true (and kept here) when
  // the subject is a local reply subject.
  bool answer(const std::string& subject, const void* data, size_t size);
  // Job events go to `listener` (set before the actors start).
  void listen(Listener listener) { listener_ = std::move(listener); }
  void event(const std::string& subject, const std::string& json) const {
    if (listener_) listener_(subject, json);
  }

 private:
  std::mutex mu_;
  InboundActor router_;
  std::unordered_map<std::string, std::promise<std::string>*> waiting_;
  std::mt19937_64 ids_{std::random_device{}()};
  Listener listener_;
};

}  // namespace troupe::shell

#include "actors/shell/local_view.hpp"

#include <chrono>

#include "actors/protocol.hpp"

namespace troupe::shell {

std::optional<std::string> LocalView::ask(const std::string& subject, int timeout_ms) {
  std::promise<std::string> answered;
  auto result = answered.get_future();
  std::string reply;
  InboundActor router;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!router_) return std::nullopt;
    router = router_;
    reply = std::string(kReplyPrefix) + std::to_string(ids_());
    waiting_[reply] = &answered;
  }
  caf::anon_send(router, Inbound{subject, reply, {'{', '}'}});
  bool ready = result.wait_for(std::chrono::milliseconds(timeout_ms)) == std::future_status::ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_.erase(reply);  // (an answer after this finds nobody waiting)
  }
  if (!ready) return std::nullopt;
  return result.get();
}

void LocalView::serve(InboundActor router) {
  std::lock_guard<std::mutex> lock(mu_);
  router_ = std::move(router);
}

bool LocalView::answer(const std::string& subject, const void* data, size_t size) {
  if (subject.compare(0, kReplyPrefix.size(), kReplyPrefix) != 0) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = waiting_.find(subject); it != waiting_.end()) {
    it->second->set_value(std::string(static_cast<const char*>(data), size));
    waiting_.erase(it);
  }
  return true;
}

}  // namespace troupe::shell

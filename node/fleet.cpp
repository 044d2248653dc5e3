// Owns the fleet of simulated agents: creating the members, spreading their
// heartbeats, routing inbound messages by node token, and the shutdown order
// (members first, then the shared timer thread, before any member is freed).
#include "node/fleet.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "bus/subjects.hpp"
#include "node/options.hpp"

namespace troupe::node {

Fleet::Fleet(FleetConfig cfg, Publish publish)
    : prefix_(cfg.prefix), timers_(std::make_shared<TimerQueue>()) {
  const int count = std::max(cfg.count, 1);
  names_.reserve(static_cast<size_t>(count));
  agents_.reserve(static_cast<size_t>(count));
  const long long period = std::max(cfg.base.heartbeat_ms, 1);
  for (int i = 1; i <= count; ++i) names_.push_back(fleet_node_name(prefix_, i, count));
  for (int i = 0; i < count; ++i) {
    AgentConfig a = cfg.base;
    a.name = names_[static_cast<size_t>(i)];
    a.state_dir = cfg.base.state_dir + "/" + a.name;
    a.first_heartbeat_ms = static_cast<int>(period * i / count);
    a.log_summary = false;
    a.ship_logs = false;  // a fleet's identity may not publish TROUPE_LOGS_<team>
    agents_.push_back(std::make_unique<Agent>(std::move(a), publish, timers_));
    by_name_.emplace(names_[static_cast<size_t>(i)], agents_.back().get());
  }
}

Fleet::~Fleet() {
  shutdown();
}

Agent* Fleet::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

void Fleet::start() {
  for (auto& a : agents_) a->start();
}

void Fleet::on_message(const Inbound& in) {
  if (in.subject == subjects::kSysHello) {
    for (auto& a : agents_) a->on_message(in);
    return;
  }
  std::string_view node = subjects::token(in.subject, 3);
  if (Agent* a = find(node)) {
    a->on_message(in);
    return;
  }
  // Another agent's message (the wildcard sees every node's), or one for a
  // member this fleet does not have.
  if (node.size() > prefix_.size() && node.substr(0, prefix_.size()) == prefix_ &&
      node[prefix_.size()] == '-') {
    uint64_t n = ++unrouted_;
    if (n <= 20 || n % 1000 == 0)
      spdlog::warn("dropped a message on {}: no such node in this fleet ({} so far)", in.subject,
                   n);
  }
}

void Fleet::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  for (auto& a : agents_) a->shutdown();
  timers_->stop();  // no callback runs after this: members may now go
  AgentCounters c = counters();
  spdlog::info(
      "fleet of {} simulated node(s) stopped: {} launched, {} exited, {} launch failures, "
      "{} duplicates, {} bad messages dropped, {} unrouted",
      agents_.size(), c.launches, c.exits, c.launch_failures, c.duplicates, c.bad_messages,
      unrouted_.load());
}

AgentCounters Fleet::counters() const {
  AgentCounters sum;
  for (const auto& a : agents_) {
    AgentCounters c = a->counters();
    sum.bad_messages += c.bad_messages;
    sum.launches += c.launches;
    sum.duplicates += c.duplicates;
    sum.launch_failures += c.launch_failures;
    sum.exits += c.exits;
  }
  return sum;
}

}  // namespace troupe::node

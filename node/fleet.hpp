// A fleet of simulated node agents in one process (troupe-node --simulate
// --count N): N Agents, each its own node on the bus with its own register,
// heartbeats and worker table, sharing one timer thread, and fed by one
// wildcard subscription (troupe.sys.node.*.>) plus troupe.sys.hello that this
// class dispatches by the node token. Like Agent it talks to the outside only
// through the Publish function it is given, so tests drive it without NATS.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bus/inbound.hpp"
#include "node/agent.hpp"
#include "node/timer_queue.hpp"

namespace troupe::node {

struct FleetConfig {
  // Template of every member: name is ignored; state_dir is the parent of
  // each member's own state folder (<state_dir>/<node name>).
  AgentConfig base;
  std::string prefix;  // members are <prefix>-00001 ... (fleet_node_name)
  int count = 1;
};

class Fleet {
 public:
  Fleet(FleetConfig cfg, Publish publish);
  ~Fleet();  // shutdown()
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  // The wildcard subscription that carries every member's messages (plus
  // troupe.sys.hello, which the caller subscribes to as well).
  static const char* node_wildcard() { return "troupe.sys.node.*.>"; }

  // Every member registers now; heartbeats are spread evenly over one
  // heartbeat period (member i first beats at i * period / count).
  void start();
  // One message from the subscriptions: troupe.sys.hello goes to every
  // member, troupe.sys.node.<name>.<kind> to member <name>; messages for nodes
  // not in this fleet are ignored (counted when they carry our prefix).
  void on_message(const Inbound& in);
  // Shuts every member down, then stops the shared timer thread. Idempotent.
  void shutdown();

  size_t size() const { return agents_.size(); }
  const std::vector<std::string>& names() const { return names_; }
  Agent* find(std::string_view name) const;
  uint64_t unrouted() const { return unrouted_.load(); }
  // Sums of every member's counters.
  AgentCounters counters() const;

 private:
  const std::string prefix_;
  std::shared_ptr<TimerQueue> timers_;
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<Agent>> agents_;
  std::unordered_map<std::string_view, Agent*> by_name_;  // views into names_
  std::atomic<uint64_t> unrouted_{0};
  bool shut_down_ = false;
};

}  // namespace troupe::node

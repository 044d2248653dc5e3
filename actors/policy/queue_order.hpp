// Order inside a team queue: priority, then submit order. Pure.
#pragma once

#include <cstdint>
#include <string_view>

namespace troupe::policy {

// Higher runs first.
inline int priority_value(std::string_view name) {
  if (name == "high") return 100;
  if (name == "low") return 10;
  return 50;
}

struct QueueKey {
  int priority = 50;
  uint64_t seq = 0;
  bool operator<(const QueueKey& o) const {
    if (priority != o.priority) return priority > o.priority;
    return seq < o.seq;
  }
};

}  // namespace troupe::policy

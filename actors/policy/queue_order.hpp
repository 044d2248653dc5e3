// Order inside a team queue: priority, then (las) band, then submit order. Pure.
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

// Priority class first; within it, for an `order: las` team, the band
// (least attained service first, policy/las.hpp; always 0 under fifo); then
// submit order.
struct QueueKey {
  int priority = 50;
  uint64_t seq = 0;
  int band = 0;
  bool operator<(const QueueKey& o) const {
    if (priority != o.priority) return priority > o.priority;
    if (band != o.band) return band < o.band;
    return seq < o.seq;
  }
};

}  // namespace troupe::policy

// Recent<K, V>: a map that remembers only its last `capacity` insertions
// (the oldest is forgotten first). The agent keeps two: the workers that
// finished (a repeated Launch is a duplicate) and how the last ones ended
// (re-sent with every NodeRegister and on a repeated Launch).
// Unit tests: tests/unit/node_pure_test.cpp.
#pragma once

#include <cstddef>
#include <deque>
#include <map>

namespace troupe::node {

template <class K, class V>
class Recent {
 public:
  explicit Recent(size_t capacity) : capacity_(capacity) {}

  // Remembers `key` (false, and nothing changes, when it is already known).
  bool remember(const K& key, V value = V{}) {
    if (!items_.emplace(key, std::move(value)).second) return false;
    order_.push_back(key);
    if (order_.size() > capacity_) {
      items_.erase(order_.front());
      order_.pop_front();
    }
    return true;
  }
  bool contains(const K& key) const { return items_.count(key) != 0; }
  const V* find(const K& key) const {
    auto it = items_.find(key);
    return it == items_.end() ? nullptr : &it->second;
  }
  const std::map<K, V>& items() const { return items_; }

 private:
  size_t capacity_;
  std::map<K, V> items_;
  std::deque<K> order_;
};

}  // namespace troupe::node

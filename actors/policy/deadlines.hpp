// Deadlines of many items kept for one periodic check, instead of a timer
// each (on CAF 0.17 every delayed message and request timeout wakes the
// clock's thread twice: docs/performance.md). Pure: ids and milliseconds.
// An id has one deadline: setting it again replaces the earlier one.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace troupe::policy {

class Deadlines {
 public:
  // `id` is due at `until_ms` (its earlier deadline, if any, no longer counts).
  void set(const std::string& id, int64_t until_ms) {
    clear(id);
    by_id_.emplace(id, until_ms);
    by_time_.emplace(until_ms, id);
  }
  // `id` is not due any more (done before its deadline).
  void clear(const std::string& id) {
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return;
    by_time_.erase(std::make_pair(it->second, id));
    by_id_.erase(it);
  }
  // The ids due by `now_ms`, earliest first; they are forgotten.
  std::vector<std::string> take_due(int64_t now_ms) {
    std::vector<std::string> due;
    while (!by_time_.empty() && by_time_.begin()->first <= now_ms) {
      due.push_back(by_time_.begin()->second);
      by_id_.erase(due.back());
      by_time_.erase(by_time_.begin());
    }
    return due;
  }
  bool empty() const { return by_id_.empty(); }
  size_t size() const { return by_id_.size(); }

 private:
  std::unordered_map<std::string, int64_t> by_id_;
  std::set<std::pair<int64_t, std::string>> by_time_;
};

}  // namespace troupe::policy

#include "actors/policy/arrays.hpp"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

namespace troupe::policy::arrays {

std::string task_id(std::string_view array_id, int index) {
  return std::string(array_id) + "-" + std::to_string(index);
}

std::optional<std::pair<std::string, int>> split_task_id(std::string_view id) {
  auto dash = id.rfind('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 >= id.size() ||
      id.size() - dash - 1 > 9)
    return std::nullopt;
  int index = 0;
  for (char c : id.substr(dash + 1)) {
    if (c < '0' || c > '9') return std::nullopt;
    index = index * 10 + (c - '0');
  }
  // "-01" is not task 1: only the canonical form is a task id.
  if (id.substr(dash + 1) != std::to_string(index)) return std::nullopt;
  return std::make_pair(std::string(id.substr(0, dash)), index);
}

std::string param_env(std::string_view name) {
  std::string out = "TROUPE_PARAM_";
  for (unsigned char c : name)
    out += std::isalnum(c) && c < 0x80 ? static_cast<char>(std::toupper(c)) : '_';
  return out;
}

int64_t grid_size(const Grid& g, int64_t cap) {
  if (g.empty()) return 0;
  int64_t n = 1;
  for (const auto& [name, values] : g) {
    n *= static_cast<int64_t>(values.size());
    if (n == 0) return 0;
    if (n > cap) return cap + 1;
  }
  return n;
}

std::vector<std::pair<std::string, Value>> point(const Grid& g, int64_t index) {
  std::vector<std::pair<std::string, Value>> p(g.size());
  for (size_t i = g.size(); i-- > 0;) {
    const auto& values = g[i].second;
    if (values.empty()) return {};
    auto n = static_cast<int64_t>(values.size());
    p[i] = {g[i].first, values[static_cast<size_t>(index % n)]};
    index /= n;
  }
  return p;
}

std::string point_json(const std::vector<std::pair<std::string, Value>>& p) {
  std::string out = "{";
  for (const auto& [name, v] : p) {
    if (out.size() > 1) out += ',';
    out += nlohmann::json(name).dump();
    out += ':';
    out += v.json;
  }
  return out + "}";
}

Counts count(std::string_view tasks) {
  Counts c;
  for (char t : tasks) {
    switch (t) {
      case kPending:
        ++c.pending;
        break;
      case kStarted:
        ++c.started;
        break;
      case kSucceeded:
        ++c.succeeded;
        break;
      case kFailed:
        ++c.failed;
        break;
      default:
        ++c.canceled;
        break;
    }
  }
  return c;
}

int may_start(const Counts& c, int parallelism, bool canceling) {
  if (canceling) return 0;
  if (parallelism <= 0) return c.pending;
  return std::max(0, std::min(c.pending, parallelism - c.started));
}

char mark_of(std::string_view state) {
  if (state == "succeeded") return kSucceeded;
  if (state == "failed") return kFailed;
  return kCanceled;
}

std::optional<End> end_of(const Counts& c, bool cancel_requested) {
  if (c.pending > 0 || c.started > 0) return std::nullopt;
  int total = c.succeeded + c.failed + c.canceled;
  std::string counts = std::to_string(c.succeeded) + " of " + std::to_string(total) +
                       " tasks succeeded, " + std::to_string(c.failed) + " failed, " +
                       std::to_string(c.canceled) + " canceled";
  End e;
  if (cancel_requested) {
    e.state = "canceled";
    e.outcome = kCanceledOutcome;
    e.reason = "canceled by request: " + counts;
  } else if (c.succeeded == total) {
    e.state = "succeeded";
    e.outcome = kAllSucceeded;
    e.reason = counts;
  } else if (c.succeeded == 0) {
    e.state = "failed";
    e.outcome = kNoneSucceeded;
    e.reason = "no task succeeded: " + counts;
  } else {
    e.state = "failed";
    e.outcome = kPartiallySucceeded;
    e.reason = "partially succeeded: " + counts;
  }
  return e;
}

}  // namespace troupe::policy::arrays

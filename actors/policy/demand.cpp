#include "actors/policy/demand.hpp"

namespace troupe::policy {

DemandDiff diff_demand(std::unordered_set<std::string>& held,
                       const std::vector<std::string_view>& now) {
  DemandDiff d;
  std::unordered_set<std::string_view> in_now(now.begin(), now.end());
  for (auto it = held.begin(); it != held.end();) {
    if (in_now.count(*it) == 0) {
      d.removed.push_back(*it);
      it = held.erase(it);
    } else {
      ++it;
    }
  }
  for (size_t i = 0; i < now.size(); ++i)
    if (held.emplace(now[i]).second) d.added.push_back(i);
  return d;
}

}  // namespace troupe::policy

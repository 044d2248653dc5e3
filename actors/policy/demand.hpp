// A team's demand as changes (issue 15): a team queue tells the arbiter of a
// pool which of the first jobs of its line were added and which removed since
// the last time, not the whole list again. Pure: the queue keeps the ids it
// told (diff_demand), the arbiter keeps the tickets (apply_demand), in line
// order (priority, then submit order: QueueKey), and both stay the same list
// as long as every change is applied in order.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "actors/policy/queue_order.hpp"

namespace troupe::policy {

struct DemandDiff {
  std::vector<size_t> added;         // indexes into `now`, in its order
  std::vector<std::string> removed;  // ids held and no longer in `now`
};

// `held`: the ids the arbiter holds (as last told); `now`: the ids of the
// first jobs now, in line order. `held` becomes `now`'s ids.
DemandDiff diff_demand(std::unordered_set<std::string>& held,
                       const std::vector<std::string_view>& now);

// Applies a diff to the tickets held, kept in line order: `key(t)` its
// QueueKey, `id(t)` its job id. An added ticket goes after those of an equal
// key (as the queue's line keeps arrival order among them); an added ticket
// already held replaces it.
template <class Ticket, class KeyOf, class IdOf>
void apply_demand(std::vector<Ticket>& held, std::vector<Ticket>&& added,
                  const std::vector<std::string>& removed, KeyOf key, IdOf id) {
  if (!removed.empty() || !added.empty()) {
    std::unordered_set<std::string_view> gone(removed.begin(), removed.end());
    for (const auto& t : added) gone.insert(id(t));
    held.erase(std::remove_if(held.begin(), held.end(),
                              [&](const Ticket& t) { return gone.count(id(t)) != 0; }),
               held.end());
  }
  for (auto& t : added) {
    QueueKey k = key(t);
    auto at = std::upper_bound(held.begin(), held.end(), k,
                               [&](const QueueKey& a, const Ticket& b) { return a < key(b); });
    held.insert(at, std::move(t));
  }
}

}  // namespace troupe::policy

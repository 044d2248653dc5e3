// Unit tests for actors/policy/demand: a team's demand told as changes.
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "actors/policy/demand.hpp"

using namespace troupe::policy;

namespace {

struct Ticket {
  std::string id;
  QueueKey key;
};
auto key_of = [](const Ticket& t) { return t.key; };
auto id_of = [](const Ticket& t) -> const std::string& { return t.id; };

std::vector<std::string> ids(const std::vector<Ticket>& ts) {
  std::vector<std::string> out;
  for (const auto& t : ts) out.push_back(t.id);
  return out;
}

}  // namespace

TEST_CASE("demand: a diff names what was added and what left, once", "[policy][demand]") {
  std::unordered_set<std::string> held;
  auto d = diff_demand(held, {"a", "b", "c"});
  CHECK(d.added == std::vector<size_t>{0, 1, 2});
  CHECK(d.removed.empty());
  d = diff_demand(held, {"b", "c", "d"});
  CHECK(d.added == std::vector<size_t>{2});
  CHECK(d.removed == std::vector<std::string>{"a"});
  d = diff_demand(held, {"b", "c", "d"});  // nothing changed: nothing to tell
  CHECK(d.added.empty());
  CHECK(d.removed.empty());
}

TEST_CASE("demand: an added ticket takes its place in line, after equal keys", "[policy][demand]") {
  std::vector<Ticket> held;
  apply_demand(held, {{"a", {50, 1}}, {"c", {50, 3}}}, {}, key_of, id_of);
  apply_demand(held, {{"b", {50, 2}}, {"h", {100, 9}}, {"c2", {50, 3}}}, {}, key_of, id_of);
  CHECK(ids(held) == std::vector<std::string>{"h", "a", "b", "c", "c2"});
  apply_demand(held, {}, {"a", "h", "unknown"}, key_of, id_of);
  CHECK(ids(held) == std::vector<std::string>{"b", "c", "c2"});
  apply_demand(held, {{"b", {10, 2}}}, {}, key_of, id_of);  // held already: replaced
  CHECK(ids(held) == std::vector<std::string>{"c", "c2", "b"});
}

// A queue's line changes at random (jobs come, leave, are granted and given
// back); after each change the queue tells its diff, and the arbiter's
// tickets must be exactly the line's first jobs not being placed, in order.
TEST_CASE("demand: diffs applied in order keep the arbiter's list equal to the queue's",
          "[policy][demand]") {
  constexpr size_t kDepth = 16;
  std::mt19937 rng(20261203);
  std::map<QueueKey, std::string> line;  // unique seqs: one order for both sides
  std::map<std::string, QueueKey> key;
  std::unordered_set<std::string> granted;
  std::unordered_set<std::string> told;  // the queue's side
  std::vector<Ticket> held;              // the arbiter's side
  uint64_t seq = 0;
  int checks = 0;
  for (int step = 0; step < 20000; ++step) {
    int op = std::uniform_int_distribution<int>(0, 9)(rng);
    if (op < 4 || line.empty()) {  // a job comes
      int prio = std::uniform_int_distribution<int>(0, 2)(rng) == 0 ? 100 : 50;
      QueueKey k{prio, ++seq};
      std::string id = "j" + std::to_string(seq);
      line[k] = id;
      key[id] = k;
    } else {
      auto it = line.begin();
      std::advance(it, std::uniform_int_distribution<size_t>(0, line.size() - 1)(rng) % kDepth %
                           line.size());
      const std::string id = it->second;
      if (op < 6) {  // leaves (placed, canceled)
        line.erase(it);
        granted.erase(id);
      } else if (op < 8) {
        granted.insert(id);  // being placed
      } else {
        granted.erase(id);  // given back
      }
    }
    std::vector<std::string_view> now;
    for (const auto& [k, id] : line) {
      if (now.size() == kDepth) break;
      if (!granted.count(id)) now.push_back(id);
    }
    auto d = diff_demand(told, now);
    std::vector<Ticket> added;
    for (size_t i : d.added) added.push_back({std::string(now[i]), key[std::string(now[i])]});
    apply_demand(held, std::move(added), d.removed, key_of, id_of);
    std::vector<std::string> want(now.begin(), now.end());
    if (ids(held) != want) FAIL("step " << step << ": the arbiter's list differs");
    ++checks;
  }
  CHECK(checks == 20000);
}

// Grants the nodes' reports do not count yet (actors/policy/overlay.hpp): a
// report sent before the node heard of a grant must not give its room back.
#include <catch2/catch.hpp>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "actors/policy/ledger.hpp"
#include "actors/policy/overlay.hpp"

using namespace troupe::policy;

namespace {
PlacementRequest one(int gpus) {
  PlacementRequest r;
  r.pool = "a100";
  r.gpus = gpus;
  r.cpus = 2 * gpus;
  r.memory_mb = 1000 * gpus;
  return r;
}
NodeCapacity free_node(int gpus) {
  NodeCapacity n;
  n.name = "n0";
  n.pool = "a100";
  n.gpus_total = n.gpus_free = gpus;
  n.cpus_total = n.cpus_free = 2 * gpus;
  n.memory_total_mb = n.memory_free_mb = 1000 * gpus;
  return n;
}
}  // namespace

TEST_CASE("overlay: a report that does not list a grant's hold is read less that grant",
          "[policy][overlay]") {
  GrantOverlay o;
  o.add(0, "j-1", 1, 0, one(2));
  o.add(0, "j-2", 1, 0, one(1));
  o.add(1, "j-3", 1, 0, one(4));
  CHECK(o.size() == 3);

  auto r = free_node(8);  // sent before n0 heard of either
  o.apply(0, {}, r);
  CHECK(r.gpus_free == 5);
  CHECK(r.cpus_free == 10);
  CHECK(r.memory_free_mb == 5000);
  CHECK(o.size() == 3);  // still not counted by the node

  // n0 reserved j-1: its report counts it, so the overlay no longer does.
  r = free_node(8);
  r.gpus_free = 6;
  o.apply(0, {hold_id("j-1", 1, 0)}, r);
  CHECK(r.gpus_free == 5);
  CHECK(o.size() == 2);

  // A later report without j-1 (it ended, or its gang gave up) is believed.
  r = free_node(8);
  o.apply(0, {}, r);
  CHECK(r.gpus_free == 7);  // j-2 only

  // Another node's report is untouched by n0's grants, and j-3's answer ends its share.
  o.forget("j-3");
  r = free_node(8);
  o.apply(1, {}, r);
  CHECK(r.gpus_free == 8);
  CHECK(o.size() == 1);
  o.forget("j-2");
  o.forget("j-2");  // idempotent
  o.forget("j-unknown");
  CHECK(o.size() == 0);
}

TEST_CASE("overlay: ranks of one gang on one node, and another attempt's hold",
          "[policy][overlay]") {
  GrantOverlay o;
  o.add(0, "g-1", 2, 0, one(2));
  o.add(0, "g-1", 2, 1, one(2));
  auto r = free_node(8);
  // The node holds rank 0 of attempt 2, and a stale hold of attempt 1's rank 1.
  r.gpus_free = 4;
  o.apply(0, {hold_id("g-1", 2, 0), hold_id("g-1", 1, 1)}, r);
  CHECK(r.gpus_free == 2);  // attempt 2's rank 1 is not counted by the node yet
  CHECK(o.size() == 1);
  r.gpus_free = 1;
  r.cpus_free = 3;
  o.apply(0, {}, r);
  CHECK(r.gpus_free == 0);  // never below zero
  CHECK(r.cpus_free == 0);
  o.forget("g-1");
  CHECK(o.size() == 0);
}

// A node's ledger hears of grants late and reports at random moments; the
// arbiter's view of it (each report through the overlay) never shows more
// free GPUs than the node has less the grants it has not heard of, and
// equals the node's own figure once every grant is answered.
TEST_CASE("overlay: randomized grants, late reserves and reports", "[policy][overlay]") {
  std::mt19937 rng(15);
  for (int run = 0; run < 200; ++run) {
    Ledger node;
    node.resize(8, 16, 8000);
    GrantOverlay o;
    std::deque<std::pair<std::string, int>> unheard;  // grants on their way: hold id, gpus
    std::vector<std::string> held;                    // holds the node has
    int next = 0;
    int64_t now = 0;
    auto view_free = [&] {
      NodeCapacity r;
      r.gpus_free = node.gpus_free();
      r.cpus_free = node.cpus_free();
      r.memory_free_mb = node.memory_free_mb();
      std::vector<std::string> ids;
      for (const auto& [id, h] : node.holds) ids.push_back(id);
      o.apply(0, ids, r);
      return r.gpus_free;
    };
    for (int step = 0; step < 200; ++step) {
      int what = static_cast<int>(rng() % 4);
      if (what == 0) {  // the arbiter grants what its view shows free
        int free = view_free();
        if (free > 0) {
          int g = 1 + static_cast<int>(rng() % free);
          std::string job = "j-" + std::to_string(next++);
          o.add(0, job, 1, 0, one(g));
          unheard.emplace_back(hold_id(job, 1, 0), g);
        }
      } else if (what == 1 && !unheard.empty()) {  // the node hears of the oldest grant
        auto [id, g] = unheard.front();
        unheard.pop_front();
        Hold want;
        std::string job;
        int attempt = 0, rank = 0;
        REQUIRE(parse_hold_id(id, &job, &attempt, &rank));
        want.job_id = job;
        want.gpus.resize(static_cast<size_t>(g));
        want.cpus = 2 * g;
        want.memory_mb = 1000 * g;
        // Never refused: the view never granted room the node lacks.
        REQUIRE(reserve(node, id, want, now, 1000000).ok);
        REQUIRE(commit(node, id, now).ok);
        held.push_back(id);
      } else if (what == 2 && !held.empty()) {  // a job ends; its grant was answered
        size_t k = rng() % held.size();
        std::string job;
        int attempt = 0, rank = 0;
        REQUIRE(parse_hold_id(held[k], &job, &attempt, &rank));
        release(node, held[k]);
        o.forget(job);
        held.erase(held.begin() + static_cast<long>(k));
      } else {  // a report at a random moment
        int unheard_gpus = 0;
        for (const auto& [id, g] : unheard) unheard_gpus += g;
        CHECK(view_free() == node.gpus_free() - unheard_gpus);
      }
      ++now;
    }
  }
}

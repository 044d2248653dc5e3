// The pool arbiter's books (actors/policy/books.hpp): usage per (team, pool)
// kept as grants, placements and ends happen, equal to a full recount.
#include <catch2/catch.hpp>
#include <random>
#include <vector>

#include "actors/policy/books.hpp"

using namespace troupe::policy;

namespace {
PlacementRequest req(const std::string& pool, int gpus, int workers = 1) {
  PlacementRequest r;
  r.pool = pool;
  r.gpus = gpus;
  r.cpus = 2 * gpus;
  r.memory_mb = 1000 * gpus;
  r.workers = workers;
  return r;
}
}  // namespace

TEST_CASE("books: a grant counts while in flight and running, not after", "[policy][books]") {
  Books b;
  REQUIRE(b.grant("j-1", "nlp", req("a100", 4, 2), true));
  CHECK_FALSE(b.grant("j-1", "nlp", req("a100", 1), false));  // known: nothing changes
  auto a = b.account("nlp", "a100");
  CHECK(a.used.gpus == 8);
  CHECK(a.used.cpus == 16);
  CHECK(a.used.memory_mb == 8000);
  CHECK(a.borrowed_gpus == 0);  // borrowed counts once it runs
  CHECK(b.in_flight("j-1"));
  CHECK_FALSE(b.ended("j-1"));  // not running: an end of a grant is not an end
  REQUIRE(b.placed("j-1"));
  CHECK_FALSE(b.placed("j-1"));
  CHECK_FALSE(b.unplaced("j-1"));  // running: an unplaced answer is stale
  CHECK(b.account("nlp", "a100").used.gpus == 8);
  CHECK(b.account("nlp", "a100").borrowed_gpus == 8);
  CHECK(b.account("nlp", "h100").used.gpus == 0);
  CHECK(b.account("cv", "a100").used.gpus == 0);
  REQUIRE(b.ended("j-1"));
  CHECK(b.account("nlp", "a100").used.gpus == 0);
  CHECK(b.size() == 0);
}

TEST_CASE("books: an unplaced grant gives its usage back", "[policy][books]") {
  Books b;
  b.grant("j-1", "nlp", req("a100", 1), false);
  b.grant("j-2", "nlp", req("a100", 2), false);
  REQUIRE(b.unplaced("j-1"));
  CHECK_FALSE(b.unplaced("j-1"));
  CHECK(b.account("nlp", "a100").used.gpus == 2);
  CHECK(b.find("j-1") == nullptr);
}

TEST_CASE("books: a randomized run equals a full recount after every event", "[policy][books]") {
  std::mt19937 rng(20261202);
  const std::vector<std::string> teams{"nlp", "cv", "rl"};
  const std::vector<std::string> pools{"a100", "h100"};
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  Books b;
  int granted = 0, placed = 0, ended = 0;
  for (int step = 0; step < 20000; ++step) {
    std::string job = "j-" + std::to_string(pick(300));
    switch (pick(4)) {
      case 0:
        granted += b.grant(job, teams[pick(3)], req(pools[pick(2)], 1 + pick(8), 1 + pick(3)),
                           pick(2) == 0);
        break;
      case 1:
        placed += b.placed(job);
        break;
      case 2:
        b.unplaced(job);
        break;
      default:
        ended += b.ended(job);
        break;
    }
    for (const auto& t : teams) {
      for (const auto& p : pools) {
        auto kept = b.account(t, p);
        auto counted = b.recount(t, p);
        REQUIRE(kept.used.gpus == counted.used.gpus);
        REQUIRE(kept.used.cpus == counted.used.cpus);
        REQUIRE(kept.used.memory_mb == counted.used.memory_mb);
        REQUIRE(kept.borrowed_gpus == counted.borrowed_gpus);
      }
    }
  }
  // The run exercised every path many times.
  CHECK(granted > 1000);
  CHECK(placed > 500);
  CHECK(ended > 200);
}

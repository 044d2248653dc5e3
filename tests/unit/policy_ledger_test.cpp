// Unit tests for actors/policy/ledger: the node's GPU ledger and its leases.
#include <catch2/catch.hpp>

#include "actors/policy/ledger.hpp"

using namespace troupe::policy;

namespace {
Hold want(int gpus) {
  Hold h;
  h.job_id = "j";
  h.gpus.assign(static_cast<size_t>(gpus), 0);
  return h;
}
Ledger ledger(int gpus) {
  Ledger l;
  l.resize(gpus, 16, 64000);
  return l;
}
}  // namespace

TEST_CASE("reserve hands out distinct GPU indices", "[policy][ledger]") {
  auto l = ledger(4);
  auto a = reserve(l, "a", want(2), 0, 1000);
  auto b = reserve(l, "b", want(2), 0, 1000);
  REQUIRE(a.ok);
  REQUIRE(b.ok);
  CHECK(a.gpus == std::vector<int>{0, 1});
  CHECK(b.gpus == std::vector<int>{2, 3});
  CHECK(l.gpus_free() == 0);
  CHECK(check_invariants(l).empty());
  auto c = reserve(l, "c", want(1), 0, 1000);
  CHECK_FALSE(c.ok);
  CHECK(c.reason.find("not enough free GPUs") != std::string::npos);
}

TEST_CASE("a lease ends: commit fails and the GPUs are free", "[policy][ledger][lease]") {
  auto l = ledger(2);
  REQUIRE(reserve(l, "a", want(2), 0, 100).ok);
  CHECK(l.gpus_reserved() == 2);
  auto late = commit(l, "a", 101);
  CHECK_FALSE(late.ok);
  CHECK(late.reason == "the lease expired");
  CHECK(l.gpus_free() == 2);
  CHECK(check_invariants(l).empty());
}

TEST_CASE("expire frees only uncommitted reservations past their lease", "[policy][ledger][lease]") {
  auto l = ledger(4);
  REQUIRE(reserve(l, "a", want(1), 0, 100).ok);
  REQUIRE(reserve(l, "b", want(1), 0, 100).ok);
  REQUIRE(commit(l, "b", 50).ok);
  REQUIRE(reserve(l, "c", want(1), 0, 1000).ok);
  auto gone = expire(l, 200);
  CHECK(gone == std::vector<std::string>{"a"});
  CHECK(l.gpus_allocated() == 1);
  CHECK(l.gpus_reserved() == 1);
  CHECK(l.gpus_free() == 2);
  CHECK(check_invariants(l).empty());
}

TEST_CASE("release is idempotent and frees GPUs", "[policy][ledger]") {
  auto l = ledger(2);
  REQUIRE(reserve(l, "a", want(2), 0, 100).ok);
  REQUIRE(commit(l, "a", 10).ok);
  CHECK(release(l, "a"));
  CHECK_FALSE(release(l, "a"));
  CHECK(l.gpus_free() == 2);
}

TEST_CASE("re-reserving the same id replaces, a committed id is refused", "[policy][ledger]") {
  auto l = ledger(4);
  REQUIRE(reserve(l, "a", want(2), 0, 100).ok);
  REQUIRE(reserve(l, "a", want(3), 0, 100).ok);
  CHECK(l.gpus_reserved() == 3);
  REQUIRE(commit(l, "a", 10).ok);
  CHECK_FALSE(reserve(l, "a", want(1), 20, 100).ok);
  CHECK(check_invariants(l).empty());
}

TEST_CASE("CPU and memory are checked", "[policy][ledger]") {
  auto l = ledger(8);
  Hold h = want(1);
  h.cpus = 10;
  REQUIRE(reserve(l, "a", h, 0, 100).ok);
  CHECK_FALSE(reserve(l, "b", h, 0, 100).ok);
  Hold m = want(1);
  m.memory_mb = 70000;
  CHECK_FALSE(reserve(l, "c", m, 0, 100).ok);
}

TEST_CASE("check_invariants catches a GPU held twice", "[policy][ledger]") {
  auto l = ledger(2);
  REQUIRE(reserve(l, "a", want(1), 0, 100).ok);
  Hold bad = want(1);
  bad.gpus = {0};
  l.holds["b"] = bad;
  CHECK_FALSE(check_invariants(l).empty());
}

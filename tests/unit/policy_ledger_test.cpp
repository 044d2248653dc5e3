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

TEST_CASE("expire frees only uncommitted reservations past their lease",
          "[policy][ledger][lease]") {
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

TEST_CASE("hold ids split back into job, attempt and rank", "[policy][ledger]") {
  std::string job;
  int attempt = 0, rank = 0;
  REQUIRE(parse_hold_id(hold_id("j-1/x", 3, 7), &job, &attempt, &rank));
  CHECK(job == "j-1/x");
  CHECK(attempt == 3);
  CHECK(rank == 7);
  for (const char* bad : {"", "j", "j/1", "/1/2", "j//2", "j/1/", "j/a/2", "j/1/2x", "j/-1/2"})
    CHECK_FALSE(parse_hold_id(bad, &job, &attempt, &rank));
}

TEST_CASE("a hold is checked when committed and unlaunched, or exited, for kHoldCheckMs",
          "[policy][ledger]") {
  Hold h = want(1);
  h.changed_ms = 1000;
  CHECK_FALSE(hold_needs_check(h, 1000 + kHoldCheckMs));  // a lease: it expires by itself
  h.committed = true;
  CHECK_FALSE(hold_needs_check(h, 1000 + kHoldCheckMs - 1));
  CHECK(hold_needs_check(h, 1000 + kHoldCheckMs));
  h.checked_ms = 1000 + kHoldCheckMs;  // asked: again only after another kHoldCheckMs
  CHECK_FALSE(hold_needs_check(h, 1000 + kHoldCheckMs + 5));
  CHECK(hold_needs_check(h, 1000 + 2 * kHoldCheckMs));
  h.launched = true;  // running: its agent reports on it
  CHECK_FALSE(hold_needs_check(h, 1000 + 3 * kHoldCheckMs));
  h.exited = true;  // ended but never released
  CHECK(hold_needs_check(h, 1000 + 3 * kHoldCheckMs));
}

TEST_CASE("a job judges a hold it is asked about from its own record", "[policy][ledger]") {
  JobSide job;
  job.state = "running";
  job.attempt = 2;
  job.node_of_rank = "n1";
  HoldSide hold{"n1", 2, true};
  CHECK(judge_hold(job, hold) == HoldAnswer::keep);  // exited, waiting for the other ranks
  hold.launched = false;
  CHECK(judge_hold(job, hold) == HoldAnswer::relaunch);  // its Launch was lost
  job.rank_started = true;
  CHECK(judge_hold(job, hold) == HoldAnswer::keep);  // it runs: the node learns from Started
  job.rank_started = false;
  CHECK(judge_hold(job, HoldSide{"n2", 2, false}) == HoldAnswer::release);  // another node
  CHECK(judge_hold(job, HoldSide{"n1", 1, true}) == HoldAnswer::release);   // an older attempt
  for (const char* state : {"queued", "succeeded", "failed", "canceled", "preempted"}) {
    job.state = state;  // a placement that never reached the job, or an attempt over
    CHECK(judge_hold(job, HoldSide{"n1", 2, false}) == HoldAnswer::release);
  }
  job.state = "starting";
  CHECK(judge_hold(job, HoldSide{"n1", 2, false}) == HoldAnswer::relaunch);
}

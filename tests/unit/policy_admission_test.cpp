// Unit tests for actors/policy/admission: codes, the token bucket, the team
// limits, feasibility against registered node shapes, idempotency conflicts.
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "actors/policy/admission.hpp"

using namespace troupe::policy;

TEST_CASE("admission: every refusal has a distinct stable code", "[policy][admission]") {
  std::set<std::string> names;
  for (auto r : kAllRefusals) {
    std::string n = code_name(r);
    CHECK_FALSE(n.empty());
    CHECK(names.insert(n).second);
  }
  CHECK(std::string(code_name(Refusal::rate_limited)) == "rate_limited");
  CHECK(std::string(code_name(Refusal::too_many_queued)) == "too_many_queued");
  CHECK(std::string(code_name(Refusal::idempotency_conflict)) == "idempotency_conflict");
  CHECK(std::string(code_name(Refusal::none)).empty());
}

TEST_CASE("admission: a token bucket allows its burst, then its rate", "[policy][admission]") {
  TokenBucket b;
  const double rate = 10, burst = 5;
  int64_t t = 1'000'000;
  for (int i = 0; i < 5; ++i) CHECK(take_token(b, rate, burst, t));  // a new bucket is full
  CHECK_FALSE(take_token(b, rate, burst, t));
  CHECK_FALSE(take_token(b, rate, burst, t + 99));  // 0.99 token
  CHECK(take_token(b, rate, burst, t + 100));       // one token per 100 ms
  CHECK_FALSE(take_token(b, rate, burst, t + 100));
  // A long pause refills to the burst, not beyond.
  t += 60'000;
  for (int i = 0; i < 5; ++i) CHECK(take_token(b, rate, burst, t));
  CHECK_FALSE(take_token(b, rate, burst, t));
}

TEST_CASE("admission: tokens another shard spent are debited, a debt of burst + rate at most",
          "[policy][admission]") {
  TokenBucket b;
  const double rate = 10, burst = 5;
  int64_t t = 1'000'000;
  debit_tokens(b, 3, rate, burst, t);  // a new bucket: full (5), less 3
  CHECK(take_token(b, rate, burst, t));
  CHECK(take_token(b, rate, burst, t));
  CHECK_FALSE(take_token(b, rate, burst, t));
  // A debt: the refill pays it first (100 ms per token).
  debit_tokens(b, 100, rate, burst, t);  // no deeper than -(5 + 10)
  CHECK_FALSE(take_token(b, rate, burst, t + 1500));
  CHECK_FALSE(take_token(b, rate, burst, t + 1599));
  CHECK(take_token(b, rate, burst, t + 1600));
  // Two shards each admitting what their bucket allows, each debiting what
  // the other reports every 250 ms: together they keep to one rate.
  TokenBucket a, c;
  int ok = 0;
  double spent_a = 0, spent_c = 0;
  for (int64_t now = 0; now < 10'000; now += 10) {
    for (int i = 0; i < 5; ++i) {
      if (take_token(a, rate, burst, now)) ++ok, ++spent_a;
      if (take_token(c, rate, burst, now)) ++ok, ++spent_c;
    }
    if (now % 250 == 0) {
      debit_tokens(a, spent_c, rate, burst, now);
      debit_tokens(c, spent_a, rate, burst, now);
      spent_a = spent_c = 0;
    }
  }
  // One rate for 10 s (100), each shard's first burst, one report's lag.
  CHECK(ok >= 100);
  CHECK(ok <= 100 + 2 * 5 + 3);
  debit_tokens(b, 0, rate, burst, t);  // nothing
  debit_tokens(b, 1, 0, burst, t);     // no limit: untouched
}

TEST_CASE("admission: refused attempts take no token", "[policy][admission]") {
  TokenBucket b;
  int64_t t = 0;
  CHECK(take_token(b, 1, 1, t));
  for (int i = 0; i < 1000; ++i) CHECK_FALSE(take_token(b, 1, 1, t + 500));
  CHECK(take_token(b, 1, 1, t + 1000));
}

TEST_CASE("admission: a clock that goes back does not refill", "[policy][admission]") {
  TokenBucket b;
  CHECK(take_token(b, 1, 1, 10'000));
  CHECK_FALSE(take_token(b, 1, 1, 5'000));
  CHECK_FALSE(take_token(b, 1, 1, 10'500));
  CHECK(take_token(b, 1, 1, 11'000));
}

TEST_CASE("admission: 50,000 attempts in 4 s at 200/s with burst 200", "[policy][admission]") {
  TokenBucket b;
  int ok = 0;
  for (int i = 0; i < 50'000; ++i) ok += take_token(b, 200, 200, i * 4'000 / 50'000) ? 1 : 0;
  // The burst, plus 200/s for (almost) 4 s.
  CHECK(ok >= 200 + 790);
  CHECK(ok <= 200 + 800);
}

TEST_CASE("admission: rate 0 limits nothing, full buckets can be forgotten",
          "[policy][admission]") {
  TokenBucket b;
  for (int i = 0; i < 100'000; ++i) REQUIRE(take_token(b, 0, 0, 0));
  CHECK(bucket_full(b, 0, 0, 0));
  TokenBucket c;
  CHECK(bucket_full(c, 5, 5, 0));
  REQUIRE(take_token(c, 5, 5, 0));
  CHECK_FALSE(bucket_full(c, 5, 5, 100));
  CHECK(bucket_full(c, 5, 5, 200));
}

TEST_CASE("admission: check_rate names the limit", "[policy][admission]") {
  TeamLimits l;
  l.submit_rate = 200;
  l.submit_burst = 200;
  TokenBucket b;
  for (int i = 0; i < 200; ++i) REQUIRE(check_rate(b, l, "vision", 0).ok());
  auto v = check_rate(b, l, "vision", 0);
  CHECK(v.code == Refusal::rate_limited);
  CHECK_THAT(v.error, Catch::Contains("submit_rate 200/s"));
  CHECK_THAT(v.error, Catch::Contains("submit_burst 200"));
  CHECK_THAT(v.error, Catch::Contains("vision"));
  TeamLimits slow;
  slow.submit_rate = 0.5;
  slow.submit_burst = 1;
  TokenBucket s;
  REQUIRE(check_rate(s, slow, "t", 0).ok());
  CHECK_THAT(check_rate(s, slow, "t", 0).error, Catch::Contains("submit_rate 0.5/s"));
}

TEST_CASE("admission: check_request_rate names the limit and the request", "[policy][admission]") {
  TeamLimits l;
  l.request_rate = 5;
  l.request_burst = 10;
  TokenBucket b;
  for (int i = 0; i < 10; ++i) REQUIRE(check_request_rate(b, l, "vision", "status", 0).ok());
  auto v = check_request_rate(b, l, "vision", "jobs", 0);
  CHECK(v.code == Refusal::rate_limited);
  CHECK_THAT(v.error, Catch::Contains("request_rate 5/s") && Catch::Contains("request_burst 10") &&
                          Catch::Contains("vision") && Catch::Contains("(jobs)"));
  // 200 ms later one more (5 a second).
  CHECK(check_request_rate(b, l, "vision", "status", 200).ok());
  CHECK_FALSE(check_request_rate(b, l, "vision", "status", 200).ok());
  TeamLimits none;
  none.request_rate = 0;
  TokenBucket n;
  for (int i = 0; i < 10'000; ++i) REQUIRE(check_request_rate(n, none, "t", "status", 0).ok());
}

TEST_CASE("admission: full buckets are forgotten, used ones kept", "[policy][admission]") {
  std::map<std::string, TokenBucket> buckets;
  REQUIRE(take_token(buckets["a"], 5, 5, 0));
  REQUIRE(take_token(buckets["b"], 1, 1, 0));
  buckets["c"];  // never used: full
  forget_full_buckets(buckets, 200, [](const std::string& k) {
    return k == "a" ? std::pair{5.0, 5.0} : std::pair{1.0, 1.0};
  });
  // a refilled its one token in 200 ms at 5/s; b needs a second.
  CHECK(buckets.count("a") == 0);
  CHECK(buckets.count("b") == 1);
  CHECK(buckets.count("c") == 0);
}

TEST_CASE("admission: queued jobs and GPUs per job", "[policy][admission]") {
  TeamLimits none;
  CHECK(check_queued(none, "t", 1'000'000).ok());
  CHECK(check_job_gpus(none, "t", 1024, 64).ok());
  TeamLimits l;
  l.max_queued_jobs = 1000;
  l.max_gpus_per_job = 64;
  CHECK(check_queued(l, "t", 999).ok());
  auto q = check_queued(l, "t", 1000);
  CHECK(q.code == Refusal::too_many_queued);
  CHECK_THAT(q.error, Catch::Contains("1000 jobs queued (limit max_queued_jobs 1000)"));
  CHECK(check_job_gpus(l, "t", 8, 8).ok());
  auto g = check_job_gpus(l, "t", 1024, 64);
  CHECK(g.code == Refusal::too_large);
  CHECK_THAT(g.error, Catch::Contains("65536 GPUs (1024 workers x 64)"));
  CHECK_THAT(g.error, Catch::Contains("max_gpus_per_job 64"));
  TeamLimits frozen;
  frozen.max_queued_jobs = 0;
  CHECK(check_queued(frozen, "t", 0).code == Refusal::too_many_queued);
  // An array counts its tasks: 990 queued + 10 fit in 1000, + 11 does not.
  CHECK(check_queued(l, "t", 990, 10).ok());
  auto a = check_queued(l, "t", 990, 11);
  CHECK(a.code == Refusal::too_many_queued);
  CHECK_THAT(a.error, Catch::Contains("the array's 11 tasks would take team t from 990 to 1001"));
}

TEST_CASE("admission: feasibility against the registered node shapes", "[policy][admission]") {
  std::vector<NodeShape> nodes = {
      {"n1", "a100", "a100", 8, 64, 512'000},
      {"n2", "a100", "a100", 4, 128, 1'024'000},
      {"h1", "h100", "h100", 8, 32, 256'000},
      {"lost", "", "v100", 64, 1000, 9'000'000},  // in no pool: never counts
  };
  auto req = [](std::string pool, int gpus, int cpus = 0, int64_t mem = 0, std::string type = "") {
    PlacementRequest r;
    r.pool = std::move(pool);
    r.gpus = gpus;
    r.cpus = cpus;
    r.memory_mb = mem;
    r.gpu_type = std::move(type);
    return r;
  };
  CHECK(check_feasible(nodes, req("a100", 8)).ok());
  CHECK(check_feasible(nodes, req("a100", 4, 128, 1'000'000)).ok());
  auto g = check_feasible(nodes, req("a100", 16));
  CHECK(g.code == Refusal::unsatisfiable);
  CHECK_THAT(g.error,
             Catch::Contains("needs 16 GPUs per worker; the largest node of pool a100 has 8"));
  CHECK_THAT(g.error, Catch::Contains("2 nodes registered there"));
  auto c = check_feasible(nodes, req("h100", 1, 64));
  CHECK_THAT(c.error,
             Catch::Contains("needs 64 CPUs per worker; the largest node of pool h100 has 32"));
  auto m = check_feasible(nodes, req("h100", 1, 1, 300'000));
  CHECK_THAT(m.error, Catch::Contains("needs 300000 MB of memory per worker"));
  CHECK_THAT(m.error, Catch::Contains("has 256000"));
  // Each part fits some node, but no node holds all three.
  auto all = check_feasible(nodes, req("a100", 8, 128));
  CHECK(all.code == Refusal::unsatisfiable);
  CHECK_THAT(all.error, Catch::Contains("no node of pool a100 has all three"));
  // A pool with no node yet accepts: nodes may join later.
  CHECK(check_feasible(nodes, req("tpu", 64)).ok());
  CHECK(check_feasible({}, req("a100", 64)).ok());
  // A GPU type no node of the pool has yet: may join later too.
  CHECK(check_feasible(nodes, req("a100", 16, 0, 0, "b200")).ok());
  auto typed = check_feasible(nodes, req("a100", 16, 0, 0, "a100"));
  CHECK_THAT(typed.error, Catch::Contains("pool a100 (GPU type a100) has 8"));
  // CPU-only jobs: any node's CPUs count, whatever its GPU type.
  CHECK(check_feasible(nodes, req("a100", 0, 100, 0, "h100")).ok());
  // An any-type job: feasible when one candidate pool can take it; else the
  // first candidate's reason.
  auto flex = req("h100", 4, 100);
  flex.pools = {"h100", "a100"};
  CHECK(check_feasible(nodes, flex).ok());  // n2 has 128 CPUs
  flex.cpus = 500;
  auto none = check_feasible(nodes, flex);
  CHECK(none.code == Refusal::unsatisfiable);
  CHECK_THAT(none.error, Catch::Contains("pool h100"));
}

TEST_CASE("admission: idempotency conflicts", "[policy][admission]") {
  CHECK(check_idempotency("run-7", "abc", "abc").ok());
  CHECK(check_idempotency("run-7", "", "abc").ok());  // unknown: no conflict
  auto v = check_idempotency("run-7", "abc", "abd");
  CHECK(v.code == Refusal::idempotency_conflict);
  CHECK_THAT(v.error, Catch::Contains("run-7"));
}

TEST_CASE("admission: what counts as queued after a restart", "[policy][admission]") {
  CHECK(awaiting_first_start("queued", 0));
  CHECK(awaiting_first_start("", 0));
  CHECK_FALSE(awaiting_first_start("queued", 1));  // requeued after an attempt
  CHECK_FALSE(awaiting_first_start("starting", 0));
  CHECK_FALSE(awaiting_first_start("running", 0));
  CHECK_FALSE(awaiting_first_start("canceled", 0));
}

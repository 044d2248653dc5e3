// Unit tests for actors/policy/config: loading, checking, admission.
#include <catch2/catch.hpp>

#include "actors/policy/config.hpp"
#include "bus/subjects.hpp"

using namespace troupe::policy;

namespace {
const char* kConfig = R"(
pools:
  - {name: a100, gpu_type: a100}
  - {name: h100, gpu_type: h100}
teams:
  - {name: vision, weight: 1, borrow: true, quotas: {a100: {guaranteed: 8, limit: 16}}}
  - {name: nlp, weight: 2}
priority_classes:
  - {name: high, value: 100, preemptible: false}
  - {name: normal, value: 50, preemptible: true}
)";

// A key's text, after one pool, and what the refusal must say.
struct Refusal {
  const char* text;
  const char* want;
};
void check_refusals(const std::vector<Refusal>& cases) {
  for (const auto& k : cases) {
    SECTION(k.text) {
      ClusterConfig out;
      auto err = load_config(std::string("pools: [{name: a, gpu_type: a}]\n") + k.text, out);
      CHECK_THAT(err, Catch::Contains(k.want));
    }
  }
}
}  // namespace

TEST_CASE("the documented config shape loads", "[policy][config]") {
  ClusterConfig c;
  REQUIRE(load_config(kConfig, c) == "");
  CHECK_FALSE(c.open);
  REQUIRE(c.pools.size() == 2);
  REQUIRE(c.team("vision"));
  CHECK(c.team("vision")->quota("a100").guaranteed == 8);
  CHECK(c.team("vision")->quota("a100").limit == 16);
  CHECK(c.team("vision")->borrow);
  // No quota for a pool: guarantee 0 and no limit there.
  CHECK(c.team("vision")->quota("h100").guaranteed == 0);
  CHECK(c.team("vision")->quota("h100").limit == -1);
  CHECK(c.team("nlp")->weight == 2.0);
  CHECK(c.team("nlp")->borrow);  // borrowing is on unless a team says borrow: false
  CHECK(c.cls("high")->value == 100);
  CHECK_FALSE(c.cls("high")->preemptible);
}

TEST_CASE("bad configs are refused with a reason", "[policy][config]") {
  struct Case {
    const char* name;
    const char* text;
    const char* want;
  };
  std::vector<Case> cases = {
      {"not YAML", "pools: [", "config"},
      {"no pools", "teams: []", "at least one pool"},
      {"quota for unknown pool",
       "pools: [{name: a, gpu_type: a}]\nteams: [{name: t, quotas: {b: {guaranteed: 1}}}]",
       "unknown pool 'b'"},
      {"limit below guarantee",
       "pools: [{name: a, gpu_type: a}]\nteams: [{name: t, quotas: {a: {guaranteed: 4, limit: "
       "2}}}]",
       "below guaranteed"},
      {"team sys", "pools: [{name: a, gpu_type: a}]\nteams: [{name: sys}]", "not allowed"},
      {"zero weight", "pools: [{name: a, gpu_type: a}]\nteams: [{name: t, weight: 0}]",
       "weight > 0"},
      {"duplicate pool", "pools: [{name: a, gpu_type: a}, {name: a, gpu_type: b}]", "twice"},
      {"unknown key", "pools: [{name: a, gpu_type: a}]\nbogus: 1", "config"},
      {"preference for unknown pool",
       "pools: [{name: a, gpu_type: a}]\nteams: [{name: t, pool_preference: [b]}]",
       "pool_preference names unknown pool 'b'"},
      {"unknown order", "pools: [{name: a, gpu_type: a}]\nteams: [{name: t, order: srtf}]",
       "order must be fifo, las or sjf"},
      {"las thresholds not increasing",
       "pools: [{name: a, gpu_type: a}]\nlas: {thresholds_gpu_s: [100, 50]}", "increasing"},
      {"las negative promote", "pools: [{name: a, gpu_type: a}]\nlas: {promote_after_s: -1}",
       "promote_after_s"},
      {"preference twice",
       "pools: [{name: a, gpu_type: a}]\nteams: [{name: t, pool_preference: [a, a]}]", "twice"},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      ClusterConfig out;
      auto err = load_config(c.text, out);
      CHECK(err.find(c.want) != std::string::npos);
    }
  }
}

TEST_CASE("admission resolves pool and class, refuses the unknown", "[policy][config]") {
  ClusterConfig c;
  REQUIRE(load_config(kConfig, c) == "");
  auto ok = admit(c, "vision", "", "h100", 1, "high");
  CHECK(ok.error == "");
  CHECK(ok.pool == "h100");
  CHECK(ok.priority_value == 100);
  CHECK(admit(c, "ghost", "", "a100", 1, "normal").error.find("unknown team") != std::string::npos);
  CHECK(admit(c, "vision", "tpu", "", 1, "normal").error.find("unknown pool") != std::string::npos);
  CHECK(admit(c, "vision", "", "a100", 1, "urgent").error.find("unknown priority class") !=
        std::string::npos);
  CHECK(admit(c, "vision", "", "v100", 1, "normal").error.find("no pool has GPU type") !=
        std::string::npos);
  CHECK(admit(c, "vision", "a100", "h100", 1, "normal").error.find("has GPU type") !=
        std::string::npos);
  // No type with several pools: any pool the team may use, in the config's order.
  auto any = admit(c, "vision", "", "", 1, "normal");
  CHECK(any.error == "");
  CHECK(any.pool == "a100");
  CHECK(any.pools == std::vector<std::string>{"a100", "h100"});
}

TEST_CASE("any-type jobs: candidate pools by preference, type list and what the team may use",
          "[policy][config]") {
  ClusterConfig c;
  REQUIRE(load_config(R"(
pools:
  - {name: a100, gpu_type: a100}
  - {name: h100, gpu_type: h100}
  - {name: h100b, gpu_type: h100}
  - {name: t4, gpu_type: t4}
teams:
  - {name: vision, pool_preference: [h100b, t4]}
  - {name: lender, borrow: false, quotas: {a100: {guaranteed: 8}, h100: {guaranteed: 4}}}
  - {name: capped, quotas: {t4: {guaranteed: 0, limit: 0}}}
)",
                      c) == "");
  using V = std::vector<std::string>;
  // Its preference first, then the config's order.
  CHECK(admit(c, "vision", "", "", 1, "").pools == V{"h100b", "t4", "a100", "h100"});
  CHECK(admit(c, "vision", "", "", 1, "").pool == "h100b");
  // A type list: type by type, each type's pools by preference.
  auto typed = admit(c, "vision", "", "", 1, "", {"h100", "a100"});
  CHECK(typed.error == "");
  CHECK(typed.pools == V{"h100b", "h100", "a100"});
  // gpu_type comes first, then the list (without repeats).
  CHECK(admit(c, "vision", "", "a100", 1, "", {"h100", "a100"}).pools ==
        V{"a100", "h100b", "h100"});
  // One candidate: a plain job in that pool.
  auto one = admit(c, "vision", "", "t4", 1, "");
  CHECK(one.pool == "t4");
  CHECK(one.pools.empty());
  // Only pools the team may use: a guarantee there, or borrowing; limit 0 never.
  CHECK(admit(c, "lender", "", "", 1, "").pools == V{"a100", "h100"});
  CHECK(admit(c, "capped", "", "", 1, "").pools == V{"a100", "h100", "h100b"});
  // An unknown type in the list is refused by name.
  CHECK_THAT(admit(c, "vision", "", "", 1, "", {"h100", "v100"}).error,
             Catch::Contains("no pool has GPU type 'v100'"));
  // A named pool wins over everything.
  auto named = admit(c, "vision", "a100", "", 1, "", {"h100"});
  CHECK(named.pool == "a100");
  CHECK(named.pools.empty());
  // A CPU-only job goes to the first pool, as before.
  CHECK(admit(c, "vision", "", "", 0, "").pools.empty());
}

TEST_CASE("a team that may use no pool is told so", "[policy][config]") {
  ClusterConfig c;
  REQUIRE(load_config("pools: [{name: a, gpu_type: a}, {name: b, gpu_type: b}]\n"
                      "teams: [{name: t, borrow: false}]",
                      c) == "");
  CHECK_THAT(admit(c, "t", "", "", 1, "").error, Catch::Contains("may use no pool"));
  // Naming a type keeps the old behaviour: it waits there, and `why` says why.
  CHECK(admit(c, "t", "", "b", 1, "").pool == "b");
}

TEST_CASE("an open config accepts any team in one pool", "[policy][config]") {
  auto c = open_config();
  auto a = admit(c, "anyone", "", "a100", 1, "low");
  CHECK(a.error == "");
  CHECK(a.pool == kDefaultPool);
  CHECK(a.priority_value == 10);
  CHECK(c.pool_of_node("", "h100") == kDefaultPool);
}

TEST_CASE("a node joins the pool of its GPU type, or the one it names", "[policy][config]") {
  ClusterConfig c;
  REQUIRE(load_config(kConfig, c) == "");
  CHECK(c.pool_of_node("", "a100") == "a100");
  CHECK(c.pool_of_node("h100", "a100") == "h100");
  CHECK(c.pool_of_node("", "v100") == "");
  CHECK(c.pool_of_node("nope", "a100") == "");
}

TEST_CASE("admission limits: none configured limits nothing", "[policy][config][limits]") {
  // The documented defaults: no queue limit, no rate, no GPU cap per job.
  for (const auto& c : {open_config(), [] {
                          ClusterConfig c;
                          REQUIRE(load_config(kConfig, c) == "");
                          return c;
                        }()}) {
    for (const char* team : {"vision", "nlp", "ghost"}) {
      auto l = c.limits_of(team);
      CHECK(l.max_queued_jobs == -1);
      CHECK(l.submit_rate == 0);
      CHECK(l.submit_burst == 0);
      CHECK(l.max_gpus_per_job == -1);
      // A team's other requests: kept to the default rate, two seconds' burst.
      CHECK(l.request_rate == kDefaultRequestRate);
      CHECK(l.request_burst == 2 * kDefaultRequestRate);
    }
  }
}

TEST_CASE("admission limits: per team, with default_limits per key", "[policy][config][limits]") {
  const char* text = R"(
pools:
  - {name: a100, gpu_type: a100}
default_limits: {max_queued_jobs: 5000, submit_rate: 100, max_gpus_per_job: 256}
teams:
  - name: vision
    limits: {max_queued_jobs: 1000, submit_rate: 200, submit_burst: 400, max_gpus_per_job: 64}
  - name: nlp
    limits: {submit_rate: 10}
  - name: free
    limits: {submit_rate: 0, max_queued_jobs: -1}
  - {name: plain}
)";
  ClusterConfig c;
  REQUIRE(load_config(text, c) == "");
  auto v = c.limits_of("vision");
  CHECK(v.max_queued_jobs == 1000);
  CHECK(v.submit_rate == 200);
  CHECK(v.submit_burst == 400);
  CHECK(v.max_gpus_per_job == 64);
  // nlp: its own rate; the rest from default_limits; burst one second's worth.
  auto n = c.limits_of("nlp");
  CHECK(n.submit_rate == 10);
  CHECK(n.submit_burst == 10);
  CHECK(n.max_queued_jobs == 5000);
  CHECK(n.max_gpus_per_job == 256);
  // free: explicitly unlimited where it says so.
  auto f = c.limits_of("free");
  CHECK(f.submit_rate == 0);
  CHECK(f.max_queued_jobs == -1);
  CHECK(f.max_gpus_per_job == 256);
  // plain (no limits:) and a team absent from the config: default_limits.
  for (const char* t : {"plain", "ghost"}) {
    auto p = c.limits_of(t);
    CHECK(p.max_queued_jobs == 5000);
    CHECK(p.submit_rate == 100);
    CHECK(p.submit_burst == 100);
    CHECK(p.max_gpus_per_job == 256);
  }
}

TEST_CASE("admission limits: a slow rate still gets a burst of one", "[policy][config][limits]") {
  ClusterConfig c;
  REQUIRE(
      load_config("pools: [{name: a, gpu_type: a}]\nteams: [{name: t, limits: {submit_rate: 0.5}}]",
                  c) == "");
  CHECK(c.limits_of("t").submit_burst == 1);
}

TEST_CASE("admission limits: request_rate per team, with default_limits, 0 for none",
          "[policy][config][limits]") {
  ClusterConfig c;
  REQUIRE(load_config(R"(
pools: [{name: a, gpu_type: a}]
default_limits: {request_rate: 20}
teams:
  - {name: svc, limits: {request_rate: 500, request_burst: 600}}
  - {name: open, limits: {request_rate: 0}}
  - {name: slow, limits: {request_rate: 0.2}}
  - {name: plain}
)",
                      c) == "");
  CHECK(c.limits_of("svc").request_rate == 500);
  CHECK(c.limits_of("svc").request_burst == 600);
  CHECK(c.limits_of("open").request_rate == 0);
  CHECK(c.limits_of("slow").request_burst == 1);  // at least one
  for (const char* t : {"plain", "ghost"}) {
    CHECK(c.limits_of(t).request_rate == 20);
    CHECK(c.limits_of(t).request_burst == 40);
  }
  check_refusals({
      {"teams: [{name: t, limits: {request_rate: -1}}]", "request_rate must be >= 0"},
      {"default_limits: {request_burst: 0}", "request_burst must be >= 1"},
  });
}

TEST_CASE("admission limits: bad values are refused with a reason", "[policy][config][limits]") {
  check_refusals({
      {"teams: [{name: t, limits: {submit_rate: -1}}]", "team 't' limits: submit_rate"},
      {"teams: [{name: t, limits: {submit_burst: 0.5}}]", "submit_burst must be >= 1"},
      {"teams: [{name: t, limits: {max_queued_jobs: -2}}]", "max_queued_jobs must be >= 0"},
      {"teams: [{name: t, limits: {max_gpus_per_job: -5}}]", "max_gpus_per_job must be >= 0"},
      {"default_limits: {submit_rate: -3}", "default_limits: submit_rate"},
      {"teams: [{name: t, limits: {max_jobs: 3}}]", "config"},  // unknown key
  });
}

TEST_CASE("log retention: the scheduler's flags when nothing is configured",
          "[policy][config][logs]") {
  const LogLimits flags{3600, 0};
  for (const auto& c : {open_config(), [] {
                          ClusterConfig c;
                          REQUIRE(load_config(kConfig, c) == "");
                          return c;
                        }()}) {
    for (const char* team : {"vision", "nlp", "ghost"}) {
      auto l = c.logs_of(team, flags);
      CHECK(l.max_age_s == 3600);
      CHECK(l.max_bytes == 0);
    }
  }
}

TEST_CASE("log retention: per team, then default_logs, then the flags, per key",
          "[policy][config][logs]") {
  const char* text = R"(
pools:
  - {name: a100, gpu_type: a100}
default_logs: {max_age_s: 86400}
teams:
  - {name: vision, logs: {max_age_s: 600, max_bytes: 1048576}}
  - {name: nlp, logs: {max_bytes: 2097152}}
  - {name: forever, logs: {max_age_s: 0, max_bytes: 0}}
  - {name: plain}
)";
  ClusterConfig c;
  REQUIRE(load_config(text, c) == "");
  const LogLimits flags{7 * 24 * 3600, 64LL << 20};
  auto v = c.logs_of("vision", flags);
  CHECK(v.max_age_s == 600);
  CHECK(v.max_bytes == 1048576);
  // nlp: its own bound; the age from default_logs.
  auto n = c.logs_of("nlp", flags);
  CHECK(n.max_bytes == 2097152);
  CHECK(n.max_age_s == 86400);
  // Zeros are values of their own (forever; the automatic bound), not absent keys.
  auto f = c.logs_of("forever", flags);
  CHECK(f.max_age_s == 0);
  CHECK(f.max_bytes == 0);
  // plain (no logs:) and a team absent from the config: default_logs, then the flags.
  for (const char* t : {"plain", "ghost"}) {
    auto p = c.logs_of(t, flags);
    CHECK(p.max_age_s == 86400);
    CHECK(p.max_bytes == 64LL << 20);
  }
}

TEST_CASE("log retention: negative values are refused with a reason", "[policy][config][logs]") {
  check_refusals({
      {"teams: [{name: t, logs: {max_age_s: -1}}]", "team 't' logs: max_age_s must be >= 0"},
      {"teams: [{name: t, logs: {max_bytes: -5}}]", "team 't' logs: max_bytes must be >= 0"},
      {"default_logs: {max_bytes: -1}", "default_logs: max_bytes must be >= 0"},
      {"default_logs: {max_age_s: -60}", "default_logs: max_age_s must be >= 0"},
      {"teams: [{name: t, logs: {max_size: 3}}]", "config"},  // unknown key
  });
}

TEST_CASE("log retention: a team's stream, its subjects, and the team of a chunk's subject",
          "[policy][config][logs]") {
  namespace sj = troupe::subjects;
  CHECK(sj::logs_stream("nlp") == "TROUPE_LOGS_nlp");
  CHECK(sj::team_log_chunks("nlp") == "troupe.sys.logs.*.nlp.>");
  CHECK(sj::team_of_log_chunks(sj::log_chunks("n-1", "nlp", "j-1", 2, 0)) == "nlp");
  CHECK(sj::team_of_log_chunks("troupe.sys.logs.n1") == "");
  CHECK(sj::team_of_log_chunks("troupe.nlp.logs") == "");
}

TEST_CASE("isolation keys: run_as, job_defaults and max_grace_s", "[policy][config][isolation]") {
  ClusterConfig none;
  REQUIRE(load_config("pools: [{name: a, gpu_type: a}]\nteams: [{name: t}]", none) == "");
  CHECK_FALSE(none.team("t")->run_as.has_value());  // its jobs run as troupe-t
  CHECK(none.job_defaults.memory_mb == 0);          // the agent's default
  CHECK(none.preemption.max_grace_s == 600);
  CHECK(open_config().preemption.max_grace_s == 600);

  ClusterConfig c;
  REQUIRE(load_config("pools: [{name: a, gpu_type: a}]\n"
                      "teams: [{name: t, run_as: 5001}, {name: u}]\n"
                      "job_defaults: {memory_mb: 8192}\n"
                      "preemption: {max_grace_s: 120}",
                      c) == "");
  REQUIRE(c.team("t")->run_as.has_value());
  CHECK(*c.team("t")->run_as == 5001);
  CHECK_FALSE(c.team("u")->run_as.has_value());
  CHECK(c.job_defaults.memory_mb == 8192);
  CHECK(c.preemption.max_grace_s == 120);

  ClusterConfig uncapped;
  REQUIRE(load_config("pools: [{name: a, gpu_type: a}]\npreemption: {max_grace_s: 0}", uncapped) ==
          "");
  CHECK(uncapped.preemption.max_grace_s == 0);
}

TEST_CASE("isolation keys: bad values are refused with a reason", "[policy][config][isolation]") {
  check_refusals({
      {"teams: [{name: t, run_as: 0}]", "team 't': run_as must be a uid from 1"},
      {"teams: [{name: t, run_as: -1}]", "never run as root), not -1"},
      {"teams: [{name: t, run_as: 4294967295}]", "not 4294967295"},
      {"job_defaults: {memory_mb: -1}", "job_defaults: memory_mb must be >= 0"},
      {"preemption: {max_grace_s: -5}", "preemption: max_grace_s must be >= 0"},
      {"job_defaults: {cpus: 2}", "config"},  // unknown key
  });
}

TEST_CASE("events_bytes_for: the events stream's size bound follows the storage",
          "[policy][config]") {
  constexpr int64_t MiB = 1024 * 1024, GiB = 1024 * MiB;
  CHECK(events_bytes_for(1 * GiB, 1000 * GiB) == 512 * MiB);  // the account's limit first
  CHECK(events_bytes_for(0, 2 * GiB) == 512 * MiB);           // else the free disk
  CHECK(events_bytes_for(0, 100 * GiB) == 1 * GiB);           // at most 1 GiB (reserved)
  CHECK(events_bytes_for(0, 0) == 1 * GiB);                   // neither known
  CHECK(events_bytes_for(0, 100 * MiB) == 64 * MiB);          // never below 64 MiB
  CHECK(events_bytes_for(-1, -1) == 1 * GiB);
}

TEST_CASE("order: las and its bands load, fifo is the default", "[policy][config][las]") {
  ClusterConfig c;
  REQUIRE(load_config("pools: [{name: a, gpu_type: a}]\n"
                      "teams: [{name: short, order: las}, {name: plain}]\n"
                      "las: {thresholds_gpu_s: [60, 600, 6000], promote_after_s: 120}",
                      c) == "");
  CHECK(c.team("short")->las);
  CHECK_FALSE(c.team("plain")->las);
  CHECK(c.las.thresholds_gpu_s == std::vector<double>{60, 600, 6000});
  CHECK(c.las.promote_after_s == 120);
  ClusterConfig d;
  REQUIRE(load_config("pools: [{name: a, gpu_type: a}]\nteams: [{name: t, order: fifo}]", d) == "");
  CHECK_FALSE(d.team("t")->las);
  CHECK(d.las.thresholds_gpu_s == std::vector<double>{3600, 36000});  // the defaults
  CHECK(d.las.promote_after_s == 3600);
}

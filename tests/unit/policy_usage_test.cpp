// Unit tests for actors/policy/usage (troupe usage): GPU time per attempt from
// its start to its end, preempted attempts apart, ends and waits, the window
// clipping, grouping by team, kind and day, checked against hand-counted runs.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "actors/policy/stats.hpp"
#include "actors/policy/usage.hpp"

using namespace troupe;
using namespace troupe::policy::usage;

namespace {

constexpr int64_t kT0 = 1'800'000'000'000;  // 2027-01-15T08:00:00Z
int64_t at(double s) {
  return kT0 + static_cast<int64_t>(s * 1000);
}

pb::JobEvent ev(const std::string& job, const std::string& team, const std::string& state, double s,
                int attempt = 1, int gpus = 0, const std::string& cause = {},
                const std::string& kind = "training") {
  pb::JobEvent e;
  e.set_job_id(job);
  e.set_team(team);
  e.set_state(state);
  e.set_ts_ms(at(s));
  e.set_attempt(attempt);
  e.set_kind(kind);
  e.set_cause(cause);
  if (gpus > 0) {
    auto* w = e.add_workers();
    w->set_node("n1");
    for (int g = 0; g < gpus; ++g) w->add_gpus(g);
  }
  return e;
}

// a: 2 GPUs 10..70 s, succeeded (wait 10 s). b: 1 GPU 20..50 s preempted,
// again 60..90 s, failed (wait 20 s). c (team u, inference): blocked, queued
// at 100 s, 1 GPU 105..110 s, canceled (wait 5 s).
std::vector<pb::JobEvent> run() {
  return {ev("a", "t", "queued", 0),
          ev("b", "t", "queued", 0),
          ev("c", "u", "blocked", 0, 0, 0, {}, "inference"),
          ev("a", "t", "starting", 10, 1, 2),
          ev("a", "t", "running", 11, 1, 2),
          ev("b", "t", "starting", 20, 1, 1),
          ev("b", "t", "running", 21, 1, 1),
          ev("b", "t", "preempted", 50, 1, 1, "preempted"),
          ev("b", "t", "queued", 50, 2),
          ev("b", "t", "starting", 60, 2, 1),
          ev("b", "t", "running", 61, 2, 1),
          ev("a", "t", "succeeded", 70, 1, 2, "succeeded"),
          ev("b", "t", "failed", 90, 2, 1, "exit_code"),
          ev("c", "u", "queued", 100, 1, 0, {}, "inference"),
          ev("c", "u", "starting", 105, 1, 1, {}, "inference"),
          ev("c", "u", "canceled", 110, 1, 1, "canceled", "inference")};
}

Counter count(Query q) {
  Counter c(q);
  for (const auto& e : run()) c.add(e);
  return c;
}

}  // namespace

TEST_CASE("usage: a hand-counted run, every team", "[unit][policy][usage]") {
  auto c = count({at(0), at(200), By::team});
  auto total = c.total();
  CHECK(total.gpu_s == Approx(2 * 60 + 30 + 30 + 5));
  CHECK(total.gpu_s_preempted == Approx(30));
  CHECK(total.ended.at("succeeded") == 1);
  CHECK(total.ended.at("failed") == 1);
  CHECK(total.ended.at("canceled") == 1);
  // Waits 5, 10, 20 s: p99 between the two largest (policy/stats.hpp).
  CHECK(policy::percentile(total.waits_s, 50) == Approx(10));
  CHECK(policy::percentile(total.waits_s, 99) == Approx(19.8));
  REQUIRE(c.groups().size() == 2);
  CHECK(c.groups().at("t").gpu_s == Approx(180));
  CHECK(c.groups().at("u").gpu_s == Approx(5));
  // The blocked time of c is no queue wait.
  CHECK(c.groups().at("u").waits_s == std::vector<double>{5});
  auto j = nlohmann::json::parse(c.json());
  CHECK(j["total"].value("gpu_hours", 0.0) == Approx(185.0 / 3600));
  CHECK(j["total"].value("success_rate", 0.0) == Approx(1.0 / 3));
  CHECK(j["total"].value("ended", 0) == 3);
  CHECK(j.value("events", 0) == 16);
}

TEST_CASE("usage: a window counts the GPU time inside it and what started or ended in it",
          "[unit][policy][usage]") {
  auto c = count({at(30), at(65), By::none});
  auto t = c.total();
  // a: 30..65 x 2; b: 30..50 and 60..65.
  CHECK(t.gpu_s == Approx(70 + 20 + 5));
  CHECK(t.gpu_s_preempted == Approx(20));
  CHECK(t.ended.empty());
  CHECK(t.waits_s.empty());  // a and b first started before the window
}

TEST_CASE("usage: by kind, and by day with an attempt across midnight split",
          "[unit][policy][usage]") {
  auto kinds = count({at(0), at(200), By::kind});
  CHECK(kinds.groups().at("training").gpu_s == Approx(180));
  CHECK(kinds.groups().at("inference").ended.at("canceled") == 1);
  // 2027-01-15T23:59:30Z .. 2027-01-16T00:00:30Z on 4 GPUs.
  const int64_t midnight = 1'800'057'600'000;
  Counter days({midnight - 3600'000, midnight + 3600'000, By::day});
  pb::JobEvent s = ev("x", "t", "starting", 0, 1, 4);
  s.set_ts_ms(midnight - 30'000);
  pb::JobEvent e = ev("x", "t", "succeeded", 0, 1, 4);
  e.set_ts_ms(midnight + 30'000);
  days.add(s);
  days.add(e);
  REQUIRE(days.groups().size() == 2);
  CHECK(days.groups().at("2027-01-15").gpu_s == Approx(120));
  CHECK(days.groups().at("2027-01-16").gpu_s == Approx(120));
  CHECK(days.groups().at("2027-01-16").ended.at("succeeded") == 1);
  By by = By::team;
  CHECK(parse_by("day", &by));
  CHECK(by == By::day);
  CHECK_FALSE(parse_by("pool?", &by));
}

TEST_CASE("usage: a request is read into a window and a grouping, or refused with why",
          "[unit][policy][usage]") {
  using troupe::policy::usage::By;
  using troupe::policy::usage::parse_query;
  using troupe::policy::usage::Query;
  constexpr int64_t kDay = 24LL * 3600 * 1000;
  const int64_t now = 400 * kDay;
  Query q;
  REQUIRE(parse_query(nlohmann::json::object(), now, &q).empty());
  CHECK(q.until_ms == now);
  CHECK(q.since_ms == now - 7 * kDay);
  CHECK(q.by == By::team);
  CHECK(troupe::policy::usage::scan_from_ms(q) == now - 8 * kDay);
  REQUIRE(
      parse_query({{"since_ms", kDay}, {"until_ms", 2 * kDay}, {"by", "day"}}, now, &q).empty());
  CHECK(q.since_ms == kDay);
  CHECK(q.by == By::day);
  CHECK(troupe::policy::usage::scan_from_ms(q) == 1);  // not before the epoch
  REQUIRE(parse_query({{"by", "none"}}, now, &q).empty());
  CHECK(q.by == By::none);
  CHECK_THAT(parse_query({{"since_ms", "yesterday"}}, now, &q), Catch::Contains("milliseconds"));
  CHECK_THAT(parse_query({{"until_ms", -5}}, now, &q), Catch::Contains("milliseconds"));
  CHECK_THAT(parse_query({{"since_ms", 2 * kDay}, {"until_ms", kDay}}, now, &q),
             Catch::Contains("before"));
  CHECK_THAT(parse_query({{"since_ms", 0}, {"until_ms", 367 * kDay}}, now, &q),
             Catch::Contains("366 days"));
  CHECK_THAT(parse_query({{"by", "pool"}}, now, &q), Catch::Contains("team, kind or day"));
  CHECK_FALSE(parse_query(nlohmann::json::array(), now, &q).empty());
}

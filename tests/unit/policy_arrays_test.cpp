// Unit tests for actors/policy/arrays (job arrays and sweeps): task ids, the
// sweep grid and its points, parameter env names, how many tasks may start
// under a parallelism, and the array's end from its tasks' ends.
#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "actors/policy/arrays.hpp"

using namespace troupe::policy::arrays;

TEST_CASE("arrays: task ids round-trip, and only canonical ones", "[unit][policy][arrays]") {
  CHECK(task_id("j-abc-7", 12) == "j-abc-7-12");
  auto t = split_task_id("j-abc-7-12");
  REQUIRE(t);
  CHECK(t->first == "j-abc-7");
  CHECK(t->second == 12);
  CHECK_FALSE(split_task_id("j-abc-01"));
  CHECK_FALSE(split_task_id("jabc"));
  CHECK_FALSE(split_task_id("j-abc-"));
  CHECK_FALSE(split_task_id("-3"));
  CHECK_FALSE(split_task_id("j-1x"));
  CHECK_FALSE(split_task_id("j-12345678901"));  // no overflow
  CHECK(split_task_id("j-0")->second == 0);
}

TEST_CASE("arrays: a parameter's env name", "[unit][policy][arrays]") {
  CHECK(param_env("lr") == "TROUPE_PARAM_LR");
  CHECK(param_env("batch-size.v2") == "TROUPE_PARAM_BATCH_SIZE_V2");
  CHECK(param_env("\xc3\xa9t\xc3\xa9") == "TROUPE_PARAM___T__");
}

TEST_CASE("arrays: a grid's points, the last parameter fastest", "[unit][policy][arrays]") {
  Grid g = {{"batch", {{"32", "32"}, {"64", "64"}}},
            {"lr", {{"0.1", "0.1"}, {"0.01", "0.01"}, {"x", "\"x\""}}}};
  CHECK(grid_size(g, 10000) == 6);
  CHECK(grid_size(g, 4) == 5);  // capped
  std::set<std::string> seen;
  for (int i = 0; i < 6; ++i) seen.insert(point_json(point(g, i)));
  CHECK(seen.size() == 6);
  auto p = point(g, 4);  // batch index 1, lr index 1
  REQUIRE(p.size() == 2);
  CHECK(p[0].first == "batch");
  CHECK(p[0].second.text == "64");
  CHECK(p[1].second.text == "0.01");
  CHECK(point_json(point(g, 2)) == R"({"batch":32,"lr":"x"})");
  CHECK(grid_size({}, 10) == 0);
  CHECK(grid_size({{"a", {}}}, 10) == 0);
}

TEST_CASE("arrays: json of a point escapes names", "[unit][policy][arrays]") {
  CHECK(point_json({{"a\"b", {"1", "1"}}}) == R"({"a\"b":1})");
  CHECK(point_json({}) == "{}");
}

TEST_CASE("arrays: at most parallelism started at once", "[unit][policy][arrays]") {
  auto c = count("..r.S");
  CHECK(c.pending == 3);
  CHECK(c.started == 1);
  CHECK(c.succeeded == 1);
  CHECK(may_start(c, 3, false) == 2);
  CHECK(may_start(c, 1, false) == 0);
  CHECK(may_start(c, 0, false) == 3);  // no bound
  CHECK(may_start(c, 3, true) == 0);   // canceling
  CHECK(may_start(count("rrr"), 2, false) == 0);
}

TEST_CASE("arrays: the end from the tasks' ends", "[unit][policy][arrays]") {
  CHECK_FALSE(end_of(count("SSr"), false));
  CHECK_FALSE(end_of(count("SS."), false));
  auto all = end_of(count("SSS"), false);
  REQUIRE(all);
  CHECK(all->state == "succeeded");
  CHECK(all->outcome == std::string(kAllSucceeded));
  auto none = end_of(count("FFC"), false);
  REQUIRE(none);
  CHECK(none->state == "failed");
  CHECK(none->outcome == std::string(kNoneSucceeded));
  auto part = end_of(count("SFS"), false);
  REQUIRE(part);
  CHECK(part->state == "failed");
  CHECK(part->outcome == std::string(kPartiallySucceeded));
  CHECK(part->reason.find("2 of 3 tasks succeeded, 1 failed") != std::string::npos);
  auto canceled = end_of(count("SCC"), true);
  REQUIRE(canceled);
  CHECK(canceled->state == "canceled");
  CHECK(mark_of("succeeded") == kSucceeded);
  CHECK(mark_of("failed") == kFailed);
  CHECK(mark_of("canceled") == kCanceled);
}

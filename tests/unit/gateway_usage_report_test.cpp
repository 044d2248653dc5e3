// Unit tests for gateway/usage_report (troupe usage): --since/--until, the
// request, and the report as a table and as CSV.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "gateway/usage_report.hpp"

using namespace troupe::gateway;

TEST_CASE("usage: --since and --until read durations, now and UTC dates", "[gateway][usage]") {
  const int64_t now = 1'800'000'000'000;
  CHECK(parse_when_ms("now", now) == now);
  CHECK(parse_when_ms("7d", now) == now - 7 * 86400'000LL);
  CHECK(parse_when_ms("90m", now) == now - 5400'000LL);
  CHECK(parse_when_ms("2026-12-01", now) == 1'796'083'200'000LL);
  CHECK(parse_when_ms("2026-12-01T08:30", now) == 1'796'083'200'000LL + 8.5 * 3600'000);
  CHECK(parse_when_ms("2026-12-01T08:30:15", now) == 1'796'083'200'000LL + 30'615'000);
  CHECK_FALSE(parse_when_ms("yesterday", now));
  CHECK_FALSE(parse_when_ms("2026-13-01", now));
  CHECK_FALSE(parse_when_ms("2026-12-01Tnoon", now));
  auto req = nlohmann::json::parse(usage_request(1, 2, "kind"));
  CHECK(req.value("since_ms", 0) == 1);
  CHECK(req.value("by", "") == "kind");
}

TEST_CASE("usage: the report as a table and as CSV, groups then TOTAL", "[gateway][usage]") {
  nlohmann::json figures{{"gpu_hours", 1.5},
                         {"gpu_hours_preempted", 0.25},
                         {"jobs", {{"succeeded", 2}, {"failed", 1}}},
                         {"ended", 3},
                         {"success_rate", 2.0 / 3},
                         {"queue_wait_p50_s", 4.0},
                         {"queue_wait_p99_s", 12.5}};
  auto g = figures;
  g["key"] = "nlp, research";
  nlohmann::json report{{"by", "team"}, {"groups", {g}}, {"total", figures}};
  auto table = usage_text(report.dump(), false);
  CHECK_THAT(table, Catch::Contains("TEAM"));
  CHECK_THAT(table, Catch::Contains("TOTAL"));
  CHECK_THAT(table, Catch::Contains("1.500"));
  CHECK_THAT(table, Catch::Contains("66.7%"));
  auto csv = usage_text(report.dump(), true);
  CHECK_THAT(csv,
             Catch::StartsWith("TEAM,GPU-HOURS,PREEMPTED-GPU-HOURS,SUCCEEDED,FAILED,CANCELED"));
  CHECK_THAT(csv, Catch::Contains("\"nlp, research\",1.500,0.250,2,1,0,66.7%,4.0,12.5\n"));
  CHECK_THAT(csv, Catch::Contains("TOTAL,1.500"));
  CHECK(usage_text("not json", false).empty());
}

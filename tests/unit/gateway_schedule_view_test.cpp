// gateway/schedule_view: the request of each `troupe schedule` verb, and how
// a schedule, the list and an error read.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gateway/schedule_view.hpp"
#include "messages/spec.hpp"

using namespace troupe::gateway;
using nlohmann::json;

TEST_CASE("gateway: schedule requests carry the verb and its fields", "[gateway][schedules]") {
  ScheduleArgs a;
  a.name = "nightly";
  a.cron = "0 3 * * *";
  a.tz = "Europe/Amsterdam";
  a.concurrency = "forbid";
  a.spec_json = R"({"command":["true"]})";
  auto c = json::parse(schedule_request("create", a));
  CHECK(c["op"] == "create");
  CHECK(c["cron"] == "0 3 * * *");
  CHECK(c["tz"] == "Europe/Amsterdam");
  CHECK(c["concurrency"] == "forbid");
  CHECK_FALSE(c.contains("missed"));
  CHECK(c["spec"]["command"][0] == "true");
  auto s = json::parse(schedule_request("show", a));
  CHECK(s["name"] == "nightly");
  CHECK_FALSE(s.contains("cron"));
  CHECK_FALSE(json::parse(schedule_request("list", ScheduleArgs{})).contains("name"));
}

TEST_CASE("gateway: a schedule, the list and errors as text", "[gateway][schedules]") {
  std::string out;
  json v{{"name", "nightly"},       {"team", "nlp"},        {"cron", "@every 5s"}, {"tz", "UTC"},
         {"concurrency", "forbid"}, {"missed", "run_once"}, {"suspended", true},   {"runs", 3},
         {"skipped_ticks", 2},      {"last_run", "j-1"},    {"next_ms", 2000000}};
  REQUIRE(schedule_text("show", v.dump(), 1000000, &out).empty());
  CHECK(out.find("schedule       nightly") != std::string::npos);
  CHECK(out.find("state          suspended") != std::string::npos);
  CHECK(out.find("skipped ticks  2") != std::string::npos);
  CHECK(out.find("last run       j-1") != std::string::npos);
  REQUIRE(schedule_text("list", json{{"schedules", {v}}}.dump(), 0, &out).empty());
  CHECK(out.find("NAME") != std::string::npos);
  CHECK(out.find("nightly") != std::string::npos);
  CHECK(out.find("suspended") != std::string::npos);
  REQUIRE(schedule_text("delete", json{{"deleted", "nightly"}}.dump(), 0, &out).empty());
  CHECK(out == "deleted schedule nightly\n");
  CHECK(schedule_text("show", R"({"error":"no schedule x in team nlp","code":"not_found"})", 0,
                      &out) == "no schedule x in team nlp");
  CHECK_FALSE(schedule_text("show", "not json", 0, &out).empty());
}

TEST_CASE("gateway: docs/examples/nightly.yaml is a valid spec for a schedule",
          "[gateway][schedules]") {
  std::ifstream in(std::string(TROUPE_SOURCE_DIR) + "/docs/examples/nightly.yaml");
  std::stringstream text;
  text << in.rdbuf();
  auto p = troupe::spec::from_text(text.str());
  INFO(p.error);
  REQUIRE(p.ok);
  troupe::spec::apply_defaults(p.spec);
  CHECK(troupe::spec::check(p.spec).ok());
  CHECK(p.spec.idempotency_key().empty());
}

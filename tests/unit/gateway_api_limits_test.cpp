// gateway/replies: error codes, jobs pages and history replies as the CLI
// reads them.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gateway/replies.hpp"
#include "job_spec.pb.h"

using namespace troupe::gateway;
using nlohmann::json;

TEST_CASE("replies: the error code comes with the text", "[replies]") {
  auto e = reply_error_of(R"({"error":"no job j-9","code":"not_found"})");
  REQUIRE(e);
  CHECK(e->code == "not_found");
  CHECK(e->text == "no job j-9");
  CHECK(reply_error(R"({"error":"no job j-9","code":"not_found"})") ==
        std::optional<std::string>("not_found: no job j-9"));
  // Without a code (an older scheduler, an agent): the text alone.
  CHECK(reply_error(R"({"error":"no job j-9"})") == std::optional<std::string>("no job j-9"));
  CHECK(reply_error_of(R"({"error":"x"})")->code.empty());
  CHECK_FALSE(reply_error_of(R"({"job_id":"j-1"})"));
  CHECK_FALSE(reply_error_of("not json"));
  troupe::pb::JobView v;
  CHECK(parse_view(R"({"error":"no job j-9","code":"not_found"})", v) == "not_found: no job j-9");
}

TEST_CASE("replies: jobs requests and pages", "[replies]") {
  CHECK(json::parse(jobs_request(0, "", "")) == json::object());
  CHECK(json::parse(jobs_request(50, "j-1", "queued")) ==
        json{{"limit", 50}, {"after", "j-1"}, {"state", "queued"}});
  const std::string page =
      R"({"jobs":[{"job_id":"j-1","team":"t1","state":"queued"}],"next":"j-1"})";
  troupe::pb::JobList list;
  REQUIRE(parse_view(page, list).empty());  // the JobList shape, "next" beside it
  CHECK(list.jobs_size() == 1);
  CHECK(parse_jobs_next(page) == "j-1");
  CHECK(parse_jobs_next(R"({"jobs":[]})").empty());
  CHECK(parse_jobs_next("garbage").empty());
}

TEST_CASE("replies: a history reply gives each event's text back in stored field order",
          "[replies]") {
  std::vector<std::string> events;
  bool truncated = true;
  const std::string e1 = R"({"job_id":"j-1","team":"t1","state":"queued","seq":"1"})";
  const std::string e2 = R"({"job_id":"j-1","team":"t1","state":"running","seq":"2"})";
  REQUIRE(parse_history_reply(R"({"job_id":"j-1","events":[)" + e1 + "," + e2 + "]}", &events,
                              &truncated)
              .empty());
  CHECK(events == std::vector<std::string>{e1, e2});
  CHECK_FALSE(truncated);

  events.clear();
  REQUIRE(parse_history_reply(R"({"job_id":"j-1","events":[)" + e2 + R"(],"truncated":true})",
                              &events, &truncated)
              .empty());
  CHECK(truncated);
  CHECK(events.size() == 1);

  events.clear();
  CHECK(parse_history_reply(R"({"error":"no job j-1","code":"not_found"})", &events, &truncated) ==
        "not_found: no job j-1");
  CHECK_FALSE(parse_history_reply(R"({"job_id":"j-1"})", &events, &truncated).empty());
  CHECK(events.empty());
}

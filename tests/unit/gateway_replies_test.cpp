// gateway/replies: request bodies and reading the scheduler's JSON replies.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "gateway/replies.hpp"
#include "job_spec.pb.h"

using namespace troupe;
using namespace troupe::gateway;
using nlohmann::json;

TEST_CASE("gateway: request bodies match the contract", "[gateway][replies]") {
  CHECK(json::parse(job_request("j-1")) == json{{"job_id", "j-1"}});
  CHECK(json::parse(logs_request("j-1", 1, 4096, 65536)) ==
        json{{"job_id", "j-1"}, {"rank", 1}, {"offset", 4096}, {"max_bytes", 65536}});
}

TEST_CASE("gateway: reply_error finds {\"error\"} only", "[gateway][replies]") {
  CHECK(reply_error(R"({"error":"no job j-9"})") == std::optional<std::string>("no job j-9"));
  CHECK_FALSE(reply_error(R"({"job_id":"j-1"})"));
  CHECK_FALSE(reply_error("not json"));
  CHECK_FALSE(reply_error("[1,2]"));
}

TEST_CASE("gateway: parse_view reads JobView JSON with int64 strings and unknown fields",
          "[gateway][replies]") {
  pb::JobView v;
  std::string err = parse_view(R"({"job_id":"j-1","team":"nlp","state":"running","gpus":4,
      "workers":2,"submit_ms":"1700000000000","exit_code":0,
      "placement":[{"rank":0,"node":"node-1","gpus":[0,1]}],"added_later":{"x":1}})",
                               v);
  REQUIRE(err.empty());
  CHECK(v.job_id() == "j-1");
  CHECK(v.submit_ms() == 1'700'000'000'000);
  CHECK(v.has_exit_code());
  CHECK(v.placement(0).gpus_size() == 2);
}

TEST_CASE("gateway: parse_view reports the server's error and garbage", "[gateway][replies]") {
  pb::JobList l;
  CHECK(parse_view(R"({"error":"team 'x' unknown"})", l) == "team 'x' unknown");
  CHECK_THAT(parse_view("{nope", l), Catch::Contains("unreadable reply"));
  pb::JobList empty;
  CHECK(parse_view("{}", empty).empty());
  CHECK(empty.jobs_size() == 0);
}

TEST_CASE("gateway: submit and cancel replies", "[gateway][replies]") {
  CHECK(parse_submit_reply(R"({"job_id":"j-abc"})").job_id == "j-abc");
  CHECK(parse_submit_reply(R"({"error":"team is required"})").error == "team is required");
  CHECK_THAT(parse_submit_reply("{}").error, Catch::Contains("no job_id"));
  CHECK_THAT(parse_submit_reply("").error, Catch::Contains("unreadable"));
  auto c = parse_cancel_reply(R"({"job_id":"j-1","state":"canceled"})");
  CHECK(c.error.empty());
  CHECK(c.state == "canceled");
  CHECK(parse_cancel_reply(R"({"error":"no job j-1"})").error == "no job j-1");
  CHECK_FALSE(parse_cancel_reply(R"({"job_id":"j-1"})").error.empty());
}

TEST_CASE("gateway: log pages advance by the reply's offset either way it is meant",
          "[gateway][replies]") {
  // offset = end of this page
  auto a = parse_log_reply(R"({"data":"hello","offset":"105","eof":false,"size":"200"})", 100);
  CHECK(a.error.empty());
  CHECK(a.data == "hello");
  CHECK(a.next_offset == 105);
  CHECK_FALSE(a.eof);
  CHECK(a.size == 200);
  // offset = start of this page
  auto b = parse_log_reply(R"({"data":"hello","offset":100,"eof":true})", 100);
  CHECK(b.next_offset == 105);
  CHECK(b.eof);
  // no offset at all
  auto c = parse_log_reply(R"({"data":"abc"})", 7);
  CHECK(c.next_offset == 10);
  // empty page at the end
  auto d = parse_log_reply(R"({"data":"","offset":10,"eof":true})", 10);
  CHECK(d.next_offset == 10);
  CHECK(parse_log_reply(R"({"error":"the job never ran"})", 0).error == "the job never ran");
}

// gateway/policy_view: reading and printing `troupe queues` and `troupe why`.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gateway/format.hpp"
#include "gateway/policy_view.hpp"

using namespace troupe::gateway;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// Whitespace-separated cells of a table line (the cells themselves have no
// blanks in these fixtures, except the header's "IN USE" and "PENDING GPUS").
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string c; in >> c;) out.push_back(c);
  return out;
}

const char* kQueues = R"({
  "pools": [
    {"pool": "h100", "gpus_total": 16, "gpus_free": 16},
    {"pool": "a100", "gpus_total": 32, "gpus_free": 3,
     "hold": {"job_id": "j-gang", "nodes": ["n1", "n2", "n3", "n4"], "start_ms": 1700000012000,
              "idle_gpus": 3}}],
  "teams": [
    {"team": "vision", "pool": "a100", "weight": 2, "borrow": true, "guaranteed": 8, "limit": -1,
     "in_use": 16, "borrowed": 8, "pending_jobs": 40, "pending_gpus": 40,
     "dominant_share": 0.5, "weighted_share": 0.25},
    {"team": "nlp", "pool": "a100", "weight": 1, "borrow": false, "guaranteed": 8, "limit": 8,
     "in_use": 8, "borrowed": 0, "pending_jobs": 3, "pending_gpus": 12,
     "dominant_share": 0.25, "weighted_share": 0.25},
    {"team": "nlp", "pool": "h100", "weight": 1.5, "guaranteed": 0, "limit": -1,
     "in_use": 0, "borrowed": 0, "pending_jobs": 0, "pending_gpus": 0,
     "dominant_share": 0, "weighted_share": 0}],
  "reserved_idle_gpu_seconds": 12.345, "grants": "77", "future_field": [1]})";

}  // namespace

TEST_CASE("gateway: parse_queues reads pools, holds and team rows", "[gateway][policy]") {
  QueuesView q;
  REQUIRE(parse_queues(kQueues, &q) == "");
  REQUIRE(q.pools.size() == 2);
  CHECK(q.pools[0].pool == "h100");
  CHECK_FALSE(q.pools[0].has_hold);
  CHECK(q.pools[1].has_hold);
  CHECK(q.pools[1].hold.job_id == "j-gang");
  CHECK(q.pools[1].hold.nodes == std::vector<std::string>{"n1", "n2", "n3", "n4"});
  CHECK(q.pools[1].hold.start_ms == 1700000012000);
  CHECK(q.pools[1].hold.idle_gpus == 3);
  REQUIRE(q.teams.size() == 3);
  CHECK(q.teams[0].team == "vision");
  CHECK(q.teams[0].weight == 2.0);
  CHECK(q.teams[0].borrow);
  CHECK(q.teams[0].limit == -1);
  CHECK(q.teams[0].borrowed == 8);
  CHECK(q.teams[1].limit == 8);
  CHECK_FALSE(q.teams[1].borrow);
  CHECK(q.teams[1].pending_gpus == 12);
  CHECK(q.teams[2].weight == 1.5);
  CHECK(q.reserved_idle_gpu_seconds == Approx(12.345));
  CHECK(q.grants == 77);  // int64 as a string is accepted
}

TEST_CASE("gateway: parse_queues reports errors and unreadable replies", "[gateway][policy]") {
  QueuesView q;
  CHECK(parse_queues(R"({"error":"scheduler is busy"})", &q) == "scheduler is busy");
  CHECK_THAT(parse_queues("nope", &q), Catch::Contains("unreadable queues reply"));
  CHECK_THAT(parse_queues("[1]", &q), Catch::Contains("unreadable"));
  // An empty object is a cluster with nothing in it.
  REQUIRE(parse_queues("{}", &q) == "");
  CHECK(q.pools.empty());
  CHECK(q.teams.empty());
  CHECK(q.reserved_idle_gpu_seconds == 0);
}

TEST_CASE("gateway: format_weight and format_percent", "[gateway][policy]") {
  CHECK(format_weight(1) == "1");
  CHECK(format_weight(2) == "2");
  CHECK(format_weight(0.5) == "0.5");
  CHECK(format_weight(1.25) == "1.25");
  CHECK(format_weight(1.0 / 3) == "0.33");
  CHECK(format_percent(0.25) == "25.0%");
  CHECK(format_percent(0) == "0.0%");
  CHECK(format_percent(1.0 / 3) == "33.3%");
}

TEST_CASE("gateway: queues_text prints one row per team and pool, pool lines and idle figure",
          "[gateway][policy]") {
  QueuesView q;
  REQUIRE(parse_queues(kQueues, &q) == "");
  int64_t now = 1700000007000;  // the hold starts 5 s later
  auto text = queues_text(q, now);
  INFO(text);
  auto lines = lines_of(text);
  REQUIRE(lines.size() >= 8);
  CHECK(cells(lines[0]) == std::vector<std::string>{"TEAM", "POOL", "WEIGHT", "GUARANTEED", "LIMIT",
                                                    "IN", "USE", "BORROWED", "PENDING", "PENDING",
                                                    "GPUS", "SHARE"});
  // Sorted by pool, then team.
  CHECK(cells(lines[1]) ==
        std::vector<std::string>{"nlp", "a100", "1", "8", "8", "8", "0", "3", "12", "25.0%"});
  CHECK(cells(lines[2]) ==
        std::vector<std::string>{"vision", "a100", "2", "8", "-", "16", "8", "40", "40", "25.0%"});
  CHECK(cells(lines[3]) ==
        std::vector<std::string>{"nlp", "h100", "1.5", "0", "-", "0", "0", "0", "0", "0.0%"});
  CHECK(lines[4].empty());
  CHECK(lines[5] == "pool a100: 32 GPUs, 3 free; hold for j-gang on n1,n2,n3,n4 from " +
                        format_clock(1700000012000) + " (in 5.0s), 3 GPUs idle on it");
  CHECK(lines[6] == "pool h100: 16 GPUs, 16 free; no hold");
  CHECK(lines[7] == "reserved-idle GPU-seconds: 12.3");
  // Columns line up: every row's SHARE starts where the header's does.
  auto col = lines[0].find("SHARE");
  for (int i = 1; i <= 3; ++i) CHECK(lines[i].find('%') > col);
}

TEST_CASE("gateway: queues_text with a due or unknown hold start", "[gateway][policy]") {
  QueuesView q;
  PoolView p;
  p.pool = "a100";
  p.gpus_total = 8;
  p.gpus_free = 1;
  p.has_hold = true;
  p.hold.job_id = "j-1";
  p.hold.nodes = {"n1"};
  p.hold.start_ms = 1000;
  p.hold.idle_gpus = 1;
  q.pools.push_back(p);
  CHECK_THAT(queues_text(q, 5000), Catch::Contains("(due now), 1 GPU idle on it"));
  q.pools[0].hold.start_ms = -1;
  CHECK_THAT(queues_text(q, 5000), Catch::Contains("from an unknown time, 1 GPU idle"));
  // No teams: the header alone, then the pool line.
  auto lines = lines_of(queues_text(q, 5000));
  REQUIRE(lines.size() == 6);
  CHECK_THAT(lines[0], Catch::StartsWith("TEAM"));
  CHECK(lines[3] == "reserved-idle GPU-seconds: 0.0");
  CHECK(lines[4] == "preemptions: 0 (GPU-seconds lost: 0.0)");
  CHECK(lines[5] == "retries by cause: none");
}

TEST_CASE("gateway: queues shows preemptions, GPU-seconds lost and retries by cause",
          "[gateway][policy]") {
  QueuesView q;
  REQUIRE(parse_queues(R"({"pools":[],"teams":[],"reserved_idle_gpu_seconds":0,"grants":3,
                           "policy":"troupe","preemptions":2,"gpu_seconds_lost":12.5,
                           "retries":{"user:exit_code":2,"infra:node_lost":1}})",
                       &q) == "");
  CHECK(q.preemptions == 2);
  CHECK(q.retries.at("infra:node_lost") == 1);
  auto text = queues_text(q, 0);
  CHECK_THAT(text, Catch::Contains("preemptions: 2 (GPU-seconds lost: 12.5)"));
  CHECK_THAT(text, Catch::Contains("retries by cause: infra:node_lost 1, user:exit_code 2"));
}

TEST_CASE("gateway: parse_why and why_text", "[gateway][policy]") {
  WhyView w;
  REQUIRE(parse_why(R"({"job_id":"j-1","state":"queued","pending":true,"code":"over_hard_limit",
                        "reason":"team nlp uses 8/8 GPUs of its hard limit in pool a100"})",
                    &w) == "");
  CHECK(w.job_id == "j-1");
  CHECK(w.pending);
  CHECK(w.code == "over_hard_limit");
  auto lines = lines_of(why_text(w));
  REQUIRE(lines.size() == 5);
  CHECK(lines[0] == "job      j-1");
  CHECK(lines[1] == "state    queued");
  CHECK(lines[2] == "pending  yes");
  CHECK(lines[3] == "code     over_hard_limit");
  CHECK(lines[4] == "reason   team nlp uses 8/8 GPUs of its hard limit in pool a100");

  REQUIRE(parse_why(R"({"job_id":"j-2","state":"running","pending":false,"code":"not_pending",
                        "reason":"not pending: the job is running on n1"})",
                    &w) == "");
  CHECK_THAT(why_text(w), Catch::Contains("pending  no"));

  CHECK(parse_why(R"({"error":"no job j-9"})", &w) == "no job j-9");
  CHECK_THAT(parse_why(R"({"job_id":"j-1"})", &w), Catch::Contains("no code nor reason"));
  CHECK_THAT(parse_why("<html>", &w), Catch::Contains("unreadable why reply"));
}

TEST_CASE("gateway: queues_text through a front door names each pool by its cluster",
          "[gateway][policy]") {
  QueuesView q;
  REQUIRE(parse_queues(R"({"pools":[{"cluster":"c2","pool":"default","gpus_total":8,"gpus_free":2},
                                    {"cluster":"c1","pool":"default","gpus_total":4,"gpus_free":4}],
                           "teams":[{"cluster":"c2","team":"nlp","pool":"default"}],
                           "partial":true,"unanswered":["c3"]})",
                       &q) == "");
  REQUIRE(q.pools.size() == 2);
  CHECK(q.pools[0].cluster == "c2");
  CHECK(q.unanswered == std::vector<std::string>{"c3"});
  auto text = queues_text(q, 0);
  INFO(text);
  auto lines = lines_of(text);
  REQUIRE(lines.size() >= 5);
  CHECK(cells(lines[1])[1] == "c2/default");
  CHECK(lines[3] == "pool c1/default: 4 GPUs, 4 free; no hold");
  CHECK(lines[4] == "pool c2/default: 8 GPUs, 2 free; no hold");
  CHECK(lines.back() == "not shown (unreachable): c3");
}

TEST_CASE("gateway: troupe queues --cluster asks for one cluster and tells a front door's answer",
          "[gateway][policy]") {
  CHECK(queues_request("") == "{}");
  CHECK(nlohmann::json::parse(queues_request("c2")) == nlohmann::json{{"cluster", "c2"}});
  // A front door's answer for c2: its rows and its own counters.
  QueuesView q;
  REQUIRE(parse_queues(R"({"pools":[{"cluster":"c2","pool":"default","gpus_total":8,"gpus_free":2}],
                           "teams":[],"grants":4,"cluster":"c2"})",
                       &q) == "");
  CHECK(q.cluster == "c2");
  CHECK(check_queues_cluster(q, "c2") == "");
  CHECK(check_queues_cluster(q, "") == "");
  CHECK(check_queues_cluster(q, "c1").find("c2") != std::string::npos);
  CHECK(queues_text(q, 0).find("\ncluster: c2 (its own counters below)\n") != std::string::npos);
  // One cluster's scheduler leaves the key out: its whole view is never
  // shown as the cluster asked for.
  QueuesView one;
  REQUIRE(parse_queues(R"({"pools":[{"pool":"default","gpus_total":8,"gpus_free":8}],"teams":[]})",
                       &one) == "");
  CHECK(check_queues_cluster(one, "") == "");
  CHECK(check_queues_cluster(one, "c2") == kNoFrontDoorFilter);
  // The front door's refusal of an unknown cluster is its error.
  CHECK(parse_queues(R"({"error":"no cluster c9","code":"not_found"})", &q) == "no cluster c9");
}

// troupe usage (docs/api.md "Usage") with a real nats-server, scheduler and
// agent: a small run of three jobs, counted by hand from the events the test
// saw (GPUs x (end - start) per job, the ends, the waits), against what the
// scheduler computes from its events stream.
#include <catch2/catch.hpp>

#include "bus/subjects.hpp"
#include "harness.hpp"

using namespace troupe;
using namespace troupe::it;

TEST_CASE("usage: troupe usage matches a hand-counted run", "[integration][usage]") {
  Cluster c(ClusterOptions{}.node("n1", 4));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  auto two = c.submit_ok("acct", job_spec("acct", {"sleep", "1"}, 2));
  auto one = c.submit_ok("acct", job_spec("acct", {"sleep", "0.5"}, 1));
  auto bad = c.submit_ok("acct", job_spec("acct", {"/bin/sh", "-c", "sleep 0.2; exit 3"}, 1));
  c.submit_ok("other", job_spec("other", {"true"}, 1));
  double gpu_s = 0;
  for (const auto& [id, gpus] : {std::pair{two, 2}, std::pair{one, 1}, std::pair{bad, 1}}) {
    auto end = c.wait_terminal(id, 30s);
    INFO(c.events().describe(id));
    REQUIRE(end);
    auto start = c.events().wait_state(id, "starting", 1s);
    REQUIRE(start);
    // (int64 fields are JSON strings, as protobuf's JSON writes them)
    int64_t from = std::stoll(start->json.value("ts_ms", std::string("0")));
    int64_t to = std::stoll(end->json.value("ts_ms", std::string("0")));
    gpu_s += gpus * static_cast<double>(to - from) / 1000.0;
  }
  RunResult r = c.run_cli({"usage", "--team", "acct", "--since", "1h", "-o", "json"});
  INFO(describe(r));
  REQUIRE(r.exit_code == 0);
  Json report = Json::parse(r.out);
  Json total = report["total"];
  CHECK(total["jobs"].value("succeeded", 0) == 2);
  CHECK(total["jobs"].value("failed", 0) == 1);
  CHECK(total.value("success_rate", 0.0) == Approx(2.0 / 3));
  CHECK(total.value("started", 0) == 3);
  CHECK(total.value("gpu_hours", 0.0) * 3600 == Approx(gpu_s).margin(0.01));
  CHECK(total.value("gpu_hours", 0.0) * 3600 >= 2 * 1.0 + 0.5 + 0.2);
  CHECK(total.value("gpu_hours_preempted", 1.0) == 0.0);
  REQUIRE(report["groups"].size() == 1);  // only the team asked for
  CHECK(report["groups"][0].value("key", "") == "acct");
  // The table, by kind; an admin sees every team.
  RunResult table = c.run_cli({"usage", "--by", "kind"});
  INFO(describe(table));
  CHECK(table.exit_code == 0);
  CHECK(table.out.find("training") != std::string::npos);
  CHECK(table.out.find("TOTAL") != std::string::npos);
  Json all = c.request("troupe.sys.usage", Json{{"by", "team"}});
  CHECK(all["groups"].size() == 2);
  Json bad_req = c.request(subjects::team_verb("acct", subjects::kUsage), Json{{"by", "pool?"}});
  CHECK(bad_req.value("code", "") == "bad_request");
  Json whole = c.request(subjects::team_verb("acct", subjects::kUsage), Json{{"since_ms", 0}});
  CHECK(whole.value("code", "") == "bad_request");
}

// Logs that outlive their node (docs/api.md, "logs"): agents ship each
// worker's output to TROUPE_LOGS, and the scheduler answers an ended job's
// logs request from there, so `troupe logs` works once the node is gone.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "bus/subjects.hpp"
#include "harness.hpp"
#include "messages/names.hpp"

using namespace troupe;
using namespace troupe::it;

TEST_CASE(
    "logs: an ended job's log is still read after its agent was killed and its state "
    "folder deleted",
    "[integration][logs]") {
  Cluster c(ClusterOptions{}.node("n1", 2));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  // More than one chunk (64 KiB each): 3000 numbered lines, then a tail
  // without a newline.
  const std::string id = c.submit_ok(
      "nlp", job_spec("nlp", {"sh", "-c",
                              "i=0; while [ $i -lt 3000 ]; do echo \"line $i of the output of "
                              "a job whose node goes away\"; i=$((i+1)); done; printf tail"}));
  auto ended = c.wait_terminal(id, 60s);
  REQUIRE(ended);
  REQUIRE(ended->state == names::kSucceeded);
  LogRead before = c.logs("nlp", id);
  REQUIRE(before.ok);
  REQUIRE(before.data.size() > 100000);
  REQUIRE(before.data.substr(before.data.size() - 4) == "tail");

  // The node is gone for good: its agent killed, its state folder deleted.
  c.node(0).kill_now();
  std::filesystem::remove_all(c.file("node-n1-state"));
  REQUIRE_FALSE(std::filesystem::exists(c.file("node-n1-state")));

  RunResult r = c.run_cli({"logs", id});
  INFO(describe(r));
  CHECK(r.exit_code == 0);
  CHECK(r.out == before.data);
  // Pages through the NATS API say where they come from.
  Json page =
      c.request(subjects::team_logs("nlp"), Json{{"job_id", id}, {"offset", 5}, {"max_bytes", 6}});
  INFO(page.dump());
  CHECK(page.value("data", "") == before.data.substr(5, 6));
  CHECK(page.value("offset", 0) == 11);
  CHECK(page.value("stored", false));
  CHECK(page.value("size", 0) == static_cast<int64_t>(before.data.size()));
  // Still another team's job for anyone else.
  Json other = c.request(subjects::team_logs("vision"), Json{{"job_id", id}});
  CHECK(other.value("code", "") == "not_found");
}

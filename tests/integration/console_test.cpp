// The web console in a real browser: tests/browser/console_test.mjs drives
// Debian's chromium (playwright-core) against a real gateway, scheduler,
// nats-server and a simulated agent. The screenshot it takes is kept as a
// test artifact (build/artifacts/console.png).
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "harness.hpp"

using namespace troupe;
using namespace troupe::it;

TEST_CASE(
    "console: in headless chromium, sign in, watch a job on the GPU map to its end, read "
    "its log, cancel another",
    "[integration][console][browser][alone]") {
  Cluster c(ClusterOptions{}.node("n1", 2, true));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  const std::string url = c.start_gateway();
  const std::string token = c.add_token("nlp");
  const std::string out = std::string(TROUPE_ARTIFACT_DIR);
  std::filesystem::create_directories(out);
  std::filesystem::remove(out + "/console.png");
  const std::string script = std::string(TROUPE_SOURCE_DIR) + "/tests/browser/console_test.mjs";
  RunResult r =
      run_program({"/usr/bin/env", "node", script, "--url", url, "--token", token, "--out", out},
                  c.dir(), "browser", 180s, &c.dump());
  INFO(describe(r));
  CHECK(r.exit_code == 0);
  CHECK(std::filesystem::file_size(out + "/console.png") > 10000);
}

TEST_CASE(
    "http: every route's real replies validate against docs/openapi.yaml (swagger-parser, "
    "ajv)",
    "[integration][http][openapi]") {
  // Teams in the config, so that the queues rows are there to validate.
  Cluster c(ClusterOptions{}
                .node("n1", 2, true)
                .with_config("pools: [{name: a100, gpu_type: a100}]\n"
                             "teams:\n  - {name: nlp, weight: 1, borrow: true}\n  - {name: vision, "
                             "weight: 2, borrow: "
                             "true}\n"));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  const std::string url = c.start_gateway();
  const std::string team = c.add_token("nlp");
  const std::string admin = c.add_token("ops", true);
  const std::string dir = std::string(TROUPE_SOURCE_DIR) + "/tests/browser";
  RunResult r = run_program({"/usr/bin/env", "node", dir + "/api_schema_test.mjs", "--url", url,
                             "--team-token", team, "--admin-token", admin},
                            c.dir(), "openapi", 180s, &c.dump());
  INFO(describe(r));
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("checks passed") != std::string::npos);
}

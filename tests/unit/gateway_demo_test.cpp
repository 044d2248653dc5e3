// gateway/demo: the jobs `troupe up` submits, its verdict and its summary.
#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "gateway/demo.hpp"
#include "gateway/submit_args.hpp"

using namespace troupe;
using namespace troupe::gateway;

TEST_CASE("gateway: the demo jobs are valid and cover what the demo promises", "[gateway][demo]") {
  auto jobs = demo_jobs("a100", "t1");
  std::set<std::string> kinds, keys;
  bool gang = false, fails = false, cpu_only = false, sweep = false;
  for (const auto& j : jobs) {
    INFO(j.spec.name());
    CHECK(check_spec(j.spec).empty());
    kinds.insert(j.spec.kind());
    keys.insert(j.spec.idempotency_key());
    if (!j.in_pipeline) CHECK_THAT(j.spec.idempotency_key(), Catch::Contains("t1"));
    if (j.spec.workers() == 2 && j.spec.resources().gpus() == 4) gang = true;
    if (j.expect_state == "failed" && j.expect_exit == 3) fails = true;
    if (j.spec.resources().gpus() == 0) cpu_only = true;
    if (j.spec.has_sweep()) sweep = true;
    CHECK(j.spec.command(0) == "sh");
  }
  CHECK(sweep);
  // A two-member pipeline: its request names the upstream member, no member has a key.
  auto body = nlohmann::json::parse(demo_pipeline_request(jobs, "t1"));
  REQUIRE(body["jobs"].size() == 2);
  CHECK(body["jobs"][1]["depends_on"][0]["name"] == "prep-data");
  CHECK(body.value("idempotency_key", "").find("t1") != std::string::npos);
  for (const auto& m : body["jobs"]) CHECK(m.value("idempotency_key", "").empty());
  CHECK(kinds == std::set<std::string>{"training", "inference", "evaluation"});
  CHECK(keys.size() == jobs.size() - 1);  // the pipeline's two members: none
  CHECK(gang);
  CHECK(fails);
  CHECK(cpu_only);
  // Two 4-GPU nodes: the gang comes first so the others queue behind it.
  CHECK(jobs.front().spec.workers() == 2);
  CHECK(demo_jobs("a100", "t2").front().spec.idempotency_key() !=
        jobs.front().spec.idempotency_key());
}

TEST_CASE("gateway: demo_problems compares end states and the failing exit code",
          "[gateway][demo]") {
  auto jobs = demo_jobs("a100", "t");
  std::vector<pb::JobView> views;
  for (size_t i = 0; i < jobs.size(); ++i) {
    pb::JobView v;
    v.set_job_id("j-" + std::to_string(i));
    v.set_state(jobs[i].expect_state);
    if (jobs[i].expect_exit) v.set_exit_code(*jobs[i].expect_exit);
    views.push_back(v);
  }
  CHECK(demo_problems(jobs, views).empty());

  auto wrong = views;
  wrong[0].set_state("failed");
  wrong[0].set_reason("killed by signal 9");
  auto p = demo_problems(jobs, wrong);
  REQUIRE(p.size() == 1);
  CHECK_THAT(p[0], Catch::Contains("expected succeeded"));
  CHECK_THAT(p[0], Catch::Contains("killed by signal 9"));

  auto exit = views;
  auto failing = std::find_if(jobs.begin(), jobs.end(),
                              [](const DemoJob& j) { return j.expect_state == "failed"; });
  REQUIRE(failing != jobs.end());
  exit[static_cast<size_t>(failing - jobs.begin())].set_exit_code(1);
  REQUIRE(demo_problems(jobs, exit).size() == 1);

  auto missing = views;
  missing.pop_back();
  CHECK(demo_problems(jobs, missing).size() == 1);
}

TEST_CASE("gateway: demo_summary counts states and lists jobs", "[gateway][demo]") {
  std::vector<pb::JobView> views(3);
  views[0].set_job_id("j-a");
  views[0].set_state("succeeded");
  views[0].set_start_ms(1'000);
  views[0].set_end_ms(3'500);
  views[1].set_job_id("j-b");
  views[1].set_state("succeeded");
  views[2].set_job_id("j-c");
  views[2].set_state("failed");
  views[2].set_exit_code(3);
  std::string s = demo_summary(views);
  CHECK_THAT(s, Catch::Contains("failed 1"));
  CHECK_THAT(s, Catch::Contains("succeeded 2"));
  CHECK_THAT(s, Catch::Contains("2.5s"));
  CHECK_THAT(s, Catch::Contains("DURATION"));
}

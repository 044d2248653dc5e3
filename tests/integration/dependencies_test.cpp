// Job dependencies (depends_on, `troupe submit --after`; docs/api.md
// "Dependencies") with a real nats-server, scheduler and agents: a blocked job
// starts only after its upstream's end event, ends canceled (dependency_failed)
// when the upstream fails, is refused at submit for another team's job, and
// survives a scheduler kill -9 while it waits.
#include <catch2/catch.hpp>
#include <fstream>

#include "bus/subjects.hpp"
#include "harness.hpp"

using namespace troupe;
using namespace troupe::it;

namespace {

// A spec that depends on `upstream` (`on`: "" for the default, succeeded).
Json after(Json spec, const std::string& upstream, const std::string& on = {}) {
  Json d{{"job", upstream}};
  if (!on.empty()) d["on"] = on;
  spec["depends_on"] = Json::array({d});
  return spec;
}

// Where the first event of `job` in `state` is in the order of arrival.
size_t arrival(Cluster& c, const std::string& job, const std::string& state) {
  for (const auto& e : c.events().of_job(job))
    if (e.state == state) return e.seq;
  return SIZE_MAX;
}

// A job that waits for `release` to exist, then exits with `code`.
Json gated(const std::string& team, const std::string& release, int code = 0) {
  return job_spec(
      team,
      {"/bin/sh", "-c",
       "while [ ! -e " + release + " ]; do sleep 0.05; done; exit " + std::to_string(code)},
      1);
}

}  // namespace

TEST_CASE(
    "deps: B after A starts only after A's end event, when A fails B ends canceled "
    "(dependency_failed) naming A, another team's job is refused",
    "[integration][deps]") {
  Cluster c(ClusterOptions{}.node("n1", 2));
  REQUIRE(c.wait_nodes_alive(1, 20s));

  // A succeeds: B (submitted with the CLI's --after) runs after A's end.
  const std::string go = c.file("a.go");
  auto a = c.submit_ok("nlp", gated("nlp", go));
  RunResult sub = c.run_cli({"submit", "--team", "nlp", "--gpus", "1", "--after", a, "--", "true"});
  INFO(describe(sub));
  REQUIRE(sub.exit_code == 0);
  std::string b = sub.out.substr(0, sub.out.find_first_of(" \n"));
  REQUIRE(c.events().wait_state(b, "blocked", 10s));
  REQUIRE(c.events().wait_state(a, "running", 20s));
  RunResult why = c.run_cli({"why", b});
  INFO(describe(why));
  CHECK(why.exit_code == 0);
  CHECK(why.out.find(a + " (running) to succeed") != std::string::npos);
  std::ofstream(go) << "go\n";
  auto b_end = c.wait_terminal(b, 30s);
  INFO(c.events().describe());
  REQUIRE(b_end);
  CHECK(b_end->state == "succeeded");
  CHECK(arrival(c, a, "succeeded") < arrival(c, b, "queued"));
  CHECK(arrival(c, a, "succeeded") < arrival(c, b, "starting"));

  // A fails: B never runs; C (on: failed) does.
  auto failing = c.submit_ok("nlp", job_spec("nlp", {"false"}, 1));
  auto never = c.submit_ok("nlp", after(job_spec("nlp", {"true"}, 1), failing));
  auto cleanup = c.submit_ok("nlp", after(job_spec("nlp", {"true"}, 1), failing, "failed"));
  auto ended = c.wait_terminal(never, 30s);
  REQUIRE(ended);
  CHECK(ended->state == "canceled");
  CHECK(ended->json.value("cause", "") == "dependency_failed");
  CHECK(ended->json.value("reason", "").find("job " + failing + " ended failed") !=
        std::string::npos);
  CHECK(arrival(c, never, "starting") == SIZE_MAX);
  auto ran = c.wait_terminal(cleanup, 30s);
  REQUIRE(ran);
  CHECK(ran->state == "succeeded");
  Json view = c.status("nlp", never);
  CHECK(view.value("state", "") == "canceled");
  CHECK(view["depends_on"][0].value("job", "") == failing);

  // Another team's job reads as no job; so does one that never was.
  auto theirs = c.submit_ok("vision", job_spec("vision", {"true"}, 1));
  Json refused = c.submit_json("nlp", after(job_spec("nlp", {"true"}, 1), theirs));
  CHECK(refused.value("code", "") == "invalid_spec");
  CHECK(refused.value("error", "").find("no job " + theirs + " in team nlp") != std::string::npos);
  Json unknown = c.submit_json("nlp", after(job_spec("nlp", {"true"}, 1), "j-0000000000000"));
  CHECK(unknown.value("code", "") == "invalid_spec");
}

TEST_CASE("deps: a scheduler kill -9 while B is blocked loses nothing: B runs once A succeeded",
          "[integration][deps][recovery]") {
  Cluster c(ClusterOptions{}.node("n1", 2));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  const std::string go = c.file("a.go");
  auto a = c.submit_ok("nlp", gated("nlp", go));
  auto b = c.submit_ok("nlp", after(job_spec("nlp", {"true"}, 1), a));
  // A third waits on B, on any end of it.
  auto d = c.submit_ok("nlp", after(job_spec("nlp", {"true"}, 1), b, "finished"));
  REQUIRE(c.events().wait_state(a, "running", 20s));
  REQUIRE(c.events().wait_state(d, "blocked", 10s));

  c.kill_scheduler();
  std::ofstream(go) << "go\n";  // A ends while no scheduler runs
  c.restart_scheduler();
  REQUIRE(c.wait_scheduler_serving(20s));
  for (const auto& id : {a, b, d}) {
    auto end = c.wait_terminal(id, 40s);
    INFO(id << "\n" << c.events().describe());
    REQUIRE(end);
    CHECK(end->state == "succeeded");
  }
  CHECK(arrival(c, a, "succeeded") < arrival(c, b, "starting"));
  CHECK(arrival(c, b, "succeeded") < arrival(c, d, "starting"));
  // Each ran once.
  for (const auto& id : {b, d}) {
    size_t starts = 0;
    for (const auto& e : c.events().of_job(id)) starts += e.state == "starting" ? 1 : 0;
    CHECK(starts == 1);
  }
}

TEST_CASE(
    "pipeline: a 3-job fan-in is accepted whole and runs in dependency order, a bad member "
    "refuses all and creates no job, a kill -9 right after acceptance loses nothing",
    "[integration][deps][pipeline]") {
  Cluster c(ClusterOptions{}.node("n1", 2));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  auto member = [](const std::string& name, std::vector<std::string> after) {
    Json m = job_spec("nlp", {"/bin/sh", "-c", "echo " + name}, 1);
    m["name"] = name;
    for (const auto& a : after) m["depends_on"].push_back(Json{{"name", a}});
    return m;
  };
  Json pipeline{
      {"name", "nightly"},
      {"jobs",
       {member("train", {"prep-a", "prep-b"}), member("prep-a", {}), member("prep-b", {})}}};

  // One bad member: nothing at all.
  Json bad = pipeline;
  bad["jobs"][1]["kind"] = "mining";
  Json refused = c.request(subjects::team_pipeline("nlp"), bad);
  INFO(refused.dump());
  CHECK(refused.value("code", "") == "invalid_spec");
  CHECK(refused.value("error", "").find("prep-a") != std::string::npos);
  Json none = c.request(subjects::team_verb("nlp", subjects::kJobs), Json::object());
  CHECK(none["jobs"].empty());

  Json ok = c.request(subjects::team_pipeline("nlp"), pipeline);
  INFO(ok.dump());
  REQUIRE(ok.contains("pipeline_id"));
  c.kill_scheduler();  // its one intake record is all there is of it yet
  c.restart_scheduler();
  REQUIRE(c.wait_scheduler_serving(20s));
  REQUIRE(ok["jobs"].size() == 3);
  CHECK(ok["jobs"][2].value("name", "") == "train");
  std::vector<std::string> ids;
  for (const auto& j : ok["jobs"]) ids.push_back(j.value("job_id", ""));
  for (const auto& id : ids) {
    auto end = c.wait_terminal(id, 40s);
    INFO(id << "\n" << c.events().describe());
    REQUIRE(end);
    CHECK(end->state == "succeeded");
  }
  CHECK(arrival(c, ids[0], "succeeded") < arrival(c, ids[2], "starting"));
  CHECK(arrival(c, ids[1], "succeeded") < arrival(c, ids[2], "starting"));
  Json listed = c.request(subjects::team_verb("nlp", subjects::kJobs),
                          Json{{"pipeline", ok.value("pipeline_id", "")}});
  REQUIRE(listed["jobs"].size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(listed["jobs"][i].value("job_id", "") == ids[i]);
  // The CLI: its state from its jobs.
  const std::string pid = ok.value("pipeline_id", "");
  RunResult status = c.run_cli({"pipeline", "status", pid, "--team", "nlp"});
  INFO(describe(status));
  CHECK(status.exit_code == 0);
  CHECK(status.out.find("pipeline " + pid + ": succeeded (3 jobs") != std::string::npos);
  // troupe pipeline submit with the example file, then cancel it while it runs.
  RunResult sub = c.run_cli({"pipeline", "submit",
                             std::string(TROUPE_SOURCE_DIR) + "/docs/examples/pipeline.yaml",
                             "--team", "nlp", "-o", "json"});
  INFO(describe(sub));
  REQUIRE(sub.exit_code == 0);
  Json made = Json::parse(sub.out);
  RunResult cancel =
      c.run_cli({"pipeline", "cancel", made.value("pipeline_id", ""), "--team", "nlp"});
  INFO(describe(cancel));
  CHECK(cancel.exit_code == 0);
  for (const auto& j : made["jobs"]) {
    auto end = c.wait_terminal(j.value("job_id", ""), 40s);
    REQUIRE(end);
    CHECK((end->state == "canceled" || end->state == "succeeded"));
  }
}

// gateway/pipeline_view: the pipeline file, request and reply, the jobs
// request's filters, a pipeline's state, its table and its cancel order.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gateway/pipeline_view.hpp"

using namespace troupe;
using namespace troupe::gateway;

namespace {

pb::JobView member(const std::string& id, const std::string& name, const std::string& state,
                   const std::string& pipeline = "p-1") {
  pb::JobView j;
  j.set_job_id(id);
  j.set_team("ml");
  j.set_name(name);
  j.set_state(state);
  if (!pipeline.empty()) (*j.mutable_labels())["troupe.pipeline"] = pipeline;
  return j;
}

const char* kYaml = R"(name: nightly
team: ml
idempotency_key: nightly-2026-01-01
jobs:
  - name: prep
    command: [sh, -c, "echo prep; sleep 1"]
    env: {DEBUG: yes}
    resources: {gpus: 1}
  - name: train
    command: [sh, -c, "echo 010"]
    depends_on: [{name: prep}]
  - name: eval
    command: [python, eval.py]
    depends_on:
      - name: train
      - job: j-42
        on: finished
)";

}  // namespace

TEST_CASE("pipeline: a YAML file reads as a job spec does, strings staying strings",
          "[gateway][pipeline]") {
  auto f = parse_pipeline_file(kYaml);
  INFO(f.error);
  REQUIRE(f.ok);
  const auto& p = f.pipeline;
  CHECK(p.name() == "nightly");
  CHECK(p.idempotency_key() == "nightly-2026-01-01");
  REQUIRE(p.jobs_size() == 3);
  CHECK(p.jobs(0).env().at("DEBUG") == "yes");  // the schema says string
  CHECK(p.jobs(0).resources().gpus() == 1);
  CHECK(p.jobs(1).command(2) == "echo 010");
  REQUIRE(p.jobs(2).depends_on_size() == 2);
  CHECK(p.jobs(2).depends_on(0).name() == "train");
  CHECK(p.jobs(2).depends_on(1).job() == "j-42");
  CHECK(p.jobs(2).depends_on(1).on() == "finished");
}

TEST_CASE("pipeline: a JSON file reads too, and a bad file says what is wrong",
          "[gateway][pipeline]") {
  auto f = parse_pipeline_file(
      R"({"name":"n","jobs":[{"name":"a","command":["true"]},{"name":"b","command":["true"],)"
      R"("depends_on":[{"name":"a"}]}]})");
  INFO(f.error);
  REQUIRE(f.ok);
  CHECK(f.pipeline.jobs(1).depends_on(0).name() == "a");

  auto str = parse_pipeline_file(R"({"jobs":[{"name":"a","command":"echo hi"}]})");
  CHECK_FALSE(str.ok);
  CHECK_THAT(str.error, Catch::Contains("jobs[0].command is a list"));

  auto yaml_str = parse_pipeline_file("jobs:\n  - name: a\n    command: echo hi\n");
  CHECK_FALSE(yaml_str.ok);
  CHECK_THAT(yaml_str.error, Catch::Contains("command is a list"));

  auto unknown = parse_pipeline_file("jobs:\n  - name: a\n    gpus: 1\n");
  CHECK_FALSE(unknown.ok);
  CHECK_THAT(unknown.error, Catch::StartsWith("invalid YAML"));

  auto empty = parse_pipeline_file("name: n\n");
  CHECK_FALSE(empty.ok);
  CHECK_THAT(empty.error, Catch::Contains("no jobs"));

  CHECK_FALSE(parse_pipeline_file("- a\n- b\n").ok);
}

TEST_CASE("pipeline: the team is --team, else the file's, else the first job's",
          "[gateway][pipeline]") {
  pb::Pipeline p;
  p.add_jobs()->set_name("a");
  p.add_jobs()->set_name("b");
  std::string team;
  CHECK_THAT(pipeline_team("", p, &team), Catch::Contains("team is required"));
  p.mutable_jobs(0)->set_team("vision");
  CHECK(pipeline_team("", p, &team).empty());
  CHECK(team == "vision");
  p.set_team("ml");
  // The file's team, then a member of another team is refused.
  CHECK_THAT(pipeline_team("", p, &team), Catch::Contains("jobs[0] (a) is of team vision"));
  p.mutable_jobs(0)->clear_team();
  CHECK(pipeline_team("", p, &team).empty());
  CHECK(team == "ml");
  CHECK(pipeline_team("nlp", p, &team).empty());
  CHECK(team == "nlp");
}

TEST_CASE("pipeline: the request carries the team and leaves zeros out", "[gateway][pipeline]") {
  auto f = parse_pipeline_file(kYaml);
  REQUIRE(f.ok);
  auto body = nlohmann::json::parse(pipeline_request(f.pipeline, "ml"));
  CHECK(body["team"] == "ml");
  CHECK(body["name"] == "nightly");
  REQUIRE(body["jobs"].size() == 3);
  CHECK(body["jobs"][1]["depends_on"][0] == nlohmann::json{{"name", "prep"}});
  CHECK_FALSE(body["jobs"][1].contains("team"));
  CHECK_FALSE(body["jobs"][1].contains("max_retries"));
}

TEST_CASE("pipeline: the reply, its error, and the lines submit prints", "[gateway][pipeline]") {
  auto r = parse_pipeline_reply(R"({"pipeline_id":"p-7","jobs":[{"name":"prep","job_id":"j-1"},)"
                                R"({"name":"train-a","job_id":"j-2"}]})");
  CHECK(r.error.empty());
  CHECK(r.pipeline_id == "p-7");
  REQUIRE(r.jobs.size() == 2);
  CHECK(pipeline_submit_text(r) == "p-7\nprep     j-1\ntrain-a  j-2\n");

  auto refused = parse_pipeline_reply(R"({"error":"a cycle: a -> b -> a","code":"invalid_spec"})");
  CHECK(refused.code == "invalid_spec");
  CHECK(refused.error == "invalid_spec: a cycle: a -> b -> a");
  CHECK(refused.pipeline_id.empty());

  CHECK_THAT(parse_pipeline_reply("not json").error, Catch::StartsWith("unreadable reply"));
  CHECK_THAT(parse_pipeline_reply(R"({"jobs":[]})").error, Catch::StartsWith("unreadable reply"));
}

TEST_CASE("pipeline: the jobs request passes the pipeline and label filters on",
          "[gateway][pipeline]") {
  auto plain = nlohmann::json::parse(jobs_filter_request(0, "", JobsFilter{}));
  CHECK(plain == nlohmann::json::object());
  auto all = nlohmann::json::parse(
      jobs_filter_request(50, "j-3", JobsFilter{"running", "p-1", "troupe.pipeline=p-1", {}, {}}));
  CHECK(all["limit"] == 50);
  CHECK(all["after"] == "j-3");
  CHECK(all["state"] == "running");
  CHECK(all["pipeline"] == "p-1");
  CHECK(all["label"] == "troupe.pipeline=p-1");
  auto runs =
      nlohmann::json::parse(jobs_filter_request(0, "", JobsFilter{{}, {}, {}, "nightly", {}}));
  CHECK(runs == nlohmann::json{{"schedule", "nightly"}});
  auto in_c2 = nlohmann::json::parse(jobs_filter_request(0, "", JobsFilter{{}, {}, {}, {}, "c2"}));
  CHECK(in_c2 == nlohmann::json{{"cluster", "c2"}});  // (a front door's filter)

  CHECK(check_label_filter("team=vision").empty());
  CHECK(check_label_filter("k=").empty());
  CHECK_THAT(check_label_filter("k"), Catch::Contains("KEY=VALUE"));
  CHECK_THAT(check_label_filter("=v"), Catch::Contains("KEY=VALUE"));
}

TEST_CASE("pipeline: its state from its jobs' states", "[gateway][pipeline]") {
  using V = std::vector<std::string>;
  CHECK(pipeline_state({}).empty());
  CHECK(pipeline_state(V{"succeeded", "succeeded"}) == "succeeded");
  CHECK(pipeline_state(V{"succeeded", "failed", "running"}) == "failed");
  CHECK(pipeline_state(V{"succeeded", "canceled", "blocked"}) == "failed");
  CHECK(pipeline_state(V{"succeeded", "running", "blocked"}) == "running");
  CHECK(pipeline_state(V{"starting", "blocked"}) == "running");
  CHECK(pipeline_state(V{"succeeded", "queued", "blocked"}) == "pending");
  CHECK(pipeline_state(V{"placing"}) == "pending");
  CHECK(pipeline_state(V{"blocked"}) == "pending");
}

TEST_CASE("pipeline: members are the jobs with its label, in the list's order",
          "[gateway][pipeline]") {
  pb::JobList list;
  *list.add_jobs() = member("j-1", "prep", "succeeded");
  *list.add_jobs() = member("j-9", "other", "running", "p-2");
  *list.add_jobs() = member("j-2", "train", "running");
  *list.add_jobs() = member("j-5", "loose", "queued", "");
  auto m = pipeline_members(list, "p-1");
  REQUIRE(m.size() == 2);
  CHECK(m[0].job_id() == "j-1");
  CHECK(m[1].job_id() == "j-2");
  CHECK(pipeline_members(list, "p-3").empty());
}

TEST_CASE("pipeline: the status table, its reasons and its summary", "[gateway][pipeline]") {
  std::vector<pb::JobView> jobs = {
      member("j-1", "prep", "succeeded"), member("j-2", "train-a", "failed"),
      member("j-3", "train-b", "running"), member("j-4", "eval", "canceled")};
  jobs[1].set_reason("rank 0 exited with code 1");
  jobs[3].set_reason("dependency_failed: job j-2 ended failed; this job needed it to succeed");
  jobs[2].set_reason("placed");  // not shown: it has not ended
  CHECK(dependency_failed(jobs[3]));
  CHECK_FALSE(dependency_failed(jobs[1]));
  auto text = pipeline_status_text("p-1", jobs);
  INFO(text);
  CHECK_THAT(text, Catch::StartsWith("NAME     JOB  STATE      REASON\n"
                                     "prep     j-1  succeeded\n"
                                     "train-a  j-2  failed     rank 0 exited with code 1\n"
                                     "train-b  j-3  running\n"
                                     "eval     j-4  canceled   dependency_failed: job j-2 ended "
                                     "failed; this job needed it to succeed\n"));
  CHECK_THAT(text, Catch::EndsWith("\npipeline p-1: failed (4 jobs: 1 running, 1 succeeded, 1 "
                                   "failed, 1 canceled)\n"));
  auto one = pipeline_status_text("p-2", {member("j-7", "", "blocked", "p-2")});
  CHECK_THAT(one, Catch::Contains("-     j-7  blocked"));
  CHECK_THAT(one, Catch::EndsWith("pipeline p-2: pending (1 job: 1 blocked)\n"));
}

TEST_CASE("pipeline: the status JSON has the state, the counts and the views",
          "[gateway][pipeline]") {
  std::vector<pb::JobView> jobs = {member("j-1", "prep", "succeeded"),
                                   member("j-2", "train", "succeeded")};
  auto j = nlohmann::json::parse(pipeline_status_json("p-1", jobs));
  CHECK(j["pipeline_id"] == "p-1");
  CHECK(j["state"] == "succeeded");
  CHECK(j["counts"] == nlohmann::json{{"succeeded", 2}});
  REQUIRE(j["jobs"].size() == 2);
  CHECK(j["jobs"][1]["job_id"] == "j-2");
  CHECK(j["jobs"][1]["labels"]["troupe.pipeline"] == "p-1");
}

TEST_CASE("pipeline: cancel goes last job first and leaves ended jobs alone",
          "[gateway][pipeline]") {
  std::vector<pb::JobView> jobs = {
      member("j-1", "prep", "succeeded"), member("j-2", "train-a", "running"),
      member("j-3", "train-b", "queued"), member("j-4", "eval", "blocked")};
  auto order = cancel_order(jobs);
  REQUIRE(order.size() == 3);
  CHECK(order[0].job_id() == "j-4");
  CHECK(order[1].job_id() == "j-3");
  CHECK(order[2].job_id() == "j-2");
  CHECK(cancel_order({member("j-1", "a", "failed")}).empty());
}

TEST_CASE("pipeline: docs/examples/pipeline.yaml reads: prep, two trainings, a fan-in",
          "[gateway][pipeline]") {
  std::ifstream in(std::string(TROUPE_SOURCE_DIR) + "/docs/examples/pipeline.yaml");
  REQUIRE(in);
  std::ostringstream text;
  text << in.rdbuf();
  auto f = parse_pipeline_file(text.str());
  INFO(f.error);
  REQUIRE(f.ok);
  std::string team;
  CHECK(pipeline_team("", f.pipeline, &team).empty());
  REQUIRE(f.pipeline.jobs_size() == 4);
  CHECK(f.pipeline.jobs(0).depends_on_size() == 0);
  CHECK(f.pipeline.jobs(1).depends_on(0).name() == "prep");
  CHECK(f.pipeline.jobs(2).depends_on(0).name() == "prep");
  REQUIRE(f.pipeline.jobs(3).depends_on_size() == 2);
  CHECK(f.pipeline.jobs(3).depends_on(0).name() == "train-a");
  CHECK(f.pipeline.jobs(3).depends_on(1).name() == "train-b");
  for (const auto& j : f.pipeline.jobs()) CHECK(j.resources().gpus() == 1);
}

TEST_CASE("pipeline: the status JSON keeps its order: id, state, counts by state, jobs",
          "[gateway][pipeline]") {
  auto text = pipeline_status_json(
      "p-1", {member("j-1", "prep", "succeeded"), member("j-2", "train", "running")});
  CHECK_THAT(text, Catch::StartsWith(R"({"pipeline_id":"p-1","state":"running","counts":)"
                                     R"({"running":1,"succeeded":1},"jobs":[{"job_id":"j-1",)"));
}

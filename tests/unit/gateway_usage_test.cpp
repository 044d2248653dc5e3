// Unit tests for gateway/usage: the CLI's usage errors (unknown verbs and
// flags named with the closest, a job command without --), durations and
// sizes with units, and the states --state accepts.
#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>

#include "gateway/usage.hpp"

using namespace troupe::gateway;

namespace {
const std::vector<std::string> kVerbs = {"submit", "status", "jobs", "cancel", "logs", "why"};
const std::vector<std::string> kGlobal = {"--nats", "--creds", "--tls-ca"};
VerbFlags submit_flags() {
  return {"submit", {"--team", "--gpus", "--max-runtime", "--env"}, {}};
}
}  // namespace

TEST_CASE("usage: an unknown verb is named, with the closest known one", "[gateway][usage]") {
  auto bad = unknown_verb({"stauts", "j-1"}, kVerbs, kGlobal);
  REQUIRE(bad);
  CHECK_THAT(*bad, Catch::Contains("unknown command 'stauts'") &&
                       Catch::Contains("did you mean 'status'?"));
  // Global flags and their values are skipped; a known verb is fine.
  CHECK_FALSE(unknown_verb({"--nats", "nats://x:1", "status", "j-1"}, kVerbs, kGlobal));
  CHECK_FALSE(unknown_verb({"--nats=nats://x:1", "jobs"}, kVerbs, kGlobal));
  CHECK_FALSE(unknown_verb({"--help"}, kVerbs, kGlobal));
  auto far = unknown_verb({"frobnicate"}, kVerbs, kGlobal);
  REQUIRE(far);
  CHECK(far->find("did you mean") == std::string::npos);
  CHECK_THAT(*far, Catch::Contains("the commands are submit, status"));
  CHECK(closest("canc", kVerbs) == "cancel");
}

TEST_CASE("usage: an unknown flag is named with the closest, a command without -- is shown with it",
          "[gateway][usage]") {
  auto gpu = usage_error(submit_flags(), kGlobal, {"submit", "--team", "nlp", "--gpu", "1"}, "x");
  CHECK_THAT(gpu, Catch::Contains("unknown flag --gpu") && Catch::Contains("'--gpus'"));
  auto cmd =
      usage_error(submit_flags(), kGlobal,
                  {"submit", "--team", "nlp", "--gpus", "1", "python", "train.py", "--lr", "0.1"},
                  "The following arguments were not expected: 0.1 --lr train.py");
  CHECK_THAT(cmd, Catch::Contains("put it after --") &&
                      Catch::Contains("troupe submit [flags] -- python train.py --lr 0.1"));
  auto two = usage_error(submit_flags(), kGlobal, {"submit", "a", "b"}, "extra");
  CHECK_THAT(two, Catch::Contains("-- a b"));
  // Other errors keep CLI11's text and point at --help.
  auto other =
      usage_error({"status", {"--team"}, {"--json"}}, kGlobal, {"status"}, "id is required");
  CHECK(other == "troupe status: id is required (see troupe status --help)");
  // A spec file and a bad value: not mistaken for a command.
  auto value = usage_error(submit_flags(), kGlobal, {"submit", "job.yaml", "--gpus", "x"},
                           "Could not convert: --gpus = x");
  CHECK_THAT(value, Catch::Contains("Could not convert"));
}

TEST_CASE("usage: durations with units", "[gateway][usage]") {
  CHECK(parse_duration_s("90") == 90);
  CHECK(parse_duration_s("90s") == 90);
  CHECK(parse_duration_s("15m") == 900);
  CHECK(parse_duration_s("1h30m") == 5400);
  CHECK(parse_duration_s("2d12h") == 216000);
  CHECK(parse_duration_s("1h") == 3600);
  CHECK_FALSE(parse_duration_s(""));
  CHECK_FALSE(parse_duration_s("1h30"));  // the unit of 30 is not said
  CHECK_FALSE(parse_duration_s("abc"));
  CHECK_FALSE(parse_duration_s("-5"));
  CHECK_FALSE(parse_duration_s("1w"));
  CHECK_FALSE(parse_duration_s("99999999999999999999"));
}

TEST_CASE("usage: sizes with units, in MiB", "[gateway][usage]") {
  CHECK(parse_size_mb("512") == 512);
  CHECK(parse_size_mb("512M") == 512);
  CHECK(parse_size_mb("64G") == 65536);
  CHECK(parse_size_mb("64Gi") == 65536);
  CHECK(parse_size_mb("64GB") == 65536);
  CHECK(parse_size_mb("64g") == 65536);
  CHECK(parse_size_mb("1T") == 1048576);
  CHECK(parse_size_mb("1536K") == 2);  // rounded up
  CHECK_FALSE(parse_size_mb("G"));
  CHECK_FALSE(parse_size_mb("12X"));
  CHECK_FALSE(parse_size_mb("-1"));
  CHECK_FALSE(parse_size_mb("99999999999999999999"));
}

TEST_CASE("usage: --state takes job states only", "[gateway][usage]") {
  CHECK(check_state("running").empty());
  CHECK(check_state("canceled").empty());
  auto bad = check_state("runing");
  CHECK_THAT(bad, Catch::Contains("unknown state 'runing'") && Catch::Contains("'running'"));
  CHECK_THAT(check_state("bogus"), Catch::Contains("the states are blocked, queued"));
}

TEST_CASE("usage: a job's end as an exit code (troupe wait)", "[gateway][usage][wait]") {
  troupe::pb::JobView v;
  v.set_state("running");
  CHECK(job_exit_code(v) == -1);
  v.set_state("succeeded");
  CHECK(job_exit_code(v) == 0);
  v.set_state("failed");
  v.set_exit_code(7);
  v.set_reason("rank 0 exited with code 7");
  std::string why;
  CHECK(job_exit_code(v, &why) == 7);
  CHECK(why == "rank 0 exited with code 7");
  v.add_attempts()->set_cause("max_runtime");
  CHECK(job_exit_code(v) == kRuntimeLimitExit);
  v.mutable_attempts(0)->set_cause("node_lost");
  v.clear_exit_code();
  CHECK(job_exit_code(v) == kNoExitCodeExit);
  v.set_exit_code(300);  // not an exit status
  CHECK(job_exit_code(v) == kNoExitCodeExit);
  v.set_state("canceled");
  CHECK(job_exit_code(v) == kCanceledExit);
}

TEST_CASE("usage: the completion script knows the verbs and each verb's flags",
          "[gateway][usage][completion]") {
  std::vector<VerbFlags> verbs = {submit_flags(), {"status", {"--team"}, {"--json"}}};
  auto bash = completion_script("bash", verbs, {"--nats", "--utc"}, {"--nats"});
  CHECK_THAT(bash, Catch::Contains("complete -F _troupe troupe"));
  CHECK_THAT(bash, Catch::Contains("submit) words=\"--team --gpus --max-runtime --env --help\""));
  CHECK_THAT(bash, Catch::Contains("\"\") words=\"submit status --nats --utc\""));
  CHECK_THAT(bash, Catch::Contains("--nats) ((i++))"));
  CHECK_THAT(completion_script("zsh", verbs, {}, {}), Catch::Contains("bashcompinit"));
  CHECK(completion_script("fish", verbs, {}, {}).empty());
}

TEST_CASE("usage: -o names an output, and YAML says what the JSON says",
          "[gateway][usage][output]") {
  CHECK(parse_output("wide") == Output::wide);
  CHECK(parse_output("yaml") == Output::yaml);
  CHECK_FALSE(parse_output("xml"));
  std::string json =
      R"({"job_id":"j-1","gpus":2,"ok":true,"end_ms":"0","tags":["a","010"],"x":null})";
  auto yaml = json_to_yaml(json);
  INFO(yaml);
  auto back = YAML::Load(yaml);
  CHECK(back["job_id"].as<std::string>() == "j-1");
  CHECK(back["gpus"].as<int>() == 2);
  CHECK(back["ok"].as<bool>());
  CHECK(back["end_ms"].as<std::string>() == "0");
  CHECK(back["end_ms"].Tag() == "!");  // quoted: a string stays a string
  CHECK(back["tags"][1].as<std::string>() == "010");
  CHECK(back["x"].IsNull());
  CHECK(json_to_yaml("not json").empty());
}

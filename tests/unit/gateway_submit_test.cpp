// gateway/submit_args: argv split at "--", --env pairs, spec from file + flags.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "gateway/submit_args.hpp"

using namespace troupe;
using namespace troupe::gateway;

TEST_CASE("gateway: split_at_dashdash keeps the command's own dashes", "[gateway][submit]") {
  const char* argv[] = {"troupe", "submit", "--team", "t",  "--",
                        "python", "-u",     "x.py",   "--", "--lr"};
  auto s = split_at_dashdash(10, argv);
  CHECK(s.had_dashdash);
  CHECK(s.options == std::vector<std::string>{"troupe", "submit", "--team", "t"});
  CHECK(s.command == std::vector<std::string>{"python", "-u", "x.py", "--", "--lr"});
  const char* plain[] = {"troupe", "jobs"};
  auto p = split_at_dashdash(2, plain);
  CHECK_FALSE(p.had_dashdash);
  CHECK(p.command.empty());
}

TEST_CASE("gateway: parse_env_pair", "[gateway][submit]") {
  CHECK(parse_env_pair("A=1") ==
        std::make_optional(std::make_pair(std::string("A"), std::string("1"))));
  CHECK(parse_env_pair("A=b=c")->second == "b=c");
  CHECK(parse_env_pair("A=")->second.empty());
  CHECK_FALSE(parse_env_pair("A"));
  CHECK_FALSE(parse_env_pair("=1"));
}

TEST_CASE("gateway: build_spec from flags only", "[gateway][submit]") {
  SubmitFlags f;
  f.team = "vision";
  f.kind = "training";
  f.gpus = 4;
  f.gpu_type = "a100";
  f.workers = 2;
  f.max_runtime_s = 600;
  f.max_retries = 1;
  f.idempotency_key = "k1";
  f.env = {"EPOCHS=3", "MODE=fast"};
  f.command = {"sh", "-c", "echo hi"};
  auto b = build_spec(std::nullopt, f);
  REQUIRE(b.ok);
  CHECK(b.spec.team() == "vision");
  CHECK(b.spec.resources().gpus() == 4);
  CHECK(b.spec.resources().gpu_type() == "a100");
  CHECK(b.spec.workers() == 2);
  CHECK(b.spec.max_runtime_s() == 600);
  CHECK(b.spec.idempotency_key() == "k1");
  CHECK(b.spec.env().at("MODE") == "fast");
  CHECK(b.spec.command_size() == 3);
  CHECK(check_spec(b.spec).empty());
}

TEST_CASE("gateway: build_spec lets flags override the file", "[gateway][submit]") {
  std::string yaml = R"(
name: bert
team: nlp
kind: inference
command: [python, serve.py]
resources: {gpus: 1, gpu_type: h100}
env: {A: "1"}
)";
  SubmitFlags f;
  f.team = "research";
  f.gpus = 2;
  f.env = {"B=2"};
  auto b = build_spec(yaml, f);
  REQUIRE(b.ok);
  CHECK(b.spec.name() == "bert");
  CHECK(b.spec.team() == "research");
  CHECK(b.spec.kind() == "inference");
  CHECK(b.spec.resources().gpus() == 2);
  CHECK(b.spec.resources().gpu_type() == "h100");
  CHECK(b.spec.env().size() == 2);
  CHECK(b.spec.command(1) == "serve.py");
  // A command after -- replaces the file's.
  f.command = {"echo", "x"};
  CHECK(build_spec(yaml, f).spec.command_size() == 2);
}

TEST_CASE("gateway: build_spec and check_spec explain what is wrong", "[gateway][submit]") {
  SubmitFlags bad_env;
  bad_env.env = {"NOEQUALS"};
  auto b = build_spec(std::nullopt, bad_env);
  CHECK_FALSE(b.ok);
  CHECK_THAT(b.error, Catch::Contains("KEY=VALUE"));

  CHECK_FALSE(build_spec(std::string("{\"team\": "), {}).ok);

  SubmitFlags none;
  none.command = {"true"};
  CHECK_THAT(check_spec(build_spec(std::nullopt, none).spec), Catch::Contains("--team"));
  SubmitFlags nocmd;
  nocmd.team = "t";
  CHECK_THAT(check_spec(build_spec(std::nullopt, nocmd).spec), Catch::Contains("after --"));
  SubmitFlags kind;
  kind.team = "t";
  kind.kind = "dreaming";
  kind.command = {"true"};
  CHECK_THAT(check_spec(build_spec(std::nullopt, kind).spec), Catch::Contains("unknown kind"));
  SubmitFlags sys;
  sys.team = "sys";
  sys.command = {"true"};
  CHECK_FALSE(check_spec(build_spec(std::nullopt, sys).spec).empty());
}

TEST_CASE("gateway: --array N[%K] makes an array spec", "[gateway][submit][arrays]") {
  SubmitFlags f;
  f.team = "t";
  f.command = {"true"};
  f.array = "20%3";
  auto b = build_spec(std::nullopt, f);
  REQUIRE(b.ok);
  CHECK(b.spec.array().count() == 20);
  CHECK(b.spec.array().parallelism() == 3);
  f.array = "5";
  b = build_spec(std::nullopt, f);
  REQUIRE(b.ok);
  CHECK(b.spec.array().count() == 5);
  CHECK(b.spec.array().parallelism() == 0);
  for (const char* bad : {"", "%3", "5%", "0-19", "-1", "1e3", "99999999999"}) {
    f.array = bad;
    INFO(bad);
    CHECK_FALSE(build_spec(std::nullopt, f).ok);
  }
}

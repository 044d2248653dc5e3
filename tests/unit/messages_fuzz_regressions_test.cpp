// Inputs that the fuzz targets (tests/fuzz, docs/fuzzing.md) showed to break a
// decoder, kept here so that the fix stays.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "messages/spec.hpp"

using namespace troupe;

namespace {

// "Billion laughs": each level names the one below ten times, so these few
// hundred bytes of YAML are 10^9 scalars once the aliases are expanded.
std::string laughs(const std::string& head) {
  std::string y = head + "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 8; ++i) {
    std::string prev = "*a" + std::to_string(i - 1);
    y += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) y += (k ? ", " : "") + prev;
    y += "]\n";
  }
  return y;
}

}  // namespace

TEST_CASE("spec: YAML aliases that expand without bound are refused quickly",
          "[messages][spec][fuzz]") {
  // fuzz_spec_yaml and fuzz_config: spec::yaml_to_json expanded every alias,
  // so this ran until memory ran out (a spec file for troupe submit, or the
  // scheduler's --config on start and on SIGHUP).
  std::string text = laughs("command: [\"true\"]\n");
  auto start = std::chrono::steady_clock::now();
  auto p = spec::from_yaml(text);
  CHECK_FALSE(p.ok);
  CHECK_THAT(p.error, Catch::Contains("aliases expand the document too far"));
  pb::JobSpec s;
  CHECK_THAT(spec::parse_text(text, s), Catch::Contains("aliases expand the document too far"));
  CHECK_FALSE(spec::from_text(text).ok);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
}

TEST_CASE("spec: YAML aliases within bounds and long alias-free files still parse",
          "[messages][spec][fuzz]") {
  auto p = spec::from_yaml("command: [&p python, train.py]\nenv: {INTERPRETER: *p}\n");
  INFO(p.error);
  REQUIRE(p.ok);
  CHECK(p.spec.env().at("INTERPRETER") == "python");
  auto q = spec::from_yaml("res: &r {gpus: 2}\nresources: *r\ncommand: [x]\n");
  CHECK_FALSE(q.ok);  // the alias expands, and "res" is an unknown field
  CHECK_THAT(q.error, Catch::Contains("res"));

  // A file whose JSON is well past the 1 MiB floor of the bound.
  std::string big = "command:\n";
  for (int i = 0; i < 120000; ++i) big += "  - arg" + std::to_string(i) + "\n";
  auto b = spec::from_yaml(big);
  INFO(b.error);
  REQUIRE(b.ok);
  CHECK(b.spec.command_size() == 120000);
  CHECK(b.spec.command(119999) == "arg119999");
}

TEST_CASE("spec: YAML that holds itself, or nests too deep, is refused (no stack overflow)",
          "[messages][spec][fuzz]") {
  // fuzz_spec_yaml (CI, 2026-12-07): an alias inside its own anchor is a node
  // that contains itself; yaml_to_json recursed once per level, one byte of
  // JSON each, and ran out of stack long before the length bound.
  for (std::string text :
       {std::string("command: [x]\nenv: &a [*a]\n"), std::string("command: &c [a, *c]\n"),
        std::string("x: &m {k: *m}\ncommand: [x]\n")}) {
    INFO(text);
    auto p = spec::from_yaml(text);
    CHECK_FALSE(p.ok);
    CHECK_THAT(p.error, Catch::Contains("levels deep"));
    pb::JobSpec s;
    CHECK_THAT(spec::parse_text(text, s), Catch::Contains("levels deep"));
    CHECK_FALSE(spec::from_text(text).ok);
  }
  // Plain nesting past the bound (yaml-cpp itself refuses only far more).
  std::string deep = "command: [x]\nenv: ";
  for (int i = 0; i < 100; ++i) deep += "[";
  for (int i = 0; i < 100; ++i) deep += "]";
  auto d = spec::from_yaml(deep + "\n");
  CHECK_FALSE(d.ok);
  CHECK_THAT(d.error, Catch::Contains("levels deep"));
  // Nesting within it reads, and fails only for what the schema says.
  std::string ok = "command: [x]\nlabels: {a: ";
  for (int i = 0; i < 20; ++i) ok += "[";
  for (int i = 0; i < 20; ++i) ok += "]";
  auto o = spec::from_yaml(ok + "}\n");
  CHECK_FALSE(o.ok);
  CHECK_THAT(o.error, !Catch::Contains("levels deep"));
}

TEST_CASE("a YAML key with a quote in it stays one key (it cannot inject JSON fields)",
          "[messages][spec][fuzz]") {
  // Unescaped, this key would read as: "name": "n", "team": "x", "kind": "training".
  auto p = troupe::spec::from_yaml(
      "'name\": \"n\", \"team\": \"x\", \"kind': training\ncommand: [\"true\"]\n");
  INFO(p.error);
  if (p.ok)
    CHECK(p.spec.team() != "x");
  else
    CHECK_FALSE(p.error.empty());  // refused (an unknown field): never read as team "x"
}

TEST_CASE("spec: a single value where a list is due is refused by every JSON reader alike",
          "[messages][spec][fuzz]") {
  // fuzz_spec_yaml: from_json refused a string command, parse_text (the
  // same JSON, read for any message) took it as a list of one.
  const std::string text =
      "{\"name\": \"bert-large\", \"team\": \"nlp\", \"kind\": \"training\",\n"
      " \"command\": \"high\", \"max_runtime_s\": \"3600\", \"max_retries\": 1}\n";
  auto p = spec::from_text(text);
  pb::JobSpec s;
  auto err = spec::parse_text(text, s);
  CHECK_FALSE(p.ok);
  CHECK_FALSE(err.empty());
  CHECK_THAT(err, Catch::Contains("command is a list"));
  // Nested: a pipeline member's command, a resource's gpu_types.
  pb::Pipeline pipe;
  CHECK_THAT(spec::parse_text(R"({"jobs":[{"name":"a","command":"echo hi"}]})", pipe),
             Catch::Contains("jobs[0].command is a list"));
  CHECK_THAT(spec::parse_text(R"({"command":["x"],"resources":{"gpu_types":"a100"}})", s),
             Catch::Contains("resources.gpu_types is a list"));
  // One-element lists written as lists are fine.
  CHECK(spec::parse_text(R"({"command":["x"],"resources":{"gpu_types":["a100"]}})", s).empty());
}

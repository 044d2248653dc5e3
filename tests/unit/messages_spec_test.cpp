// messages/spec: JSON and YAML parsing, validation, wire round trip.
#include <google/protobuf/util/message_differencer.h>

#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <vector>

#include "messages/spec.hpp"

using namespace troupe;
using google::protobuf::util::MessageDifferencer;

namespace {

const char* kJsonSpec = R"({
  "name": "bert-large",
  "team": "nlp",
  "kind": "training",
  "command": ["python", "train.py", "--lr", "0.001"],
  "env": {"EPOCHS": "3", "MODE": "full"},
  "image": "registry/bert:1",
  "resources": {"gpus": 4, "gpu_type": "a100", "cpus": 16, "memory_mb": "65536"},
  "workers": 2,
  "priority": "high",
  "max_runtime_s": "3600",
  "max_retries": 2,
  "idempotency_key": "bert-run-7"
})";

const char* kYamlSpec = R"(
name: bert-large
team: nlp
kind: training
command: [python, train.py, --lr, "0.001"]
env:
  EPOCHS: "3"
  MODE: full
image: registry/bert:1
resources:
  gpus: 4
  gpu_type: a100
  cpus: 16
  memory_mb: 65536
workers: 2
priority: high
max_runtime_s: 3600
max_retries: 2
idempotency_key: bert-run-7
)";

pb::JobSpec valid_spec() {
  pb::JobSpec s;
  s.set_name("ok");
  s.set_team("vision");
  s.set_kind("training");
  s.add_command("true");
  s.mutable_resources()->set_gpus(1);
  return s;
}

}  // namespace

TEST_CASE("spec: JSON parses every field", "[messages][spec]") {
  auto p = spec::from_json(kJsonSpec);
  INFO(p.error);
  REQUIRE(p.ok);
  const auto& s = p.spec;
  CHECK(s.name() == "bert-large");
  CHECK(s.team() == "nlp");
  CHECK(s.kind() == "training");
  REQUIRE(s.command_size() == 4);
  CHECK(s.command(3) == "0.001");
  CHECK(s.env().at("EPOCHS") == "3");
  CHECK(s.env().at("MODE") == "full");
  CHECK(s.image() == "registry/bert:1");
  CHECK(s.resources().gpus() == 4);
  CHECK(s.resources().gpu_type() == "a100");
  CHECK(s.resources().cpus() == 16);
  CHECK(s.resources().memory_mb() == 65536);
  CHECK(s.has_workers());
  CHECK(s.workers() == 2);
  CHECK(s.priority() == "high");
  CHECK(s.max_runtime_s() == 3600);
  CHECK(s.max_retries() == 2);
  CHECK(s.idempotency_key() == "bert-run-7");
  CHECK(spec::validate(s).empty());
}

TEST_CASE("spec: the same spec in JSON and YAML gives equal protobuf", "[messages][spec]") {
  auto j = spec::from_json(kJsonSpec);
  auto y = spec::from_yaml(kYamlSpec);
  INFO("json error: " << j.error << " / yaml error: " << y.error);
  REQUIRE(j.ok);
  REQUIRE(y.ok);
  std::string diff;
  MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  INFO(diff);
  CHECK(d.Compare(j.spec, y.spec));

  // from_text picks the parser by the first character.
  auto tj = spec::from_text(std::string("  \n") + kJsonSpec);
  auto ty = spec::from_text(kYamlSpec);
  REQUIRE(tj.ok);
  REQUIRE(ty.ok);
  CHECK(MessageDifferencer::Equals(tj.spec, j.spec));
  CHECK(MessageDifferencer::Equals(ty.spec, j.spec));
}

TEST_CASE("spec: lowerCamelCase JSON names are accepted", "[messages][spec]") {
  auto p = spec::from_json(
      R"({"team":"t","command":["x"],"resources":{"gpuType":"h100"},"maxRetries":1,"idempotencyKey":"k"})");
  INFO(p.error);
  REQUIRE(p.ok);
  CHECK(p.spec.resources().gpu_type() == "h100");
  CHECK(p.spec.max_retries() == 1);
  CHECK(p.spec.idempotency_key() == "k");
}

TEST_CASE("spec: YAML quoted scalars stay strings, plain numbers become numbers",
          "[messages][spec]") {
  auto p = spec::from_yaml(
      "team: t\ncommand: [echo, '1', \"2\"]\nresources: {gpus: 2}\n"
      "env: {A: '007'}\n");
  INFO(p.error);
  REQUIRE(p.ok);
  REQUIRE(p.spec.command_size() == 3);
  CHECK(p.spec.command(1) == "1");
  CHECK(p.spec.command(2) == "2");
  CHECK(p.spec.resources().gpus() == 2);
  CHECK(p.spec.env().at("A") == "007");
}

TEST_CASE("spec: parse errors are reported, not thrown", "[messages][spec]") {
  SECTION("truncated JSON") {
    auto p = spec::from_json(R"({"team":)");
    CHECK_FALSE(p.ok);
    CHECK_THAT(p.error, Catch::Contains("invalid JSON"));
  }
  SECTION("empty input") {
    auto p = spec::from_json("");
    CHECK_FALSE(p.ok);
    CHECK_FALSE(p.error.empty());
  }
  SECTION("unknown field") {
    auto p = spec::from_json(R"({"team":"t","gpus_please":3})");
    CHECK_FALSE(p.ok);
    CHECK_THAT(p.error, Catch::Contains("gpus_please"));
  }
  SECTION("wrong type") {
    auto p = spec::from_json(R"({"team":"t","resources":{"gpus":"many"}})");
    CHECK_FALSE(p.ok);
    CHECK_FALSE(p.error.empty());
  }
  SECTION("not JSON at all") {
    auto p = spec::from_json("\x01\x02\xff garbage");
    CHECK_FALSE(p.ok);
  }
  SECTION("YAML that is not a mapping") {
    auto p = spec::from_yaml("- a\n- b\n");
    CHECK_FALSE(p.ok);
    CHECK_THAT(p.error, Catch::Contains("invalid YAML"));
  }
  SECTION("broken YAML") {
    auto p = spec::from_yaml("team: [unclosed\n");
    CHECK_FALSE(p.ok);
    CHECK_THAT(p.error, Catch::Contains("invalid YAML"));
  }
  SECTION("YAML with an unknown field") {
    auto p = spec::from_yaml("team: t\nbogus_field: 1\n");
    CHECK_FALSE(p.ok);
    CHECK_THAT(p.error, Catch::Contains("invalid YAML"));
  }
}

TEST_CASE("spec: defaults", "[messages][spec]") {
  pb::JobSpec s;
  s.set_team("t");
  s.add_command("x");
  spec::apply_defaults(s);
  CHECK(s.has_workers());
  CHECK(s.workers() == 1);
  CHECK(s.priority() == "normal");
  CHECK(s.kind() == "training");
  CHECK(s.resources().gpu_type().empty());
  CHECK(spec::validate(s).empty());

  // Defaults never overwrite what was given.
  pb::JobSpec g = valid_spec();
  g.set_workers(3);
  g.set_priority("low");
  g.set_kind("evaluation");
  spec::apply_defaults(g);
  CHECK(g.workers() == 3);
  CHECK(g.priority() == "low");
  CHECK(g.kind() == "evaluation");
}

TEST_CASE("spec: validation table", "[messages][spec]") {
  struct Row {
    const char* name;
    std::function<void(pb::JobSpec&)> change;
    const char* error_contains;  // nullptr: the spec is valid
  };
  const std::vector<Row> rows = {
      {"valid: one GPU training", [](pb::JobSpec&) {}, nullptr},
      {"valid: zero-GPU inference",
       [](pb::JobSpec& s) {
         s.set_kind("inference");
         s.mutable_resources()->set_gpus(0);
       },
       nullptr},
      {"valid: gang of 2 x 4 GPUs",
       [](pb::JobSpec& s) {
         s.set_workers(2);
         s.mutable_resources()->set_gpus(4);
         s.mutable_resources()->set_gpu_type("a100");
       },
       nullptr},
      {"valid: evaluation, high priority, retries, runtime",
       [](pb::JobSpec& s) {
         s.set_kind("evaluation");
         s.set_priority("high");
         s.set_max_retries(3);
         s.set_max_runtime_s(60);
       },
       nullptr},
      {"valid: 64 GPUs per worker (the limit)",
       [](pb::JobSpec& s) { s.mutable_resources()->set_gpus(64); }, nullptr},
      {"gpus -1", [](pb::JobSpec& s) { s.mutable_resources()->set_gpus(-1); }, "resources.gpus"},
      {"unknown kind", [](pb::JobSpec& s) { s.set_kind("bogus"); }, "kind"},
      {"empty kind (defaults not applied)", [](pb::JobSpec& s) { s.set_kind(""); }, "kind"},
      {"1000 GPUs per worker", [](pb::JobSpec& s) { s.mutable_resources()->set_gpus(1000); },
       "resources.gpus"},
      {"workers 0", [](pb::JobSpec& s) { s.set_workers(0); }, "workers"},
      {"workers -2", [](pb::JobSpec& s) { s.set_workers(-2); }, "workers"},
      {"workers over the limit", [](pb::JobSpec& s) { s.set_workers(5000); }, "workers"},
      {"gang without GPUs",
       [](pb::JobSpec& s) {
         s.set_workers(2);
         s.mutable_resources()->set_gpus(0);
       },
       "gang"},
      {"team 'sys'", [](pb::JobSpec& s) { s.set_team("sys"); }, "sys"},
      {"team with a dot", [](pb::JobSpec& s) { s.set_team("a.b"); }, "team"},
      {"team with a wildcard", [](pb::JobSpec& s) { s.set_team("a*"); }, "team"},
      {"missing team", [](pb::JobSpec& s) { s.set_team(""); }, "team"},
      {"missing command", [](pb::JobSpec& s) { s.clear_command(); }, "command"},
      {"unknown priority", [](pb::JobSpec& s) { s.set_priority("urgent"); }, "priority"},
      {"negative cpus", [](pb::JobSpec& s) { s.mutable_resources()->set_cpus(-1); }, "cpus"},
      {"negative memory", [](pb::JobSpec& s) { s.mutable_resources()->set_memory_mb(-1); },
       "memory_mb"},
      {"gpu_type with a dot", [](pb::JobSpec& s) { s.mutable_resources()->set_gpu_type("a.100"); },
       "gpu_type"},
      {"negative max_runtime_s", [](pb::JobSpec& s) { s.set_max_runtime_s(-5); }, "max_runtime_s"},
      {"negative max_retries", [](pb::JobSpec& s) { s.set_max_retries(-1); }, "max_retries"},
      {"idempotency_key too long",
       [](pb::JobSpec& s) { s.set_idempotency_key(std::string(257, 'k')); }, "idempotency_key"},
  };
  for (const auto& row : rows) {
    DYNAMIC_SECTION(row.name) {
      pb::JobSpec s = valid_spec();
      row.change(s);
      std::string err = spec::validate(s);
      if (row.error_contains == nullptr) {
        INFO("error: " << err);
        CHECK(err.empty());
      } else {
        REQUIRE_FALSE(err.empty());
        CHECK_THAT(err, Catch::Contains(row.error_contains));
      }
    }
  }
}

TEST_CASE("spec: custom limits are honoured", "[messages][spec]") {
  pb::JobSpec s = valid_spec();
  s.mutable_resources()->set_gpus(9);
  spec::Limits l;
  l.max_gpus_per_worker = 8;
  CHECK_THAT(spec::validate(s, l), Catch::Contains("resources.gpus"));
  l.max_gpus_per_worker = 9;
  CHECK(spec::validate(s, l).empty());
  s.set_workers(3);
  l.max_workers = 2;
  CHECK_THAT(spec::validate(s, l), Catch::Contains("workers"));
}

TEST_CASE("spec: to_wire / from_wire round trip", "[messages][spec][wire]") {
  auto p = spec::from_json(kJsonSpec);
  REQUIRE(p.ok);

  flatbuffers::FlatBufferBuilder fbb;
  auto bytes = wire::seal(fbb, wire::CreateSubmitRequest(fbb, spec::to_wire(fbb, p.spec)));
  const wire::Envelope* env = wire::open(bytes);
  REQUIRE(env != nullptr);
  REQUIRE(env->body_type() == wire::Body::SubmitRequest);
  auto back = spec::from_wire(env->body_as_SubmitRequest()->spec());
  INFO(back.error);
  REQUIRE(back.ok);

  std::string diff;
  MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  INFO(diff);
  CHECK(d.Compare(p.spec, back.spec));
}

TEST_CASE("spec: to_wire fills workers 1 when unset", "[messages][spec][wire]") {
  pb::JobSpec s = valid_spec();
  REQUIRE_FALSE(s.has_workers());
  flatbuffers::FlatBufferBuilder fbb;
  auto bytes = wire::seal(fbb, wire::CreateSubmitRequest(fbb, spec::to_wire(fbb, s)));
  const wire::Envelope* env = wire::open(bytes);
  REQUIRE(env != nullptr);
  auto back = spec::from_wire(env->body_as_SubmitRequest()->spec());
  REQUIRE(back.ok);
  CHECK(back.spec.workers() == 1);
  CHECK(back.spec.team() == "vision");
  CHECK(back.spec.resources().gpus() == 1);
}

TEST_CASE("spec: from_wire without a spec is an error", "[messages][spec][wire]") {
  auto p = spec::from_wire(nullptr);
  CHECK_FALSE(p.ok);
  CHECK_FALSE(p.error.empty());
}

TEST_CASE("spec: to_json / parse_json round trip of a JobEvent", "[messages][spec]") {
  pb::JobEvent e;
  e.set_job_id("j-00ff");
  e.set_team("t");
  e.set_state("failed");
  e.set_attempt(1);
  e.set_ts_ms(1700000000123);
  auto* w = e.add_workers();
  w->set_rank(0);
  w->set_node("n1");
  w->add_gpus(2);
  e.set_exit_code(0);  // optional: present even when zero
  e.set_reason("exited with code 0");

  std::string json = spec::to_json(e);
  CHECK_THAT(json, Catch::Contains("\"job_id\""));
  CHECK_THAT(json, Catch::Contains("\"exit_code\":0"));
  CHECK_THAT(json, Catch::Contains("\"ts_ms\":\"1700000000123\""));  // int64 as string

  pb::JobEvent back;
  REQUIRE(spec::parse_json(json, back).empty());
  CHECK(MessageDifferencer::Equals(e, back));
  CHECK(back.has_exit_code());

  pb::JobEvent bad;
  CHECK_FALSE(spec::parse_json("{\"state\":", bad).empty());
}

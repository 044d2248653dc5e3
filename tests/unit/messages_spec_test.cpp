// messages/spec: JSON and YAML parsing, validation, wire round trip.
#include <google/protobuf/util/message_differencer.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "messages/json_number.hpp"
#include "messages/json_text.hpp"
#include "messages/log_chunks.hpp"
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

TEST_CASE("spec: hostile sizes are refused as too_large, naming the limit and the value",
          "[messages][spec][limits]") {
  struct Row {
    const char* name;
    std::function<void(pb::JobSpec&)> change;
    const char* limit;  // the limit's name, in the message
    const char* value;  // the value, in the message
  };
  const std::vector<Row> rows = {
      {"60,000 env entries",
       [](pb::JobSpec& s) {
         for (int i = 0; i < 60000; ++i) (*s.mutable_env())["K" + std::to_string(i)] = "v";
       },
       "max_env_entries", "60000"},
      {"one 100 KB env value",
       [](pb::JobSpec& s) { (*s.mutable_env())["BIG"] = std::string(100000, 'x'); },
       "max_env_bytes", "100003"},
      {"5,000 arguments",
       [](pb::JobSpec& s) {
         for (int i = 0; i < 5000; ++i) s.add_command("a");
       },
       "max_command_args", "5001"},
      {"a 200 KB argument", [](pb::JobSpec& s) { s.add_command(std::string(200000, 'a')); },
       "max_command_bytes", "200004"},
      {"name of 129 bytes", [](pb::JobSpec& s) { s.set_name(std::string(129, 'n')); },
       "max_name_bytes", "129"},
      {"image of 2,000 bytes", [](pb::JobSpec& s) { s.set_image(std::string(2000, 'i')); },
       "max_image_bytes", "2000"},
      {"idempotency_key of 257 bytes",
       [](pb::JobSpec& s) { s.set_idempotency_key(std::string(257, 'k')); },
       "max_idempotency_key_bytes", "257"},
  };
  for (const auto& row : rows) {
    DYNAMIC_SECTION(row.name) {
      pb::JobSpec s = valid_spec();
      row.change(s);
      auto v = spec::check(s);
      CHECK(v.kind == spec::Verdict::Kind::too_large);
      CHECK_THAT(v.error, Catch::Contains(row.limit));
      CHECK_THAT(v.error, Catch::Contains(row.value));
      CHECK(spec::validate(s) == v.error);
    }
  }
}

TEST_CASE("spec: the launch estimate bounds command and env together", "[messages][spec][limits]") {
  // Under the default limits the parts alone keep a launch under 256 KiB; an
  // operator's smaller max_launch_bytes catches parts that are each allowed.
  pb::JobSpec s = valid_spec();
  for (int i = 0; i < 2000; ++i) s.add_command(std::string(30, 'a'));  // 60 KB
  for (int i = 0; i < 200; ++i)
    (*s.mutable_env())["K" + std::to_string(i)] = std::string(250, 'v');  // 50 KB
  CHECK(spec::check(s).ok());
  spec::Limits l;
  l.max_launch_bytes = 100 * 1024;
  auto v = spec::check(s, l);
  CHECK(v.kind == spec::Verdict::Kind::too_large);
  CHECK_THAT(v.error, Catch::Contains("max_launch_bytes 102400"));
  CHECK_THAT(v.error, Catch::Contains("about " + std::to_string(spec::launch_bytes_estimate(s))));
  // The largest spec the default parts allow still fits the default launch limit.
  pb::JobSpec big = valid_spec();
  big.clear_command();
  for (int i = 0; i < 4096; ++i) big.add_command(std::string(32, 'a'));
  for (int i = 0; i < 256; ++i)
    (*big.mutable_env())["K" + std::to_string(1000 + i)] = std::string(251, 'v');
  big.set_name(std::string(128, 'n'));
  big.set_image(std::string(1024, 'i'));
  INFO(spec::check(big).error);
  CHECK(spec::check(big).ok());
}

TEST_CASE("spec: impossible values are refused as invalid, naming the limit and the value",
          "[messages][spec][limits]") {
  struct Row {
    const char* name;
    std::function<void(pb::JobSpec&)> change;
    const char* contains;
  };
  const std::vector<Row> rows = {
      {"max_runtime_s 2^63-1", [](pb::JobSpec& s) { s.set_max_runtime_s(9223372036854775807LL); },
       "max_runtime_s 9223372036854775807 is more than 2592000"},
      {"max_retries 2^31-1", [](pb::JobSpec& s) { s.set_max_retries(2147483647); },
       "max_retries 2147483647 is more than 100"},
      {"1,024 workers x 64 GPUs",
       [](pb::JobSpec& s) {
         s.set_workers(1024);
         s.mutable_resources()->set_gpus(64);
       },
       "65536 GPUs (1024 workers x 64); limit max_gpus_per_job 32768"},
      {"grace_s 2^31-1", [](pb::JobSpec& s) { s.set_grace_s(2147483647); },
       "grace_s 2147483647 is outside 0..3600"},
      {"negative grace_s", [](pb::JobSpec& s) { s.set_grace_s(-1); }, "grace_s -1"},
      {"newline in the name", [](pb::JobSpec& s) { s.set_name("a\nb"); },
       "name contains the control character 0x0a"},
      {"escape in the name", [](pb::JobSpec& s) { s.set_name("\x1b[31mred"); }, "0x1b"},
      {"DEL in the image", [](pb::JobSpec& s) { s.set_image("img\x7f"); }, "0x7f"},
      {"CR LF in the idempotency key (a header injection)",
       [](pb::JobSpec& s) { s.set_idempotency_key("k\r\nNats-Msg-Id: other"); },
       "idempotency_key contains the control character 0x0d"},
      {"env key with '='", [](pb::JobSpec& s) { (*s.mutable_env())["A=B"] = "v"; },
       "env key 'A=B' is not a variable name"},
      {"env key starting with a digit", [](pb::JobSpec& s) { (*s.mutable_env())["1A"] = "v"; },
       "env key '1A'"},
      {"empty env key", [](pb::JobSpec& s) { (*s.mutable_env())[""] = "v"; }, "env key ''"},
      {"env key with a newline", [](pb::JobSpec& s) { (*s.mutable_env())["A\nB"] = "v"; },
       "env key 'A?B'"},
      {"NUL in an env value",
       [](pb::JobSpec& s) { (*s.mutable_env())["A"] = std::string("x\0y", 3); },
       "env value of A contains a NUL byte"},
      {"NUL in an argument", [](pb::JobSpec& s) { s.add_command(std::string("a\0b", 3)); },
       "command argument 1 contains a NUL byte"},
      {"workers over the limit names the value", [](pb::JobSpec& s) { s.set_workers(5000); },
       "(got 5000)"},
  };
  for (const auto& row : rows) {
    DYNAMIC_SECTION(row.name) {
      pb::JobSpec s = valid_spec();
      row.change(s);
      auto v = spec::check(s);
      CHECK(v.kind == spec::Verdict::Kind::invalid);
      CHECK_THAT(v.error, Catch::Contains(row.contains));
    }
  }
}

TEST_CASE("spec: values at the limits are accepted", "[messages][spec][limits]") {
  pb::JobSpec s = valid_spec();
  s.set_name(std::string(128, 'n'));
  s.set_max_runtime_s(30LL * 24 * 3600);
  s.set_max_retries(100);
  s.set_grace_s(3600);
  s.set_workers(512);
  s.mutable_resources()->set_gpus(64);  // 32768 GPUs: max_gpus_per_job
  for (int i = 0; i < 256; ++i) (*s.mutable_env())["K_" + std::to_string(i)] = "line1\nline2";
  s.set_idempotency_key(std::string(256, 'k'));
  auto v = spec::check(s);
  INFO(v.error);
  CHECK(v.ok());
  CHECK(spec::launch_bytes_estimate(s) < 256 * 1024);
}

TEST_CASE("spec: the launch estimate is an upper bound of the encoded Launch",
          "[messages][spec][limits]") {
  pb::JobSpec s = valid_spec();
  for (int i = 0; i < 200; ++i) s.add_command(std::string(i % 50, 'a'));
  for (int i = 0; i < 200; ++i) (*s.mutable_env())["K" + std::to_string(i)] = std::string(i, 'v');
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(spec::to_wire(fbb, s));
  CHECK(static_cast<int64_t>(fbb.GetSize()) < spec::launch_bytes_estimate(s));
  CHECK(static_cast<int64_t>(s.ByteSizeLong()) < spec::launch_bytes_estimate(s));
}

TEST_CASE("spec: fingerprints are stable and tell specs apart", "[messages][spec]") {
  pb::JobSpec a = valid_spec();
  (*a.mutable_env())["B"] = "2";
  (*a.mutable_env())["A"] = "1";
  pb::JobSpec b = valid_spec();
  (*b.mutable_env())["A"] = "1";
  (*b.mutable_env())["B"] = "2";
  CHECK(spec::fingerprint(a) == spec::fingerprint(b));  // map order does not matter
  pb::JobSpec c = a;
  c.add_command("--more");
  CHECK(spec::fingerprint(a) != spec::fingerprint(c));
  pb::JobSpec d = a;
  d.mutable_resources()->set_gpus(2);
  CHECK(spec::fingerprint(a) != spec::fingerprint(d));
  // The same spec through its bytes and back.
  pb::JobSpec e;
  REQUIRE(e.ParseFromString(a.SerializeAsString()));
  CHECK(spec::fingerprint(a) == spec::fingerprint(e));
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

namespace {
// A spec as a FlatBuffers submitter sends it, read back.
spec::Parsed over_the_wire(const pb::JobSpec& s) {
  flatbuffers::FlatBufferBuilder fbb;
  auto bytes = wire::seal(fbb, wire::CreateSubmitRequest(fbb, spec::to_wire(fbb, s)));
  const wire::Envelope* env = wire::open(bytes);
  if (env == nullptr) return {};
  return spec::from_wire(env->body_as_SubmitRequest()->spec());
}
}  // namespace

TEST_CASE("spec: resources.gpu_types is bounded and token-checked, and survives the wire",
          "[messages][spec][anytype]") {
  pb::JobSpec s = valid_spec();
  s.mutable_resources()->add_gpu_types("h100");
  s.mutable_resources()->add_gpu_types("a100");
  CHECK(spec::validate(s).empty());
  // Over the wire (FlatBuffers submitters) the list keeps its order.
  auto back = over_the_wire(s);
  REQUIRE(back.ok);
  REQUIRE(back.spec.resources().gpu_types_size() == 2);
  CHECK(back.spec.resources().gpu_types(0) == "h100");
  // Hostile: a name that is not a token, and more types than the limit.
  pb::JobSpec bad = s;
  bad.mutable_resources()->add_gpu_types("a100/../x");
  CHECK_THAT(spec::validate(bad), Catch::Contains("resources.gpu_types"));
  pb::JobSpec many = valid_spec();
  spec::Limits l;
  for (int i = 0; i <= l.max_gpu_types; ++i)
    many.mutable_resources()->add_gpu_types("t" + std::to_string(i));
  CHECK_THAT(spec::validate(many, l), Catch::Contains("at most 16"));
}

TEST_CASE("spec: resources.gpu_memory_mb asks for part of one GPU, and survives the wire",
          "[messages][spec][shared]") {
  pb::JobSpec s = valid_spec();
  s.mutable_resources()->set_gpus(1);
  s.set_workers(1);
  s.mutable_resources()->set_gpu_memory_mb(4000);
  CHECK(spec::validate(s).empty());
  auto back = over_the_wire(s);
  REQUIRE(back.ok);
  CHECK(back.spec.resources().gpu_memory_mb() == 4000);
  // Impossible or hostile: negative, larger than any GPU, several GPUs, a gang.
  pb::JobSpec neg = s;
  neg.mutable_resources()->set_gpu_memory_mb(-1);
  CHECK_THAT(spec::validate(neg), Catch::Contains("gpu_memory_mb must be >= 0"));
  pb::JobSpec huge = s;
  huge.mutable_resources()->set_gpu_memory_mb(INT64_MAX);
  CHECK_THAT(spec::validate(huge), Catch::Contains("more than any GPU has"));
  pb::JobSpec two = s;
  two.mutable_resources()->set_gpus(2);
  CHECK_THAT(spec::validate(two), Catch::Contains("needs resources.gpus 1 and one worker"));
  pb::JobSpec gang = s;
  gang.set_workers(2);
  CHECK_THAT(spec::validate(gang), Catch::Contains("needs resources.gpus 1 and one worker"));
  // Read from JSON as users write it.
  auto parsed = spec::from_json(
      R"({"team":"a","command":["x"],"resources":{"gpus":1,"gpu_memory_mb":2048}})");
  REQUIRE(parsed.ok);
  CHECK(parsed.spec.resources().gpu_memory_mb() == 2048);
}

TEST_CASE("spec: YAML is read by the schema: numbers in command and env stay strings",
          "[messages][spec][yaml]") {
  auto p = spec::from_yaml(
      "team: a\ncommand: [python, train.py, --epochs, 3, --lr, .001, 010, yes, 1e3]\n"
      "env: {A: 1, B: 010, C: true}\nresources: {gpus: 2, memory_mb: 1024}\n");
  INFO(p.error);
  REQUIRE(p.ok);
  std::vector<std::string> cmd(p.spec.command().begin(), p.spec.command().end());
  CHECK(cmd == std::vector<std::string>{"python", "train.py", "--epochs", "3", "--lr", ".001",
                                        "010", "yes", "1e3"});
  CHECK(p.spec.env().at("A") == "1");
  CHECK(p.spec.env().at("B") == "010");
  CHECK(p.spec.env().at("C") == "true");
  CHECK(p.spec.resources().gpus() == 2);  // numbers where the schema has numbers
  CHECK(p.spec.resources().memory_mb() == 1024);
}

TEST_CASE("spec: a string command is refused, pointing at the list form and --",
          "[messages][spec][yaml]") {
  auto y = spec::from_yaml("team: a\ncommand: echo hello world\n");
  CHECK_FALSE(y.ok);
  CHECK_THAT(y.error, Catch::Contains("command is a list") && Catch::Contains("after --"));
  auto j = spec::from_json(R"({"team":"a","command":"echo hello world"})");
  CHECK_FALSE(j.ok);
  CHECK_THAT(j.error, Catch::Contains("command is a list"));
  // A one-element list is a command of one word, as written.
  auto one = spec::from_json(R"({"team":"a","command":["nvidia-smi"]})");
  CHECK(one.ok);
}

TEST_CASE(
    "spec: replies leave out zero fields but keep a set exit_code 0, events print every field",
    "[messages][spec]") {
  pb::JobView v;
  v.set_job_id("j-1");
  v.set_state("running");
  v.set_attempt(1);
  auto* p = v.add_placement();
  p->set_node("n1");
  p->add_gpus(0);
  std::string json = spec::view_json(v);
  INFO(json);
  CHECK(json.find("end_ms") == std::string::npos);
  CHECK(json.find("exit_code") == std::string::npos);
  CHECK(json.find("\"gpus\":[0]") != std::string::npos);  // a list's 0 is a value
  CHECK(json.find("gpu_memory_mb") == std::string::npos);
  v.set_state("succeeded");
  v.set_exit_code(0);
  json = spec::view_json(v);
  CHECK(json.find("\"exit_code\":0") != std::string::npos);
  pb::JobView back;
  REQUIRE(spec::parse_json(json, back).empty());
  CHECK(back.has_exit_code());
  CHECK(back.placement(0).gpus(0) == 0);
  pb::JobEvent e;
  e.set_job_id("j-1");
  CHECK(spec::to_json(e).find("\"attempt\":0") != std::string::npos);
}

TEST_CASE(
    "log chunks: offsets put a shipped log together, a lost chunk stops it, pages as an "
    "agent reads them",
    "[messages][logs]") {
  using namespace troupe::logchunks;
  int64_t off = -1;
  std::string_view data;
  const std::string chunk = encode(42, "a\nb");  // `data` views into it
  REQUIRE(decode(chunk, &off, &data));
  CHECK(off == 42);
  CHECK(data == "a\nb");
  CHECK_FALSE(decode("x\nabc", &off, &data));
  CHECK_FALSE(decode("-1\nabc", &off, &data));
  CHECK_FALSE(decode("12", &off, &data));
  Assembler a;
  a.add(encode(0, "hello "));
  a.add(encode(3, "lo world"));  // overlaps: only the new part is kept
  a.add("garbage");              // not a chunk: ignored
  CHECK(a.log() == "hello world");
  CHECK_FALSE(a.gap());
  a.add(encode(20, "later"));  // a chunk lost between
  a.add(encode(11, "!"));
  CHECK(a.gap());
  CHECK(a.log() == "hello world");
  CHECK(a.chunks() == 3);
  auto page = nlohmann::json::parse(page_json("hello world", 6, 3));
  CHECK(page["data"] == "wor");
  CHECK(page["offset"] == 9);
  CHECK(page["eof"] == false);
  CHECK(page["size"] == 11);
  CHECK(page["stored"] == true);
  auto last = nlohmann::json::parse(page_json("hello world", 6, 0));  // 0: a default page
  CHECK(last["data"] == "world");
  CHECK(last["eof"] == true);
  // Never a cut UTF-8 character: "é" is 2 bytes.
  auto cut = nlohmann::json::parse(page_json("a\xc3\xa9", 0, 2));
  CHECK(cut["data"] == "a");
  CHECK(cut["offset"] == 1);
}

TEST_CASE("spec: labels and depends_on have limits, hostile values are refused",
          "[messages][spec][limits]") {
  auto base = [] {
    pb::JobSpec s;
    s.set_team("t");
    s.add_command("true");
    spec::apply_defaults(s);
    return s;
  };
  auto many = base();
  for (int i = 0; i < 33; ++i) (*many.mutable_labels())["k" + std::to_string(i)] = "v";
  CHECK(spec::check(many).kind == spec::Verdict::Kind::too_large);
  auto key = base();
  (*key.mutable_labels())["has space"] = "v";
  CHECK_FALSE(spec::check(key).ok());
  auto value = base();
  (*value.mutable_labels())["k"] = std::string(300, 'x');
  CHECK(spec::check(value).kind == spec::Verdict::Kind::too_large);
  auto ctl = base();
  (*ctl.mutable_labels())["k"] = "a\x1b[31m";
  CHECK(spec::check(ctl).kind == spec::Verdict::Kind::invalid);
  auto deps = base();
  for (int i = 0; i < 65; ++i) deps.add_depends_on()->set_job("j-" + std::to_string(i));
  CHECK(spec::check(deps).kind == spec::Verdict::Kind::too_large);
  auto bad_job = base();
  bad_job.add_depends_on()->set_job("j-1.>");
  CHECK(spec::check(bad_job).kind == spec::Verdict::Kind::invalid);
  auto empty = base();
  empty.add_depends_on();
  CHECK(spec::check(empty).kind == spec::Verdict::Kind::invalid);
}

TEST_CASE("spec: arrays and sweeps are read from YAML and JSON, and checked",
          "[messages][spec][arrays]") {
  auto y = spec::from_yaml(R"(team: t
command: [train]
sweep:
  params: {lr: [0.1, 0.01], batch: [32, 64], opt: [adam]}
  parallelism: 2
)");
  REQUIRE(y.ok);
  spec::apply_defaults(y.spec);
  CHECK(spec::is_array(y.spec));
  CHECK(spec::array_tasks(y.spec) == 4);
  CHECK(spec::array_parallelism(y.spec) == 2);
  CHECK(spec::check(y.spec).ok());
  auto j = spec::from_json(R"({"team":"t","command":["x"],"array":{"count":20,"parallelism":3}})");
  REQUIRE(j.ok);
  spec::apply_defaults(j.spec);
  CHECK(spec::array_tasks(j.spec) == 20);
  CHECK(spec::check(j.spec).ok());
  auto plain = spec::from_json(R"({"team":"t","command":["x"]})");
  CHECK_FALSE(spec::is_array(plain.spec));
  CHECK(spec::array_tasks(plain.spec) == 0);

  auto refused = [](const char* json) {
    auto p = spec::from_json(json);
    if (!p.ok) return p.error;
    spec::apply_defaults(p.spec);
    return spec::check(p.spec).error;
  };
  CHECK_FALSE(refused(R"({"team":"t","command":["x"],"array":{"count":0}})").empty());
  CHECK_FALSE(
      refused(R"({"team":"t","command":["x"],"array":{"count":3,"parallelism":-1}})").empty());
  CHECK(
      refused(R"({"team":"t","command":["x"],"array":{"count":10001}})").find("max_array_tasks") !=
      std::string::npos);
  CHECK(refused(R"({"team":"t","command":["x"],"array":{"count":2},"sweep":{"params":{"a":[1]}}})")
            .find("exclude") != std::string::npos);
  CHECK_FALSE(refused(R"({"team":"t","command":["x"],"sweep":{"params":{}}})").empty());
  CHECK_FALSE(refused(R"({"team":"t","command":["x"],"sweep":{"params":{"a":[]}}})").empty());
  CHECK_FALSE(
      refused(R"({"team":"t","command":["x"],"sweep":{"params":{"a":[{"b":1}]}}})").empty());
  CHECK_FALSE(refused(R"({"team":"t","command":["x"],"sweep":{"params":{"a":[null]}}})").empty());
  CHECK_FALSE(refused(R"({"team":"t","command":["x"],"sweep":{"params":{"a b":[1]}}})").empty());
  CHECK_FALSE(
      refused(R"({"team":"t","command":["x"],"sweep":{"params":{"a":["\u001b[31m"]}}})").empty());
  // A grid whose product is past the limit (no overflow on the way).
  std::string big = R"({"team":"t","command":["x"],"sweep":{"params":{)";
  for (int p = 0; p < 8; ++p) {
    big += (p ? "," : "") + std::string("\"p") + std::to_string(p) + "\":[";
    for (int v = 0; v < 100; ++v) big += (v ? "," : "") + std::to_string(v);
    big += "]";
  }
  big += "}}}";
  CHECK(refused(big.c_str()).find("max_array_tasks") != std::string::npos);
}

TEST_CASE("json_number: whole numbers from JSON others sent, never a cast out of range",
          "[messages][json]") {
  using troupe::json_number::integer;
  using troupe::json_number::whole;
  using J = nlohmann::json;
  CHECK(whole(J(5)) == 5);
  CHECK(whole(J(-5)) == -5);
  CHECK(whole(J(5.9)) == 5);
  CHECK(whole(J(-5.9)) == -5);
  CHECK(whole(J(18446744073709551615ull)) == std::numeric_limits<int64_t>::max());
  CHECK(whole(J(9223372036854775808.0)) == std::nullopt);         // 2^63: out of range
  CHECK(whole(J(9223372036854774784.0)) == 9223372036854774784);  // the largest below it
  CHECK(whole(J(-9.2233720368547758e18)) == std::numeric_limits<int64_t>::min());
  CHECK(whole(J(1e300)) == std::nullopt);
  CHECK(whole(J(std::nan(""))) == std::nullopt);
  CHECK(whole(J("12")) == std::nullopt);
  CHECK(whole(J()) == std::nullopt);
  CHECK(integer(J(7)) == 7);
  CHECK(integer(J(7.0)) == std::nullopt);
}

TEST_CASE("json_text: JSON others sent nests at most kMaxDepth deep, else it reads as discarded",
          "[messages][json]") {
  using troupe::json_text::kMaxDepth;
  using troupe::json_text::nesting_within;
  using troupe::json_text::parse;
  auto nested = [](int depth) {
    return std::string(static_cast<size_t>(depth), '[') +
           std::string(static_cast<size_t>(depth), ']');
  };
  const std::string at_bound = nested(kMaxDepth);
  CHECK(nesting_within(at_bound.begin(), at_bound.end()));
  CHECK_FALSE(nesting_within(at_bound.begin(), at_bound.end(), kMaxDepth - 1));
  CHECK(parse(nested(kMaxDepth)).is_array());
  CHECK(parse(nested(kMaxDepth + 1)).is_discarded());
  // 100,000 deep: copying or printing it would overflow the stack.
  CHECK(parse(nested(100000)).is_discarded());
  CHECK(parse("{\"a\":" + nested(kMaxDepth + 1) + "}").is_discarded());
  // Brackets inside strings (escaped quotes too) do not count.
  const std::string in_strings =
      "{\"a\":\"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\",\"b\":[1]}";
  auto j = parse(in_strings);
  REQUIRE(j.is_object());
  CHECK(j["b"] == nlohmann::json::array({1}));
  // Bytes (a NATS message's data) and ordered objects read the same.
  const std::string obj = R"({"z":1,"a":[2]})";
  std::vector<uint8_t> bytes(obj.begin(), obj.end());
  CHECK(parse(bytes.begin(), bytes.end())["a"][0] == 2);
  CHECK(parse<nlohmann::ordered_json>(obj).begin().key() == "z");
  // Not JSON is discarded as before.
  CHECK(parse("{\"a\":").is_discarded());
  CHECK(parse("").is_discarded());
}

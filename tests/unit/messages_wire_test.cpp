// messages/wire: open() verifies every buffer before a field is read.
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "messages/spec.hpp"
#include "messages/wire.hpp"

using namespace troupe;

namespace {

wire::Bytes sample_submit() {
  pb::JobSpec s;
  s.set_name("resnet");
  s.set_team("vision");
  s.set_kind("training");
  s.add_command("python");
  s.add_command("train.py");
  (*s.mutable_env())["A"] = "1";
  s.mutable_resources()->set_gpus(2);
  s.mutable_resources()->set_gpu_type("a100");
  flatbuffers::FlatBufferBuilder fbb;
  return wire::seal(fbb, wire::CreateSubmitRequest(fbb, spec::to_wire(fbb, s)));
}

wire::Bytes sample_launch() {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<int32_t> gpus = {1, 3};
  auto cmd = std::vector<flatbuffers::Offset<flatbuffers::String>>{fbb.CreateString("sleep"),
                                                                   fbb.CreateString("1")};
  auto launch = wire::CreateLaunch(fbb, fbb.CreateString("j-1"), fbb.CreateString("t"), 0, 1, 2,
                                   fbb.CreateString("10.0.0.1:29500"), fbb.CreateVector(gpus),
                                   fbb.CreateVector(cmd));
  return wire::seal(fbb, launch);
}

}  // namespace

TEST_CASE("wire: a valid envelope opens and reads back", "[messages][wire]") {
  auto bytes = sample_launch();
  const wire::Envelope* env = wire::open(bytes);
  REQUIRE(env != nullptr);
  REQUIRE(env->body_type() == wire::Body::Launch);
  CHECK(std::string(wire::body_name(env->body_type())) == "Launch");
  const auto* l = env->body_as_Launch();
  REQUIRE(l != nullptr);
  CHECK(wire::str(l->job_id()) == "j-1");
  CHECK(wire::str(l->team()) == "t");
  CHECK(l->rank() == 1);
  CHECK(l->world_size() == 2);
  CHECK(wire::str(l->coordinator()) == "10.0.0.1:29500");
  CHECK(wire::ints(l->gpus()) == std::vector<int>{1, 3});
  REQUIRE(l->command() != nullptr);
  CHECK(l->command()->size() == 2);
  CHECK(l->grace_s() == 10);  // schema default
  CHECK(wire::str(nullptr).empty());
  CHECK(wire::ints(nullptr).empty());
}

TEST_CASE("wire: a submission's body is JSON text or a FlatBuffers SubmitRequest",
          "[messages][wire]") {
  auto text = [](const std::string& s) { return wire::Bytes(s.begin(), s.end()); };
  CHECK(wire::json_text(text(" \n\t{\"command\":[\"true\"]}")));
  CHECK(wire::submit_request(text("{\"command\":[\"true\"]}")) == nullptr);
  const auto fb = sample_submit();
  CHECK_FALSE(wire::json_text(fb));
  REQUIRE(wire::submit_request(fb) != nullptr);
  CHECK(wire::submit_request(fb)->body_as_SubmitRequest() != nullptr);
  // Another message, junk, YAML, nothing: no SubmitRequest, not JSON.
  for (const auto& other :
       {sample_launch(), text("\x01\x02junk"), text("command: [x]"), text(""), text("   ")}) {
    CHECK_FALSE(wire::json_text(other));
    CHECK(wire::submit_request(other) == nullptr);
  }
}

TEST_CASE("wire: open refuses null, empty and tiny buffers", "[messages][wire]") {
  CHECK(wire::open(nullptr, 0) == nullptr);
  CHECK(wire::open(nullptr, 100) == nullptr);
  wire::Bytes empty;
  CHECK(wire::open(empty) == nullptr);
  wire::Bytes three = {1, 2, 3};
  CHECK(wire::open(three) == nullptr);
}

TEST_CASE("wire: open refuses garbage bytes", "[messages][wire]") {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> len(0, 512);
  int accepted = 0;
  for (int i = 0; i < 2000; ++i) {
    wire::Bytes b(static_cast<size_t>(len(rng)));
    for (auto& x : b) x = static_cast<uint8_t>(byte(rng));
    if (wire::open(b) != nullptr) ++accepted;
  }
  CHECK(accepted == 0);

  // JSON is not an envelope.
  std::string json = R"({"team":"t","command":["true"]})";
  CHECK(wire::open(reinterpret_cast<const uint8_t*>(json.data()), json.size()) == nullptr);

  // A root offset that points far past the end.
  wire::Bytes far = {0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0};
  CHECK(wire::open(far) == nullptr);
}

TEST_CASE("wire: open refuses truncated buffers", "[messages][wire]") {
  for (const auto& bytes : {sample_submit(), sample_launch()}) {
    REQUIRE(wire::open(bytes) != nullptr);
    // Trailing bytes may be alignment padding (< 8 bytes); every cut that
    // removes real content must be refused.
    for (size_t n = 0; n + 8 <= bytes.size(); ++n) {
      wire::Bytes cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
      INFO("prefix of " << n << " of " << bytes.size() << " bytes");
      CHECK(wire::open(cut) == nullptr);
    }
  }
}

TEST_CASE("wire: open refuses an envelope without a body", "[messages][wire]") {
  flatbuffers::FlatBufferBuilder fbb;
  wire::EnvelopeBuilder eb(fbb);
  fbb.Finish(eb.Finish());
  wire::Bytes b(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  CHECK(wire::open(b) == nullptr);
}

TEST_CASE("wire: open survives every single-byte corruption", "[messages][wire]") {
  // Corrupting any byte (offsets, the union tag, lengths) must never make
  // open() read out of bounds; a buffer it accepts must be safe to read.
  auto bytes = sample_launch();
  const wire::Envelope* env = wire::open(bytes);
  REQUIRE(env != nullptr);
  // Flip every single byte in turn; open() must never crash, whatever it says.
  int opened = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto b = bytes;
    b[i] = static_cast<uint8_t>(b[i] ^ 0xff);
    if (const wire::Envelope* e = wire::open(b)) {
      ++opened;
      // Whatever opened must be readable without going out of bounds.
      (void)wire::body_name(e->body_type());
      if (const auto* l = e->body_as_Launch()) {
        size_t total = wire::str(l->job_id()).size() + wire::str(l->coordinator()).size() +
                       wire::ints(l->gpus()).size();
        if (l->command()) {
          for (const auto* c : *l->command()) total += wire::str(c).size();
        }
        (void)total;
      }
    }
  }
  SUCCEED("opened " << opened << " of " << bytes.size() << " corrupted buffers without a crash");
}

TEST_CASE("wire: every agent message kind round-trips through seal/open", "[messages][wire]") {
  SECTION("Heartbeat") {
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<flatbuffers::Offset<wire::WorkerRef>> running = {
        wire::CreateWorkerRef(fbb, fbb.CreateString("j-1"), 0, 1)};
    auto b = wire::seal(
        fbb, wire::CreateHeartbeat(fbb, fbb.CreateString("n1"), 42, fbb.CreateVector(running)));
    auto* env = wire::open(b);
    REQUIRE(env != nullptr);
    REQUIRE(env->body_type() == wire::Body::Heartbeat);
    CHECK(env->body_as_Heartbeat()->seq() == 42);
    CHECK(env->body_as_Heartbeat()->running()->size() == 1);
  }
  SECTION("Exited") {
    flatbuffers::FlatBufferBuilder fbb;
    auto b =
        wire::seal(fbb, wire::CreateExited(fbb, fbb.CreateString("n1"), fbb.CreateString("j-2"), 1,
                                           0, 3, 0, fbb.CreateString("exited with code 3")));
    auto* env = wire::open(b);
    REQUIRE(env != nullptr);
    REQUIRE(env->body_type() == wire::Body::Exited);
    CHECK(env->body_as_Exited()->exit_code() == 3);
    CHECK(wire::str(env->body_as_Exited()->reason()) == "exited with code 3");
  }
  SECTION("SubmitReply") {
    flatbuffers::FlatBufferBuilder fbb;
    auto b = wire::seal(fbb, wire::CreateSubmitReply(fbb, fbb.CreateString(""),
                                                     fbb.CreateString("resources.gpus bad")));
    auto* env = wire::open(b);
    REQUIRE(env != nullptr);
    REQUIRE(env->body_type() == wire::Body::SubmitReply);
    CHECK(wire::str(env->body_as_SubmitReply()->error()) == "resources.gpus bad");
  }
  SECTION("Stop defaults to every rank") {
    flatbuffers::FlatBufferBuilder fbb;
    auto b = wire::seal(fbb, wire::CreateStop(fbb, fbb.CreateString("j-3"), 0));
    auto* env = wire::open(b);
    REQUIRE(env != nullptr);
    CHECK(env->body_as_Stop()->rank() == -1);
  }
}

// Unit tests of the simulated fleet behind `troupe-node --simulate --count N`
// (node/fleet.hpp), which troupe-load's replays start: member names, one
// register per member, heartbeats spread over the period, routing by node
// token, hello to all, and the --count / --name-prefix options. No NATS: the
// publishes are captured in memory.
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "bus/subjects.hpp"
#include "messages/wire.hpp"
#include "node/fleet.hpp"
#include "node/options.hpp"
#include "node/test_support.hpp"

using namespace troupe;
using namespace troupe::node;
using namespace std::chrono_literals;
using test::Capture;
using test::Published;
using test::TempDir;

namespace {

Inbound launch_for(const std::string& node, const std::string& job_id, double duration_s) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<flatbuffers::String>> cmd{fbb.CreateString("sim")};
  std::vector<flatbuffers::Offset<wire::KeyValue>> env{wire::CreateKeyValue(
      fbb, fbb.CreateString("TROUPE_SIM_DURATION_S"), fbb.CreateString(std::to_string(duration_s)))};
  std::vector<int> gpus{0};
  auto body = wire::CreateLaunch(fbb, fbb.CreateString(job_id), fbb.CreateString("team"), 1, 0, 1,
                                 fbb.CreateString("host:1"), fbb.CreateVector(gpus),
                                 fbb.CreateVector(cmd), fbb.CreateVector(env), 0, 10, 0, 1);
  return Inbound{subjects::scheduler_to_agent(node, subjects::kLaunch), "", wire::seal(fbb, body)};
}

size_t count_suffix(const std::vector<Published>& log, const std::string& suffix) {
  size_t n = 0;
  for (const auto& p : log)
    if (p.subject.size() >= suffix.size() &&
        p.subject.compare(p.subject.size() - suffix.size(), suffix.size(), suffix) == 0)
      ++n;
  return n;
}

struct FleetFixture {
  TempDir tmp;
  Capture cap;
  std::unique_ptr<Fleet> fleet;
  FleetFixture(int count, int heartbeat_ms) {
    FleetConfig fc;
    fc.base.simulate = true;
    fc.base.heartbeat_ms = heartbeat_ms;
    fc.base.state_dir = tmp.path();
    fc.base.inventory.gpus = {GpuInfo{0, "sim", 0}, GpuInfo{1, "sim", 0}};
    fc.base.inventory.gpu_type = "sim";
    fc.prefix = "fl";
    fc.count = count;
    fleet = std::make_unique<Fleet>(fc, [this](const std::string& s, const void* d, size_t n) {
      cap(s, d, n);
    });
  }
};

}  // namespace

TEST_CASE("fleet: member names", "[load][fleet]") {
  CHECK(fleet_node_name("sim", 1, 3) == "sim-00001");
  CHECK(fleet_node_name("sim", 10000, 10000) == "sim-10000");
  CHECK(fleet_node_name("sim", 7, 100000) == "sim-000007");
  CHECK(fleet_node_name("p", 1234567, 1234567) == "p-1234567");
}

TEST_CASE("fleet: every member registers and heartbeats, spread over the period",
          "[load][fleet]") {
  FleetFixture f(50, 400);
  REQUIRE(f.fleet->size() == 50);
  CHECK(f.fleet->names().front() == "fl-00001");
  CHECK(f.fleet->names().back() == "fl-00050");
  auto t0 = std::chrono::steady_clock::now();
  f.fleet->start();
  auto log = f.cap.all();
  REQUIRE(count_suffix(log, ".register") == 50);
  std::set<std::string> registered;
  for (const auto& p : log) {
    // The first heartbeats may already be out: look at the registrations only.
    if (p.subject.find(".register") == std::string::npos) continue;
    const auto* env = p.envelope();
    REQUIRE(env);
    const auto* reg = env->body_as_NodeRegister();
    REQUIRE(reg);
    registered.insert(wire::str(reg->node()));
    CHECK(p.subject == subjects::agent_to_scheduler(wire::str(reg->node()), subjects::kRegister));
  }
  CHECK(registered.size() == 50);
  // After ~half a period, roughly half the members have beaten once: spread.
  std::this_thread::sleep_until(t0 + 200ms);
  size_t half = count_suffix(f.cap.all(), ".heartbeat");
  CHECK(half >= 10);
  CHECK(half <= 40);
  // Within two periods every member has beaten at least once.
  REQUIRE(f.cap.wait(
      [](const std::vector<Published>& l) {
        std::set<std::string> beat;
        for (const auto& p : l)
          if (p.subject.find(".heartbeat") != std::string::npos) beat.insert(p.subject);
        return beat.size() == 50;
      },
      2s));
}

TEST_CASE("fleet: messages go to the member their subject names", "[load][fleet]") {
  FleetFixture f(5, 60000);
  f.fleet->start();
  f.fleet->on_message(launch_for("fl-00003", "j-1", 0.05));
  std::string started = subjects::agent_to_scheduler("fl-00003", subjects::kStarted);
  std::string exited = subjects::agent_to_scheduler("fl-00003", subjects::kExited);
  REQUIRE(f.cap.wait_count(exited, 1, 5s));
  CHECK(f.cap.on(started).size() == 1);
  CHECK(f.fleet->find("fl-00003")->counters().launches == 1);
  CHECK(f.fleet->find("fl-00002")->counters().launches == 0);
  CHECK(f.fleet->counters().exits == 1);

  // Another node's message is ignored; one for a member we lack is counted.
  f.fleet->on_message(launch_for("other-00001", "j-2", 0.01));
  f.fleet->on_message(launch_for("fl-00099", "j-3", 0.01));
  CHECK(f.fleet->unrouted() == 1);
  CHECK(f.fleet->counters().launches == 1);

  // troupe.sys.hello: every member registers again; node hello: only that one.
  size_t before = count_suffix(f.cap.all(), ".register");
  f.fleet->on_message(Inbound{subjects::kSysHello, "", {}});
  CHECK(count_suffix(f.cap.all(), ".register") == before + 5);
  f.fleet->on_message(Inbound{subjects::scheduler_to_agent("fl-00001", subjects::kHello), "", {}});
  CHECK(count_suffix(f.cap.all(), ".register") == before + 6);
}

TEST_CASE("fleet: shutdown stops running simulated workers", "[load][fleet]") {
  FleetFixture f(3, 60000);
  f.fleet->start();
  f.fleet->on_message(launch_for("fl-00002", "j-long", 1000));
  REQUIRE(f.cap.wait_count(subjects::agent_to_scheduler("fl-00002", subjects::kStarted), 1));
  f.fleet->shutdown();
  CHECK(f.cap.on(subjects::agent_to_scheduler("fl-00002", subjects::kExited)).size() == 1);
  f.fleet->shutdown();  // idempotent
}

namespace {
ParseResult parse_node(std::vector<const char*> args) {
  args.insert(args.begin(), "troupe-node");
  auto none = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  return parse_options(static_cast<int>(args.size()), args.data(), none, "box", "/w");
}
}  // namespace

TEST_CASE("fleet: --count and --name-prefix options", "[load][fleet]") {
  auto one = parse_node({"--simulate"});
  REQUIRE(one.options);
  CHECK(one.options->count == 1);
  CHECK(one.options->name_prefix.empty());

  auto many = parse_node({"--simulate", "--count", "100", "--name-prefix", "sim"});
  REQUIRE(many.options);
  CHECK(many.options->count == 100);
  CHECK(many.options->name_prefix == "sim");

  auto by_name = parse_node({"--simulate", "--count", "3", "--name", "rack7"});
  REQUIRE(by_name.options);
  CHECK(by_name.options->name_prefix == "rack7");

  CHECK(parse_node({"--count", "3"}).exit_code == 2);  // needs --simulate
  CHECK(parse_node({"--simulate", "--count", "3", "--name-prefix", "a.b"}).exit_code == 2);
  CHECK(parse_node({"--simulate", "--count", "0"}).exit_code != 0);
}

// troupe-node --pool P --rack R: the options, and the NodeRegister that one
// agent and every member of a simulated fleet publish with them. No NATS: the
// publishes are captured in memory.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "bus/subjects.hpp"
#include "messages/wire.hpp"
#include "node/agent.hpp"
#include "node/agent_messages.hpp"
#include "node/fleet.hpp"
#include "node/options.hpp"
#include "node/test_support.hpp"

using namespace troupe;
using namespace troupe::node;
using test::Capture;
using test::Published;
using test::TempDir;

namespace {

ParseResult parse(std::vector<const char*> args) {
  args.insert(args.begin(), "troupe-node");
  auto no_env = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  return parse_options(static_cast<int>(args.size()), args.data(), no_env, "box", "/w");
}

AgentConfig sim_config(const std::string& dir) {
  AgentConfig cfg;
  cfg.name = "n1";
  cfg.state_dir = dir;
  cfg.simulate = true;
  cfg.heartbeat_ms = 60000;
  cfg.inventory.gpus = {GpuInfo{0, "sim", 0}, GpuInfo{1, "sim", 0}};
  cfg.inventory.gpu_type = "h100";
  return cfg;
}

}  // namespace

TEST_CASE("node options: --pool and --rack", "[node][options][topology]") {
  auto none = parse({});
  REQUIRE(none.options);
  CHECK(none.options->pool.empty());
  CHECK(none.options->rack.empty());

  auto r = parse({"--pool", "h100-spot", "--rack", "r12", "--gpu-type", "h100"});
  REQUIRE(r.options);
  CHECK(r.options->pool == "h100-spot");
  CHECK(r.options->rack == "r12");

  // A fleet takes them too (every member the same).
  auto f = parse({"--simulate", "--count", "3", "--pool", "p", "--rack", "r1"});
  REQUIRE(f.options);
  CHECK(f.options->count == 3);
  CHECK(f.options->pool == "p");
  CHECK(f.options->rack == "r1");

  // Both must be one subject token (pool names of the config are).
  for (auto bad : {std::vector<const char*>{"--pool", "a.b"}, std::vector<const char*>{"--pool", "a b"},
                   std::vector<const char*>{"--rack", "r*"}, std::vector<const char*>{"--rack", "r>"}}) {
    auto e = parse(bad);
    INFO(bad[0] << " " << bad[1] << " -> " << e.message);
    CHECK_FALSE(e.options);
    CHECK(e.exit_code == 2);
    CHECK_THAT(e.message, Catch::StartsWith(std::string(bad[0]) + ":"));
  }
}

TEST_CASE("node wire: NodeRegister carries pool and rack", "[node][wire][topology]") {
  Inventory inv;
  inv.gpus = {{0, "NVIDIA H100", 81559}};
  inv.gpu_type = "h100";
  auto reg = make_register("n1", "10.0.0.2", inv, false, {}, "h100-spot", "r12");
  const auto* r = wire::open(reg)->body_as_NodeRegister();
  REQUIRE(r);
  CHECK(wire::str(r->pool()) == "h100-spot");
  CHECK(wire::str(r->rack()) == "r12");
  CHECK(wire::str(r->gpu_type()) == "h100");

  // Left out when not given: the scheduler reads "" (pool of the GPU type, no rack).
  auto plain = make_register("n1", "10.0.0.2", inv, false, {});
  const auto* p = wire::open(plain)->body_as_NodeRegister();
  REQUIRE(p);
  CHECK(p->pool() == nullptr);
  CHECK(p->rack() == nullptr);
  CHECK(wire::str(p->pool()).empty());
}

TEST_CASE("node agent: start and hello publish NodeRegister with pool and rack",
          "[node][agent][topology]") {
  TempDir tmp;
  Capture cap;
  auto cfg = sim_config(tmp.path());
  cfg.pool = "h100-spot";
  cfg.rack = "r3";
  Agent agent(cfg, [&](const std::string& s, const void* d, size_t n) { cap(s, d, n); });
  agent.start();
  auto reg = subjects::agent_to_scheduler("n1", subjects::kRegister);
  REQUIRE(cap.wait_count(reg, 1));
  agent.on_message(Inbound{subjects::kSysHello, "", {}});
  REQUIRE(cap.wait_count(reg, 2));
  auto regs = cap.on(reg);
  for (const auto& p : regs) {
    const auto* r = p.envelope()->body_as_NodeRegister();
    REQUIRE(r);
    CHECK(wire::str(r->pool()) == "h100-spot");
    CHECK(wire::str(r->rack()) == "r3");
  }
  agent.shutdown();
}

TEST_CASE("node fleet: every member registers with the fleet's pool and rack",
          "[node][fleet][topology]") {
  TempDir tmp;
  Capture cap;
  FleetConfig fc;
  fc.base = sim_config(tmp.path());
  fc.base.pool = "p1";
  fc.base.rack = "rack-7";
  fc.prefix = "fl";
  fc.count = 4;
  Fleet fleet(fc, [&](const std::string& s, const void* d, size_t n) { cap(s, d, n); });
  fleet.start();
  std::map<std::string, std::pair<std::string, std::string>> seen;  // node -> (pool, rack)
  for (const auto& p : cap.all()) {
    const auto* env = p.envelope();
    if (env == nullptr || env->body_as_NodeRegister() == nullptr) continue;
    const auto* r = env->body_as_NodeRegister();
    seen[wire::str(r->node())] = {wire::str(r->pool()), wire::str(r->rack())};
  }
  REQUIRE(seen.size() == 4);
  for (const auto& [node, pr] : seen) {
    INFO(node);
    CHECK(pr.first == "p1");
    CHECK(pr.second == "rack-7");
  }
  fleet.shutdown();
}

// Unit tests for actors/policy/round: one scheduling round, with reasons.
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "actors/policy/round.hpp"

using namespace troupe::policy;

namespace {
NodeCapacity node(std::string name, int free, std::string type = "a100") {
  NodeCapacity n;
  n.name = std::move(name);
  n.gpu_type = n.pool = std::move(type);
  n.gpus_total = 8;
  n.gpus_free = free;
  return n;
}
Demand demand(std::string id, int gpus, int workers = 1, int64_t max_runtime_s = 0,
              std::string type = "a100") {
  Demand d;
  d.job_id = std::move(id);
  d.req.gpus = gpus;
  d.req.workers = workers;
  d.req.pool = d.req.gpu_type = std::move(type);
  d.max_runtime_s = max_runtime_s;
  return d;
}
TeamInput team(std::string name, int used, std::vector<Demand> demands, double weight = 1,
               int guaranteed = 0, int limit = -1) {
  TeamInput t;
  t.standing.team = std::move(name);
  t.standing.used.gpus = used;
  t.standing.weight = weight;
  t.standing.guaranteed = guaranteed;
  t.standing.limit = limit;
  t.demands = std::move(demands);
  return t;
}
RoundInput input(std::vector<NodeCapacity> nodes, std::vector<TeamInput> teams) {
  RoundInput in;
  in.pool = "a100";
  in.nodes = std::move(nodes);
  in.teams = std::move(teams);
  in.now_ms = 1000;
  return in;
}
}  // namespace

TEST_CASE("round: one grant per team, most deserving first", "[policy][round]") {
  auto in = input({node("a", 1)},
                  {team("rich", 4, {demand("r1", 1)}), team("poor", 0, {demand("p1", 1)})});
  auto out = plan_round(in);
  REQUIRE(out.grants.size() == 1);
  CHECK(in.teams[out.grants[0].team].standing.team == "poor");
  CHECK(out.reasons.at("r1").code == why::kFairShare);
}

TEST_CASE("round: hard limit gives a reason with numbers", "[policy][round]") {
  auto in = input({node("a", 8)}, {team("v", 8, {demand("j", 1)}, 1, 0, 8)});
  auto out = plan_round(in);
  CHECK(out.grants.empty());
  CHECK(out.reasons.at("j").code == why::kOverLimit);
  CHECK(out.reasons.at("j").text.find("8/8") != std::string::npos);
}

TEST_CASE("round: no node of the type", "[policy][round]") {
  auto in = input({node("a", 8)}, {team("v", 0, {demand("h", 1, 1, 0, "h100")})});
  in.pool = "h100";
  auto out = plan_round(in);
  CHECK(out.reasons.at("h").code == why::kNoNodeOfType);
  CHECK(out.reasons.at("h").text.find("h100") != std::string::npos);
}

TEST_CASE("round: a big head gets a hold, small work backfills only if it ends first",
          "[policy][round][backfill]") {
  auto in = input({node("a", 0), node("b", 2)}, {team("big", 0, {demand("gang", 8, 2)}),
                                                 team("small", 8, {demand("s", 1, 1, 100)})});
  RunningWork w1;
  w1.nodes = {0};
  w1.gpus = 8;
  w1.ends_ms = 10000;
  RunningWork w2;
  w2.nodes = {1};
  w2.gpus = 6;
  w2.ends_ms = 20000;
  in.running = {w1, w2};
  auto out = plan_round(in);
  REQUIRE(out.hold.active());
  CHECK(out.hold.job_id == "gang");
  CHECK(out.hold.start_ms == 20000);
  CHECK(out.reasons.at("gang").code == why::kReservation);
  // "s" would run 100 s, past the hold at 20 s: it may not use held node b.
  CHECK(out.grants.empty());
  CHECK(out.reasons.at("s").code == why::kHeldForOther);

  // A short job (5 s, ends before the hold) backfills.
  in.teams[1].demands = {demand("quick", 1, 1, 5)};
  auto out2 = plan_round(in);
  REQUIRE(out2.grants.size() == 1);
  CHECK(in.teams[out2.grants[0].team].demands[out2.grants[0].demand].job_id == "quick");
}

TEST_CASE("round: fits nowhere reports the free-GPU histogram", "[policy][round]") {
  auto in = input({node("a", 2), node("b", 2)}, {team("v", 0, {demand("j", 4)})});
  auto out = plan_round(in);
  // The head gets a hold (it may fit later); its reason carries the histogram.
  CHECK(reason_text(out.reasons.at("j"), in.nodes).find("2 nodes have 2 free") !=
        std::string::npos);
}

TEST_CASE("round: a busy team gets no grant", "[policy][round]") {
  auto in = input({node("a", 8)}, {team("v", 0, {demand("j", 1)})});
  in.teams[0].slots = 0;
  auto out = plan_round(in);
  CHECK(out.grants.empty());
  CHECK(out.reasons.at("j").code == why::kNegotiating);
}

TEST_CASE("fifo baseline: submit order across teams, the first misfit blocks the rest",
          "[policy][round][fifo]") {
  auto in =
      input({node("a", 2)}, {team("x", 0, {demand("big", 4)}), team("y", 0, {demand("small", 1)})});
  in.fifo = true;
  in.teams[0].demands[0].seq = 1;
  in.teams[1].demands[0].seq = 2;
  auto out = plan_round(in);
  CHECK(out.grants.empty());  // no backfill: "small" waits behind "big"
  CHECK(out.reasons.at("small").code == why::kBehind);
  in.teams[0].demands[0].seq = 3;  // now "small" is first
  auto out2 = plan_round(in);
  REQUIRE(out2.grants.size() == 1);
  CHECK(in.teams[out2.grants[0].team].demands[out2.grants[0].demand].job_id == "small");
}

TEST_CASE("round: a more deserving head takes the hold over", "[policy][round][backfill]") {
  auto in = input({node("a", 0), node("b", 0)}, {team("gang", 0, {demand("g", 8, 2)}),
                                                 team("stream", 12, {demand("s", 1, 1, 10)})});
  RunningWork w;
  w.nodes = {0};
  w.gpus = 8;
  w.ends_ms = 5000;
  RunningWork w2 = w;
  w2.nodes = {1};
  in.running = {w, w2};
  in.hold.job_id = "s";  // held for the stream's head before the gang came
  in.hold.nodes = {0};
  in.hold.start_ms = 5000;
  auto out = plan_round(in);
  REQUIRE(out.hold.active());
  CHECK(out.hold.job_id == "g");
  CHECK(out.hold.nodes == std::vector<size_t>{0, 1});
}

TEST_CASE("round: a 1-GPU job waits for turnover without a hold", "[policy][round][backfill]") {
  auto in = input({node("a", 0)}, {team("v", 0, {demand("one", 1)})});
  RunningWork w;
  w.nodes = {0};
  w.gpus = 8;
  w.ends_ms = 5000;
  in.running = {w};
  auto out = plan_round(in);
  CHECK_FALSE(out.hold.active());
  CHECK(out.reasons.at("one").code == why::kFitsNowhere);
}

namespace {
const char* kImage = "localhost/troupe-busybox:latest";
// A node of pool a100 whose agent runs images (troupe-node --runtime podman).
NodeCapacity podman_node(std::string name, int free, int total = 8) {
  auto n = node(std::move(name), free);
  n.gpus_total = total;
  n.runtime = "podman";
  return n;
}
Demand image_demand(std::string id, int gpus) {
  auto d = demand(std::move(id), gpus);
  d.req.image = kImage;
  return d;
}
}  // namespace

TEST_CASE("round: a job with an image is placed only where images run",
          "[policy][round][isolation]") {
  // Node a (no runtime) fits best (fewer free GPUs); the job still goes to b.
  auto in = input({node("a", 2), podman_node("b", 8)},
                  {team("v", 0, {image_demand("img", 2), demand("plain", 2)})});
  in.teams[0].slots = 1;
  auto out = plan_round(in);
  REQUIRE(out.grants.size() == 1);
  CHECK(in.teams[0].demands[out.grants[0].demand].job_id == "img");
  CHECK(out.grants[0].nodes == std::vector<size_t>{1});
}

TEST_CASE("round: no node runs images: a reason, never the host", "[policy][round][isolation]") {
  auto in = input({node("a", 8), node("b", 8)}, {team("v", 0, {image_demand("img", 1)})});
  auto out = plan_round(in);
  CHECK(out.grants.empty());
  REQUIRE(out.reasons.count("img"));
  CHECK(out.reasons.at("img").code == why::kNoRuntime);
  CHECK_THAT(
      out.reasons.at("img").text,
      Catch::Contains(std::string("needs a container runtime for image ") + kImage) &&
          Catch::Contains("no node in pool a100 runs images (troupe-node --runtime podman)"));
  // A runtime on a node of another pool does not help.
  auto other = node("c", 8, "h100");
  other.runtime = "podman";
  in.nodes.push_back(other);
  CHECK(plan_round(in).reasons.at("img").code == why::kNoRuntime);
  // The same job without an image runs.
  in.teams[0].demands[0].req.image.clear();
  CHECK(plan_round(in).grants.size() == 1);
}

TEST_CASE("round: the nodes that run images are too small: the runtime is the reason",
          "[policy][round][isolation]") {
  auto in =
      input({podman_node("small", 2, 2), node("big", 8)}, {team("v", 0, {image_demand("img", 4)})});
  auto out = plan_round(in);
  CHECK(out.grants.empty());
  CHECK(out.reasons.at("img").code == why::kNoRuntime);
  CHECK_THAT(out.reasons.at("img").text, Catch::Contains("no node in pool a100 that runs images") &&
                                             Catch::Contains("can ever hold 4 GPUs per worker"));
  // Too big for every node, image or not: the size is the reason.
  in.teams[0].demands[0] = image_demand("img", 16);
  CHECK(plan_round(in).reasons.at("img").code == why::kNoNodeOfType);
}

TEST_CASE("free_histogram counts only the nodes that may take the job",
          "[policy][round][isolation]") {
  std::vector<NodeCapacity> nodes = {node("a", 8), podman_node("b", 1), podman_node("c", 1),
                                     node("d", 8, "h100")};
  auto d = demand("j", 4);
  CHECK(free_histogram(nodes, d.req) == "3 nodes in pool: 1 node has 8 free, 2 nodes have 1 free");
  CHECK(free_histogram(nodes, image_demand("j", 4).req) == "2 nodes in pool: 2 nodes have 1 free");
}

TEST_CASE(
    "round: planned in place on live capacity, the same plan, its grants taken and the index kept",
    "[policy][round][index]") {
  std::mt19937 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  for (int round = 0; round < 100; ++round) {
    std::vector<NodeCapacity> nodes;
    for (int i = 0; i < 1 + pick(40); ++i) nodes.push_back(node("n" + std::to_string(i), pick(9)));
    std::vector<TeamInput> teams;
    for (int t = 0; t < 1 + pick(4); ++t) {
      std::vector<Demand> ds;
      for (int d = 0; d < pick(20); ++d)
        ds.push_back(demand("t" + std::to_string(t) + "-" + std::to_string(d), 1 + pick(8),
                            1 + (pick(5) == 0 ? pick(3) : 0), pick(100)));
      teams.push_back(team("team" + std::to_string(t), pick(16), ds, 1 + pick(3), pick(16)));
      teams.back().slots = 1 + pick(6);
    }
    auto in = input(nodes, teams);
    auto copy_out = plan_round(in);
    RoundInput live = in;
    CapacityIndex idx(live.nodes);
    live.index = &idx;
    auto live_out = plan_round_live(live);
    REQUIRE(copy_out.grants.size() == live_out.grants.size());
    std::vector<NodeCapacity> expect = in.nodes;
    for (size_t g = 0; g < live_out.grants.size(); ++g) {
      REQUIRE(copy_out.grants[g].team == live_out.grants[g].team);
      REQUIRE(copy_out.grants[g].demand == live_out.grants[g].demand);
      REQUIRE(copy_out.grants[g].nodes == live_out.grants[g].nodes);
      const auto& g1 = live_out.grants[g];
      take(expect, in.teams[g1.team].demands[g1.demand].req, g1.nodes);
    }
    for (const auto& [id, r] : copy_out.reasons) REQUIRE(live_out.reasons.at(id).code == r.code);
    for (size_t i = 0; i < expect.size(); ++i)
      REQUIRE(live.nodes[i].gpus_free == expect[i].gpus_free);
    REQUIRE(idx.matches(live.nodes));
  }
}

TEST_CASE("round: an any-type guest is left to the pool it prefers while it fits there",
          "[policy][round][anytype]") {
  // Pool a100 plans; the job prefers h100, where a node has room.
  auto guest = demand("g", 2, 1, 0, "a100");
  guest.req.gpu_type.clear();
  guest.req.pools = {"h100", "a100"};
  guest.guest = true;
  guest.prefer = {"h100"};
  auto in = input({node("a", 8), node("h", 4, "h100")}, {team("v", 0, {guest})});
  auto out = plan_round(in);
  CHECK(out.grants.empty());
  CHECK(out.reasons.at("g").code == why::kPreferred);
  CHECK_THAT(out.reasons.at("g").text, Catch::Contains("pool h100"));

  // h100 is full: this pool takes it.
  in.nodes[1].gpus_free = 1;
  auto full = plan_round(in);
  REQUIRE(full.grants.size() == 1);
  CHECK(in.nodes[full.grants[0].nodes[0]].pool == "a100");

  // The arbiter stopped deferring (prefer emptied after kPreferWaitMs): taken here.
  in.nodes[1].gpus_free = 4;
  in.teams[0].demands[0].prefer.clear();
  CHECK(plan_round(in).grants.size() == 1);
}

TEST_CASE("round: an any-type guest never takes the pool's hold", "[policy][round][anytype]") {
  auto guest = demand("g", 8, 2, 0, "a100");
  guest.req.pools = {"h100", "a100"};
  guest.guest = true;
  auto in = input({node("a", 4), node("b", 4)}, {team("v", 0, {guest})});
  RunningWork w;
  w.nodes = {0, 1};
  w.gpus = 4;
  w.ends_ms = 10000;
  in.running = {w};
  auto out = plan_round(in);
  CHECK(out.grants.empty());
  CHECK_FALSE(out.hold.active());
  CHECK(out.reasons.at("g").code == why::kFitsNowhere);
  // The same job in its first pool takes the hold.
  in.teams[0].demands[0].guest = false;
  CHECK(plan_round(in).hold.active());
}

TEST_CASE("fifo-backfill baseline: the head gets a reservation, later jobs start only around it",
          "[policy][round][backfill]") {
  // Node a: 8 GPUs busy until 10 s; node b: 4 free, 4 busy until 50 s.
  auto with_seq = [](Demand d, uint64_t seq) {
    d.seq = seq;
    return d;
  };
  auto in =
      input({node("a", 0), node("b", 4)}, {team("x", 0, {with_seq(demand("gang", 8, 2), 1)}),
                                           team("y", 0, {with_seq(demand("long", 1, 1, 100), 2)}),
                                           team("z", 0, {with_seq(demand("quick", 1, 1, 5), 3)})});
  RunningWork w1;
  w1.nodes = {0};
  w1.gpus = 8;
  w1.ends_ms = 10000;
  RunningWork w2;
  w2.nodes = {1};
  w2.gpus = 4;
  w2.ends_ms = 50000;
  in.running = {w1, w2};
  in.fifo = true;
  SECTION("strict fifo: the head blocks everyone") {
    auto out = plan_round(in);
    CHECK(out.grants.empty());
    CHECK_FALSE(out.hold.active());
    CHECK(out.reasons.at("quick").code == why::kBehind);
  }
  SECTION("EASY: a reservation for the head, a job that ends before it backfills") {
    in.backfill = true;
    auto out = plan_round(in);
    REQUIRE(out.hold.active());
    CHECK(out.hold.job_id == "gang");
    CHECK(out.hold.start_ms == 50000);
    CHECK(out.reasons.at("gang").code == why::kReservation);
    // "long" (100 s) would delay the gang on node b: it waits; "quick" (5 s) goes.
    REQUIRE(out.grants.size() == 1);
    CHECK(in.teams[out.grants[0].team].demands[out.grants[0].demand].job_id == "quick");
    CHECK(out.reasons.at("long").code == why::kBehind);
  }
}

TEST_CASE("policy names: troupe, fifo and fifo-backfill, one way and back", "[policy][round]") {
  for (auto b : {Baseline::none, Baseline::fifo, Baseline::fifo_backfill})
    CHECK(parse_policy(policy_name(b)) == b);
  CHECK(std::string(policy_name(Baseline::fifo_backfill)) == "fifo-backfill");
  CHECK_FALSE(parse_policy("easy").has_value());
}

TEST_CASE("round: shared workers are packed on one GPU and charged their parts",
          "[policy][round][shared]") {
  auto n = node("a", 2);
  n.gpus_total = 2;
  n.gpu_memory_mb = 16000;
  std::vector<Demand> quarters;
  for (int i = 0; i < 5; ++i) {
    auto d = demand("q" + std::to_string(i), 1);
    d.req.gpu_memory_mb = 4000;
    d.req.share_key = "t";
    quarters.push_back(d);
  }
  // A team limited to one GPU: four quarters fit its limit, the fifth does not.
  auto t = team("t", 0, quarters, 1, 0, 1);
  t.slots = 10;
  auto in = input({n}, {t});
  auto out = plan_round(in);
  REQUIRE(out.grants.size() == 4);
  for (const auto& g : out.grants) CHECK(g.shared_milli == 250);
  CHECK(out.reasons.at("q4").code == why::kOverLimit);
  // Planned on a copy: the four share one GPU, the other stays whole.
  auto nodes = in.nodes;
  for (const auto& g : out.grants) take(nodes, in.teams[0].demands[g.demand].req, g.nodes);
  CHECK(nodes[0].gpus_free == 1);
  REQUIRE(nodes[0].shared.size() == 1);
  CHECK(nodes[0].shared[0].used_mb == 16000);
}

TEST_CASE("round: a shared job on nodes of unknown or smaller GPU memory is told why",
          "[policy][round][shared]") {
  auto n = node("a", 8);  // gpu_memory_mb unknown (0)
  auto d = demand("s", 1);
  d.req.gpu_memory_mb = 4000;
  d.req.share_key = "t";
  auto in = input({n}, {team("t", 0, {d})});
  auto out = plan_round(in);
  CHECK(out.grants.empty());
  CHECK(out.reasons.at("s").code == why::kNoNodeOfType);
  CHECK_THAT(out.reasons.at("s").text, Catch::Contains("--gpu-memory-mb"));
  in.nodes[0].gpu_memory_mb = 8000;
  CHECK(plan_round(in).grants.size() == 1);
}

TEST_CASE("free_histogram: cordoned or draining nodes are not counted as free",
          "[policy][round][cordon]") {
  std::vector<NodeCapacity> nodes = {node("a", 4), node("b", 4)};
  auto d = demand("j", 8);
  for (auto& n : nodes) n.schedulable = false;
  CHECK(free_histogram(nodes, d.req) ==
        "every node of pool a100 that could run it is cordoned or draining (2)");
  nodes[1].schedulable = true;
  CHECK(free_histogram(nodes, d.req) ==
        "1 nodes in pool: 1 node has 4 free; 1 node is cordoned or draining");
}

// Unit tests for actors/policy/placement: candidate choice, table-driven.
#include <catch2/catch.hpp>

#include "actors/policy/placement.hpp"

using troupe::policy::NodeCapacity;
using troupe::policy::PlacementRequest;

namespace {
NodeCapacity node(const std::string& name, int free, int total = 8, std::string type = "a100",
                  bool alive = true) {
  NodeCapacity n;
  n.name = name;
  n.gpu_type = std::move(type);
  n.gpus_total = total;
  n.gpus_free = free;
  n.cpus_total = n.cpus_free = 32;
  n.memory_total_mb = n.memory_free_mb = 256000;
  n.alive = alive;
  return n;
}
PlacementRequest req(int gpus, int workers = 1, std::string type = "") {
  PlacementRequest r;
  r.gpus = gpus;
  r.workers = workers;
  r.gpu_type = std::move(type);
  return r;
}
}  // namespace

TEST_CASE("single_candidates: first fit in index order", "[policy][placement]") {
  struct Case {
    const char* name;
    std::vector<NodeCapacity> nodes;
    PlacementRequest r;
    std::vector<size_t> want;
    const char* reason;
  };
  std::vector<Case> cases = {
      {"empty cluster", {}, req(1), {}, troupe::policy::kNoNodes},
      {"first node fits", {node("a", 8), node("b", 8)}, req(1), {0, 1}, nullptr},
      {"skips full node", {node("a", 0), node("b", 2)}, req(2), {1}, nullptr},
      {"equal edge case", {node("a", 4)}, req(4), {0}, nullptr},
      {"one short", {node("a", 3)}, req(4), {}, troupe::policy::kNoFreeCapacity},
      {"wrong type",
       {node("a", 8, 8, "a100")},
       req(1, 1, "h100"),
       {},
       troupe::policy::kNoNodeOfType},
      {"right type among others",
       {node("a", 8, 8, "a100"), node("b", 8, 8, "h100")},
       req(1, 1, "h100"),
       {1},
       nullptr},
      {"dead node skipped", {node("a", 8, 8, "a100", false), node("b", 1)}, req(1), {1}, nullptr},
      {"zero-GPU job fits anywhere alive", {node("a", 0)}, req(0), {0}, nullptr},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      auto got = troupe::policy::single_candidates(c.nodes, c.r, 4);
      CHECK(got.nodes == c.want);
      if (c.reason) {
        REQUIRE(got.reason != nullptr);
        CHECK(std::string(got.reason) == c.reason);
      }
    }
  }
}

TEST_CASE("single_candidates: at most max_candidates", "[policy][placement]") {
  std::vector<NodeCapacity> nodes;
  for (int i = 0; i < 10; ++i) nodes.push_back(node("n" + std::to_string(i), 8));
  CHECK(troupe::policy::single_candidates(nodes, req(1), 3).nodes.size() == 3);
}

TEST_CASE("gang_assignment: all or nothing", "[policy][placement][gang]") {
  struct Case {
    const char* name;
    std::vector<NodeCapacity> nodes;
    PlacementRequest r;
    std::vector<size_t> want;
  };
  std::vector<Case> cases = {
      {"two nodes of four, 2x4", {node("a", 4, 4), node("b", 4, 4)}, req(4, 2), {0, 1}},
      {"one node of four, 2x4: nothing", {node("a", 4, 4)}, req(4, 2), {}},
      {"ranks share a node with room", {node("a", 8)}, req(4, 2), {0, 0}},
      {"partial room is not enough", {node("a", 4), node("b", 3)}, req(4, 2), {}},
      {"type filter",
       {node("a", 8, 8, "a100"), node("b", 8, 8, "h100"), node("c", 8, 8, "h100")},
       req(8, 2, "h100"),
       {1, 2}},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      auto got = troupe::policy::gang_assignment(c.nodes, c.r);
      CHECK(got.nodes == c.want);
      CHECK(got.ok() == !c.want.empty());
      if (!got.ok()) CHECK(got.reason != nullptr);
    }
  }
}

TEST_CASE("could_fit tells impossible from busy", "[policy][placement]") {
  CHECK(troupe::policy::could_fit(node("a", 0, 8), req(8)));
  CHECK_FALSE(troupe::policy::could_fit(node("a", 8, 8), req(9)));
  CHECK_FALSE(troupe::policy::could_fit(node("a", 8, 8, "a100"), req(1, 1, "h100")));
}

namespace {
NodeCapacity runs_images(NodeCapacity n) {
  n.runtime = "podman";
  return n;
}
PlacementRequest in_image(PlacementRequest r) {
  r.image = "localhost/troupe-busybox:latest";
  return r;
}
}  // namespace

TEST_CASE("eligible: a job with an image only on a node with a container runtime",
          "[policy][placement][isolation]") {
  using troupe::policy::could_fit;
  using troupe::policy::eligible;
  using troupe::policy::fits;
  auto host = node("host", 8);
  auto podman = runs_images(node("podman", 8));
  CHECK_FALSE(req(1).needs_runtime());
  CHECK(in_image(req(1)).needs_runtime());
  // Without an image: any node of its type.
  CHECK(eligible(host, req(1)));
  CHECK(eligible(podman, req(1)));
  // With one: never on the host instead, busy or idle, now or ever.
  CHECK_FALSE(eligible(host, in_image(req(1))));
  CHECK_FALSE(fits(host, in_image(req(1))));
  CHECK_FALSE(could_fit(host, in_image(req(1))));
  CHECK(fits(podman, in_image(req(1))));
  CHECK(could_fit(podman, in_image(req(1))));
  // A CPU-only job with an image needs the runtime too (the GPU type check does not apply).
  CHECK_FALSE(eligible(host, in_image(req(0))));
  // The runtime does not override the GPU type.
  CHECK_FALSE(eligible(runs_images(node("h", 8, 8, "a100")), in_image(req(1, 1, "h100"))));
}

TEST_CASE("candidates: a job with an image skips nodes without a runtime, with a reason",
          "[policy][placement][isolation]") {
  using namespace troupe::policy;
  std::vector<NodeCapacity> mixed = {node("a", 8), runs_images(node("b", 8)), node("c", 8)};
  CHECK(single_candidates(mixed, in_image(req(1)), 4).nodes == std::vector<size_t>{1});
  CHECK(single_candidates(mixed, req(1), 4).nodes == std::vector<size_t>{0, 1, 2});

  std::vector<NodeCapacity> plain = {node("a", 8), node("b", 8)};
  auto none = single_candidates(plain, in_image(req(1)), 4);
  CHECK(none.nodes.empty());
  REQUIRE(none.reason != nullptr);
  CHECK(std::string(none.reason) == kNoRuntime);
  // A wrong GPU type is still told as such.
  auto typed = single_candidates(plain, in_image(req(1, 1, "h100")), 4);
  REQUIRE(typed.reason != nullptr);
  CHECK(std::string(typed.reason) == kNoNodeOfType);

  // A gang with an image: only on the runtime nodes, all or nothing.
  std::vector<NodeCapacity> gang_nodes = {node("a", 8), runs_images(node("b", 4)),
                                          runs_images(node("c", 4))};
  CHECK(gang_assignment(gang_nodes, in_image(req(4, 2))).nodes == std::vector<size_t>{1, 2});
  CHECK_FALSE(gang_assignment(gang_nodes, in_image(req(4, 3))).ok());
  CHECK(gang_assignment(gang_nodes, req(4, 3)).ok());
}

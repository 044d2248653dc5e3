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
      {"wrong type", {node("a", 8, 8, "a100")}, req(1, 1, "h100"), {}, troupe::policy::kNoNodeOfType},
      {"right type among others", {node("a", 8, 8, "a100"), node("b", 8, 8, "h100")},
       req(1, 1, "h100"), {1}, nullptr},
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
      {"type filter", {node("a", 8, 8, "a100"), node("b", 8, 8, "h100"), node("c", 8, 8, "h100")},
       req(8, 2, "h100"), {1, 2}},
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

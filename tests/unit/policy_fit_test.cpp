// Unit tests for actors/policy/fit: best fit and gang placement.
#include <catch2/catch.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "actors/policy/fit.hpp"

using namespace troupe::policy;

namespace {
NodeCapacity node(std::string name, int free, std::string rack = "r1", int total = 8,
                  std::string type = "a100") {
  NodeCapacity n;
  n.name = std::move(name);
  n.gpu_type = std::move(type);
  n.pool = n.gpu_type;
  n.rack = std::move(rack);
  n.gpus_total = total;
  n.gpus_free = free;
  n.cpus_total = n.cpus_free = 64;
  n.memory_total_mb = n.memory_free_mb = 512000;
  return n;
}
PlacementRequest req(int gpus, int workers = 1, std::string pool = "a100") {
  PlacementRequest r;
  r.gpus = gpus;
  r.workers = workers;
  r.pool = std::move(pool);
  r.gpu_type = r.pool;
  return r;
}
}  // namespace

TEST_CASE("best_fit: never break an empty node while a partly used one fits", "[policy][fit]") {
  std::vector<NodeCapacity> nodes = {node("empty", 8), node("partly", 3)};
  CHECK(best_fit(nodes, req(1)) == size_t{1});
  CHECK(best_fit(nodes, req(3)) == size_t{1});
  CHECK(best_fit(nodes, req(4)) == size_t{0});
}

TEST_CASE("best_fit: eight 1-GPU jobs pack one node, then 8 GPUs fit the other", "[policy][fit]") {
  std::vector<NodeCapacity> nodes = {node("a", 8), node("b", 8)};
  for (int i = 0; i < 8; ++i) {
    auto n = best_fit(nodes, req(1));
    REQUIRE(n);
    take(nodes, req(1), {*n});
  }
  CHECK(nodes[0].gpus_free + nodes[1].gpus_free == 8);
  CHECK((nodes[0].gpus_free == 8 || nodes[1].gpus_free == 8));
  CHECK(best_fit(nodes, req(8)).has_value());
}

TEST_CASE("best_fit: pool, type, mask and schedulable filter", "[policy][fit]") {
  std::vector<NodeCapacity> nodes = {node("a", 8, "r1", 8, "a100"), node("h", 8, "r1", 8, "h100")};
  CHECK(best_fit(nodes, req(1, 1, "h100")) == size_t{1});
  CHECK_FALSE(best_fit(nodes, req(1, 1, "v100")).has_value());
  CHECK_FALSE(best_fit(nodes, req(1), NodeMask{0, 1}).has_value());
  nodes[0].schedulable = false;
  CHECK_FALSE(best_fit(nodes, req(1)).has_value());
  nodes[0].schedulable = true;
  nodes[0].pool = "";  // in no pool
  CHECK_FALSE(best_fit(nodes, req(1)).has_value());
}

TEST_CASE("gang_fit: fewest nodes first", "[policy][fit][gang]") {
  // 2 x 4 GPUs: one node with 8 free beats two nodes with 4 free.
  std::vector<NodeCapacity> nodes = {node("a", 4), node("b", 4), node("c", 8)};
  CHECK(gang_fit(nodes, req(4, 2)) == std::vector<size_t>{2, 2});
}

TEST_CASE("gang_fit: a gang one node can take goes to it by best fit, whatever the rack",
          "[policy][fit][gang]") {
  // 2 x 2 GPUs: c (4 free) is left with the fewest, though a sorts first by rack.
  std::vector<NodeCapacity> nodes = {node("a", 8, "r1"), node("b", 3, "r1"), node("c", 4, "r9"),
                                     node("d", 4, "r9")};
  CHECK(gang_fit(nodes, req(2, 2)) == std::vector<size_t>{2, 2});
  CapacityIndex idx(nodes);
  CHECK(gang_fit(nodes, req(2, 2), {}, &idx) == std::vector<size_t>{2, 2});
  // CPUs count for every rank: c has room for one rank's CPUs only.
  nodes[2].cpus_free = 10;
  auto r = req(2, 2);
  r.cpus = 8;
  CHECK(gang_fit(nodes, r) == std::vector<size_t>{3, 3});
  CHECK(gang_fit(nodes, r, {}, &idx) == std::vector<size_t>{3, 3});
  // A node masked out is passed over.
  CHECK(gang_fit(nodes, r, NodeMask{1, 1, 1, 0}) == std::vector<size_t>{0, 0});
}

TEST_CASE("gang_fit: one rack when it can", "[policy][fit][gang]") {
  std::vector<NodeCapacity> nodes = {node("a", 8, "r1"), node("b", 8, "r2"), node("c", 8, "r2")};
  auto ranks = gang_fit(nodes, req(8, 2));
  REQUIRE(ranks.size() == 2);
  CHECK(nodes[ranks[0]].rack == "r2");
  CHECK(nodes[ranks[1]].rack == "r2");
}

TEST_CASE("gang_fit: spans racks when no rack is enough, else nothing", "[policy][fit][gang]") {
  std::vector<NodeCapacity> nodes = {node("a", 8, "r1"), node("b", 8, "r2")};
  CHECK(gang_fit(nodes, req(8, 2)).size() == 2);
  CHECK(gang_fit(nodes, req(8, 3)).empty());
  CHECK(gang_fit(nodes, req(8, 2, "h100")).empty());
}

TEST_CASE("capacity index: best fit is the lowest bucket with a node that fits",
          "[policy][fit][index]") {
  std::vector<NodeCapacity> nodes = {node("a", 8), node("b", 3), node("c", 1), node("d", 3),
                                     node("e", 2, "r1", 8, "h100")};
  CapacityIndex idx(nodes);
  PlacementRequest r;
  r.pool = "a100";
  r.gpus = 2;
  CHECK(best_fit(nodes, r, {}, &idx) == std::optional<size_t>(1));  // 3 free, lowest index
  CHECK(idx.with_free("a100", 3) == std::vector<size_t>{0, 1, 3});
  CHECK(idx.with_free("h100", 1) == std::vector<size_t>{4});
  CHECK(idx.with_free("v100", 1).empty());
  take(nodes, r, {1}, &idx);  // b: 1 free
  CHECK(idx.matches(nodes));
  CHECK(best_fit(nodes, r, {}, &idx) == std::optional<size_t>(3));
  CHECK(best_fit(nodes, r, NodeMask{1, 1, 1, 0, 1}, &idx) == std::optional<size_t>(0));
  give_back(nodes, r, {1}, &idx);
  CHECK(idx.matches(nodes));
  nodes[1].pool = "";  // a node of no pool takes nothing
  idx.set(1, nodes[1]);
  CHECK(idx.matches(nodes));
  CHECK(best_fit(nodes, r, {}, &idx) == std::optional<size_t>(3));
}

TEST_CASE("capacity index: random clusters give the scans' answers, and it follows every change",
          "[policy][fit][index]") {
  std::mt19937 rng(42);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const std::vector<std::string> types{"a100", "h100"};
  for (int round = 0; round < 200; ++round) {
    std::vector<NodeCapacity> nodes;
    int n = 1 + pick(60);
    for (int i = 0; i < n; ++i) {
      auto c =
          node("n" + std::to_string(i), pick(9), "r" + std::to_string(pick(4)), 8, types[pick(2)]);
      c.alive = pick(10) != 0;
      c.schedulable = pick(10) != 0;
      c.cpus_free = pick(65);
      nodes.push_back(c);
    }
    CapacityIndex idx(nodes);
    for (int q = 0; q < 30; ++q) {
      PlacementRequest r;
      r.pool = types[pick(2)];
      r.gpu_type = pick(2) ? r.pool : "";
      r.gpus = pick(9);
      r.cpus = pick(20);
      r.workers = 1 + pick(4);
      NodeMask mask;
      if (pick(3) == 0)
        for (int i = 0; i < n; ++i) mask.push_back(static_cast<char>(pick(4) != 0));
      auto scanned = place(nodes, r, mask);
      auto looked_up = place(nodes, r, mask, &idx);
      REQUIRE(scanned == looked_up);
      if (!looked_up.empty() && pick(2)) take(nodes, r, looked_up, &idx);
      if (pick(4) == 0) {  // a node reports
        size_t i = static_cast<size_t>(pick(n));
        nodes[i].gpus_free = pick(9);
        nodes[i].pool = pick(8) ? types[pick(2)] : "";
        idx.set(i, nodes[i]);
      }
      REQUIRE(idx.matches(nodes));
    }
  }
}

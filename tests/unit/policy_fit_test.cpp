// Unit tests for actors/policy/fit: best fit and gang placement.
#include <catch2/catch.hpp>

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

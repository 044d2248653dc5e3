// Unit tests for actors/policy/backfill: when and where a starving job fits,
// and who may use held nodes.
#include <catch2/catch.hpp>

#include "actors/policy/backfill.hpp"

using namespace troupe::policy;

namespace {
NodeCapacity node(std::string name, int free) {
  NodeCapacity n;
  n.name = std::move(name);
  n.gpu_type = n.pool = "a100";
  n.gpus_total = 8;
  n.gpus_free = free;
  return n;
}
PlacementRequest gang(int gpus, int workers) {
  PlacementRequest r;
  r.gpus = gpus;
  r.workers = workers;
  r.pool = r.gpu_type = "a100";
  return r;
}
RunningWork work(size_t node, int gpus, int64_t ends) {
  RunningWork w;
  w.nodes = {node};
  w.gpus = gpus;
  w.ends_ms = ends;
  return w;
}
}  // namespace

TEST_CASE("plan_hold: the gang fits when the last blocking work ends", "[policy][backfill]") {
  std::vector<NodeCapacity> nodes = {node("a", 0), node("b", 0)};
  std::vector<RunningWork> running = {work(0, 8, 5000), work(1, 4, 9000), work(1, 4, 3000)};
  auto h = plan_hold(nodes, running, gang(8, 2), "big", 1000);
  REQUIRE(h.active());
  CHECK(h.job_id == "big");
  CHECK(h.start_ms == 9000);
  CHECK(h.nodes == std::vector<size_t>{0, 1});
}

TEST_CASE("plan_hold: fits now -> hold starts now, never -> no hold", "[policy][backfill]") {
  std::vector<NodeCapacity> nodes = {node("a", 8)};
  auto now = plan_hold(nodes, {}, gang(8, 1), "j", 100);
  CHECK(now.active());
  CHECK(now.start_ms == 100);
  auto never = plan_hold(nodes, {}, gang(8, 2), "j", 100);
  CHECK_FALSE(never.active());
}

TEST_CASE("plan_hold: unbounded work gives an unknown start", "[policy][backfill]") {
  std::vector<NodeCapacity> nodes = {node("a", 0)};
  auto h = plan_hold(nodes, {work(0, 8, kNever)}, gang(8, 1), "j", 0);
  REQUIRE(h.active());
  CHECK(h.start_ms == kNever);
}

TEST_CASE("usable_under_hold: only work that ends before the hold may use held nodes",
          "[policy][backfill]") {
  Hold h;
  h.job_id = "big";
  h.nodes = {1};
  h.start_ms = 20000;
  CHECK(usable_under_hold(h, 3, 0, 15).empty());               // ends at 15 s < 20 s: every node
  CHECK(usable_under_hold(h, 3, 0, 25) == NodeMask{1, 0, 1});  // would run past the hold
  CHECK(usable_under_hold(h, 3, 0, 0) == NodeMask{1, 0, 1});   // unbounded
  CHECK(usable_under_hold(Hold{}, 2, 0, 0).empty());           // no hold: every node
}

TEST_CASE("held_idle_gpus counts free GPUs on held nodes only", "[policy][backfill]") {
  std::vector<NodeCapacity> nodes = {node("a", 3), node("b", 5)};
  Hold h;
  h.job_id = "j";
  h.nodes = {1};
  CHECK(held_idle_gpus(h, nodes) == 5);
}

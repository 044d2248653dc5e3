// Unit tests for actors/policy/placement: which nodes may run a request.
#include <algorithm>
#include <catch2/catch.hpp>
#include <optional>

#include "actors/policy/fit.hpp"
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

TEST_CASE("fit: a job with an image skips nodes without a runtime",
          "[policy][placement][isolation]") {
  using namespace troupe::policy;
  // The fits of policy/fit.hpp place within a job's pool.
  auto pooled = [](NodeCapacity n) {
    n.pool = "a100";
    return n;
  };
  auto in_pool = [](PlacementRequest r) {
    r.pool = "a100";
    return r;
  };
  std::vector<NodeCapacity> mixed = {pooled(node("a", 8)), runs_images(pooled(node("b", 8))),
                                     pooled(node("c", 8))};
  CHECK(best_fit(mixed, in_pool(in_image(req(1)))) == std::optional<size_t>{1});
  CHECK(best_fit(mixed, req(1)).has_value());

  std::vector<NodeCapacity> plain = {pooled(node("a", 8)), pooled(node("b", 8))};
  CHECK_FALSE(best_fit(plain, in_pool(in_image(req(1)))).has_value());

  // A gang with an image: only on the runtime nodes, all or nothing.
  std::vector<NodeCapacity> gang_nodes = {pooled(node("a", 8)), runs_images(pooled(node("b", 4))),
                                          runs_images(pooled(node("c", 4)))};
  auto ranks = gang_fit(gang_nodes, in_pool(in_image(req(4, 2))));
  std::sort(ranks.begin(), ranks.end());
  CHECK(ranks == std::vector<size_t>{1, 2});
  CHECK(gang_fit(gang_nodes, in_pool(in_image(req(4, 3)))).empty());
  CHECK_FALSE(gang_fit(gang_nodes, req(4, 3)).empty());
}

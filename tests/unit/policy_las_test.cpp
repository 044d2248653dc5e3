// Unit tests for actors/policy/las (least attained service) and the parts of
// queue order and preemption it drives.
#include <catch2/catch.hpp>
#include <vector>

#include "actors/policy/las.hpp"
#include "actors/policy/preemption.hpp"
#include "actors/policy/queue_order.hpp"

using namespace troupe::policy;

namespace {
const std::vector<double> kBands = {100, 1000};  // GPU-seconds

PreemptCandidate running(std::string id, int band, int priority = 50, std::string team = "t") {
  PreemptCandidate c;
  c.job_id = std::move(id);
  c.team = std::move(team);
  c.priority = priority;
  c.nodes = {0};
  c.gpus = 8;
  c.las_band = band;
  return c;
}
// One 8-GPU node of pool a100, all of it in use.
NodeCapacity full_node() {
  NodeCapacity n;
  n.name = "a";
  n.pool = n.gpu_type = "a100";
  n.gpus_total = 8;
  return n;
}
Preemptor waiting(int band, int priority = 50, std::string team = "t") {
  Preemptor p;
  p.job_id = "w";
  p.team = std::move(team);
  p.priority = priority;
  p.las_band = band;
  p.req.gpus = 8;
  p.req.pool = "a100";
  return p;
}
}  // namespace

TEST_CASE("las: a job's band is how many thresholds its GPU-seconds reached", "[policy][las]") {
  CHECK(las_band(0, kBands) == 0);
  CHECK(las_band(99.9, kBands) == 0);
  CHECK(las_band(100, kBands) == 1);
  CHECK(las_band(999, kBands) == 1);
  CHECK(las_band(5000, kBands) == 2);
  CHECK(las_band(5000, {}) == 0);  // no thresholds: one band
  // 2 workers x 4 GPUs for 10 s: 80 GPU-seconds; nothing before it started.
  CHECK(attempt_gpu_s(4, 2, 1000, 11000) == Approx(80));
  CHECK(attempt_gpu_s(4, 2, 0, 11000) == 0);
  CHECK(attempt_gpu_s(4, 2, 11000, 1000) == 0);
}

TEST_CASE("las: the starvation guard moves a long-waiting job to band 0", "[policy][las]") {
  // 500 GPU-s attained: band 1, promoted 60 s after it was queued.
  auto w = waiting_band(500, kBands, 60, 10000, 10000);
  CHECK(w.band == 1);
  CHECK(w.promote_at_ms == 70000);
  auto later = waiting_band(500, kBands, 60, 10000, 70000);
  CHECK(later.band == 0);
  CHECK(later.promote_at_ms == 0);
  // No guard (0), or already band 0: nothing to promote.
  CHECK(waiting_band(500, kBands, 0, 10000, 1'000'000).band == 1);
  CHECK(waiting_band(500, kBands, 0, 10000, 1'000'000).promote_at_ms == 0);
  CHECK(waiting_band(5, kBands, 60, 10000, 10000).promote_at_ms == 0);
}

TEST_CASE("las: within a class, a lower band goes first, then submit order", "[policy][las]") {
  QueueKey early_long{50, 1, 1}, late_short{50, 2, 0}, urgent_long{100, 3, 2};
  CHECK(late_short < early_long);
  CHECK(urgent_long < late_short);                 // the class still comes first
  CHECK(QueueKey{50, 1, 0} < QueueKey{50, 2, 0});  // fifo: band 0 for all
}

TEST_CASE("las: a running job in a higher band of the same team and class yields",
          "[policy][las][preemption]") {
  std::vector<NodeCapacity> nodes = {full_node()};
  const int64_t now = 100000;
  std::vector<PreemptCandidate> c = {running("long", 2)};
  auto plan = choose_victims(nodes, c, waiting(0), now);
  REQUIRE(plan.victims.size() == 1);
  // Not for a job of its own band or higher ...
  CHECK(choose_victims(nodes, c, waiting(2), now).victims.empty());
  // ... nor of another team (its own guarantee protects it) ...
  CHECK(choose_victims(nodes, c, waiting(0, 50, "other"), now).victims.empty());
  // ... nor of another class: priority decides there, as before.
  CHECK(choose_victims(nodes, {running("long", 2, 100)}, waiting(0, 50), now).victims.empty());
  // A fifo team (-1) never preempts for bands; churn protection still holds.
  CHECK(choose_victims(nodes, {running("long", -1)}, waiting(-1), now).victims.empty());
  auto shielded = running("long", 2);
  shielded.protected_until_ms = now + 1;
  CHECK(choose_victims(nodes, {shielded}, waiting(0), now).victims.empty());
}

TEST_CASE("las: a band preemption is planned and budgeted like a priority one",
          "[policy][las][preemption]") {
  std::vector<NodeCapacity> nodes = {full_node()};
  std::vector<PreemptCandidate> c = {running("long", 1)};
  PreemptWant w;
  w.job_id = "short";
  w.team = "t";
  w.priority = 50;
  w.las_band = 0;
  w.req.gpus = 8;
  w.req.pool = "a100";
  VictimPool pool;
  pool.add("t", 50, true, false);
  CHECK(pool.may_have_victim(w));  // same class: only a las want passes the quick filter
  auto plans = plan_preemption(nodes, c, {w}, 0, 10, 30000, 100000);
  REQUIRE(plans.size() == 1);
  CHECK(plans[0].budgeted == 1);
  CHECK_FALSE(plans[0].reclaim);
  CHECK_THAT(plans[0].why, Catch::Contains("order las"));
  // The budget spent: none.
  CHECK(plan_preemption(nodes, c, {w}, 10, 10, 30000, 100000).empty());
}

// Unit tests for shared GPUs (issue 16, item 3): the node ledger's fractions
// per GPU index, the fit that packs them (FGD-like: whole GPUs stay whole),
// the round's overlay, quota and fair share charged in parts of a GPU, and
// the arbiter's books.
#include <catch2/catch.hpp>
#include <random>

#include "actors/policy/books.hpp"
#include "actors/policy/fair_share.hpp"
#include "actors/policy/fit.hpp"
#include "actors/policy/ledger.hpp"
#include "actors/policy/overlay.hpp"

using namespace troupe::policy;

namespace {
constexpr int64_t kGpuMb = 16000;

Ledger ledger(int gpus, int64_t gpu_mb = kGpuMb) {
  Ledger l;
  l.resize(gpus, 64, 256000);
  l.gpu_memory_mb = gpu_mb;
  return l;
}
Hold shared_want(int64_t mb, const std::string& key = "a") {
  Hold h;
  h.job_id = "j";
  h.gpus.assign(1, 0);
  h.gpu_memory_mb = mb;
  h.share_key = key;
  return h;
}
Hold whole_want(int gpus) {
  Hold h;
  h.job_id = "w";
  h.gpus.assign(static_cast<size_t>(gpus), 0);
  return h;
}
PlacementRequest shared_req(int64_t mb, const std::string& key = "a") {
  PlacementRequest r;
  r.pool = "p";
  r.gpus = 1;
  r.gpu_memory_mb = mb;
  r.share_key = key;
  return r;
}
NodeCapacity node(const std::string& name, int gpus, int64_t gpu_mb = kGpuMb) {
  NodeCapacity n;
  n.name = name;
  n.pool = "p";
  n.gpus_total = gpus;
  n.gpus_free = gpus;
  n.gpu_memory_mb = gpu_mb;
  return n;
}
}  // namespace

TEST_CASE("shared ledger: four quarter-GPU workers share one GPU, the rest stays whole",
          "[policy][ledger][shared]") {
  auto l = ledger(2);
  for (int i = 0; i < 4; ++i) {
    auto v = reserve(l, "q" + std::to_string(i), shared_want(kGpuMb / 4), 0, 1000);
    REQUIRE(v.ok);
    CHECK(v.gpus == std::vector<int>{0});
  }
  CHECK(l.gpus_free() == 1);
  CHECK(l.gpus_allocated() == 1);
  CHECK(l.gpus_reserved() == 0);
  REQUIRE(l.shared_gpus().size() == 1);
  CHECK(l.shared_gpus()[0].used_mb == kGpuMb);
  CHECK(check_invariants(l).empty());
  // A fifth quarter takes the other GPU; then no GPU is free for a whole job.
  auto fifth = reserve(l, "q4", shared_want(kGpuMb / 4), 0, 1000);
  REQUIRE(fifth.ok);
  CHECK(fifth.gpus == std::vector<int>{1});
  auto whole = reserve(l, "w", whole_want(1), 0, 1000);
  CHECK_FALSE(whole.ok);
  CHECK(whole.reason.find("not enough free GPUs") != std::string::npos);
  // Released, the GPU is whole again for a whole job.
  REQUIRE(release(l, "q4"));
  auto again = reserve(l, "w", whole_want(1), 0, 1000);
  REQUIRE(again.ok);
  CHECK(again.gpus == std::vector<int>{1});
  CHECK(check_invariants(l).empty());
}

TEST_CASE("shared ledger: a whole-GPU worker never lands on a shared GPU",
          "[policy][ledger][shared]") {
  auto l = ledger(3);
  REQUIRE(reserve(l, "s", shared_want(1000), 0, 1000).ok);  // GPU 0, mostly free
  auto w = reserve(l, "w", whole_want(2), 0, 1000);
  REQUIRE(w.ok);
  CHECK(w.gpus == std::vector<int>{1, 2});
  CHECK_FALSE(reserve(l, "w2", whole_want(1), 0, 1000).ok);
  CHECK(check_invariants(l).empty());
}

TEST_CASE("shared ledger: no GPU's memory is ever over-allocated (randomized)",
          "[policy][ledger][shared]") {
  std::mt19937 rng(7);
  auto l = ledger(4);
  std::vector<std::string> live;
  for (int step = 0; step < 3000; ++step) {
    if (!live.empty() && rng() % 3 == 0) {
      size_t k = rng() % live.size();
      release(l, live[k]);
      live.erase(live.begin() + static_cast<long>(k));
    } else {
      std::string id = "h" + std::to_string(step);
      bool whole = rng() % 4 == 0;
      auto want =
          whole ? whole_want(1 + static_cast<int>(rng() % 2))
                : shared_want(1000 + static_cast<int64_t>(rng() % 9) * 1000, rng() % 2 ? "a" : "b");
      if (reserve(l, id, want, step, 1000000).ok) live.push_back(id);
    }
    auto bad = check_invariants(l);
    INFO("step " << step);
    REQUIRE(bad.empty());
    std::map<int, int64_t> per_gpu;
    for (const auto& [id, h] : l.holds)
      if (h.gpu_memory_mb > 0) per_gpu[h.gpus[0]] += h.gpu_memory_mb;
    for (const auto& [g, mb] : per_gpu) REQUIRE(mb <= kGpuMb);
  }
}

TEST_CASE("shared ledger: teams do not share a GPU unless their keys say so",
          "[policy][ledger][shared]") {
  auto l = ledger(2);
  auto a = reserve(l, "a", shared_want(4000, "team-a"), 0, 1000);
  auto b = reserve(l, "b", shared_want(4000, "team-b"), 0, 1000);
  REQUIRE(a.ok);
  REQUIRE(b.ok);
  CHECK(a.gpus != b.gpus);  // one GPU each
  CHECK_FALSE(reserve(l, "c", shared_want(4000, "team-c"), 0, 1000).ok);
  CHECK(reserve(l, "a2", shared_want(4000, "team-a"), 0, 1000).gpus == a.gpus);
  auto x = ledger(1);
  REQUIRE(reserve(x, "a", shared_want(4000, "*"), 0, 1000).ok);
  CHECK(reserve(x, "b", shared_want(4000, "*"), 0, 1000).ok);  // a pool that shares across teams
}

TEST_CASE("shared ledger: refusals name the reason", "[policy][ledger][shared]") {
  auto unknown = ledger(1, 0);
  auto v = reserve(unknown, "a", shared_want(1000), 0, 1000);
  CHECK_FALSE(v.ok);
  CHECK(v.reason.find("GPU memory is unknown") != std::string::npos);
  auto l = ledger(1);
  auto big = reserve(l, "a", shared_want(kGpuMb), 0, 1000);
  CHECK_FALSE(big.ok);
  CHECK(big.reason.find("not a share") != std::string::npos);
  auto two = shared_want(1000);
  two.gpus.assign(2, 0);
  CHECK_FALSE(reserve(l, "b", two, 0, 1000).ok);
}

TEST_CASE("shared ledger: a hold rebuilt from a snapshot (claim) counts as reserved did",
          "[policy][ledger][shared]") {
  auto l = ledger(2);
  auto h = shared_want(6000);
  h.gpus = {1};
  h.committed = true;
  claim(l, "x", h);
  CHECK(l.gpus_free() == 1);
  REQUIRE(l.shared_gpus().size() == 1);
  CHECK(l.shared_gpus()[0].index == 1);
  CHECK(check_invariants(l).empty());
  auto next = reserve(l, "y", shared_want(6000), 0, 1000);
  REQUIRE(next.ok);
  CHECK(next.gpus == std::vector<int>{1});
}

TEST_CASE("shared fit: fractions are packed where they fill a shared GPU best",
          "[policy][fit][shared]") {
  std::vector<NodeCapacity> nodes = {node("n0", 4), node("n1", 4), node("n2", 4)};
  // n1 has a GPU with 12 GB used, n2 one with 4 GB used.
  nodes[1].gpus_free = 3;
  nodes[1].shared = {SharedGpu{0, 12000, "a"}};
  nodes[2].gpus_free = 3;
  nodes[2].shared = {SharedGpu{2, 4000, "a"}};
  // 4 GB fills n1's GPU exactly: no memory left stranded.
  CHECK(best_fit(nodes, shared_req(4000)) == std::optional<size_t>(1));
  // 8 GB does not fit n1's; it joins n2's.
  CHECK(best_fit(nodes, shared_req(8000)) == std::optional<size_t>(2));
  // 13 GB fits no shared GPU: it breaks a whole one, on the node with the
  // fewest free GPUs (n1 or n2, not the empty n0).
  auto at = best_fit(nodes, shared_req(13000));
  REQUIRE(at);
  CHECK(*at != 0);
  // Another team's shared GPUs are not joined.
  auto other = best_fit(nodes, shared_req(4000, "b"));
  REQUIRE(other);
  CHECK(*other != 0);
  CHECK(nodes[*other].gpus_free == 3);
  // Memory as large as the GPU's, or a node of unknown GPU memory: no fit.
  CHECK_FALSE(fits(nodes[0], shared_req(kGpuMb)));
  CHECK_FALSE(could_fit(nodes[0], shared_req(kGpuMb)));
  CHECK_FALSE(fits(node("u", 4, 0), shared_req(1000)));
}

TEST_CASE("shared fit: a whole-GPU job never counts a shared GPU as free",
          "[policy][fit][shared]") {
  std::vector<NodeCapacity> nodes = {node("n0", 1)};
  PlacementRequest whole;
  whole.pool = "p";
  whole.gpus = 1;
  take(nodes, shared_req(4000), {0});
  CHECK(nodes[0].gpus_free == 0);
  CHECK_FALSE(fits(nodes[0], whole));
  CHECK(fits(nodes[0], shared_req(4000)));
  for (int i = 0; i < 3; ++i) take(nodes, shared_req(4000), {0});
  CHECK_FALSE(fits(nodes[0], shared_req(1000)));  // 16 of 16 GB
  CHECK(stranded_mb(nodes[0]) == 0);
  CHECK(shared_used_mb(nodes[0]) == 16000);
  for (int i = 0; i < 4; ++i) give_back(nodes, shared_req(4000), {0});
  CHECK(nodes[0].gpus_free == 1);
  CHECK(nodes[0].shared.empty());
  CHECK(fits(nodes[0], whole));
}

TEST_CASE("shared overlay: a grant the node has not counted yet takes its part",
          "[policy][overlay][shared]") {
  GrantOverlay o;
  o.add(0, "j1", 1, 0, shared_req(4000));
  auto report = node("n0", 2);
  o.apply(0, {}, report);
  CHECK(report.gpus_free == 1);
  REQUIRE(report.shared.size() == 1);
  CHECK(report.shared[0].used_mb == 4000);
  CHECK(stranded_mb(report) == 12000);
  auto counted = node("n0", 2);
  o.apply(0, {"j1/1/0"}, counted);  // the node lists it: no longer taken here
  CHECK(counted.gpus_free == 2);
}

TEST_CASE("shared quota: a part of a GPU is charged memory / the GPU's memory",
          "[policy][fair_share][shared]") {
  CHECK(shared_milli(4000, 16000) == 250);
  CHECK(shared_milli(1, 16000) == 1);         // never free
  CHECK(shared_milli(5000, 16000) == 313);    // rounded up
  CHECK(shared_milli(16000, 16000) == 1000);  // all of it is a whole GPU
  CHECK(shared_milli(4000, 0) == 1000);       // unknown memory: a whole GPU
  TeamStanding t;
  t.team = "a";
  t.guaranteed = 1;
  t.limit = 1;
  t.used.shared_milli = 750;
  CHECK(admit_quota_milli(t, 250).ok);
  auto over = admit_quota_milli(t, 251);
  CHECK_FALSE(over.ok);
  CHECK(over.reason.find("0.75/1 GPUs in use") != std::string::npos);
  CHECK(over.reason.find("0.251 more") != std::string::npos);
  CHECK(below_guarantee(t));
  PoolTotals totals{4, 0, 0};
  CHECK(dominant_share(t.used, totals) == Approx(0.1875));
  CHECK(gpus_text(2250) == "2.25");
  CHECK(gpus_text(3000) == "3");
}

TEST_CASE("shared books: a shared worker is charged its part, not a GPU",
          "[policy][books][shared]") {
  Books b;
  auto req = shared_req(4000);
  REQUIRE(b.grant("j1", "a", req, false, 250));
  REQUIRE(b.grant("j2", "a", req, false, 250));
  auto acc = b.account("a", "p");
  CHECK(acc.used.gpus == 0);
  CHECK(acc.used.shared_milli == 500);
  CHECK(gpu_milli(acc.used) == 500);
  REQUIRE(b.placed("j1"));
  REQUIRE(b.ended("j1"));
  CHECK(b.account("a", "p").used.shared_milli == 250);
  CHECK(b.recount("a", "p").used.shared_milli == 250);
  REQUIRE(b.unplaced("j2"));
  CHECK(b.size() == 0);
}

// Unit tests for actors/policy/preemption: victim choice, gangs, churn.
#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "actors/policy/preemption.hpp"
#include "actors/policy/why.hpp"

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
PreemptCandidate job(std::string id, std::vector<size_t> nodes, int gpus, int priority,
                     int64_t started, int64_t ckpt = 0, std::string team = "high",
                     bool borrowed = false) {
  PreemptCandidate c;
  c.job_id = std::move(id);
  c.team = std::move(team);
  c.nodes = std::move(nodes);
  c.gpus = gpus;
  c.priority = priority;
  c.started_ms = started;
  c.last_checkpoint_ms = ckpt;
  c.borrowed = borrowed;
  return c;
}
Preemptor wants(int gpus, int workers = 1, int priority = 100, std::string team = "high",
                bool below = false) {
  Preemptor p;
  p.job_id = "p";
  p.team = std::move(team);
  p.priority = priority;
  p.below_guarantee = below;
  p.req.gpus = gpus;
  p.req.workers = workers;
  p.req.pool = p.req.gpu_type = "a100";
  return p;
}
std::vector<std::string> ids(const std::vector<PreemptCandidate>& c, const VictimPlan& p) {
  std::vector<std::string> out;
  for (size_t i : p.victims) out.push_back(c[i].job_id);
  std::sort(out.begin(), out.end());
  return out;
}
const int64_t kNow = 100000;
}  // namespace

TEST_CASE("victims: least work lost first (time since checkpoint x GPUs)", "[policy][preemption]") {
  std::vector<NodeCapacity> nodes = {node("a", 0), node("b", 0)};
  std::vector<PreemptCandidate> c = {
      job("old-no-ckpt", {0}, 8, 50, 0),              // 100 s x 8 GPUs lost
      job("fresh-ckpt", {1}, 8, 50, 0, kNow - 5000),  // 5 s x 8
  };
  auto plan = choose_victims(nodes, c, wants(8), kNow);
  CHECK(ids(c, plan) == std::vector<std::string>{"fresh-ckpt"});
  CHECK(plan.gpu_s_lost == Approx(40));
  CHECK(plan.nodes == std::vector<size_t>{1});
}

TEST_CASE("victims: non-preemptible and equal priority are never chosen", "[policy][preemption]") {
  std::vector<NodeCapacity> nodes = {node("a", 0)};
  auto pinned = job("pinned", {0}, 8, 50, 0);
  pinned.preemptible = false;
  std::vector<PreemptCandidate> c = {pinned};
  CHECK(choose_victims(nodes, c, wants(8), kNow).victims.empty());
  std::vector<PreemptCandidate> peer = {job("peer", {0}, 8, 100, 0)};
  CHECK(choose_victims(nodes, peer, wants(8), kNow).victims.empty());
}

TEST_CASE("victims: a gang is taken whole", "[policy][preemption][gang]") {
  std::vector<NodeCapacity> nodes = {node("a", 4), node("b", 4)};
  // A 2-rank gang with 4 GPUs on each node; the preemptor needs one whole node.
  std::vector<PreemptCandidate> c = {job("gang", {0, 1}, 4, 10, kNow - 1000)};
  auto plan = choose_victims(nodes, c, wants(8), kNow);
  REQUIRE(plan.victims.size() == 1);
  CHECK(plan.gpu_s_lost == Approx(8.0));  // 1 s x 4 GPUs x 2 ranks
}

TEST_CASE("victims: only as many as the fit needs", "[policy][preemption]") {
  std::vector<NodeCapacity> nodes = {node("a", 4)};
  std::vector<PreemptCandidate> c = {job("x", {0}, 2, 10, kNow - 1000),
                                     job("y", {0}, 2, 10, kNow - 2000),
                                     job("z", {0}, 4, 10, kNow - 500)};
  auto plan = choose_victims(nodes, c, wants(8), kNow);
  // x and z both lose 2 GPU-s; z started most recently, so it goes first, and
  // z alone frees enough (4 + 4 = 8): nothing else is taken.
  CHECK(ids(c, plan) == std::vector<std::string>{"z"});
  // Needing both 2-GPU jobs: take the two cheapest, leave the costliest.
  std::vector<NodeCapacity> tight = {node("a", 4)};
  std::vector<PreemptCandidate> small = {job("x", {0}, 2, 10, kNow - 1000),
                                         job("y", {0}, 2, 10, kNow - 2000),
                                         job("w", {0}, 2, 10, kNow - 9000)};
  auto two = choose_victims(tight, small, wants(8), kNow);
  CHECK(ids(small, two) == std::vector<std::string>{"x", "y"});
}

TEST_CASE("reclaim: below guarantee takes borrowed work of other teams only",
          "[policy][preemption]") {
  std::vector<NodeCapacity> nodes = {node("a", 0)};
  std::vector<PreemptCandidate> c = {job("own", {0}, 4, 50, 0, 0, "b", true),
                                     job("lent", {0}, 4, 50, 0, 0, "a", true)};
  auto plan = choose_victims(nodes, c, wants(4, 1, 50, "b", true), kNow);
  CHECK(ids(c, plan) == std::vector<std::string>{"lent"});
  // Not below guarantee, same priority: nothing.
  CHECK(choose_victims(nodes, c, wants(4, 1, 50, "b", false), kNow).victims.empty());
  // Guaranteed (not borrowed) work of another team is safe.
  std::vector<PreemptCandidate> safe = {job("kept", {0}, 8, 50, 0, 0, "a", false)};
  CHECK(choose_victims(nodes, safe, wants(4, 1, 50, "b", true), kNow).victims.empty());
}

TEST_CASE("churn: a job preempted N times in the window is protected", "[policy][preemption]") {
  CHECK(protected_until({1000, 2000, 3000}, 3, 10000, 60000) == 63000);
  CHECK(protected_until({1000, 2000}, 3, 10000, 60000) == 0);
  CHECK(protected_until({1000, 50000, 60000}, 3, 10000, 60000) == 0);  // spread out
  std::vector<NodeCapacity> nodes = {node("a", 0)};
  auto guarded = job("guarded", {0}, 8, 10, 0);
  guarded.protected_until_ms = kNow + 1;
  std::vector<PreemptCandidate> c = {guarded};
  CHECK(choose_victims(nodes, c, wants(8), kNow).victims.empty());
}

TEST_CASE("grace: the spec's, else the default, capped by max_grace_s", "[policy][preemption]") {
  CHECK(preempt_grace_s(std::nullopt, 0) == kDefaultPreemptGraceS);
  CHECK(preempt_grace_s(std::nullopt, 600) == kDefaultPreemptGraceS);
  CHECK(preempt_grace_s(120, 600) == 120);
  CHECK(preempt_grace_s(3600, 600) == 600);  // capped
  CHECK(preempt_grace_s(600, 600) == 600);
  CHECK(preempt_grace_s(std::nullopt, 20) == 20);  // the default is capped too
  CHECK(preempt_grace_s(0, 600) == 0);             // no grace asked: none given
  CHECK(preempt_grace_s(3600, 0) == 3600);         // 0: no cap (records from before the key)
  CHECK(preempt_grace_s(3600, -1) == 3600);
}

namespace {
PreemptWant want(std::string id, int priority, uint64_t seq, bool below = false, int gpus = 8,
                 std::string team = "high") {
  PreemptWant w;
  w.job_id = std::move(id);
  w.team = std::move(team);
  w.priority = priority;
  w.seq = seq;
  w.below_guarantee = below;
  w.req.gpus = gpus;
  w.req.pool = w.req.gpu_type = "a100";
  return w;
}
}  // namespace

TEST_CASE("pool plan: the highest-priority want first, the nodes held after the grace",
          "[policy][preemption]") {
  std::vector<NodeCapacity> nodes = {node("a", 0), node("b", 0)};
  std::vector<PreemptCandidate> c = {job("v1", {0}, 8, 10, 0), job("v2", {1}, 8, 10, 0)};
  auto plans =
      plan_preemption(nodes, c, {want("mid", 60, 1), want("top", 90, 2)}, 0, 10, 30000, kNow);
  REQUIRE(plans.size() == 1);  // one priority preemption a round
  const auto& plan = plans[0];
  CHECK(plan.preemptor.job_id == "top");
  CHECK_FALSE(plan.reclaim);
  CHECK(plan.budgeted == 1);
  CHECK(plan.plan.victims.size() == 1);
  CHECK(plan.held_nodes.size() == 1);
  CHECK(plan.hold_start_ms == kNow + 30000);
  CHECK(plan.preempting_until_ms == kNow + 60000);
  CHECK(plan.why == "for job top of team high (higher priority)");
  CHECK(plan.reason_code == "preempting");
  // A shorter grace moves the hold and the wait with it (no fixed timeout).
  auto quick = plan_preemption(nodes, c, {want("top", 90, 2)}, 0, 10, 5000, kNow);
  REQUIRE(quick.size() == 1);
  CHECK(quick[0].hold_start_ms == kNow + 5000);
  CHECK(quick[0].preempting_until_ms == kNow + 10000);
}

TEST_CASE("pool plan: equal priority, the one below its guarantee goes first, then submit order",
          "[policy][preemption]") {
  std::vector<NodeCapacity> nodes = {node("a", 0)};
  std::vector<PreemptCandidate> c = {job("lent", {0}, 8, 50, 0, 0, "other", true)};
  auto plans = plan_preemption(
      nodes, c, {want("early", 50, 1, false, 8, "b"), want("owed", 50, 2, true, 8, "b")}, 0, 10,
      30000, kNow);
  REQUIRE(plans.size() == 1);
  CHECK(plans[0].preemptor.job_id == "owed");
  CHECK(plans[0].why == "for job owed of team b (below its guarantee)");
}

TEST_CASE("pool plan: the per-minute budget, none when nothing makes room",
          "[policy][preemption]") {
  std::vector<NodeCapacity> nodes = {node("a", 0), node("b", 0)};
  std::vector<PreemptCandidate> c = {job("v1", {0}, 8, 10, 0), job("v2", {1}, 8, 10, 0)};
  // A 16-GPU gang needs both victims: over a budget with one left.
  auto gang = want("gang", 90, 1, false, 8);
  gang.req.workers = 2;
  CHECK(plan_preemption(nodes, c, {gang}, 9, 10, 30000, kNow).empty());
  CHECK(plan_preemption(nodes, c, {gang}, 8, 10, 30000, kNow).size() == 1);
  CHECK(plan_preemption(nodes, c, {gang}, 10, 10, 30000, kNow).empty());
  // Equal priority, not owed anything: no victim, no plan.
  CHECK(plan_preemption(nodes, c, {want("same", 10, 1)}, 0, 10, 30000, kNow).empty());

  std::vector<int64_t> recent = {kNow - kBudgetWindowMs - 1, kNow - 1000, kNow};
  forget_old(recent, kNow);
  CHECK(recent == std::vector<int64_t>{kNow - 1000, kNow});
}

TEST_CASE(
    "rule: another team's work within its guarantee is safe from any priority, borrowed "
    "work is not",
    "[policy][preemption]") {
  std::vector<NodeCapacity> nodes = {node("a", 0)};
  // Team "high" wants 8 GPUs at priority 100.
  auto p = wants(8, 1, 100, "high", false);
  std::vector<PreemptCandidate> guarded = {job("theirs", {0}, 8, 10, 0, 0, "low", false)};
  CHECK_FALSE(may_preempt(p, guarded[0], kNow));
  CHECK(choose_victims(nodes, guarded, p, kNow).victims.empty());
  // The same team's lower-priority work yields.
  std::vector<PreemptCandidate> own = {job("mine", {0}, 8, 10, 0, 0, "high", false)};
  CHECK(ids(own, choose_victims(nodes, own, p, kNow)) == std::vector<std::string>{"mine"});
  // Another team's borrowed lower-priority work yields to priority, with no
  // guarantee owed; equal priority needs a guarantee owed.
  std::vector<PreemptCandidate> lent = {job("lent", {0}, 8, 10, 0, 0, "low", true)};
  CHECK(ids(lent, choose_victims(nodes, lent, p, kNow)) == std::vector<std::string>{"lent"});
  auto peer = wants(8, 1, 10, "high", false);
  CHECK(choose_victims(nodes, lent, peer, kNow).victims.empty());
  peer.below_guarantee = true;
  CHECK(is_reclaim(peer, lent[0]));
  CHECK(ids(lent, choose_victims(nodes, lent, peer, kNow)) == std::vector<std::string>{"lent"});
  // A team never "reclaims" from itself.
  std::vector<PreemptCandidate> self_borrowed = {job("sb", {0}, 8, 10, 0, 0, "high", true)};
  CHECK_FALSE(is_reclaim(peer, self_borrowed[0]));
}

TEST_CASE("reclaim: churn protection shields from priority preemption, never from the lender",
          "[policy][preemption]") {
  std::vector<NodeCapacity> nodes = {node("a", 0)};
  auto guarded = job("guarded", {0}, 8, 10, 0, 0, "lender-less", true);
  guarded.protected_until_ms = kNow + 60000;
  std::vector<PreemptCandidate> c = {guarded};
  CHECK(choose_victims(nodes, c, wants(8, 1, 100, "high", false), kNow).victims.empty());
  CHECK(choose_victims(nodes, c, wants(8, 1, 10, "high", true), kNow).victims.size() == 1);
}

TEST_CASE("reclaim: outside the budget, every owed want in one round, no hold, numbers in why",
          "[policy][preemption]") {
  // 4 nodes x 8 GPUs full of team "borrower"'s 1-GPU borrowed jobs; team
  // "owed" (below its guarantee) wants 16 one-GPU jobs; the budget is spent.
  std::vector<NodeCapacity> nodes;
  std::vector<PreemptCandidate> c;
  for (size_t n = 0; n < 4; ++n) {
    nodes.push_back(node("n" + std::to_string(n), 0));
    for (int g = 0; g < 8; ++g)
      c.push_back(job("b" + std::to_string(n) + "-" + std::to_string(g), {n}, 1, 50,
                      kNow - 1000 * (g + 1), 0, "borrower", true));
  }
  std::vector<PreemptWant> ws;
  for (int i = 0; i < 16; ++i)
    ws.push_back(want("o" + std::to_string(i), 50, static_cast<uint64_t>(i), true, 1, "owed"));
  auto plans = plan_preemption(nodes, c, ws, 10, 10, 30000, kNow);
  REQUIRE(plans.size() == 16);
  std::set<size_t> victims;
  for (const auto& p : plans) {
    CHECK(p.reclaim);
    CHECK(p.budgeted == 0);
    CHECK(p.held_nodes.empty());
    CHECK(p.reason_code == "reclaiming");
    CHECK(p.reason_text ==
          "reclaiming 1 GPU(s) borrowed by team(s) borrower (1 job(s)); they have up to 30 s to "
          "stop, then this job runs");
    CHECK(p.preempting_until_ms == kNow + 60000);
    REQUIRE(p.plan.victims.size() == 1);
    victims.insert(p.plan.victims[0]);
  }
  CHECK(victims.size() == 16);  // each want its own victim
  // The youngest go first (least work lost): every victim started after
  // every job left running.
  for (size_t v : victims)
    for (size_t i = 0; i < c.size(); ++i)
      if (!victims.count(i)) CHECK(c[v].started_ms >= c[i].started_ms);
}

TEST_CASE("reclaim: no more is stopped than the wants need", "[policy][preemption]") {
  // One 4-GPU borrowed job frees room for four 1-GPU wants: one victim.
  std::vector<NodeCapacity> nodes = {node("a", 0)};
  std::vector<PreemptCandidate> c = {job("big", {0}, 4, 50, kNow - 500, 0, "borrower", true),
                                     job("s1", {0}, 2, 50, kNow - 9000, 0, "borrower", true),
                                     job("s2", {0}, 2, 50, kNow - 9000, 0, "borrower", true)};
  std::vector<PreemptWant> ws;
  for (int i = 0; i < 4; ++i)
    ws.push_back(want("o" + std::to_string(i), 50, static_cast<uint64_t>(i), true, 1, "owed"));
  auto plans = plan_preemption(nodes, c, ws, 0, 10, 30000, kNow);
  REQUIRE(plans.size() == 1);
  CHECK(ids(c, plans[0].plan) == std::vector<std::string>{"big"});
  // A fifth want needs one more victim.
  ws.push_back(want("o4", 50, 4, true, 1, "owed"));
  auto more = plan_preemption(nodes, c, ws, 0, 10, 30000, kNow);
  REQUIRE(more.size() == 2);
  CHECK(more[1].preemptor.job_id == "o4");
}

TEST_CASE("pool plan: a want below its guarantee past the budget takes back only borrowed work",
          "[policy][preemption]") {
  std::vector<NodeCapacity> nodes = {node("a", 0), node("b", 0)};
  // On a: the team's own lower-priority job (cheapest to stop); on b: work
  // another team borrowed.
  std::vector<PreemptCandidate> c = {job("own-low", {0}, 8, 10, kNow - 100, 0, "owed", false),
                                     job("lent", {1}, 8, 50, 0, 0, "borrower", true)};
  auto w = want("o", 50, 1, true, 8, "owed");
  auto within = plan_preemption(nodes, c, {w}, 0, 10, 30000, kNow);
  REQUIRE(within.size() == 1);
  CHECK(ids(c, within[0].plan) == std::vector<std::string>{"own-low"});
  CHECK_FALSE(within[0].reclaim);
  auto spent = plan_preemption(nodes, c, {w}, 10, 10, 30000, kNow);
  REQUIRE(spent.size() == 1);
  CHECK(ids(c, spent[0].plan) == std::vector<std::string>{"lent"});
  CHECK(spent[0].reclaim);
}

// The pool arbiter asks a VictimPool before it builds candidates: it must
// never say "no victim" where may_preempt accepts some running job.
TEST_CASE("victim pool: no where may_preempt finds none, yes where it finds one",
          "[policy][preemption]") {
  std::mt19937 rng(16);
  const std::vector<std::string> teams = {"a", "b", "c"};
  for (int run = 0; run < 300; ++run) {
    VictimPool pool;
    std::vector<PreemptCandidate> running;
    for (int step = 0; step < 40; ++step) {
      if (running.empty() || rng() % 3 != 0) {
        auto c = job("j" + std::to_string(step), {0}, 1, static_cast<int>(rng() % 4) * 25, 0, 0,
                     teams[rng() % teams.size()], rng() % 2 == 0);
        c.preemptible = rng() % 4 != 0;
        pool.add(c.team, c.priority, c.preemptible, c.borrowed);
        running.push_back(c);
      } else {
        size_t k = rng() % running.size();
        const auto& c = running[k];
        pool.remove(c.team, c.priority, c.preemptible, c.borrowed);
        running.erase(running.begin() + static_cast<long>(k));
      }
      PreemptWant w;
      w.job_id = "p";
      w.team = teams[rng() % teams.size()];
      w.priority = static_cast<int>(rng() % 4) * 25;
      w.below_guarantee = rng() % 2 == 0;
      Preemptor p = wants(1, 1, w.priority, w.team, w.below_guarantee);
      bool some = std::any_of(running.begin(), running.end(),
                              [&](const PreemptCandidate& c) { return may_preempt(p, c, kNow); });
      CHECK(pool.may_have_victim(w) == some);
    }
  }
}

TEST_CASE("restore wait: from below its guarantee with work waiting to back at it, in buckets",
          "[policy][preemption]") {
  RestoreWait w;
  CHECK_FALSE(w.step(false, true, 500));  // at its guarantee: nothing starts
  CHECK_FALSE(w.step(true, false, 600));  // below, nothing waiting: nothing starts
  CHECK_FALSE(w.step(true, true, 1000));  // below with work waiting: the wait starts
  CHECK_FALSE(w.step(true, true, 3000));  // still below
  auto s = w.step(false, true, 13500);    // back at it: 12.5 s
  REQUIRE(s);
  CHECK(*s == Approx(12.5));
  REQUIRE(w.buckets.size() == troupe::names::kRestoreBucketsS.size() + 1);
  CHECK(w.buckets[4] == 1);  // <= 15 s (1, 2, 5, 10, 15)
  CHECK(w.count == 1);
  CHECK(w.sum_s == Approx(12.5));
  // A wait that ends because nothing waits any more is not an observation.
  CHECK_FALSE(w.step(true, true, 20000));
  CHECK_FALSE(w.step(true, false, 25000));
  CHECK_FALSE(w.step(false, false, 26000));
  CHECK(w.count == 1);
  // Past the last bound: +Inf.
  CHECK_FALSE(w.step(true, true, 30000));
  CHECK(w.step(false, false, 30000 + 400000));
  CHECK(w.buckets.back() == 1);
  CHECK(w.count == 2);
}

TEST_CASE("WantGate: what a team is owed goes to its jobs in order, then only the budget",
          "[policy][preemption]") {
  const std::string fits_nowhere(why::kFitsNowhere), fair(why::kFairShare);
  WantGate gate(4, false);  // owed 4 GPUs, no priority budget left
  CHECK_FALSE(gate.admit(2, true, &fits_nowhere, false));  // already waiting: takes 2 of it
  CHECK_FALSE(gate.admit(1, false, &fair, false));         // not a reason to preempt
  CHECK_FALSE(gate.admit(1, false, nullptr, false));       // placed this round
  CHECK_FALSE(gate.admit(1, false, &fits_nowhere, true));  // its own hold starts sooner
  CHECK(gate.admit(2, false, &fits_nowhere, false) == std::optional<bool>(true));
  CHECK_FALSE(gate.admit(1, false, &fits_nowhere, false));  // owed nothing more, no budget
  WantGate budget(0, true);
  CHECK(budget.admit(8, false, &fits_nowhere, false) == std::optional<bool>(false));
}

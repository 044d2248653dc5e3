// Unit tests for actors/policy/fair_share: DRF order, guarantees, quotas.
#include <catch2/catch.hpp>

#include "actors/policy/fair_share.hpp"

using namespace troupe::policy;

namespace {
TeamStanding team(std::string name, int used, double weight = 1, int guaranteed = 0, int limit = -1,
                  bool borrow = true) {
  TeamStanding t;
  t.team = std::move(name);
  t.used.gpus = used;
  t.weight = weight;
  t.guaranteed = guaranteed;
  t.limit = limit;
  t.borrow = borrow;
  return t;
}
std::vector<std::string> names(const std::vector<TeamStanding>& t, const std::vector<size_t>& order) {
  std::vector<std::string> out;
  for (size_t i : order) out.push_back(t[i].team);
  return out;
}
const PoolTotals kPool{32, 0, 0};
}  // namespace

TEST_CASE("team_order: lowest weighted dominant share first", "[policy][fair_share]") {
  std::vector<TeamStanding> t = {team("a", 8), team("b", 4), team("c", 12, 2)};
  // shares: a 8/32=.25, b .125, c .375/2=.1875
  CHECK(names(t, team_order(t, kPool)) == std::vector<std::string>{"b", "c", "a"});
}

TEST_CASE("team_order: below guarantee comes before any share", "[policy][fair_share]") {
  std::vector<TeamStanding> t = {team("borrower", 0), team("owed", 10, 1, 16)};
  CHECK(names(t, team_order(t, kPool)) == std::vector<std::string>{"owed", "borrower"});
}

TEST_CASE("weights 1:1:2 settle at 25/25/50", "[policy][fair_share]") {
  // Hand out 32 GPUs one at a time to the first team in order.
  std::vector<TeamStanding> t = {team("a", 0, 1), team("b", 0, 1), team("c", 0, 2)};
  for (int i = 0; i < 32; ++i) ++t[team_order(t, kPool).front()].used.gpus;
  CHECK(t[0].used.gpus == 8);
  CHECK(t[1].used.gpus == 8);
  CHECK(t[2].used.gpus == 16);
}

TEST_CASE("dominant share takes the largest resource", "[policy][fair_share]") {
  Usage u{2, 30, 1000};
  CHECK(dominant_share(u, PoolTotals{32, 60, 100000}) == Approx(0.5));
}

TEST_CASE("admit_quota: hard limit, borrowing, borrowed mark", "[policy][fair_share]") {
  auto at_limit = admit_quota(team("v", 8, 1, 4, 8), 1);
  CHECK_FALSE(at_limit.ok);
  CHECK(at_limit.reason.find("8/8") != std::string::npos);
  auto no_borrow = admit_quota(team("v", 4, 1, 4, 16, false), 1);
  CHECK_FALSE(no_borrow.ok);
  CHECK(no_borrow.reason.find("may not borrow") != std::string::npos);
  auto within = admit_quota(team("v", 2, 1, 4, 16), 2);
  CHECK(within.ok);
  CHECK_FALSE(within.borrowed);
  auto beyond = admit_quota(team("v", 4, 1, 4, 16), 1);
  CHECK(beyond.ok);
  CHECK(beyond.borrowed);
}

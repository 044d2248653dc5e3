// The scheduler's JSON views from plain values (actors/views.hpp): here, one
// troupe.sys.queues view from the pools' parts, as the arbiter front puts
// together what each pool's arbiter gives.
#include <catch2/catch.hpp>

#include "actors/views.hpp"

using namespace troupe;

namespace {

views::Queues part(const std::string& pool, std::vector<std::string> teams, int64_t grants) {
  views::Queues q;
  views::PoolRow p;
  p.pool = pool;
  p.gpus_total = 8;
  q.pools.push_back(p);
  for (const auto& t : teams) {
    views::TeamRow r;
    r.team = t;
    r.pool = pool;
    r.pending_jobs = 1;
    q.teams.push_back(r);
  }
  q.grants = grants;
  q.preemptions = 1;
  q.reserved_idle_gpu_seconds = 0.5;
  q.retries["user:exit_code"] = 2;
  return q;
}

}  // namespace

TEST_CASE("views: the pools' parts make one queues view in pool, then team order",
          "[actors][views]") {
  views::Queues own;  // the front's: its retries and policy
  own.policy = "fifo-backfill";
  own.retries["infra:node_lost"] = 3;
  auto all = views::merge({part("h100", {"b", "a"}, 5), own, part("a100", {"b"}, 7)});
  REQUIRE(all.pools.size() == 2);
  CHECK(all.pools[0].pool == "a100");
  CHECK(all.pools[1].pool == "h100");
  REQUIRE(all.teams.size() == 3);
  CHECK((all.teams[0].team == "a" && all.teams[0].pool == "h100"));
  CHECK((all.teams[1].team == "b" && all.teams[1].pool == "a100"));
  CHECK((all.teams[2].team == "b" && all.teams[2].pool == "h100"));
  CHECK(all.policy == "fifo-backfill");
  CHECK(all.grants == 12);
  CHECK(all.preemptions == 2);
  CHECK(all.reserved_idle_gpu_seconds == Approx(1.0));
  CHECK(all.retries.at("user:exit_code") == 4);
  CHECK(all.retries.at("infra:node_lost") == 3);
  CHECK(views::merge({}).pools.empty());
}

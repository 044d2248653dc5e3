// actors/policy/shards.hpp: which pools, nodes, jobs and submissions a shard
// owns, and the pool a shard's job id names.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "actors/policy/shards.hpp"

using namespace troupe::policy;

namespace {

ClusterConfig two_pools() {
  ClusterConfig c;
  REQUIRE(load_config(R"({"pools":[{"name":"a100","gpu_type":"a100"},
                                    {"name":"a100-big","gpu_type":"a100x"},
                                    {"name":"h100","gpu_type":"h100"}],
                          "teams":[{"name":"ml"}]})",
                      c)
              .empty());
  return c;
}

}  // namespace

TEST_CASE("a job id names its pool, the longest that matches", "[shards]") {
  auto c = two_pools();
  CHECK(pool_of_job_id(c, "j-a100-0abcdefg00001") == "a100");
  CHECK(pool_of_job_id(c, "j-a100-big-0abcdefg00001") == "a100-big");
  CHECK(pool_of_job_id(c, "j-a100-big-0abcdefg00001-7") == "a100-big");  // an array's task
  CHECK(pool_of_job_id(c, "j-h100-0abcdefg00001") == "h100");
  CHECK(pool_of_job_id(c, "j-0abcdefg00001").empty());  // one scheduler's id
  CHECK(pool_of_job_id(c, "j-v100-0abcdefg00001").empty());
  CHECK(pool_of_job_id(c, "j-a100").empty());  // nothing after the pool
  CHECK(pool_of_job_id(c, "x-a100-1").empty());
}

TEST_CASE("one scheduler owns everything, a shard only its pools", "[shards]") {
  auto c = two_pools();
  ShardScope all;
  CHECK_FALSE(all.sharded());
  CHECK(all.coordinator(c));
  CHECK(all.owns_job(c, "j-h100-0abcdefg00001"));
  CHECK(all.owns_node(c, "", "v100"));

  ShardScope h{{"h100"}};
  CHECK(h.sharded());
  CHECK_FALSE(h.coordinator(c));
  CHECK(h.owns_job(c, "j-h100-0abcdefg00001"));
  CHECK_FALSE(h.owns_job(c, "j-a100-0abcdefg00001"));
  CHECK_FALSE(h.owns_job(c, "j-0abcdefg00001"));  // no pool: the coordinator's
  CHECK(h.owns_node(c, "", "h100"));
  CHECK(h.owns_node(c, "h100", "anything"));  // a named pool wins over the type
  CHECK_FALSE(h.owns_node(c, "", "a100"));
  CHECK_FALSE(h.owns_node(c, "", "v100"));  // no pool at all: nobody places there
  CHECK(h.owns_submission(c, "h100"));
  CHECK_FALSE(h.owns_submission(c, "a100"));
  CHECK_FALSE(h.owns_submission(c, ""));

  ShardScope a{{"a100", "a100-big"}};
  CHECK(a.coordinator(c));  // owns the config's first pool
  CHECK(a.owns_job(c, "j-0abcdefg00001"));
  CHECK(a.owns_job(c, "j-nopool-1"));
  CHECK(a.owns_submission(c, ""));  // a refusal before any pool: answered once, here
  CHECK_FALSE(a.owns_job(c, "j-h100-0abcdefg00001"));
}

TEST_CASE("shards need named pools of bounded names", "[shards]") {
  auto c = two_pools();
  CHECK(check_shards(c, {"h100"}).empty());
  CHECK(check_shards(c, {"v100"}).find("not a pool") != std::string::npos);
  CHECK(check_shards(open_config(), {}).find("--config") != std::string::npos);
  ClusterConfig longp;
  REQUIRE(load_config(R"({"pools":[{"name":")" + std::string(49, 'p') +
                          R"(","gpu_type":"a100"}],"teams":[{"name":"ml"}]})",
                      longp)
              .empty());
  CHECK(check_shards(longp, {}).find("longer than 48") != std::string::npos);
}

TEST_CASE("a view of shards keeps each pool's rows from its owner's part", "[shards]") {
  // Each shard knows every pool's name but only its own pools' nodes and rows.
  std::string a = R"({"policy":"troupe","grants":3,
    "pools":[{"pool":"a100","gpus_total":8},{"pool":"h100","gpus_total":0}],
    "teams":[{"team":"ml","pool":"a100","in_use":2},{"team":"ml","pool":"h100","in_use":0}]})";
  std::string h = R"({"policy":"troupe","grants":5,
    "pools":[{"pool":"a100","gpus_total":0},{"pool":"h100","gpus_total":16}],
    "teams":[{"team":"ml","pool":"h100","in_use":4}]})";
  auto j =
      nlohmann::json::parse(merge_pool_parts({"pools", "teams"}, {{"a100", a}, {"h100", h}}, {}));
  REQUIRE(j["pools"].size() == 2);
  CHECK(j["pools"][0]["gpus_total"] == 8);
  CHECK(j["pools"][1]["gpus_total"] == 16);
  REQUIRE(j["teams"].size() == 2);
  CHECK(j["teams"][1]["in_use"] == 4);
  CHECK(j["policy"] == "troupe");
  CHECK(j["grants"] == 3);  // scalars: the first part's
  CHECK_FALSE(j.contains("missing_pools"));

  auto nodes = nlohmann::json::parse(merge_pool_parts(
      {"nodes"}, {{"a100", R"({"nodes":[{"node":"na","pool":"a100"}]})"}, {"h100", "not json"}},
      {"h100"}));
  REQUIRE(nodes["nodes"].size() == 1);
  CHECK(nodes["missing_pools"] == nlohmann::json::array({"h100"}));
}

TEST_CASE(
    "the other shards' queued jobs: each report replaces the last, a silent shard counts "
    "nothing",
    "[shards]") {
  PeerQueued p;
  const int64_t stale = 3000;
  peer_reported(p, "s2", {{"ml", 4}, {"cv", 1}}, 1000, stale);
  peer_reported(p, "s3", {{"ml", 2}}, 1200, stale);
  CHECK(peers_queued(p, "ml", 1500, stale) == 6);
  CHECK(peers_queued(p, "cv", 1500, stale) == 1);
  CHECK(peers_queued(p, "nlp", 1500, stale) == 0);
  // A report is the shard's whole count: a team it leaves out has none.
  peer_reported(p, "s2", {{"ml", 1}}, 2000, stale);
  CHECK(peers_queued(p, "ml", 2100, stale) == 3);
  CHECK(peers_queued(p, "cv", 2100, stale) == 0);
  // s3 silent for longer than stale_ms: not counted, then forgotten.
  CHECK(peers_queued(p, "ml", 4300, stale) == 1);
  peer_reported(p, "s2", {}, 4400, stale);
  CHECK(p.peers.empty());
  CHECK(peers_queued(p, "ml", 4400, stale) == 0);
}

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

TEST_CASE("an any-type job goes to the first candidate pool with room for it now", "[shards]") {
  PoolRooms rooms;
  rooms["a100"] = {0, 0, 0, 1000};    // full
  rooms["h100"] = {16, 8, 0, 1000};   // two empty nodes
  rooms["v100"] = {16, 8, 13, 1000};  // free, but 13 GPUs wait there
  const std::vector<std::string> ah{"a100", "h100"};
  CHECK(pick_pool(rooms, ah, 1, 1, 1500, 2000) == 1);
  CHECK(pick_pool(rooms, ah, 2, 8, 1500, 2000) == 1);  // both nodes
  CHECK(pick_pool(rooms, ah, 3, 8, 1500, 2000) == 0);  // too big for either now: its first
  CHECK(pick_pool(rooms, ah, 1, 9, 1500, 2000) == 0);  // no node with 9 free
  // What waits in a pool counts before a newcomer.
  CHECK(pick_pool(rooms, {"v100", "h100"}, 1, 4, 1500, 2000) == 1);
  rooms["v100"].pending_gpus = 8;
  CHECK(pick_pool(rooms, {"v100", "h100"}, 1, 4, 1500, 2000) == 0);
  // The first in the spec's order wins when both have room.
  CHECK(pick_pool(rooms, {"h100", "v100"}, 1, 1, 1500, 2000) == 0);
  // A room not heard lately, or never, counts for nothing.
  CHECK(pick_pool(rooms, ah, 1, 1, 3001, 2000) == 0);
  CHECK(pick_pool(rooms, {"a100", "t4"}, 1, 1, 1500, 2000) == 0);
  CHECK(pick_pool(rooms, {}, 1, 1, 1500, 2000) == 0);
  // A job of no GPUs fits anywhere: its first choice.
  CHECK(pick_pool(rooms, ah, 1, 0, 1500, 2000) == 0);
}

TEST_CASE("room: a node with the GPUs of one worker, and the whole job beyond what waits",
          "[shards]") {
  CHECK(has_room({8, 8, 0, 0}, 1, 8));
  CHECK_FALSE(has_room({6, 4, 0, 0}, 2, 4));  // not 8 free
  CHECK(has_room({8, 4, 0, 0}, 2, 4));        // (two nodes of 4 may hold it)
  CHECK_FALSE(has_room({8, 3, 0, 0}, 1, 4));  // no node with 4 free
  CHECK_FALSE(has_room({8, 8, 1, 0}, 1, 8));
  CHECK(has_room({8, 8, -5, 0}, 1, 8));  // a bad report's negative wait counts as none
  CHECK(has_room({0, 0, 0, 0}, 4, 0));
}

TEST_CASE("put_first moves one candidate to the front, the rest in their order", "[shards]") {
  std::vector<std::string> p{"a", "b", "c", "d"};
  put_first(p, 2);
  CHECK(p == std::vector<std::string>{"c", "a", "b", "d"});
  put_first(p, 0);
  CHECK(p == std::vector<std::string>{"c", "a", "b", "d"});
  put_first(p, 9);  // out of range: unchanged
  CHECK(p == std::vector<std::string>{"c", "a", "b", "d"});
  put_first(p, 3);
  CHECK(p == std::vector<std::string>{"d", "c", "a", "b"});
}

TEST_CASE("a pool's room counts its live, schedulable nodes only", "[shards]") {
  std::vector<NodeCapacity> caps(4);
  caps[0].pool = "h100";
  caps[0].gpus_total = 8;
  caps[0].gpus_allocated = 2;
  caps[0].gpus_reserved = 1;
  caps[1].pool = "h100";
  caps[1].gpus_total = 8;
  caps[1].schedulable = false;  // cordoned
  caps[2].pool = "h100";
  caps[2].gpus_total = 4;
  caps[3].pool = "a100";
  caps[3].gpus_total = 8;
  auto r = room_of(caps, "h100", 3);
  CHECK(r.free_gpus == 9);
  CHECK(r.largest_free == 5);
  CHECK(r.pending_gpus == 3);
  CHECK(r.total_gpus == 12);
  caps[2].alive = false;
  r = room_of(caps, "h100", -1);
  CHECK(r.free_gpus == 5);
  CHECK(r.pending_gpus == 0);
  CHECK(r.total_gpus == 8);
  CHECK(room_of(caps, "v100", 0) == PoolRoom{});
}

TEST_CASE("an any-type job no candidate has room for goes where it would wait least", "[shards]") {
  PoolRooms rooms;
  // {free, largest free, waiting, heard at, total}
  rooms["a100"] = {0, 0, 64, 1000, 64};  // a whole pool's worth waits
  rooms["h100"] = {0, 0, 8, 1000, 64};   // an eighth of one
  rooms["t4"] = {2, 2, 0, 1000, 8};      // 2 free, but the job needs 4 on one node
  const std::vector<std::string> ah{"a100", "h100"};
  CHECK(pick_pool(rooms, ah, 1, 4, 1500, 2000) == 1);
  CHECK(pick_pool(rooms, {"h100", "a100"}, 1, 4, 1500, 2000) == 0);
  // Per GPU of the pool: 2 short of 8 (t4) is more than 12 short of 64.
  CHECK(pick_pool(rooms, {"t4", "h100"}, 1, 4, 1500, 2000) == 1);
  // A tie: the earlier.
  rooms["v100"] = {0, 0, 8, 1000, 64};
  CHECK(pick_pool(rooms, {"v100", "h100"}, 1, 4, 1500, 2000) == 0);
  CHECK(pick_pool(rooms, {"h100", "v100"}, 1, 4, 1500, 2000) == 0);
  // A pool with no GPUs heard, or a room not heard lately: not waited for.
  rooms["empty"] = {0, 0, 0, 1000, 0};
  CHECK(pick_pool(rooms, {"a100", "empty"}, 1, 4, 1500, 2000) == 0);
  rooms["h100"].at_ms = 0;
  CHECK(pick_pool(rooms, {"a100", "h100"}, 1, 4, 2500, 2000) == 0);
  CHECK(pick_pool(rooms, {"h100", "a100"}, 1, 4, 2500, 2000) == 1);
}

// Scheduler shards (docs/recovery.md "Shards"): several troupe-scheduler
// processes act at once, each owning some pools through a fenced lease per
// pool. What one shard decides from plain values: which pools, nodes, jobs
// and requests are its own. Pure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "actors/policy/config.hpp"
#include "actors/policy/placement.hpp"

namespace troupe::policy {

// The longest pool name shards take: a shard's job ids carry it.
inline constexpr size_t kMaxShardPoolName = 48;

// The pools a scheduler owns. Empty: every pool (one scheduler, no shards).
struct ShardScope {
  std::vector<std::string> pools;
  bool sharded() const { return !pools.empty(); }
  bool owns_pool(std::string_view pool) const;
  // The coordinator owns the config's first pool: it answers what belongs
  // to no pool (a refused submission, a job id of no pool, the views).
  bool coordinator(const ClusterConfig& cfg) const;
  // A node, by the pool it names and its GPU type (ClusterConfig::pool_of_node).
  bool owns_node(const ClusterConfig& cfg, std::string_view named_pool,
                 std::string_view gpu_type) const;
  // A job, by the pool its id names (shard_job_id_prefix); an id naming no
  // pool of the config is the coordinator's.
  bool owns_job(const ClusterConfig& cfg, std::string_view job_id) const;
  // A submission admitted to `pool` ("" when refused before it had one).
  bool owns_submission(const ClusterConfig& cfg, std::string_view pool) const;
};

// The pool a job id names (a shard's job ids start "j-<pool>-":
// submission::shard_job_id_prefix): the longest pool of the config P such that the id
// starts with "j-P-"; "" when none.
std::string pool_of_job_id(const ClusterConfig& cfg, std::string_view job_id);
// The same over pool names.
std::string pool_of_job_id(const std::vector<std::string>& pools, std::string_view job_id);

// A view that spans pools (troupe.sys.nodes: "nodes"; troupe.sys.queues:
// "pools" and "teams") put together from its pools' parts (pool, the JSON
// its owner answered): of each part, the rows of `keys` whose "pool" is
// that part's pool; every other key as the first part has it;
// "missing_pools" lists the pools that gave no part.
std::string merge_pool_parts(const std::vector<std::string>& keys,
                             const std::vector<std::pair<std::string, std::string>>& parts,
                             const std::vector<std::string>& missing);

// "" when the config can be sharded (it names its pools, each at most
// kMaxShardPoolName characters), else why not. `pools` (--pools) must be
// pools of the config.
std::string check_shards(const ClusterConfig& cfg, const std::vector<std::string>& pools);

// What the other shards last said of their teams' queued jobs (each report
// is a shard's whole count, troupe.sys.shard.rate): a team's max_queued_jobs
// holds across the shards with this process's own count added. A shard not
// heard for `stale_ms` counts nothing (it died: its pools' new owner counts
// their jobs).
struct PeerQueued {
  struct Peer {
    int64_t at_ms = 0;
    std::unordered_map<std::string, int64_t> queued;  // by team
  };
  std::unordered_map<std::string, Peer> peers;  // by shard
};
// A shard's report (its teams with jobs queued; any other: none). Shards
// not heard for `stale_ms` are forgotten.
void peer_reported(PeerQueued& p, const std::string& shard,
                   const std::vector<std::pair<std::string, int64_t>>& queued, int64_t now_ms,
                   int64_t stale_ms);
int64_t peers_queued(const PeerQueued& p, const std::string& team, int64_t now_ms,
                     int64_t stale_ms);

// An any-type job (several candidate pools) whose pools have different
// owners goes to the shard of the pool that can take it now: each shard
// tells the others its pools' room with its reports (troupe.sys.shard.rate),
// and the shard that reads a submission picks (docs/recovery.md "Shards").
struct PoolRoom {
  int32_t free_gpus = 0;     // free on the pool's live, schedulable nodes
  int32_t largest_free = 0;  // the most free on one of them
  int32_t pending_gpus = 0;  // GPUs of the jobs waiting for the pool
  int64_t at_ms = 0;         // when heard (the hearing process's clock)
  int32_t total_gpus = 0;    // on its live, schedulable nodes
  bool operator==(const PoolRoom& o) const {
    return free_gpus == o.free_gpus && largest_free == o.largest_free &&
           pending_gpus == o.pending_gpus && total_gpus == o.total_gpus;
  }
  bool operator!=(const PoolRoom& o) const { return !(*this == o); }
};
using PoolRooms = std::unordered_map<std::string, PoolRoom>;  // by pool

// A pool's room from its nodes' capacity (the live, schedulable nodes of
// `pool`; what each has free, less its reserved GPUs) and the GPUs waiting
// for it (at_ms left 0).
PoolRoom room_of(const std::vector<NodeCapacity>& caps, std::string_view pool, int32_t waiting);
// Room for one more job of `workers` x `gpus` (per worker) after the GPUs
// already waiting there: a node with `gpus` free, and the whole job free
// beyond what waits. A job of no GPUs always has room.
bool has_room(const PoolRoom& r, int workers, int gpus);
// The candidate (an index into `pools`, the spec's order of preference) an
// any-type job goes to: the first whose room, heard within `stale_ms`, takes
// it now. When none does, the one where it would wait least: the fewest
// GPUs short (what waits there and the job, less what is free) for each
// GPU of the pool, the earlier on a tie (as Slurm starts a job sent to
// several partitions in the one where it can start first). 0 when no room
// of a candidate with GPUs was heard.
size_t pick_pool(const PoolRooms& rooms, const std::vector<std::string>& pools, int workers,
                 int gpus, int64_t now_ms, int64_t stale_ms);
// `pools` with pools[i] first and the others in their order.
void put_first(std::vector<std::string>& pools, size_t i);

}  // namespace troupe::policy

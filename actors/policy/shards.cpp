#include "actors/policy/shards.hpp"

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>

#include "messages/json_text.hpp"

namespace troupe::policy {

bool ShardScope::owns_pool(std::string_view pool) const {
  return !sharded() || std::find(pools.begin(), pools.end(), pool) != pools.end();
}

bool ShardScope::coordinator(const ClusterConfig& cfg) const {
  return !sharded() || (!cfg.pools.empty() && owns_pool(cfg.pools.front().name));
}

bool ShardScope::owns_node(const ClusterConfig& cfg, std::string_view named_pool,
                           std::string_view gpu_type) const {
  return !sharded() || owns_pool(cfg.pool_of_node(named_pool, gpu_type));
}

bool ShardScope::owns_job(const ClusterConfig& cfg, std::string_view job_id) const {
  if (!sharded()) return true;
  auto pool = pool_of_job_id(cfg, job_id);
  return pool.empty() ? coordinator(cfg) : owns_pool(pool);
}

bool ShardScope::owns_submission(const ClusterConfig& cfg, std::string_view pool) const {
  if (!sharded()) return true;
  return pool.empty() ? coordinator(cfg) : owns_pool(pool);
}

std::string pool_of_job_id(const std::vector<std::string>& pools, std::string_view job_id) {
  std::string best;
  if (job_id.substr(0, 2) != "j-") return best;
  auto rest = job_id.substr(2);
  for (const auto& name : pools) {
    if (name.size() <= best.size() || rest.size() <= name.size()) continue;
    if (rest.substr(0, name.size()) == name && rest[name.size()] == '-') best = name;
  }
  return best;
}

std::string pool_of_job_id(const ClusterConfig& cfg, std::string_view job_id) {
  std::vector<std::string> names;
  names.reserve(cfg.pools.size());
  for (const auto& p : cfg.pools) names.push_back(p.name);
  return pool_of_job_id(names, job_id);
}

std::string merge_pool_parts(const std::vector<std::string>& keys,
                             const std::vector<std::pair<std::string, std::string>>& parts,
                             const std::vector<std::string>& missing) {
  using nlohmann::json;
  json out = json::object();
  for (const auto& k : keys) out[k] = json::array();
  bool first = true;
  for (const auto& [pool, text] : parts) {
    json j = json_text::parse<json>(text);
    if (!j.is_object()) continue;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (std::find(keys.begin(), keys.end(), it.key()) == keys.end()) {
        if (first) out[it.key()] = it.value();
        continue;
      }
      if (!it->is_array()) continue;
      for (auto& row : *it)
        if (row.is_object() && row.value("pool", std::string()) == pool)
          out[it.key()].push_back(std::move(row));
    }
    first = false;
  }
  if (!missing.empty()) out["missing_pools"] = missing;
  return out.dump();
}

std::string check_shards(const ClusterConfig& cfg, const std::vector<std::string>& pools) {
  if (cfg.open || cfg.pools.empty())
    return "shards need a cluster config that names its pools (--config)";
  for (const auto& p : cfg.pools)
    if (p.name.size() > kMaxShardPoolName)
      return "pool '" + p.name + "' is longer than " + std::to_string(kMaxShardPoolName) +
             " characters: shards carry it in job ids";
  for (const auto& p : pools)
    if (!cfg.pool(p)) return "--pools names '" + p + "', not a pool of the config";
  return {};
}

void peer_reported(PeerQueued& p, const std::string& shard,
                   const std::vector<std::pair<std::string, int64_t>>& queued, int64_t now_ms,
                   int64_t stale_ms) {
  for (auto it = p.peers.begin(); it != p.peers.end();)
    it = now_ms - it->second.at_ms > stale_ms ? p.peers.erase(it) : std::next(it);
  auto& peer = p.peers[shard];
  peer.at_ms = now_ms;
  peer.queued.clear();
  for (const auto& [team, n] : queued)
    if (n > 0) peer.queued[team] = n;
  if (peer.queued.empty()) p.peers.erase(shard);  // nothing queued: nothing to keep
}

int64_t peers_queued(const PeerQueued& p, const std::string& team, int64_t now_ms,
                     int64_t stale_ms) {
  int64_t sum = 0;
  for (const auto& [shard, peer] : p.peers) {
    if (now_ms - peer.at_ms > stale_ms) continue;
    auto it = peer.queued.find(team);
    if (it != peer.queued.end()) sum += it->second;
  }
  return sum;
}

PoolRoom room_of(const std::vector<NodeCapacity>& caps, std::string_view pool, int32_t waiting) {
  PoolRoom r;
  r.pending_gpus = std::max(waiting, 0);
  for (const auto& c : caps) {
    if (c.pool != pool || !c.alive || !c.schedulable) continue;
    const int free = std::max(0, c.gpus_total - c.gpus_reserved - c.gpus_allocated);
    r.free_gpus += free;
    r.largest_free = std::max(r.largest_free, free);
    r.total_gpus += std::max(0, c.gpus_total);
  }
  return r;
}

bool has_room(const PoolRoom& r, int workers, int gpus) {
  if (gpus <= 0) return true;
  const int64_t job = int64_t{std::max(workers, 1)} * gpus;
  return r.largest_free >= gpus && int64_t{r.free_gpus} - std::max(r.pending_gpus, 0) >= job;
}

size_t pick_pool(const PoolRooms& rooms, const std::vector<std::string>& pools, int workers,
                 int gpus, int64_t now_ms, int64_t stale_ms) {
  const int64_t job = int64_t{std::max(workers, 1)} * std::max(gpus, 0);
  size_t best = 0;
  double least = -1;  // GPUs short per GPU of the pool; -1: none heard yet
  for (size_t i = 0; i < pools.size(); ++i) {
    auto it = rooms.find(pools[i]);
    if (it == rooms.end() || now_ms - it->second.at_ms > stale_ms) continue;
    const auto& r = it->second;
    if (has_room(r, workers, gpus)) return i;
    if (r.total_gpus <= 0) continue;  // no node to wait for there
    const int64_t short_by =
        std::max<int64_t>(0, int64_t{std::max(r.pending_gpus, 0)} + job - r.free_gpus);
    const double per_gpu = static_cast<double>(short_by) / r.total_gpus;
    if (least < 0 || per_gpu < least) {
      least = per_gpu;
      best = i;
    }
  }
  return best;
}

void put_first(std::vector<std::string>& pools, size_t i) {
  if (i == 0 || i >= pools.size()) return;
  std::rotate(pools.begin(), pools.begin() + static_cast<std::ptrdiff_t>(i),
              pools.begin() + static_cast<std::ptrdiff_t>(i) + 1);
}

}  // namespace troupe::policy

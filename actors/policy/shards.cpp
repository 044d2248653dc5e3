#include "actors/policy/shards.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

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
    json j = json::parse(text, nullptr, false);
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

}  // namespace troupe::policy

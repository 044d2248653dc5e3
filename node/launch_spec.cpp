// Owns the pure model of a Launch: decode, validate, paths, env, sim params.
#include "node/launch_spec.hpp"

#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "bus/subjects.hpp"

namespace troupe::node {

std::string to_string(const WorkerKey& k) {
  return k.job_id + "/attempt-" + std::to_string(k.attempt) + "/rank-" + std::to_string(k.rank);
}

LaunchInfo decode_launch(const wire::Launch& l) {
  LaunchInfo out;
  out.key.job_id = wire::str(l.job_id());
  out.key.attempt = l.attempt();
  out.key.rank = l.rank();
  out.team = wire::str(l.team());
  out.world_size = l.world_size();
  out.coordinator = wire::str(l.coordinator());
  out.gpus = wire::ints(l.gpus());
  if (l.command() != nullptr)
    for (const auto* s : *l.command()) out.command.push_back(wire::str(s));
  if (l.env() != nullptr)
    for (const auto* kv : *l.env())
      if (kv != nullptr) out.env.emplace_back(wire::str(kv->key()), wire::str(kv->value()));
  out.max_runtime_s = l.max_runtime_s();
  out.grace_s = l.grace_s();
  out.checkpoint_dir = wire::str(l.checkpoint_dir());
  out.image = wire::str(l.image());
  out.cpus = l.cpus();
  out.memory_mb = l.memory_mb();
  out.run_as_uid = l.run_as_uid();
  out.gpu_memory_mb = l.gpu_memory_mb();
  return out;
}

std::string validate_launch(const LaunchInfo& l, bool need_command) {
  if (auto why = subjects::check_token(l.key.job_id); !why.empty()) return "job_id " + why;
  if (l.key.attempt < 0) return "attempt must be >= 0";
  if (l.key.rank < 0) return "rank must be >= 0";
  for (int g : l.gpus)
    if (g < 0) return "GPU indices must be >= 0";
  if (need_command && (l.command.empty() || l.command.front().empty())) return "empty command";
  for (const auto& w : l.command)
    if (w.find('\0') != std::string::npos) return "command holds a NUL byte";
  if (l.checkpoint_dir.find('\0') != std::string::npos) return "checkpoint_dir holds a NUL byte";
  // Bounds keep the cgroup arithmetic (bytes, quota microseconds) finite.
  if (l.cpus < 0 || l.cpus > (1 << 20)) return "cpus must be in 0 .. 1048576";
  if (l.memory_mb < 0 || l.memory_mb > (1LL << 40)) return "memory_mb must be in 0 .. 2^40";
  if (l.gpu_memory_mb < 0 || l.gpu_memory_mb > (1LL << 20))
    return "gpu_memory_mb must be in 0 .. 2^20";
  if (l.gpu_memory_mb > 0 && l.gpus.size() != 1)
    return "a shared worker (gpu_memory_mb) holds part of exactly one GPU";
  if (l.image.find('\0') != std::string::npos || (!l.image.empty() && l.image.front() == '-'))
    return "image is not an image name";
  return {};
}

std::string cuda_visible_devices(const std::vector<int>& gpus) {
  std::string s;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(gpus[i]);
  }
  return s;
}

std::string log_dir(const std::string& state_dir, const std::string& job_id) {
  return state_dir + "/logs/" + job_id;
}

std::string log_path(const std::string& state_dir, const WorkerKey& k) {
  return log_dir(state_dir, k.job_id) + "/attempt-" + std::to_string(k.attempt) + "-rank-" +
         std::to_string(k.rank) + ".log";
}

std::string work_dir(const std::string& state_dir, const std::string& job_id) {
  return state_dir + "/jobs/" + job_id;
}

std::vector<std::string> build_child_env(const std::vector<std::string>& base,
                                         const LaunchInfo& l) {
  std::vector<std::string> out;
  std::unordered_map<std::string, size_t> where;  // key -> index in out
  auto set = [&](const std::string& key, const std::string& value) {
    if (key.empty() || key.find('=') != std::string::npos || key.find('\0') != std::string::npos ||
        value.find('\0') != std::string::npos)
      return;
    auto it = where.find(key);
    if (it != where.end()) {
      out[it->second] = key + "=" + value;
    } else {
      where.emplace(key, out.size());
      out.push_back(key + "=" + value);
    }
  };
  for (const auto& kv : base) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    set(kv.substr(0, eq), kv.substr(eq + 1));
  }
  for (const auto& [k, v] : l.env) set(k, v);
  set("CUDA_VISIBLE_DEVICES", cuda_visible_devices(l.gpus));
  set("TROUPE_JOB_ID", l.key.job_id);
  set("TROUPE_ATTEMPT", std::to_string(l.key.attempt));
  set("TROUPE_RANK", std::to_string(l.key.rank));
  set("TROUPE_WORLD_SIZE", std::to_string(l.world_size));
  set("TROUPE_COORDINATOR", l.coordinator);
  if (!l.checkpoint_dir.empty()) set("TROUPE_CHECKPOINT_DIR", l.checkpoint_dir);
  if (l.gpu_memory_mb > 0) {
    set("TROUPE_GPU_MEMORY_MB", std::to_string(l.gpu_memory_mb));
    // Device 0 of what CUDA_VISIBLE_DEVICES shows it: its one GPU.
    if (l.mps)
      set("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=" + std::to_string(l.gpu_memory_mb) + "M");
  }
  return out;
}

SimParams sim_params(const LaunchInfo& l) {
  SimParams p;
  for (const auto& [k, v] : l.env) {
    if (k == "TROUPE_SIM_DURATION_S") {
      char* end = nullptr;
      double d = std::strtod(v.c_str(), &end);
      if (!v.empty() && end != nullptr && *end == '\0' && std::isfinite(d) && d >= 0)
        p.duration_s = d;
    } else if (k == "TROUPE_SIM_EXIT") {
      char* end = nullptr;
      long c = std::strtol(v.c_str(), &end, 10);
      if (!v.empty() && end != nullptr && *end == '\0' && c >= -1000000 && c <= 1000000)
        p.exit_code = static_cast<int>(c);
    }
  }
  return p;
}

std::string command_line(const std::vector<std::string>& command) {
  std::string s;
  for (size_t i = 0; i < command.size(); ++i) {
    if (i > 0) s += ' ';
    s += command[i];
  }
  return s;
}

}  // namespace troupe::node

// Owns the JSON of the simulated job specs that troupe-load submits.
#include "load/jobspec.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace troupe::load {

long long default_max_runtime_s(double duration_s) {
  if (!std::isfinite(duration_s) || duration_s < 0) duration_s = 0;
  return static_cast<long long>(std::ceil(duration_s * 2 + 60));
}

long long runtime_limit_s(double trace_duration_s, double factor, double speedup,
                          double min_duration_s) {
  if (!std::isfinite(trace_duration_s) || trace_duration_s < 0) trace_duration_s = 0;
  if (!std::isfinite(factor) || factor <= 0) factor = 1;
  if (!std::isfinite(speedup) || speedup <= 0) speedup = 1;
  if (!std::isfinite(min_duration_s) || min_duration_s < 0) min_duration_s = 0;
  const double wall = std::max(trace_duration_s / speedup, min_duration_s);
  const double limit = std::min(std::ceil(factor * wall - 1e-9), 1e15);
  return std::max(1LL, static_cast<long long>(limit));
}

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", seconds);
  std::string s = buf;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s.empty() ? "0" : s;
}

std::string sim_job_json(const SimJob& job) {
  nlohmann::json spec{
      {"name", job.name},
      {"team", job.team},
      {"kind", "training"},
      {"command", job.command.empty() ? nlohmann::json{"troupe-sim", job.name}
                                      : nlohmann::json{"sh", "-c", job.command}},
      {"env", {{"TROUPE_SIM_DURATION_S", duration_text(job.duration_s)}}},
      {"max_runtime_s",
       std::to_string(job.max_runtime_s > 0 ? job.max_runtime_s
                                            : default_max_runtime_s(job.duration_s))}};
  nlohmann::json res = nlohmann::json::object();
  if (job.gpus_per_worker > 0) res["gpus"] = job.gpus_per_worker;
  if (!job.gpu_type.empty()) res["gpu_type"] = job.gpu_type;
  if (!res.empty()) spec["resources"] = res;
  if (!job.pool.empty()) spec["pool"] = job.pool;
  if (job.workers != 1) spec["workers"] = job.workers;
  if (!job.priority.empty()) spec["priority"] = job.priority;
  return spec.dump();
}

}  // namespace troupe::load

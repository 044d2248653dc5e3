// Owns the arithmetic of load and replay reports and their table rendering.
#include "load/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "load/stats.hpp"

namespace troupe::load {

namespace {

constexpr double kNsPerMs = 1e6;
constexpr double kNsPerS = 1e9;

double round3(double v) { return std::round(v * 1000.0) / 1000.0; }

Json summary_json(const std::vector<double>& samples) {
  Summary s = summarize(samples);
  return Json{{"count", s.count},       {"mean", round3(s.mean)}, {"p50", round3(s.p50)},
              {"p99", round3(s.p99)},   {"p999", round3(s.p999)}, {"max", round3(s.max)}};
}

Json scheduler_json(const RunInfo& info) {
  if (!info.scheduler) return nullptr;
  Json j{{"pid", info.scheduler->pid}};
  j["peak_rss_kb"] = info.scheduler->hwm_kb ? Json(*info.scheduler->hwm_kb) : Json(nullptr);
  j["rss_kb"] = info.scheduler->rss_kb ? Json(*info.scheduler->rss_kb) : Json(nullptr);
  if (info.scheduler->hwm_kb) j["peak_rss_mb"] = round3(*info.scheduler->hwm_kb / 1024.0);
  return j;
}

// Counts shared by both reports.
void common(const std::vector<JobResult>& jobs, const RunInfo& info, Json& r) {
  size_t acked = 0, rejected = 0, unanswered = 0, placed = 0, terminal = 0;
  std::map<std::string, size_t> states{{"succeeded", 0}, {"failed", 0}, {"canceled", 0}};
  std::map<std::string, size_t> errors;
  for (const auto& j : jobs) {
    if (j.acked_ns >= 0) {
      ++acked;
      if (j.placed_ns >= 0) ++placed;
      if (!j.final_state.empty()) {
        ++terminal;
        ++states[j.final_state];
      }
    } else if (!j.error.empty()) {
      ++rejected;
      if (errors.size() < 10 || errors.count(j.error) != 0) ++errors[j.error];
    } else {
      ++unanswered;
    }
  }
  states["not_terminal"] = acked - terminal;
  r["config"] = info.config;
  r["submitted"] = jobs.size();
  r["acknowledged"] = acked;
  r["rejected"] = rejected;
  r["unanswered"] = unanswered;
  r["placed"] = placed;
  r["terminal"] = terminal;
  r["complete"] = info.complete;
  r["states"] = states;
  r["errors"] = errors;
  r["total_s"] = round3(info.total_s);
  r["scheduler"] = scheduler_json(info);
  r["nats_dropped"] = info.dropped;
}

int64_t first_sent(const std::vector<JobResult>& jobs) {
  int64_t t = -1;
  for (const auto& j : jobs)
    if (j.sent_ns >= 0 && (t < 0 || j.sent_ns < t)) t = j.sent_ns;
  return t;
}

double rate(size_t n, int64_t from_ns, int64_t to_ns) {
  if (n == 0 || from_ns < 0 || to_ns <= from_ns) return 0;
  return round3(static_cast<double>(n) / (static_cast<double>(to_ns - from_ns) / kNsPerS));
}

}  // namespace

Json load_report(const std::vector<JobResult>& jobs, const RunInfo& info) {
  Json r{{"mode", "load"}};
  common(jobs, info, r);
  int64_t t0 = first_sent(jobs), last_ack = -1, last_placed = -1, last_sent = -1;
  std::vector<double> ack_ms, placed_ms;
  size_t acked = 0, placed = 0;
  for (const auto& j : jobs) {
    last_sent = std::max(last_sent, j.sent_ns);
    if (j.acked_ns < 0) continue;
    ++acked;
    last_ack = std::max(last_ack, j.acked_ns);
    ack_ms.push_back(static_cast<double>(j.acked_ns - j.sent_ns) / kNsPerMs);
    if (j.placed_ns >= 0) {
      ++placed;
      last_placed = std::max(last_placed, j.placed_ns);
      placed_ms.push_back(static_cast<double>(j.placed_ns - j.sent_ns) / kNsPerMs);
    }
  }
  r["submit_window_s"] = t0 >= 0 ? round3(static_cast<double>(last_sent - t0) / kNsPerS) : 0.0;
  r["submit_rate_per_s"] = rate(acked, t0, last_ack);
  r["placement_rate_per_s"] = rate(placed, t0, last_placed);
  r["submit_to_ack_ms"] = summary_json(ack_ms);
  r["submit_to_placed_ms"] = summary_json(placed_ms);
  return r;
}

Json replay_report(const std::vector<JobResult>& jobs, const std::vector<AllocSample>& samples,
                   double speedup, const RunInfo& info) {
  Json r{{"mode", "replay"}};
  common(jobs, info, r);
  if (speedup <= 0) speedup = 1;
  std::vector<double> jct, queueing;
  std::map<std::string, double> team_gpu_s;
  std::map<std::string, size_t> team_jobs;
  int64_t t0 = first_sent(jobs), last_end = -1;
  for (const auto& j : jobs) {
    ++team_jobs[j.team];
    team_gpu_s.emplace(j.team, 0.0);
    if (j.acked_ns < 0) continue;
    if (j.running_ns >= 0)
      queueing.push_back(static_cast<double>(j.running_ns - j.sent_ns) / kNsPerS);
    if (j.ended_ns >= 0) {
      jct.push_back(static_cast<double>(j.ended_ns - j.sent_ns) / kNsPerS);
      last_end = std::max(last_end, j.ended_ns);
      if (j.running_ns >= 0)
        team_gpu_s[j.team] +=
            j.gpus * static_cast<double>(j.ended_ns - j.running_ns) / kNsPerS;
    }
  }
  auto scaled = [&](const std::vector<double>& v) {
    Summary s = summarize(v);
    return Json{{"count", s.count},
                {"avg_s", round3(s.mean)},
                {"p99_s", round3(s.p99)},
                {"avg_trace_s", round3(s.mean * speedup)},
                {"p99_trace_s", round3(s.p99 * speedup)}};
  };
  r["jct"] = scaled(jct);
  r["queueing_delay"] = scaled(queueing);
  double makespan = t0 >= 0 && last_end > t0 ? static_cast<double>(last_end - t0) / kNsPerS : 0;
  r["makespan_s"] = round3(makespan);
  r["makespan_trace_s"] = round3(makespan * speedup);

  double sum_frac = 0;
  size_t used = 0;
  for (const auto& s : samples) {
    if (s.total <= 0) continue;
    if (t0 >= 0 && s.t_ns < t0) continue;
    if (last_end >= 0 && s.t_ns > last_end) continue;
    sum_frac += static_cast<double>(s.allocated) / static_cast<double>(s.total);
    ++used;
  }
  r["gpu_allocation"] = Json{{"samples", used},
                             {"mean", used > 0 ? round3(sum_frac / static_cast<double>(used)) : 0.0}};

  double total_gpu_s = 0;
  std::vector<double> per_team;
  for (const auto& [t, g] : team_gpu_s) {
    total_gpu_s += g;
    per_team.push_back(g);
  }
  Json teams = Json::object();
  for (const auto& [t, g] : team_gpu_s)
    teams[t] = Json{{"jobs", team_jobs[t]},
                    {"gpu_s", round3(g)},
                    {"gpu_trace_s", round3(g * speedup)},
                    {"share", total_gpu_s > 0 ? round3(g / total_gpu_s) : 0.0}};
  r["teams"] = teams;
  r["jain_index"] = round3(jain_index(per_team));
  return r;
}

namespace {
void flatten(const Json& j, const std::string& prefix,
             std::vector<std::pair<std::string, std::string>>& out) {
  if (j.is_object()) {
    if (j.empty() && !prefix.empty()) out.emplace_back(prefix, "-");
    for (auto it = j.begin(); it != j.end(); ++it)
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
    return;
  }
  std::string v;
  if (j.is_string())
    v = j.get<std::string>();
  else if (j.is_null())
    v = "-";
  else if (j.is_number_float()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", j.get<double>());
    v = buf;
  } else
    v = j.dump();
  out.emplace_back(prefix, v);
}
}  // namespace

std::string report_table(const Json& report) {
  std::vector<std::pair<std::string, std::string>> rows;
  flatten(report, "", rows);
  size_t width = 0;
  for (const auto& [k, v] : rows) width = std::max(width, k.size());
  std::ostringstream out;
  for (const auto& [k, v] : rows) out << k << std::string(width - k.size() + 2, ' ') << v << "\n";
  return out.str();
}

}  // namespace troupe::load

// Owns the trace readers: CSV splitting, per-format columns and units, the
// arrival ordering and the GPU-count-to-gang mapping.
#include "load/trace.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace troupe::load {

namespace {

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : line) {
    if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r' && c != '\n') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::optional<double> number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == nullptr || *end != '\0' || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string token_of(const std::string& s) {
  std::string out;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_';
    out += ok ? c : '_';
  }
  if (out.size() > 128) out.resize(128);
  if (out.empty() || out == "sys") out = "trace";
  return out;
}

struct Columns {
  const char* id;
  const char* arrival;
  const char* duration;
  const char* gpus;
  const char* team;  // nullptr: none
  double to_seconds;
};

Columns columns_of(TraceFormat f) {
  switch (f) {
    case TraceFormat::chronus:
      return {"job_id", "submit_time", "duration", "num_gpu", "user", 60.0};
    case TraceFormat::elasticflow:
      return {"job_id", "submission_time", "duration", "num_gpu", nullptr, 1.0};
    case TraceFormat::muri:
      return {"job_id", "submit_time", "duration", "num_gpu", nullptr, 0.001};
    case TraceFormat::tiresias:
      return {"job_id", "submit_time", "duration", "num_gpu", nullptr, 1.0};
  }
  return {"job_id", "submit_time", "duration", "num_gpu", nullptr, 1.0};
}

}  // namespace

std::optional<TraceFormat> parse_trace_format(const std::string& name) {
  if (name == "chronus") return TraceFormat::chronus;
  if (name == "elasticflow") return TraceFormat::elasticflow;
  if (name == "muri") return TraceFormat::muri;
  if (name == "tiresias") return TraceFormat::tiresias;
  return std::nullopt;
}

const char* trace_format_name(TraceFormat f) {
  switch (f) {
    case TraceFormat::chronus: return "chronus";
    case TraceFormat::elasticflow: return "elasticflow";
    case TraceFormat::muri: return "muri";
    case TraceFormat::tiresias: return "tiresias";
  }
  return "?";
}

TraceParse parse_trace(std::istream& in, TraceFormat format, const std::string& default_team) {
  TraceParse r;
  const Columns cols = columns_of(format);
  std::string line;
  if (!std::getline(in, line)) {
    r.error = "the trace is empty";
    return r;
  }
  if (line.size() >= 3 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);  // BOM
  std::vector<std::string> header = split_csv(line);
  auto find = [&](const char* name) -> int {
    if (name == nullptr) return -1;
    for (size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return static_cast<int>(i);
    return -1;
  };
  int id = find(cols.id), arr = find(cols.arrival), dur = find(cols.duration),
      gpu = find(cols.gpus), team = find(cols.team);
  if (arr < 0 || dur < 0 || gpu < 0 || (cols.team != nullptr && team < 0)) {
    r.error = std::string("not a ") + trace_format_name(format) + " trace: the header lacks " +
              (arr < 0 ? cols.arrival : dur < 0 ? cols.duration : gpu < 0 ? cols.gpus : cols.team) +
              " (header: " + line + ")";
    return r;
  }
  const std::string fallback_team = token_of(default_team);
  size_t row = 0;
  while (std::getline(in, line)) {
    ++row;
    if (line.empty() || line == "\r") continue;
    std::vector<std::string> f = split_csv(line);
    auto at = [&](int i) -> std::string {
      return i >= 0 && static_cast<size_t>(i) < f.size() ? f[static_cast<size_t>(i)] : "";
    };
    auto a = number(at(arr)), d = number(at(dur)), g = number(at(gpu));
    if (!a || !d || !g || *d < 0 || *g < 1 || *g > 1e6) {
      ++r.skipped;
      continue;
    }
    TraceJob j;
    j.id = id >= 0 ? at(id) : std::to_string(row);
    if (j.id.empty()) j.id = std::to_string(row);
    j.arrival_s = *a * cols.to_seconds;
    j.duration_s = *d * cols.to_seconds;
    j.gpus = static_cast<int>(std::lround(*g));
    std::string t = team >= 0 ? at(team) : "";
    j.team = t.empty() ? fallback_team : token_of(t);
    r.jobs.push_back(std::move(j));
  }
  return r;
}

void order_trace(std::vector<TraceJob>& jobs, size_t limit) {
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.arrival_s < b.arrival_s; });
  if (limit > 0 && jobs.size() > limit) jobs.resize(limit);
  if (jobs.empty()) return;
  double first = jobs.front().arrival_s;
  for (auto& j : jobs) j.arrival_s -= first;
}

std::string team_from_path(const std::string& path) {
  size_t slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  size_t dot = name.find_last_of('.');
  if (dot != std::string::npos && dot > 0) name = name.substr(0, dot);
  return token_of(name);
}

JobShape shape_for(int gpus, int gpus_per_node) {
  JobShape s;
  gpus = std::max(gpus, 0);
  gpus_per_node = std::max(gpus_per_node, 1);
  if (gpus <= gpus_per_node) {
    s.workers = 1;
    s.gpus_per_worker = gpus;
  } else {
    s.workers = (gpus + gpus_per_node - 1) / gpus_per_node;
    s.gpus_per_worker = gpus_per_node;
  }
  return s;
}

}  // namespace troupe::load

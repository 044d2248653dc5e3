// Owns the trace readers: CSV splitting, per-format columns and units, the
// arrival ordering and the GPU-count-to-gang mapping.
#include "load/trace.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <string>

namespace troupe::load {

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

// A value that says "not known": the job has not ended (for a duration or an
// end time).
bool missing(const std::string& s) {
  std::string v = lower(trim(s));
  return v.empty() || v == "nan" || v == "none" || v == "null" || v == "na" || v == "n/a" ||
         v == "-";
}

bool unfinished_status(const std::string& s) {
  std::string v = lower(trim(s));
  return v == "running" || v == "pending" || v == "queued" || v == "waiting" || v == "unfinished";
}

std::optional<double> number(const std::string& text) {
  const std::string s = trim(text);
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

std::optional<std::string> priority_class(PriorityColumn column, const std::string& value) {
  const std::string v = lower(trim(value));
  if (v.empty()) return std::string();
  switch (column) {
    case PriorityColumn::chronus_job_type:
      if (v == "strict") return std::string("high");
      if (v == "soft") return std::string("normal");
      if (v == "best") return std::string("low");
      return std::nullopt;
    case PriorityColumn::chronus_best_effort:
      if (auto n = number(v); n && (*n == 0 || *n == 1))
        return std::string(*n == 1 ? "low" : "normal");
      return std::nullopt;
    case PriorityColumn::generic:
      break;
  }
  for (const char* h : {"high", "urgent", "critical", "guaranteed", "prod"})
    if (v == h) return std::string("high");
  for (const char* n : {"normal", "default", "medium", "standard", "burstable"})
    if (v == n) return std::string("normal");
  for (const char* l :
       {"low", "best", "best_effort", "besteffort", "preemptible", "spot", "scavenger"})
    if (v == l) return std::string("low");
  if (auto n = number(v); n && *n == std::floor(*n))
    return std::string(*n > 0 ? "high" : *n < 0 ? "low" : "normal");
  return std::nullopt;
}

std::optional<TraceFormat> parse_trace_format(const std::string& name) {
  if (name == "chronus") return TraceFormat::chronus;
  if (name == "elasticflow") return TraceFormat::elasticflow;
  if (name == "muri") return TraceFormat::muri;
  if (name == "tiresias") return TraceFormat::tiresias;
  return std::nullopt;
}

const char* trace_format_name(TraceFormat f) {
  switch (f) {
    case TraceFormat::chronus:
      return "chronus";
    case TraceFormat::elasticflow:
      return "elasticflow";
    case TraceFormat::muri:
      return "muri";
    case TraceFormat::tiresias:
      return "tiresias";
  }
  return "?";
}

bool CsvReader::next(CsvRecord& out) {
  out.fields.clear();
  out.ok = true;
  out.line = line_;
  std::streambuf* buf = in_.rdbuf();
  using Traits = std::char_traits<char>;
  const auto eof = Traits::eof();
  if (buf == nullptr || Traits::eq_int_type(buf->sgetc(), eof)) return false;
  std::string cur;
  bool quoted = false;      // inside a quoted field
  bool was_quoted = false;  // the current field was quoted (and closed)
  // A line end: LF, CRLF or a lone CR (the CR already taken).
  auto end_of_line = [&](char c) {
    if (c == '\r' && Traits::eq_int_type(buf->sgetc(), Traits::to_int_type('\n'))) buf->sbumpc();
    ++line_;
  };
  while (true) {
    auto ic = buf->sbumpc();
    if (Traits::eq_int_type(ic, eof)) {
      if (quoted) out.ok = false;  // a quote left open
      out.fields.push_back(std::move(cur));
      return true;
    }
    char c = Traits::to_char_type(ic);
    if (quoted) {
      if (c == '"') {
        if (Traits::eq_int_type(buf->sgetc(), Traits::to_int_type('"'))) {
          buf->sbumpc();
          cur += '"';
        } else {
          quoted = false;
          was_quoted = true;
        }
      } else {
        if (c == '\n' || c == '\r') {
          if (c == '\r' && Traits::eq_int_type(buf->sgetc(), Traits::to_int_type('\n'))) {
            buf->sbumpc();
            cur += '\r';
            c = '\n';
          }
          ++line_;
        }
        cur += c;
      }
      continue;
    }
    if (c == ',') {
      out.fields.push_back(std::move(cur));
      cur.clear();
      was_quoted = false;
    } else if (c == '\n' || c == '\r') {
      end_of_line(c);
      out.fields.push_back(std::move(cur));
      return true;
    } else if (c == '"') {
      if (cur.empty() && !was_quoted)
        quoted = true;
      else
        out.ok = false;  // a quote inside an unquoted field, or after a closing one
    } else {
      if (was_quoted) out.ok = false;  // text after the closing quote
      cur += c;
    }
  }
}

TraceParse parse_trace(std::istream& in, TraceFormat format, const std::string& default_team) {
  TraceParse r;
  const Columns cols = columns_of(format);
  CsvReader reader(in);
  CsvRecord rec;
  if (!reader.next(rec) || (rec.fields.size() == 1 && trim(rec.fields[0]).empty())) {
    r.error = "the trace is empty";
    return r;
  }
  std::vector<std::string> header = rec.fields;
  if (!header.empty() && header[0].compare(0, 3, "\xEF\xBB\xBF") == 0)
    header[0].erase(0, 3);  // BOM
  for (auto& h : header) h = trim(h);
  auto find = [&](const char* name) -> int {
    if (name == nullptr) return -1;
    for (size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return static_cast<int>(i);
    return -1;
  };
  auto find_any = [&](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (int i = find(n); i >= 0) return i;
    return -1;
  };
  int id = find(cols.id), arr = find(cols.arrival), dur = find(cols.duration),
      gpu = find(cols.gpus), team = find(cols.team), milli = find("gpu_milli"),
      status = find_any({"status", "state", "job_status"}),
      end_col = find_any({"end_time", "finish_time", "end"}), gpu_type_col = find("gpu_type");
  // The priority column: `priority` or `qos` in any format; chronus's
  // `job_type`, else `best_effort`, when neither is there.
  PriorityColumn prio_kind = PriorityColumn::generic;
  int prio = find_any({"priority", "qos"});
  if (prio < 0 && format == TraceFormat::chronus) {
    if ((prio = find("job_type")) >= 0)
      prio_kind = PriorityColumn::chronus_job_type;
    else if ((prio = find("best_effort")) >= 0)
      prio_kind = PriorityColumn::chronus_best_effort;
  }
  if (prio >= 0) r.priority_column = header[static_cast<size_t>(prio)];
  if (arr < 0 || dur < 0 || (gpu < 0 && milli < 0) || (cols.team != nullptr && team < 0)) {
    std::string joined;
    for (size_t i = 0; i < header.size(); ++i) joined += (i > 0 ? "," : "") + header[i];
    r.error = std::string("not a ") + trace_format_name(format) + " trace: the header lacks " +
              (arr < 0   ? cols.arrival
               : dur < 0 ? cols.duration
               : gpu < 0 ? cols.gpus
                         : cols.team) +
              " (header: " + joined + ")";
    return r;
  }
  const std::string fallback_team = token_of(default_team);
  auto bad = [&](size_t line) {
    ++r.bad;
    ++r.skipped;
    if (r.bad_lines.size() < kBadLinesKept) r.bad_lines.push_back(line);
  };
  double trace_end = 0;
  bool any_end = false;
  std::vector<size_t> unknown_duration;  // indices into r.jobs
  size_t row = 0;
  while (reader.next(rec)) {
    ++row;
    const auto& f = rec.fields;
    if (f.size() == 1 && trim(f[0]).empty()) continue;  // an empty line
    if (!rec.ok || f.size() != header.size()) {
      bad(rec.line);
      continue;
    }
    auto at = [&](int i) -> const std::string& {
      static const std::string none;
      return i >= 0 ? f[static_cast<size_t>(i)] : none;
    };
    auto a = number(at(arr));
    bool duration_missing = missing(at(dur));
    auto d = duration_missing ? std::optional<double>(0) : number(at(dur));
    std::optional<double> g;
    if (milli >= 0) {
      auto m = number(at(milli));
      auto n = gpu >= 0 ? number(at(gpu)) : std::optional<double>(1);
      if (m && n) g = *m / 1000.0 * *n;
    } else {
      g = number(at(gpu));
    }
    if (!a || !d || !g || *d < 0 || *g < 0 || *g > 1e6) {
      bad(rec.line);
      continue;
    }
    const double arrival = *a * cols.to_seconds, duration = *d * cols.to_seconds;
    trace_end = any_end ? std::max(trace_end, arrival + duration) : arrival + duration;
    any_end = true;
    if (*g == 0) {
      ++r.zero_gpu;
      ++r.skipped;
      continue;
    }
    TraceJob j;
    j.id = id >= 0 ? trim(at(id)) : std::to_string(row);
    if (j.id.empty()) j.id = std::to_string(row);
    j.arrival_s = arrival;
    j.duration_s = duration;
    j.gpus = *g;
    j.censored = duration_missing || (status >= 0 && unfinished_status(at(status))) ||
                 (end_col >= 0 && !number(at(end_col)));
    if (duration_missing) unknown_duration.push_back(r.jobs.size());
    if (j.censored) ++r.censored;
    if (gpu_type_col >= 0) j.gpu_type = trim(at(gpu_type_col));
    if (prio >= 0) {
      auto cls = priority_class(prio_kind, at(prio));
      if (cls)
        j.priority = *cls;
      else
        ++r.priority_unknown;
    }
    std::string t = team >= 0 ? trim(at(team)) : "";
    j.team = t.empty() ? fallback_team : token_of(t);
    r.jobs.push_back(std::move(j));
  }
  // A censored job without a duration ran (or waited) until the trace ended.
  for (size_t i : unknown_duration)
    r.jobs[i].duration_s = std::max(0.0, trace_end - r.jobs[i].arrival_s);
  return r;
}

int gpus_to_submit(double gpus) {
  if (!(gpus > 0)) return 0;
  double whole = std::round(gpus);
  if (std::fabs(gpus - whole) <= 1e-6) return std::max(1, static_cast<int>(whole));
  if (gpus < 1) return 1;
  return static_cast<int>(std::ceil(gpus));
}

bool gpus_rounded(double gpus) {
  return std::fabs(static_cast<double>(gpus_to_submit(gpus)) - gpus) > 1e-6;
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

long long fleet_nodes(const std::vector<FleetGroup>& fleet) {
  long long n = 0;
  for (const auto& g : fleet) n += g.nodes;
  return n;
}

long long fleet_gpus(const std::vector<FleetGroup>& fleet) {
  long long n = 0;
  for (const auto& g : fleet) n += static_cast<long long>(g.nodes) * g.gpus_per_node;
  return n;
}

FleetFit fit_on_fleet(int gpus, const std::string& job_type, const std::string& untyped_type,
                      const std::vector<FleetGroup>& fleet) {
  FleetFit fit;
  const std::string& type = job_type.empty() ? untyped_type : job_type;
  fit.gpu_type = type;
  if (!type.empty()) {
    for (const auto& g : fleet) {
      if (g.gpu_type != type) continue;
      fit.shape = shape_for(gpus, g.gpus_per_node);
      fit.fits = fit.shape.workers <= g.nodes;
      return fit;
    }
    fit.type_missing = true;
    fit.shape = shape_for(gpus, 1);
    return fit;
  }
  const FleetGroup* best = nullptr;
  for (const auto& g : fleet) {
    if (shape_for(gpus, g.gpus_per_node).workers > g.nodes) continue;
    if (best == nullptr || g.gpus_per_node > best->gpus_per_node) best = &g;
  }
  if (best == nullptr) {
    int widest = 1;
    for (const auto& g : fleet) widest = std::max(widest, g.gpus_per_node);
    fit.shape = shape_for(gpus, widest);
    return fit;
  }
  fit.shape = shape_for(gpus, best->gpus_per_node);
  fit.fits = true;
  return fit;
}

IdleSkip skip_idle(std::vector<TraceJob>& jobs, double max_gap_s, double fleet_gpus,
                   int gpus_per_node) {
  IdleSkip out;
  if (max_gap_s < 0 || jobs.empty()) return out;
  const double capacity = fleet_gpus > 0 ? fleet_gpus : 1;
  double busy_end = 0;  // latest arrival + duration so far
  double work = 0;      // GPU-seconds not yet drained at time t
  double t = 0;
  double shift = 0;  // trace seconds removed so far
  for (size_t k = 0; k < jobs.size(); ++k) {
    TraceJob& j = jobs[k];
    double a = j.arrival_s - shift;
    if (k > 0) {
      const double idle_from = std::max(busy_end, t + work / capacity);
      const double gap = a - idle_from;
      if (gap > max_gap_s) {
        const double cut = gap - max_gap_s;
        shift += cut;
        a -= cut;
        ++out.gaps;
        out.removed_s += cut;
      }
      work = std::max(0.0, work - capacity * (a - t));
    }
    t = a;
    j.arrival_s = a;
    busy_end = std::max(busy_end, a + j.duration_s);
    const int submitted = j.submit_gpus > 0
                              ? j.submit_gpus
                              : shape_for(gpus_to_submit(j.gpus), gpus_per_node).total_gpus();
    work += submitted * j.duration_s;
  }
  return out;
}

}  // namespace troupe::load

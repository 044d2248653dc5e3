// Text the CLI prints (see format.hpp): tables, ages, status and event lines.
#include "gateway/format.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "gateway/replies.hpp"
#include "messages/json_text.hpp"
#include "messages/names.hpp"

namespace troupe::gateway {

std::string format_age(int64_t ms) {
  int64_t s = std::max<int64_t>(ms, 0) / 1000;
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m";
  if (s < 86400) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

std::string format_duration(int64_t ms) {
  ms = std::max<int64_t>(ms, 0);
  char buf[32];
  if (ms < 1000) {
    std::snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(ms));
  } else if (ms < 60'000) {
    std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms / 100) / 10.0);
  } else if (ms < 3'600'000) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(ms / 60'000),
                  static_cast<long long>(ms / 1000 % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(ms / 3'600'000),
                  static_cast<long long>(ms / 60'000 % 60));
  }
  return buf;
}

namespace {

std::tm local_tm(int64_t epoch_ms) {
  std::time_t t = static_cast<std::time_t>(epoch_ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

// ".mmm" of an epoch time (also before 1970).
std::string millis_suffix(int64_t epoch_ms) {
  char buf[8];
  std::snprintf(buf, sizeof buf, ".%03d", static_cast<int>(((epoch_ms % 1000) + 1000) % 1000));
  return buf;
}

}  // namespace

std::string format_clock(int64_t epoch_ms, bool millis) {
  std::tm tm = local_tm(epoch_ms);
  char buf[32];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return millis ? buf + millis_suffix(epoch_ms) : std::string(buf);
}

std::string format_datetime(int64_t epoch_ms, bool millis) {
  std::tm tm = local_tm(epoch_ms);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return millis ? buf + millis_suffix(epoch_ms) : std::string(buf);
}

std::string format_zone(int64_t epoch_ms) {
  std::tm tm = local_tm(epoch_ms);
  char zone[16];
  std::strftime(zone, sizeof zone, "%z", &tm);
  return zone;
}

std::string localize_times(const std::string& text) {
  std::string out;
  size_t i = 0;
  auto digits = [&](size_t at, size_t n) {
    if (at + n > text.size()) return false;
    for (size_t k = at; k < at + n; ++k)
      if (!std::isdigit(static_cast<unsigned char>(text[k]))) return false;
    return true;
  };
  auto num = [&](size_t at, size_t n) { return std::stoi(text.substr(at, n)); };
  while (i < text.size()) {
    // YYYY-MM-DDTHH:MM:SSZ
    if (i + 20 <= text.size() && digits(i, 4) && text[i + 4] == '-' && digits(i + 5, 2) &&
        text[i + 7] == '-' && digits(i + 8, 2) && text[i + 10] == 'T' && digits(i + 11, 2) &&
        text[i + 13] == ':' && digits(i + 14, 2) && text[i + 16] == ':' && digits(i + 17, 2) &&
        text[i + 19] == 'Z') {
      std::tm tm{};
      tm.tm_year = num(i, 4) - 1900;
      tm.tm_mon = num(i + 5, 2) - 1;
      tm.tm_mday = num(i + 8, 2);
      tm.tm_hour = num(i + 11, 2);
      tm.tm_min = num(i + 14, 2);
      tm.tm_sec = num(i + 17, 2);
      int64_t ms = static_cast<int64_t>(timegm(&tm)) * 1000;
      out += format_datetime(ms, false) + " " + format_zone(ms);
      i += 20;
      continue;
    }
    out += text[i++];
  }
  return out;
}

std::string format_memory_mb(int64_t mb) {
  if (mb <= 0) return "-";
  char buf[32];
  if (mb < 1024) {
    std::snprintf(buf, sizeof buf, "%lldM", static_cast<long long>(mb));
  } else if (mb < 1024 * 1024) {
    double g = static_cast<double>(mb) / 1024.0;
    if (mb % 1024 == 0 || g >= 100)
      std::snprintf(buf, sizeof buf, "%.0fG", g);
    else
      std::snprintf(buf, sizeof buf, "%.1fG", g);
  } else {
    std::snprintf(buf, sizeof buf, "%.1fT", static_cast<double>(mb) / (1024.0 * 1024.0));
  }
  return buf;
}

std::string join_ints(const google::protobuf::RepeatedField<int32_t>& v) {
  std::string out;
  for (int i = 0; i < v.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(v.Get(i));
  }
  return out;
}

std::string render_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i)
      width[i] = std::max(width[i], row[i].size());
  };
  measure(header);
  for (const auto& r : rows) measure(r);
  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < width.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : std::string();
      line += cell;
      if (i + 1 < width.size()) line += std::string(width[i] - cell.size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  };
  emit(header);
  for (const auto& r : rows) emit(r);
  return out;
}

namespace {

std::vector<const pb::WorkerPlacement*> by_rank(
    const google::protobuf::RepeatedPtrField<pb::WorkerPlacement>& p) {
  std::vector<const pb::WorkerPlacement*> v;
  for (const auto& w : p) v.push_back(&w);
  std::stable_sort(v.begin(), v.end(),
                   [](const auto* a, const auto* b) { return a->rank() < b->rank(); });
  return v;
}

}  // namespace

std::string placement_text(const google::protobuf::RepeatedPtrField<pb::WorkerPlacement>& p) {
  if (p.empty()) return "-";
  std::string out;
  for (const auto* w : by_rank(p)) {
    if (!out.empty()) out += ' ';
    out += w->node().empty() ? std::string("?") : w->node();
    if (!w->gpus().empty()) out += "[" + join_ints(w->gpus()) + "]";
  }
  return out;
}

std::string nodes_text(const google::protobuf::RepeatedPtrField<pb::WorkerPlacement>& p) {
  std::vector<std::string> seen;
  for (const auto* w : by_rank(p)) {
    if (w->node().empty()) continue;
    if (std::find(seen.begin(), seen.end(), w->node()) == seen.end()) seen.push_back(w->node());
  }
  if (seen.empty()) return "-";
  std::string out;
  for (const auto& n : seen) {
    if (!out.empty()) out += ',';
    out += n;
  }
  return out;
}

std::string gpus_text(const pb::JobView& j) {
  return std::to_string(j.gpus()) + "x" + std::to_string(std::max(j.workers(), 1));
}

std::string array_text(const pb::ArrayView& a) {
  std::string out = std::to_string(a.count()) + " task" + (a.count() == 1 ? "" : "s") + ":";
  bool first = true;
  for (const auto& [n, what] :
       std::initializer_list<std::pair<int, const char*>>{{a.running(), "running"},
                                                          {a.queued(), "queued"},
                                                          {a.succeeded(), "succeeded"},
                                                          {a.failed(), "failed"},
                                                          {a.canceled(), "canceled"}}) {
    if (n == 0) continue;
    out += (first ? " " : ", ") + std::to_string(n) + " " + what;
    first = false;
  }
  return out;
}

std::string jobs_table(const pb::JobList& jobs, int64_t now_ms, const std::string& state,
                       bool wide) {
  std::vector<const pb::JobView*> sorted;
  for (const auto& j : jobs.jobs())
    if (state.empty() || j.state() == state) sorted.push_back(&j);
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) {
    if (a->submit_ms() != b->submit_ms()) return a->submit_ms() < b->submit_ms();
    return a->job_id() < b->job_id();
  });
  bool clusters = false;  // through a front door: a CLUSTER column before NODE(S)
  for (const auto* j : sorted) clusters = clusters || !j->cluster().empty();
  std::vector<std::vector<std::string>> rows;
  for (const auto* j : sorted) {
    std::string st = j->state();
    if (j->has_array()) {  // one row for the array, its tasks counted
      const auto& a = j->array();
      st += " [" + std::to_string(a.succeeded() + a.failed() + a.canceled()) + "/" +
            std::to_string(a.count()) + " done";
      if (a.running() > 0) st += ", " + std::to_string(a.running()) + " running";
      if (a.failed() > 0) st += ", " + std::to_string(a.failed()) + " failed";
      st += "]";
    }
    rows.push_back({j->job_id(), j->team(), j->name().empty() ? "-" : j->name(), j->kind(), st,
                    gpus_text(*j), nodes_text(j->placement()),
                    j->submit_ms() > 0 ? format_age(now_ms - j->submit_ms()) : "-"});
    if (clusters)
      rows.back().insert(rows.back().begin() + 6, j->cluster().empty() ? "-" : j->cluster());
    if (wide)
      rows.back().insert(
          rows.back().end(),
          {j->pool().empty() ? "-" : j->pool(), j->priority().empty() ? "-" : j->priority(),
           std::to_string(j->attempt()), placement_text(j->placement())});
  }
  std::vector<std::string> head = {"ID", "TEAM", "NAME", "KIND", "STATE", "GPUS", "NODE(S)", "AGE"};
  if (clusters) head.insert(head.begin() + 6, "CLUSTER");
  if (wide) head.insert(head.end(), {"POOL", "PRIORITY", "ATTEMPT", "PLACEMENT"});
  return render_table(head, rows);
}

std::string prefix_lines(std::string& carry, const std::string& data, const std::string& prefix) {
  std::string out;
  carry += data;
  size_t start = 0;
  for (size_t nl = carry.find('\n'); nl != std::string::npos; nl = carry.find('\n', start)) {
    out += prefix;
    out.append(carry, start, nl + 1 - start);
    start = nl + 1;
  }
  carry.erase(0, start);
  return out;
}

std::string node_state(const pb::NodeView& n) {
  if (!n.alive()) return "lost";
  if (n.schedulable()) return "alive";
  std::string s = n.draining() ? "draining" : "cordoned";
  return n.reason().empty() ? s : s + " (" + n.reason() + ")";
}

std::string clusters_table(const std::string& reply_json, std::string* error) {
  auto j = json_text::parse(reply_json);
  if (!j.is_object() || !j.contains("clusters") || !j["clusters"].is_array()) {
    *error = "unreadable troupe.sys.clusters reply: " + reply_json;
    return {};
  }
  auto num = [](const nlohmann::json& c, const char* k) {
    return c.contains(k) && c[k].is_number_integer() ? std::to_string(c[k].get<int64_t>())
                                                     : std::string("0");
  };
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : j["clusters"]) {
    if (!c.is_object()) continue;
    std::string types;
    if (c.contains("gpu_types") && c["gpu_types"].is_object())
      for (const auto& [t, v] : c["gpu_types"].items()) types += (types.empty() ? "" : ",") + t;
    rows.push_back({c.value("name", std::string("?")), types.empty() ? "-" : types,
                    num(c, "gpus_free") + "/" + num(c, "gpus_total"), num(c, "queued"),
                    num(c, "running"), c.value("state", std::string("?"))});
  }
  return render_table({"NAME", "GPU TYPES", "GPUS", "QUEUED", "RUNNING", "STATE"}, rows);
}

std::string keep_cluster_nodes(pb::NodeList& nodes, const std::string& cluster) {
  const auto& all = nodes.nodes();
  if (!all.empty() && std::all_of(all.begin(), all.end(),
                                  [](const pb::NodeView& n) { return n.cluster().empty(); }))
    return kNoFrontDoorFilter;
  pb::NodeList kept;
  for (const auto& n : all)
    if (n.cluster() == cluster) *kept.add_nodes() = n;
  const bool unanswered = std::find(nodes.unanswered().begin(), nodes.unanswered().end(),
                                    cluster) != nodes.unanswered().end();
  if (unanswered) kept.add_unanswered(cluster);
  if (kept.nodes().empty() && !unanswered)
    return "no node of cluster " + cluster + " (troupe clusters lists the clusters)";
  nodes = std::move(kept);
  return {};
}

std::string nodes_table(const pb::NodeList& nodes, int64_t now_ms, bool wide) {
  std::vector<const pb::NodeView*> sorted;
  bool clusters = false;  // through a front door: a CLUSTER column first
  for (const auto& n : nodes.nodes()) {
    sorted.push_back(&n);
    clusters = clusters || !n.cluster().empty();
  }
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) {
    return std::tie(a->cluster(), a->node()) < std::tie(b->cluster(), b->node());
  });
  std::vector<std::vector<std::string>> rows;
  for (const auto* n : sorted) {
    rows.push_back({n->node(), n->gpu_type().empty() ? "-" : n->gpu_type(),
                    std::to_string(n->gpus_free()) + "/" + std::to_string(n->gpus_total()),
                    std::to_string(n->gpus_reserved()), std::to_string(n->gpus_allocated()),
                    n->cpus() > 0 ? std::to_string(n->cpus()) : "-",
                    format_memory_mb(n->memory_mb()), node_state(*n),
                    n->last_heartbeat_ms() > 0
                        ? format_age(now_ms - n->last_heartbeat_ms()) + " ago"
                        : "never"});
    if (wide)
      rows.back().insert(
          rows.back().end(),
          {n->pool().empty() ? "-" : n->pool(), n->rack().empty() ? "-" : n->rack(),
           n->runtime().empty() ? "-" : n->runtime(),
           n->gpus_shared() > 0 ? std::to_string(n->gpus_shared()) + " (" +
                                      format_memory_mb(n->gpu_memory_shared_mb()) + " used, " +
                                      format_memory_mb(n->gpu_memory_stranded_mb()) + " left)"
                                : "-"});
    if (clusters)
      rows.back().insert(rows.back().begin(), n->cluster().empty() ? "-" : n->cluster());
  }
  std::vector<std::string> head = {"NODE", "GPU TYPE", "GPUS",  "RESERVED",      "ALLOCATED",
                                   "CPUS", "MEMORY",   "STATE", "LAST HEARTBEAT"};
  if (wide) head.insert(head.end(), {"POOL", "RACK", "RUNTIME", "SHARED GPUS"});
  if (clusters) head.insert(head.begin(), "CLUSTER");
  std::string out = render_table(head, rows);
  if (!nodes.unanswered().empty()) {
    std::string names;
    for (const auto& n : nodes.unanswered()) names += (names.empty() ? "" : ", ") + n;
    out += "not shown (unreachable): " + names + "\n";
  }
  return out;
}

std::string status_text(const pb::JobView& j, int64_t now_ms) {
  std::vector<std::pair<std::string, std::string>> lines;
  auto add = [&](const std::string& k, const std::string& v) { lines.emplace_back(k, v); };
  add("job", j.job_id());
  if (!j.name().empty()) add("name", j.name());
  add("team", j.team());
  add("kind", j.kind());
  std::string state = j.state();
  if (j.attempt() > 0) state += " (attempt " + std::to_string(j.attempt()) + ")";
  add("state", state);
  if (!j.cluster().empty())
    add("cluster",
        j.cluster() + (j.cluster_job_id().empty() ? "" : " (as " + j.cluster_job_id() + ")"));
  if (!j.priority().empty()) add("priority", j.priority());
  std::string gpus = std::to_string(j.gpus()) + " GPU" + (j.gpus() == 1 ? "" : "s") + " x " +
                     std::to_string(std::max(j.workers(), 1)) + " worker" +
                     (std::max(j.workers(), 1) == 1 ? "" : "s");
  if (!j.gpu_type().empty()) gpus += " (" + j.gpu_type() + ")";
  add("gpus", gpus);
  if (j.placement().empty()) {
    add("placement", "-");
  } else {
    bool first = true;
    for (const auto* w : by_rank(j.placement())) {
      std::string v = "rank " + std::to_string(w->rank()) + ": " + w->node();
      if (!w->gpus().empty()) v += " gpus " + join_ints(w->gpus());
      add(first ? "placement" : "", v);
      first = false;
    }
  }
  if (j.has_exit_code()) add("exit code", std::to_string(j.exit_code()));
  if (!j.reason().empty()) add("reason", j.reason());
  if (j.submit_ms() > 0)
    add("submitted",
        format_datetime(j.submit_ms()) + " (" + format_age(now_ms - j.submit_ms()) + " ago)");
  if (j.start_ms() > 0) {
    std::string v = format_datetime(j.start_ms());
    if (j.submit_ms() > 0) v += " (waited " + format_duration(j.start_ms() - j.submit_ms()) + ")";
    add("started", v);
  }
  if (j.end_ms() > 0) {
    std::string v = format_datetime(j.end_ms());
    if (j.start_ms() > 0) v += " (ran " + format_duration(j.end_ms() - j.start_ms()) + ")";
    add("ended", v);
  } else if (j.start_ms() > 0 && !names::is_terminal(j.state())) {
    add("running for", format_duration(now_ms - j.start_ms()));
  }
  if (j.has_array()) {
    const auto& a = j.array();
    add("array", array_text(a));
    add("parallelism",
        a.parallelism() > 0 ? std::to_string(a.parallelism()) + " at once" : "all at once");
    if (!a.outcome().empty()) add("outcome", a.outcome());
  }
  size_t w = 0;
  for (const auto& [k, v] : lines) w = std::max(w, k.size());
  std::string out;
  for (const auto& [k, v] : lines) {
    out += k;
    out += std::string(w - k.size() + 2, ' ');
    out += v;
    out += '\n';
  }
  if (j.has_array() && j.array().tasks_size() > 0) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& t : j.array().tasks()) {
      std::string params;
      for (const auto& [k, v] :
           std::map<std::string, std::string>(t.params().begin(), t.params().end()))
        params += (params.empty() ? "" : " ") + k + "=" + v;
      rows.push_back(
          {t.job_id(), std::to_string(t.index()), t.state(), params.empty() ? "-" : params});
    }
    out += "\n" + render_table({"TASK", "INDEX", "STATE", "PARAMS"}, rows);
  }
  return out;
}

std::string event_line(const pb::JobEvent& e) {
  std::string when;
  if (e.ts_ms() > 0)
    when = format_clock(e.ts_ms(), true);
  else if (!e.ts().empty())
    when = e.ts();
  else
    when = "-";
  char buf[160];
  std::snprintf(buf, sizeof buf, "%-12s  %-20s  %-16s  %-9s", when.c_str(), e.job_id().c_str(),
                e.name().empty() ? "-" : e.name().c_str(), e.state().c_str());
  std::string out = buf;
  if (e.attempt() > 1) out += "  attempt " + std::to_string(e.attempt());
  if (!e.workers().empty()) out += "  " + placement_text(e.workers());
  if (e.has_exit_code()) out += "  exit " + std::to_string(e.exit_code());
  if (!e.reason().empty()) out += "  (" + e.reason() + ")";
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::vector<pb::JobEvent> parse_events(const std::vector<std::string>& raw, size_t* skipped) {
  std::vector<pb::JobEvent> out;
  size_t bad = 0;
  for (const auto& text : raw) {
    pb::JobEvent e;
    if (parse_view(text, e).empty() && !e.job_id().empty() && !e.state().empty())
      out.push_back(std::move(e));
    else
      ++bad;
  }
  if (skipped != nullptr) *skipped = bad;
  return out;
}

namespace {

std::string history_reason(const pb::JobEvent& e) {
  std::string out = e.reason();
  if (!e.cause().empty() && e.cause() != e.state()) {
    if (!out.empty()) out += ' ';
    out += "(cause " + e.cause() + ")";
  }
  return out.empty() ? "-" : out;
}

}  // namespace

std::string history_table(const std::vector<pb::JobEvent>& events) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : events) {
    std::string when = e.ts_ms() > 0    ? format_datetime(e.ts_ms(), true)
                       : e.ts().empty() ? std::string("-")
                                        : e.ts();
    rows.push_back({when, e.state(), e.attempt() > 0 ? std::to_string(e.attempt()) : "-",
                    placement_text(e.workers()),
                    e.has_exit_code() ? std::to_string(e.exit_code()) : "-", history_reason(e)});
  }
  return render_table({"TIME", "STATE", "ATTEMPT", "NODES/GPUS", "EXIT", "REASON"}, rows);
}

std::string history_json(const std::vector<std::string>& raw) {
  std::string out = "[";
  bool first = true;
  for (const auto& text : raw) {
    auto j = json_text::parse(text);
    if (j.is_discarded() || !j.is_object()) continue;
    auto begin = text.find_first_not_of(" \t\r\n");
    auto end = text.find_last_not_of(" \t\r\n");
    out += first ? "\n" : ",\n";
    out += text.substr(begin, end - begin + 1);
    first = false;
  }
  out += first ? "]" : "\n]";
  return out;
}

}  // namespace troupe::gateway

#include "actors/policy/usage.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

#include "actors/policy/stats.hpp"
#include "messages/names.hpp"

namespace troupe::policy::usage {

namespace {

constexpr int64_t kDayMs = 24LL * 3600 * 1000;

double gpus_of(const pb::JobEvent& e) {
  double n = 0;
  for (const auto& w : e.workers()) n += w.gpus_size();
  return n;
}

nlohmann::json figures_json(const Figures& f) {
  int64_t ended = 0;
  for (const auto& [state, n] : f.ended) ended += n;
  auto succeeded = f.ended.count(std::string(names::kSucceeded))
                       ? f.ended.at(std::string(names::kSucceeded))
                       : 0;
  nlohmann::json j{{"gpu_hours", f.gpu_s / 3600.0},
                   {"gpu_hours_preempted", f.gpu_s_preempted / 3600.0},
                   {"jobs", f.ended},
                   {"ended", ended},
                   {"succeeded", succeeded},
                   {"success_rate", ended > 0 ? static_cast<double>(succeeded) / ended : 0.0},
                   {"started", f.waits_s.size()},
                   {"queue_wait_p50_s", percentile(f.waits_s, 50)},
                   {"queue_wait_p99_s", percentile(f.waits_s, 99)}};
  if (f.ended.empty()) j["jobs"] = nlohmann::json::object();
  return j;
}

}  // namespace

bool parse_by(const std::string& text, By* by) {
  if (text == "team")
    *by = By::team;
  else if (text == "kind")
    *by = By::kind;
  else if (text == "day")
    *by = By::day;
  else if (text.empty() || text == "none")
    *by = By::none;
  else
    return false;
  return true;
}

std::string parse_query(const nlohmann::json& req, int64_t now_ms, Query* q) {
  if (!req.is_object()) return "the request is not a JSON object";
  auto number = [&](const char* key, int64_t dflt, int64_t* out) {
    auto it = req.find(key);
    if (it == req.end() || it->is_null()) {
      *out = dflt;
      return true;
    }
    if (!it->is_number_integer() || it->get<int64_t>() < 0) return false;
    *out = it->get<int64_t>();
    return true;
  };
  if (!number("until_ms", now_ms, &q->until_ms) ||
      !number("since_ms", q->until_ms - 7 * kDayMs, &q->since_ms))
    return "since_ms and until_ms are milliseconds since the epoch";
  if (q->since_ms >= q->until_ms) return "since_ms must be before until_ms";
  if (q->until_ms - q->since_ms > 366 * kDayMs)  // each event of the window is read
    return "the window is at most 366 days (since_ms .. until_ms)";
  auto by = req.find("by");
  if (!parse_by(by != req.end() && by->is_string() ? by->get<std::string>() : "team", &q->by))
    return "by must be team, kind or day";
  return {};
}

int64_t scan_from_ms(const Query& q) {
  return std::max<int64_t>(1, q.since_ms - kDayMs);
}

std::string utc_day(int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

std::string Counter::key_of(const Job& j, int64_t ts_ms) const {
  switch (q_.by) {
    case By::team:
      return j.team;
    case By::kind:
      return j.kind;
    case By::day:
      return utc_day(ts_ms);
    case By::none:
      return "total";
  }
  return {};
}

void Counter::add_gpu_time(const Job& j, int64_t from, int64_t to, bool preempted) {
  from = std::max(from, q_.since_ms);
  to = std::min(to, q_.until_ms);
  while (from < to) {
    // One day at a time when grouped by day; else all at once.
    int64_t end = q_.by == By::day ? std::min(to, (from / kDayMs + 1) * kDayMs) : to;
    auto& g = groups_[key_of(j, from)];
    double s = j.gpus * static_cast<double>(end - from) / 1000.0;
    g.gpu_s += s;
    if (preempted) g.gpu_s_preempted += s;
    from = end;
  }
}

void Counter::add(const pb::JobEvent& e) {
  ++events_;
  if (e.job_id().empty() || e.state().empty()) return;
  // An array's own events: its tasks, jobs with events of their own, are counted.
  if (e.tasks() > 0) return;
  auto& j = jobs_[e.job_id()];
  if (!e.team().empty()) j.team = e.team();
  if (!e.kind().empty()) j.kind = e.kind();
  const int64_t ts = e.ts_ms();
  const std::string& state = e.state();
  // The attempt that held GPUs ends with any other state of the job.
  if (j.held_since > 0 && state != names::kRunning &&
      !(state == names::kStarting && e.attempt() == j.held_attempt)) {
    bool preempted = state == "preempted" || e.cause() == "preempted";
    add_gpu_time(j, j.held_since, ts, preempted);
    j.held_since = 0;
  }
  if (state == names::kQueued && j.queued_ms == 0) j.queued_ms = ts;
  if (state == names::kStarting && j.held_since == 0) {
    j.held_since = ts;
    j.held_attempt = e.attempt();
    j.gpus = gpus_of(e);
    if (!j.started) {
      j.started = true;
      if (j.queued_ms > 0 && ts >= q_.since_ms && ts < q_.until_ms)
        groups_[key_of(j, ts)].waits_s.push_back(static_cast<double>(ts - j.queued_ms) / 1000.0);
    }
  }
  if (state == names::kRunning && j.held_since > 0 && gpus_of(e) > 0) j.gpus = gpus_of(e);
  if (names::is_terminal(state) && ts >= q_.since_ms && ts < q_.until_ms)
    ++groups_[key_of(j, ts)].ended[state];
}

Figures Counter::total() const {
  Figures t;
  for (const auto& [key, g] : groups_) {
    t.gpu_s += g.gpu_s;
    t.gpu_s_preempted += g.gpu_s_preempted;
    for (const auto& [state, n] : g.ended) t.ended[state] += n;
    t.waits_s.insert(t.waits_s.end(), g.waits_s.begin(), g.waits_s.end());
  }
  return t;
}

std::string Counter::json() const {
  static constexpr const char* const kBy[] = {"team", "kind", "day", "none"};
  nlohmann::json j{{"since_ms", q_.since_ms},
                   {"until_ms", q_.until_ms},
                   {"by", kBy[static_cast<int>(q_.by)]},
                   {"events", events_},
                   {"groups", nlohmann::json::array()}};
  for (const auto& [key, g] : groups_) {
    auto f = figures_json(g);
    f["key"] = key;
    j["groups"].push_back(std::move(f));
  }
  j["total"] = figures_json(total());
  return j.dump();
}

}  // namespace troupe::policy::usage

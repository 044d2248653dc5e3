// Usage accounting (troupe usage; docs/api.md "Usage"), what Slurm's sacct and
// sreport give: GPU-hours used and lost to preemption, jobs by final state,
// queue wait p50/p99 and the success rate, per team, kind or day, over a time
// window, computed from the job events (the events stream, so it covers the
// stream's retention). Pure: events in, a report out. Unit tests:
// tests/unit/policy_usage_test.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "job_spec.pb.h"

namespace troupe::policy::usage {

enum class By { team, kind, day, none };
// "team", "kind", "day" or "" (none: one total); false when unknown.
bool parse_by(const std::string& text, By* by);

struct Query {
  int64_t since_ms = 0;
  int64_t until_ms = 0;  // exclusive
  By by = By::team;
};

// A request {"since_ms","until_ms","by"} (each optional: the 7 days before
// `now_ms`, by team; a window of at most 366 days) read into `q`: "" or why
// it is refused.
std::string parse_query(const nlohmann::json& request, int64_t now_ms, Query* q);
// Where a scan of the events for `q` starts: a day before its window (an
// attempt that started then still counts from since_ms on).
int64_t scan_from_ms(const Query& q);

// One group's figures.
struct Figures {
  double gpu_s = 0;                      // GPUs held (from an attempt's start to its end) x seconds
  double gpu_s_preempted = 0;            // of that, attempts that ended preempted
  std::map<std::string, int64_t> ended;  // jobs by final state, ended in the window
  std::vector<double> waits_s;           // queued -> first start, started in the window
};

// Takes a job's events in order (per job; jobs may interleave) and keeps what
// the report needs: per job a few fields, per group the figures.
class Counter {
 public:
  explicit Counter(Query q) : q_(q) {}
  void add(const pb::JobEvent& e);
  // {"since_ms","until_ms","by","groups":[{"key","gpu_hours","gpu_hours_preempted",
  //  "jobs":{state:n},"ended","succeeded","success_rate","queue_wait_p50_s",
  //  "queue_wait_p99_s","started"}],"total":{...},"events":N}
  std::string json() const;
  const std::map<std::string, Figures>& groups() const { return groups_; }
  Figures total() const;

 private:
  struct Job {
    std::string team, kind;
    int64_t queued_ms = 0;   // the first queued event (blocked time is no queue wait)
    bool started = false;    // its first attempt started (the wait is counted)
    int64_t held_since = 0;  // the current attempt's start (starting), 0: none
    int32_t held_attempt = 0;
    double gpus = 0;  // GPUs the current attempt holds
  };
  std::string key_of(const Job& j, int64_t ts_ms) const;
  // Adds [from, to) clipped to the window, split by day when grouped so.
  void add_gpu_time(const Job& j, int64_t from, int64_t to, bool preempted);
  Query q_;
  std::unordered_map<std::string, Job> jobs_;
  std::map<std::string, Figures> groups_;
  int64_t events_ = 0;
};

// "2026-12-03" (UTC) of a time in ms.
std::string utc_day(int64_t ms);

}  // namespace troupe::policy::usage

// The pure half of the scheduler's metrics: the table of every series the
// scheduler exports (name, type, labels, help, buckets), the bounded cause
// label of a job's end, the job-event tracker that turns JobEvents into
// observations (queue wait, placement latency, finished jobs, ended attempts),
// and the readers that turn the troupe.sys.nodes / queues / stats / jobs
// replies into gauge rows. No prometheus-cpp, NATS or clock here: the
// collector (actors/metrics/scheduler_metrics.cpp) carries these out. Unit
// tests: tests/unit/metrics_*.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace troupe::metrics {

using Json = nlohmann::json;

// ---- the series table ---------------------------------------------------------

enum class Type { kCounter, kGauge, kHistogram };

struct SeriesInfo {
  std::string name;  // full family name (counters end in _total)
  Type type = Type::kGauge;
  std::vector<std::string> labels;  // every label the family may carry
  std::string help;
  std::vector<double> buckets;  // histograms only (seconds)
};

// Every series troupe-scheduler --metrics exports, in one place: the collector
// builds its families from it and the dashboard test checks queries against it.
const std::vector<SeriesInfo>& scheduler_series();
// The series a node agent exports (node/metrics.cpp).
const std::vector<SeriesInfo>& node_series();
// The series a front door exports (troupe-dispatch --metrics,
// gateway/dispatch/dispatch_main.cpp).
const std::vector<SeriesInfo>& dispatch_series();
// The sample names a family produces: histograms give name_bucket, _sum, _count.
std::vector<std::string> sample_names(const SeriesInfo& s);
// nullptr when `name` is not a family of `table`.
const SeriesInfo* find_series(const std::vector<SeriesInfo>& table, std::string_view name);

// ---- causes -------------------------------------------------------------------

// The bounded set of cause label values (the vocabulary of policy/retry.hpp,
// plus "other").
const std::vector<std::string>& known_causes();

// How an attempt or a job ended, as a bounded label: the event's own `cause`
// when it carries a known one (any other value becomes "other"), else derived
// from `state` and the `reason` text ("rank 1 exited with code 3",
// "retry 1 of 2 after: killed by signal 9", "exceeded max_runtime_s", ...).
std::string cause_of(std::string_view state, std::string_view reason,
                     std::string_view event_cause = {});

// ---- job events -----------------------------------------------------------------

struct JobEvent {
  std::string job_id, team, kind, state, reason, cause;
  int attempt = 0;
  int64_t ts_ms = 0;
};

// Parses a JobEvent JSON body (protobuf JSON: int64 as strings, zero fields
// omitted). nullopt unless it is an object with job_id, state and ts_ms.
std::optional<JobEvent> parse_event(std::string_view body);

struct Finished {
  std::string state, cause;
};

// What one event adds to the metrics.
struct Observations {
  std::optional<double> queue_wait_s;         // queued -> first running, per attempt
  std::optional<double> placement_latency_s;  // submit -> starting (attempt 1 only)
  std::optional<Finished> finished;           // terminal: state and cause
  std::optional<std::string> attempt_ended;   // an attempt ended (requeue or terminal): cause
};

// Follows each job through its events. Out-of-order or older-attempt events
// are ignored; a job is forgotten at its terminal event, and the oldest jobs
// are forgotten beyond `max_jobs` (a subscriber that joins late sees jobs
// half-way: it then measures only what it saw from the start of).
class EventTracker {
 public:
  explicit EventTracker(size_t max_jobs = 200000) : max_jobs_(max_jobs) {}
  Observations on_event(const JobEvent& ev);
  size_t tracked() const { return jobs_.size(); }

 private:
  struct Job {
    int attempt = 0;
    int64_t submit_ms = 0;  // queued event of attempt 1 (0: not seen)
    int64_t queued_ms = 0;  // queued event of the current attempt (0: not seen)
    bool placement_seen = false;
    bool wait_seen = false;
  };
  Job& job(const std::string& id);
  void evict();
  size_t max_jobs_;
  std::unordered_map<std::string, Job> jobs_;
  std::deque<std::string> order_;  // first-seen order, for eviction (may hold forgotten ids)
};

// ---- cumulative values from the scheduler -------------------------------------

// Turns a cumulative value polled from the scheduler into counter increments;
// a value that went down means the scheduler restarted: its whole value is new.
class CounterMirror {
 public:
  double delta(double now);

 private:
  bool seen_ = false;
  double last_ = 0;
};

// A cumulative value the scheduler reports (troupe.sys.stats / queues), as
// one labelled counter. Every entry is present (0 when the reply lacks the
// field), so the series exist before the scheduler fills them in.
struct Cumulative {
  std::string series;
  std::map<std::string, std::string> labels;
  double value = 0;
};
std::vector<Cumulative> cumulative_values(const Json& stats, const Json& queues);
// A row's series and labels as one key ("series,k=v,..."): its CounterMirror's.
std::string key_of(const Cumulative& c);

// A histogram the scheduler keeps (troupe.sys.queues teams[].guarantee_restore:
// observations per bucket, then +Inf, their sum and count), as increments
// since the last sample, for Prometheus' ObserveMultiple. A count that went
// down means the scheduler restarted: all of it is new.
struct HistogramIncrement {
  std::string team, pool;
  std::vector<double> buckets;  // per bound, then +Inf
  double sum = 0;
};
class HistogramMirror {
 public:
  std::optional<HistogramIncrement> delta(const Json& row, size_t bounds);

 private:
  std::vector<double> last_buckets_;
  double last_sum_ = 0;
  int64_t last_count_ = 0;
};
// The guarantee_restore increments of every team row (mirrors by team/pool).
std::vector<HistogramIncrement> restore_increments(const Json& queues,
                                                   std::map<std::string, HistogramMirror>& seen);

// A front door's troupe.sys.clusters view ({"clusters":[{"name","state",
// "gpu_types":{type:{"total","free"}},"queued","running"}],"counters":{...}})
// as dispatch_series() rows: per cluster whether it answers, its GPUs by type
// and its jobs; and the front door's counters, cumulative (through a
// CounterMirror each). Rows of a malformed part are left out.
struct DispatchSample {
  std::vector<Cumulative> gauges;
  std::vector<Cumulative> counters;
};
DispatchSample dispatch_sample(const Json& clusters_view);

// ---- replies -> rows --------------------------------------------------------

struct GpuRow {
  std::string pool, gpu_type;
  int total = 0, allocated = 0, reserved = 0, free = 0, held_idle = 0, fragmented = 0;
  int64_t memory_shared_mb = 0, memory_stranded_mb = 0;  // shared GPUs
};

struct TeamRow {
  std::string team, pool;
  double weight = 0, dominant_share = 0, weighted_share = 0;
  int guaranteed = 0, in_use = 0, borrowed = 0, pending_jobs = 0, pending_gpus = 0;
  int pending_flexible = 0;  // of pending_jobs, any-type jobs
};

// A pending job's shape: what one of its workers needs.
struct PendingShape {
  int gpus = 0;  // per worker
  std::string gpu_type, pool;
};

struct Sample {
  std::vector<GpuRow> gpus;  // per (pool, gpu_type) of alive nodes
  std::vector<TeamRow> teams;
  int nodes_alive = 0, nodes_dead = 0, workers_running = 0;
  double allocation_ratio = 0;  // allocated / total over alive nodes (0 without GPUs)
};

// Number or numeric string (protobuf JSON prints int64 as strings); `def` when absent.
double num(const Json& j, const char* key, double def = 0);

// Pending shapes from troupe.sys.queues (teams[].pending_shapes, when the
// scheduler provides it); nullopt when the reply has no such field.
std::optional<std::vector<PendingShape>> shapes_from_queues(const Json& queues);
// Pending shapes from a troupe.sys.jobs JobList (its queued jobs).
std::vector<PendingShape> shapes_from_jobs(const Json& jobs);
// True when some team row has pending jobs.
bool any_pending(const Json& queues);

// Builds the gauge rows from troupe.sys.nodes and troupe.sys.queues replies.
// Fragmentation: free GPUs on alive nodes outside any backfill hold on which
// no pending GPU job's worker fits (type, pool, count); 0 when nothing with
// GPUs is pending. Held-idle: free GPUs on the nodes of a pool's hold.
Sample build_sample(const Json& nodes, const Json& queues,
                    const std::vector<PendingShape>& pending);

// Label value for a pool or GPU type that may be empty.
std::string label_or_none(const std::string& s);

}  // namespace troupe::metrics

// troupe-load's reports: the figures computed from the submissions' results
// (and, for replays, the GPU allocation samples) as JSON, and the same JSON
// rendered as a table for people. Pure.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "load/engine.hpp"
#include "load/proc.hpp"

namespace troupe::load {

using Json = nlohmann::ordered_json;

// The run's setting, copied into the report as "config".
struct RunInfo {
  Json config = Json::object();
  double total_s = 0;     // from the first submission to the end of the wait
  bool complete = false;  // every job answered and terminal before the deadline
  std::optional<ProcMemory> scheduler;
  int64_t dropped = 0;  // messages the NATS client dropped (slow consumer)
  // Replays: jobs preempted during the run (troupe.sys.queues "preemptions",
  // end minus start); nullopt when the scheduler did not say.
  std::optional<long long> preemptions;
};

// Load-run report: counts, per-state counts, submissions/s acknowledged,
// placements/s, submit->ack and submit->placed latency (ms), scheduler RSS.
//   submit_rate_per_s    = acknowledged / (last ack - first send)
//   placement_rate_per_s = placed / (last placement - first send)
// where "placed" is the first starting or running event of the job, and the
// latencies run from the moment the submit was published to the moment the
// reply or event arrived here.
Json load_report(const std::vector<JobResult>& jobs, const RunInfo& info);

// One sample of troupe.sys.nodes (and troupe.sys.queues): GPUs allocated,
// free and in total over alive nodes, and how many free GPUs are fragmented.
struct AllocSample {
  int64_t t_ns = 0;
  long long allocated = 0;
  long long total = 0;
  long long free = 0;
  // Free GPUs, outside any backfill hold, on nodes where no pending job's
  // worker fits (GPU count, type, pool); 0 when no GPU job is pending. Only
  // meaningful when `has_queues`.
  long long fragmented = 0;
  bool has_queues = false;  // a troupe.sys.queues reply came with pending_shapes
  bool pending = false;     // some GPU job was pending
};

// Builds a sample from a troupe.sys.nodes reply and, when not null, a
// troupe.sys.queues reply (teams[].pending_shapes, pools[].hold.nodes),
// counting only alive nodes whose name starts with `prefix` + "-" (every
// node when `prefix` is empty). `alive` gets the number of such nodes.
// nullopt when `nodes` is not a NodeList. The same definition as the
// troupe_gpus_fragmented metric (docs/metrics.md).
std::optional<AllocSample> sample_from(const Json& nodes, const Json& queues,
                                       const std::string& prefix, size_t* alive = nullptr);

// Where each replayed job sits in trace time, rebuilt from trace-time
// quantities only: the wall clock gives the order of the events, the trace
// gives every length. Jobs are taken in the order of their first `running`
// event; a job starts, in trace time, at the later of its trace arrival and
// the trace end of every job whose terminal event came before its running
// event. A job ends at its start + its trace duration when it succeeded; a job
// that ended otherwise (failed, canceled: killed at its runtime limit, say)
// at its start + min(trace duration, wall run x speedup). So no wall latency of
// the scheduler is multiplied by the speedup: waiting for another job to end
// is the only trace-time wait.
struct TraceTiming {
  bool known = false;                         // has trace data and a running event
  bool ended = false;                         // and a terminal event
  double start_s = 0, wait_s = 0, end_s = 0;  // trace seconds (end_s when `ended`)
};
std::vector<TraceTiming> trace_timeline(const std::vector<JobResult>& jobs, double speedup);

// Replay report. Wall-clock figures are in seconds (`*_s`) or milliseconds
// (`*_ms`); trace-time figures (`*_trace_s`) come from trace_timeline, never
// from a wall figure x speedup:
//   JCT (wall) = terminal event - submit; JCT (trace) = trace wait + trace
//   duration, of the jobs that succeeded; censored jobs are in neither;
//   queueing delay (wall) = first running event - submit; (trace) = the
//   trace wait;
//   scheduler_delay_ms: submit -> ack, submit -> running, and `own`: the wall
//   wait minus the trace wait / speedup (what waiting for other jobs to end
//   does not explain: the scheduler's own latency), wall ms;
//   makespan = last terminal event - first submit (wall), latest trace end
//   (trace);
//   GPU allocation = mean of allocated/total over the samples taken between
//   the first submit and the last terminal event;
//   GPU time of a team = sum of GPUs x (terminal - first running) of its jobs
//   (wall), GPUs x trace duration of its jobs that succeeded (trace);
//   Jain's index over the teams' (wall) GPU times.
Json replay_report(const std::vector<JobResult>& jobs, const std::vector<AllocSample>& samples,
                   double speedup, const RunInfo& info);

// Several replays of the same trace, one per policy (the first is the one
// compared, the second the baseline): {"mode": "replay_compare", "policies",
// "complete", "ratios": first / second for the average and p99 JCT and
// queueing delay, makespan, mean GPU allocation, Jain's index and mean
// fragmented GPUs (null where the baseline is 0), "runs": {policy: report}}.
Json compare_report(const std::vector<std::pair<std::string, Json>>& runs);

// A compare report as a table: one row per measure, one column per policy,
// and the ratio column.
std::string compare_table(const Json& compare);

// The report as an aligned two-column table (nested objects flattened to
// dotted keys).
std::string report_table(const Json& report);

}  // namespace troupe::load

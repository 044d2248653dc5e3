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
  int64_t dropped = 0;   // messages the NATS client dropped (slow consumer)
  int64_t rerouted = 0;  // --pool submissions nobody listened for, sent to any scheduler
  // Replays: jobs preempted during the run (troupe.sys.queues "preemptions",
  // end minus start); nullopt when the scheduler did not say.
  std::optional<long long> preemptions;
  // The event times ARE trace times (troupe-load simulate, run in virtual
  // trace time, speedup 1): the trace figures come from them directly, not
  // from trace_timeline's reconstruction.
  bool exact_trace_times = false;
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
  // Free GPUs on nodes held by a backfill hold (pools[].hold.nodes): idle
  // because of the hold (reserved-idle).
  long long held_idle = 0;
  // Free GPUs where some pending job's worker fits now: free - fragmented -
  // held_idle (0 when nothing is pending). > 0 means "work waits and fits".
  long long usable_free = 0;
  // Teams with pending work (teams[].pending_jobs > 0) and Jain's index over
  // their weight-adjusted GPUs in use (in_use / weight): 1 when each gets the
  // same weighted share (its fair share among the teams that want more).
  // Meaningful when teams_pending >= 2.
  int teams_pending = 0;
  double jain_pending = 1;
};

// What make_sample reads: one alive node, one pending worker shape, one team.
struct SampleNode {
  std::string gpu_type, pool;
  long long total = 0, allocated = 0, free = 0;
  bool held = false;  // in a backfill hold
};
struct SampleWant {
  long long gpus = 0;
  std::string gpu_type, pool;  // "" = any
};
struct SampleTeam {
  double in_use = 0;  // GPUs
  double weight = 1;
  bool pending = false;
};
// The sample of these nodes, pending shapes and teams (sample_from's
// arithmetic, also used by troupe-load simulate): allocated/total/free summed;
// fragmented = free GPUs of unheld nodes where no want fits (0 without
// wants); held_idle = free GPUs of held nodes; usable_free = the rest of the
// free GPUs when something is pending; Jain's index over in_use / weight of
// the teams with pending work. `has_queues` is copied.
AllocSample make_sample(const std::vector<SampleNode>& nodes, const std::vector<SampleWant>& wants,
                        const std::vector<SampleTeam>& teams, bool has_queues);

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
// gives every length. Attempts are taken in the order of their `running`
// events (a job's attempts that ended `preempted`, then its last one); an
// attempt starts, in trace time, at the later of when its job may run (its
// trace arrival; for a later attempt, the trace end of the one before) and
// the trace end of every attempt whose end (terminal or preempted event) came
// before its running event. A last attempt that succeeded ends at its start +
// the trace duration; one that ended otherwise (failed, canceled: killed at
// its runtime limit, say), and a preempted attempt, at its start + min(trace
// duration, wall run x speedup) (the only place a wall length is scaled: how
// long a preempted attempt ran is a scheduler decision the trace cannot
// give). So, without preemption, no wall latency of the scheduler is
// multiplied by the speedup: waiting for another job to end is the only
// trace-time wait. start_s/wait_s are the first attempt's, end_s the last's.
struct TraceTiming {
  bool known = false;                         // has trace data and a running event
  bool ended = false;                         // and a terminal event
  double start_s = 0, wait_s = 0, end_s = 0;  // trace seconds (end_s when `ended`)
};
std::vector<TraceTiming> trace_timeline(const std::vector<JobResult>& jobs, double speedup);

// The starvation check: each job's trace wait against 2 x the longest
// max_runtime_s (factor x trace duration) of the jobs ahead of it, those that
// arrived before it (file order on a tie) and had not ended, in trace time,
// when it arrived (a job with none ahead should not wait: its bound is 0).
// {"jobs_checked", "violations" (waits above the bound, 1 ms of slack),
// "worst_wait_trace_s", "worst_bound_trace_s" (the violation with the
// largest wait / bound)}.
Json wait_bound_json(const std::vector<JobResult>& jobs, const std::vector<TraceTiming>& timeline,
                     double factor);

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
//   GPU time of a team = sum of GPUs x the time its jobs held them (terminal
//   - the last attempt's running event, plus each preempted attempt's run)
//   (wall), GPUs x trace duration of its jobs that succeeded (trace);
//   Jain's index over the teams' (wall) GPU times.
// And (issue 16, item 5):
//   jct_by_size: the JCT figures per job size bucket of submitted GPUs
//   ("1", "2-4", "5-8", ">8");
//   queueing_delay.max_s / max_trace_s: the longest wait;
//   gpu_allocation.while_waiting_fits: mean allocated/total over the samples
//   where work waits and fits: a GPU job is pending and some free GPU outside
//   any backfill hold fits one of its workers (AllocSample::usable_free > 0);
//   gpu_allocation.while_pending: over the samples where a GPU job is pending;
//   fair_share: Jain's index over the weight-adjusted GPUs in use of the
//   teams with pending work, averaged over the samples with >= 2 such teams
//   (min too);
//   reserved_idle: GPU-seconds of free GPUs held by a backfill hold, sum of
//   held_idle x the time to the next sample (wall; x speedup: `gpu_s_scaled`);
//   wait_bound: wait_bound_json with config.runtime_limit_factor (default 2);
//   preemption_loss: attempts that ended preempted and their GPUs x run time
//   (wall; x speedup: `gpu_s_scaled`; exact trace time under simulate).
Json replay_report(const std::vector<JobResult>& jobs, const std::vector<AllocSample>& samples,
                   double speedup, const RunInfo& info);

// "" when no job failed, else how many failed and the reasons of the first
// few ("3 job(s) failed: j-1: cannot execute 'x'; ..."), one line.
std::string failed_text(const std::vector<JobResult>& jobs, size_t shown = 3);

// Several replays of the same trace, one per policy (the first is the one
// compared, the second the baseline): {"mode": "replay_compare", "policies",
// "complete", "ratios": first / second for the average and p99 JCT and
// queueing delay, makespan, mean GPU allocation, Jain's index and mean
// fragmented GPUs (null where the baseline is 0), "runs": {policy: report}}.
Json compare_report(const std::vector<std::pair<std::string, Json>>& runs);

// A compare report as a table: one row per measure, one column per policy,
// and the ratio column.
std::string compare_table(const Json& compare);

// What a run of one policy or several prints: one run's report, else the
// compare report (its "mode" set to `mode` when given); JSON or a table.
std::string runs_text(const std::vector<std::pair<std::string, Json>>& runs, bool json,
                      const std::string& mode = {});

// The report as an aligned two-column table (nested objects flattened to
// dotted keys).
std::string report_table(const Json& report);

}  // namespace troupe::load

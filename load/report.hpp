// troupe-load's reports: the figures computed from the submissions' results
// (and, for replays, the GPU allocation samples) as JSON, and the same JSON
// rendered as a table for people. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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
  int64_t dropped = 0;    // messages the NATS client dropped (slow consumer)
};

// Load-run report: counts, per-state counts, submissions/s acknowledged,
// placements/s, submit->ack and submit->placed latency (ms), scheduler RSS.
//   submit_rate_per_s    = acknowledged / (last ack - first send)
//   placement_rate_per_s = placed / (last placement - first send)
// where "placed" is the first starting or running event of the job, and the
// latencies run from the moment the submit was published to the moment the
// reply or event arrived here.
Json load_report(const std::vector<JobResult>& jobs, const RunInfo& info);

// One troupe.sys.nodes sample: GPUs allocated and in total over alive nodes.
struct AllocSample {
  int64_t t_ns = 0;
  long long allocated = 0;
  long long total = 0;
};

// Replay report. Wall-clock figures (seconds) are also given scaled back to
// trace time ("*_trace_s" = wall x speedup):
//   JCT = terminal event - submit; queueing delay = first running event -
//   submit; makespan = last terminal event - first submit;
//   GPU allocation = mean of allocated/total over the samples taken between
//   the first submit and the last terminal event;
//   GPU time of a team = sum of GPUs x (terminal - first running) of its jobs;
//   Jain's index over the teams' GPU times.
Json replay_report(const std::vector<JobResult>& jobs, const std::vector<AllocSample>& samples,
                   double speedup, const RunInfo& info);

// The report as an aligned two-column table (nested objects flattened to
// dotted keys).
std::string report_table(const Json& report);

}  // namespace troupe::load

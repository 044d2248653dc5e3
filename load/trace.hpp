// GPU-cluster job traces for troupe-load replay: parsers for the four trace
// formats under /work/shared/traces (chronus, elasticflow, muri, tiresias),
// ordering, and the mapping of a job's GPU count onto Troupe job shapes. Pure
// (parsers read from a std::istream).
//
// Units (see each trace's README): chronus minutes; elasticflow and tiresias
// seconds; muri milliseconds. Only chronus has a tenant column (`user`, a
// Philly VC); for the others every job gets the default team (the caller uses
// the file's name, so several files merged become several teams).
#pragma once

#include <cstddef>
#include <istream>
#include <optional>
#include <string>
#include <vector>

namespace troupe::load {

enum class TraceFormat { chronus, elasticflow, muri, tiresias };

std::optional<TraceFormat> parse_trace_format(const std::string& name);
const char* trace_format_name(TraceFormat f);

struct TraceJob {
  std::string id;         // the trace's job id
  double arrival_s = 0;   // seconds from the trace start
  int gpus = 0;           // GPUs asked for (total)
  double duration_s = 0;  // run time in seconds
  std::string team;       // a valid subject token
};

struct TraceParse {
  std::vector<TraceJob> jobs;  // in file order
  size_t skipped = 0;          // rows dropped (0 GPUs, bad numbers)
  std::string error;           // set when the file cannot be read at all (bad header)
};

// Parses one trace file. Columns are found by name in the header line, so
// extra or reordered columns are fine. Rows with 0 GPUs (CPU-only jobs,
// about 0.6% of chronus), a negative duration or numbers that do not parse
// are skipped and counted. `default_team` is used when the format has no
// tenant column.
TraceParse parse_trace(std::istream& in, TraceFormat format, const std::string& default_team);

// Sorts by arrival (stable: file order among equal arrivals), shifts the
// arrivals so that the first job arrives at 0, then keeps the first `limit`
// jobs (0: all).
void order_trace(std::vector<TraceJob>& jobs, size_t limit);

// A subject-token team name from a file path: the file name without its
// extension, other characters replaced by '_' ("60_job.csv" -> "60_job").
std::string team_from_path(const std::string& path);

// How a job of `gpus` GPUs runs on nodes of `gpus_per_node`: up to one node
// it is one worker with `gpus`; beyond, a gang of ceil(gpus / gpus_per_node)
// workers with gpus_per_node each (so 12 GPUs on 8-GPU nodes take 2 x 8).
struct JobShape {
  int workers = 1;
  int gpus_per_worker = 0;
  int total_gpus() const { return workers * gpus_per_worker; }
};
JobShape shape_for(int gpus, int gpus_per_node);

}  // namespace troupe::load

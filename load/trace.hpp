// GPU-cluster job traces for troupe-load replay: parsers for the four trace
// formats under /work/shared/traces (chronus, elasticflow, muri, tiresias),
// ordering, and the mapping of a job's GPU count onto Troupe job shapes. Pure
// (parsers read from a std::istream).
//
// Units (see each trace's README): chronus minutes; elasticflow and tiresias
// seconds; muri milliseconds. Only chronus has a tenant column (`user`, a
// Philly VC); for the others every job gets the default team (the caller uses
// the file's name, so several files merged become several teams).
//
// The files are read as RFC 4180 CSV (CsvReader): quoted fields may hold
// commas, doubled quotes and line breaks; lines end in LF or CRLF. A row that
// cannot be read is counted and its line number kept, never dropped in
// silence.
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
  std::string id;        // the trace's job id
  double arrival_s = 0;  // seconds from the trace start
  // GPUs asked for (total), as the trace says: may be a fraction (a
  // `gpu_milli` column, or a fractional `num_gpu`). gpus_to_submit() gives
  // the whole GPUs a replay asks for.
  double gpus = 0;
  double duration_s = 0;  // run time in seconds (a lower bound when censored)
  std::string team;       // a valid subject token
  // Still running (or still waiting) when the trace ends: its true run time is
  // unknown. Replayed, but left out of the JCT figures.
  bool censored = false;
  // The GPU type the trace names (a `gpu_type` column), "" when none.
  std::string gpu_type;
  // The priority class the trace's priority column maps to (priority_class):
  // "high", "normal" or "low"; "" when the trace says nothing (the job asks
  // for the scheduler's default class).
  std::string priority;
  // Set by the replay's plan: the GPUs the job is submitted with after
  // rounding and gang mapping on the nodes it can use (0: not planned;
  // skip_idle then maps it onto its `gpus_per_node`).
  int submit_gpus = 0;
};

// The priority class of a trace row, from the value of one of its priority
// columns (docs/load.md, "Priority classes"). Every format: a `priority` or
// `qos` column (the first of the two the header has): the names high, normal
// and low (any case), and the aliases urgent/critical/guaranteed/prod (high),
// default/medium/standard/burstable (normal), best/best_effort/besteffort/
// preemptible/spot/scavenger (low); a whole number: above 0 high, 0 normal,
// below 0 low (muri's 0/1 `priority` flag: 1 high, 0 normal). chronus, when
// neither column is there: `job_type` strict (a hard deadline) high, soft
// (utility decays over deadlines) normal, best low; else `best_effort` 1 low,
// 0 normal. Returns "high", "normal" or "low"; "" for an empty value; nullopt
// for a value it does not know (the job then asks for the default class).
enum class PriorityColumn { generic, chronus_job_type, chronus_best_effort };
std::optional<std::string> priority_class(PriorityColumn column, const std::string& value);

// One record of an RFC 4180 CSV file.
struct CsvRecord {
  std::vector<std::string> fields;
  size_t line = 0;  // the physical line (1-based) the record starts on
  bool ok = true;   // false: a stray or unterminated quote
};

// Reads RFC 4180 records: fields separated by ',', a field in double quotes
// may hold ',', line breaks and '""' (one '"'); records end in LF, CRLF or a
// lone CR; the last line needs no line end. A quote inside an unquoted field,
// text after a closing quote, or a quote left open at the end of the input
// makes the record not `ok` (it still ends at the next line end outside
// quotes, so the following records are read).
class CsvReader {
 public:
  explicit CsvReader(std::istream& in) : in_(in) {}
  // The next record; false at the end of the input. An empty line is a
  // record of one empty field.
  bool next(CsvRecord& out);

 private:
  std::istream& in_;
  size_t line_ = 1;
};

struct TraceParse {
  std::vector<TraceJob> jobs;     // in file order
  size_t skipped = 0;             // rows dropped: zero_gpu + bad
  size_t zero_gpu = 0;            // rows with 0 GPUs (CPU-only jobs)
  size_t bad = 0;                 // rows that cannot be read (see parse_trace)
  std::vector<size_t> bad_lines;  // the first kBadLinesKept of them (line numbers, header = 1)
  size_t censored = 0;            // jobs kept with `censored` set
  // The header column the priority classes come from ("" when none), and the
  // jobs whose value there is not one priority_class knows (they ask for the
  // default class).
  std::string priority_column;
  size_t priority_unknown = 0;
  std::string error;  // set when the file cannot be read at all (bad header)
};
inline constexpr size_t kBadLinesKept = 5;

// Parses one trace file. Columns are found by name in the header line (spaces
// around names ignored), so extra or reordered columns are fine.
// - GPUs: the format's `num_gpu`; when the header has a `gpu_milli` column,
//   gpus = gpu_milli / 1000 x num_gpu (x 1 when there is no num_gpu column).
//   Fractions are kept. Rows with 0 GPUs (CPU-only jobs, about 0.6% of
//   chronus) are skipped and counted as `zero_gpu`.
// - Censored jobs: a row whose duration is missing (empty, "nan", "none",
//   "null", "na", "n/a" or "-"), whose `end_time`/`finish_time`/`end` column
//   (when the header has one) is missing or not a number, or whose
//   `status`/`state`/`job_status` column says running, pending, queued,
//   waiting or unfinished (any case). Its duration, when missing, becomes the
//   end of the trace (the latest arrival + duration of the file's rows) minus
//   its arrival; a duration given stays (what it had run so far).
// - Bad rows, counted and not replayed: a record that is not RFC 4180 (a
//   stray or open quote), a field count different from the header's, an
//   arrival, duration or GPU count that is not a number, a negative duration
//   or arrival, a negative GPU count or one above 10^6.
// - GPU type: a `gpu_type` column (any format; none of the shared traces has
//   one) gives TraceJob::gpu_type, trimmed.
// - Priority: TraceJob::priority from priority_class, on the column it names.
// `default_team` is used when the format has no tenant column.
TraceParse parse_trace(std::istream& in, TraceFormat format, const std::string& default_team);

// The whole GPUs a replay asks for a job of `gpus` (until Troupe shares GPUs):
// 0 for 0 (or less); a fraction below 1 becomes 1; above 1 it rounds up
// (2.5 -> 3). A count within 10^-6 of a whole number is that number.
int gpus_to_submit(double gpus);
// gpus_to_submit(gpus) differs from `gpus` (the job was rounded).
bool gpus_rounded(double gpus);

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

// One group of a replay's simulated fleet: `nodes` nodes of `gpus_per_node`
// GPUs of type `gpu_type` (one troupe-node --simulate --count process).
struct FleetGroup {
  std::string gpu_type;
  int nodes = 0;
  int gpus_per_node = 0;
  bool operator==(const FleetGroup& o) const {
    return gpu_type == o.gpu_type && nodes == o.nodes && gpus_per_node == o.gpus_per_node;
  }
};
// Totals over a fleet's groups.
long long fleet_nodes(const std::vector<FleetGroup>& fleet);
long long fleet_gpus(const std::vector<FleetGroup>& fleet);

// How a job of `gpus` whole GPUs runs on `fleet`. A job of GPU type
// `job_type` (or, when that is "", of `untyped_type` when that is not "")
// runs on the group of that type, shaped by shape_for on its GPUs per node;
// it fits when the gang needs at most the group's nodes, and `type_missing`
// when no group has that type. A job of no type asks for none; it is shaped
// for the group with the most GPUs per node among those with enough nodes
// for it (the first such group on a tie), and fits when there is one.
// `gpu_type` is the type to ask for ("" for any).
struct FleetFit {
  bool fits = false;
  bool type_missing = false;
  JobShape shape;
  std::string gpu_type;
};
FleetFit fit_on_fleet(int gpus, const std::string& job_type, const std::string& untyped_type,
                      const std::vector<FleetGroup>& fleet);

// --skip-idle: after order_trace (sorted, first arrival 0), shortens every
// idle stretch longer than `max_gap_s` of trace time to `max_gap_s`, by
// moving every later arrival earlier. A stretch is idle from the moment the
// jobs arrived so far are surely not all done, to the next arrival: that
// moment is the later of (a) the latest arrival + duration so far (each job
// started at once) and (b) when a fluid fleet of `fleet_gpus` GPUs would have
// drained their GPU-seconds (each job's gpus_to_submit() x duration, summed
// and drained at fleet_gpus per second from each arrival). Both are lower
// bounds on when a real schedule is done, so at most `max_gap_s` of each
// stretch is kept as a margin. Returns how many stretches were shortened and
// the trace seconds removed. Nothing changes when max_gap_s < 0.
struct IdleSkip {
  size_t gaps = 0;
  double removed_s = 0;
};
IdleSkip skip_idle(std::vector<TraceJob>& jobs, double max_gap_s, double fleet_gpus,
                   int gpus_per_node);

}  // namespace troupe::load

// The fault-injection audit: what the event stream alone says about a run.
//
// Pure code (no NATS, no processes): it takes the job events as they are
// stored in the TROUPE_EVENTS stream (JSON JobEvent, messages/job_spec.proto,
// in stream order), the acknowledged job ids with their worker counts, and
// returns five figures with the offending details:
//
//  1. terminal:  every acknowledged job reached exactly one terminal state
//                (succeeded, failed or canceled; names::is_terminal).
//  2. attempts:  no job ran two attempts at once.
//  3. gpus:      no (node, GPU index) was held by two jobs at a time.
//  4. gangs:     no gang ran partially.
//  5. dependencies: no job with upstream jobs (JobInfo::after, depends_on with
//                the default `on`: succeeded) started before each of them
//                succeeded; one whose upstream never succeeded never started.
//
// Holding, from events alone: attempt k of a job holds the (node, gpu) pairs
// of its workers from its first `starting` or `running` event until the
// job's next event that is neither `starting` nor `running` and whose attempt
// is >= k. (The JobActor ends an attempt with `preempted` or a terminal state
// carrying attempt k, or with `queued` already carrying attempt k + 1 when it
// requeues; GPUs are released only after that event is on the bus, see
// docs/architecture.md "Placement", step 7.)
//
// Re-emissions. A restarted scheduler may publish again an event it had
// already published (same job, attempt and state). Such an identical event is
// not a violation: a second `running` of an attempt that already holds its
// GPUs changes nothing, and a second terminal event with the same state,
// attempt and exit code is still "one terminal state" (it is counted as a
// re-emission). A terminal event with another state, or with the same state
// for another attempt or exit code, is a violation; so is any `starting` or
// `running` after the job's first terminal event (the job left its terminal
// state). Other non-terminal events after a terminal one (`queued`,
// `preempted`) are reported the same way.
//
// Event numbers. When events carry JobEvent.seq (the job's event number),
// the audit also reports, as context (not one of the four figures), numbers
// missing from the stream and a number stored twice with different content.
//
// Gangs. A `running` (or `starting`) event of a job with W workers must list
// ranks 0..W-1, each exactly once, each on a node with at least one GPU (or
// exactly the requested GPUs per worker when known); a `running` event must
// place every rank on the node and GPUs its attempt's `starting` event gave
// it. Anything else is a partial gang. (W comes from the acknowledged spec;
// for jobs the audit was not told about, from the largest worker list seen.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace troupe::fault {

struct Worker {
  int rank = 0;
  std::string node;
  std::vector<int> gpus;
};

// One JobEvent, with its position in the stream.
struct JobEvent {
  uint64_t seq = 0;  // stream order (or arrival order); audit_json orders by ts_ms, then this
  std::string job_id;
  std::string team;
  std::string state;
  int attempt = 0;
  int64_t ts_ms = 0;
  std::vector<Worker> workers;
  std::optional<int> exit_code;
  std::string reason;
  std::string cause;
  int64_t job_seq = 0;  // JobEvent.seq: the job's event number (1, 2, ...); 0 when absent
};

// Parses one stored event (protobuf JSON of JobEvent: int64 fields may be
// strings). nullopt, with `error` set, when it is not a JobEvent with a job_id
// and a state.
std::optional<JobEvent> parse_event(const std::string& json, uint64_t seq, std::string* error);

// What the submitter knows about an acknowledged job.
struct JobInfo {
  JobInfo(int w = 1, int g = 0, std::vector<std::string> up = {})
      : workers(w), gpus_per_worker(g), after(std::move(up)) {}
  int workers;                     // W: 1 for a single job, > 1 for a gang
  int gpus_per_worker;             // 0: not checked
  std::vector<std::string> after;  // upstream jobs that must succeed before it starts
};

struct Violation {
  std::string job_id;
  uint64_t seq = 0;  // the event where it showed (0: at the end of the stream)
  std::string what;
};

struct AuditReport {
  // Figure 1: acknowledged jobs with exactly one terminal state, of all acknowledged.
  size_t acknowledged = 0;
  size_t terminal_once = 0;
  std::vector<Violation> terminal;  // missing, conflicting, left the terminal state
  size_t missing_terminal = 0;      // ... of which: no terminal event at all (yet)
  // Figure 2: jobs that ran two attempts at once.
  size_t overlapping_jobs = 0;
  std::vector<Violation> overlaps;
  // Figure 3: times a job took a (node, GPU) another job held; distinct GPUs involved.
  size_t gpu_clashes = 0;
  size_t gpus_clashed = 0;
  std::vector<Violation> clashes;
  // Figure 4: gangs (jobs with W > 1) that ran partially, of all gangs; jobs
  // of one worker whose start event did not place it are listed too.
  size_t gangs = 0;
  size_t partial_gangs = 0;
  size_t partial_singles = 0;
  std::vector<Violation> partials;
  // Figure 5: acknowledged jobs with upstream jobs that started before each
  // of them succeeded, of all such jobs.
  size_t dependents = 0;
  size_t early_dependents = 0;
  std::vector<Violation> early;

  // Context.
  size_t events = 0;
  size_t malformed = 0;                  // events that could not be audited (see `problems`)
  size_t jobs_seen = 0;                  // distinct job ids in the events
  size_t unacknowledged_jobs = 0;        // in the events, not acknowledged
  size_t unacknowledged_unfinished = 0;  // ... that never reached a terminal state
  size_t attempts_started = 0;           // (job, attempt) pairs that started
  size_t reemitted_terminal = 0;         // identical terminal re-emissions
  size_t reemitted_other = 0;            // identical non-terminal re-emissions
  size_t max_gpus_held = 0;              // most GPUs held at once (concurrency)
  // From JobEvent.seq (when the events carry it): numbers the stream lacks
  // (a job's seq jumps), and one number stored twice with different content.
  size_t seq_gaps = 0;
  size_t seq_conflicts = 0;
  std::vector<Violation> seq_issues;
  std::map<std::string, size_t> by_state;         // events per state
  std::map<std::string, size_t> terminal_states;  // acknowledged jobs by final state
  std::vector<std::string> problems;              // malformed input, one line each

  size_t terminal_violations() const { return acknowledged - terminal_once; }
  // All five properties hold (and every event could be read).
  bool ok() const {
    return terminal_once == acknowledged && overlapping_jobs == 0 && gpu_clashes == 0 &&
           partial_gangs == 0 && partial_singles == 0 && early_dependents == 0 && malformed == 0;
  }
  // The five figures on one line.
  std::string figures() const;
  // Figures, context and up to `max_each` offending details per property.
  std::string describe(size_t max_each = 20) const;
};

// Audits `events` (in stream order) against the acknowledged jobs.
AuditReport audit(const std::vector<JobEvent>& events,
                  const std::map<std::string, JobInfo>& acknowledged);

// The same from stored JSON texts, in stream order (seq = index + 1).
AuditReport audit_json(const std::vector<std::string>& events,
                       const std::map<std::string, JobInfo>& acknowledged);

}  // namespace troupe::fault

// The demo `troupe up` runs on a fresh local cluster: which jobs it submits,
// what each should end as, and the summary it prints. Pure (the run loop is
// in up.cpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "job_spec.pb.h"

namespace troupe::gateway {

struct DemoJob {
  pb::JobSpec spec;
  std::string expect_state;        // terminal state it must reach
  std::optional<int> expect_exit;  // exit code it must report, when set
  // Depends on the demo job at this index (its id filled in at submit),
  // ending as `after_on` says (depends_on).
  std::optional<size_t> after;
  std::string after_on;
  // A member of the demo's pipeline (submitted together, all or none), after
  // its siblings of these names (depends_on by name).
  bool in_pipeline = false;
  std::vector<std::string> needs;
};

// The demo's pipeline (its members, in `jobs` order) as one pipeline
// request body for `team` (their team): {"name","idempotency_key","jobs"}.
std::string demo_pipeline_request(const std::vector<DemoJob>& jobs, const std::string& run_tag);

// The demo jobs for a cluster of two 4-GPU `gpu_type` nodes: every kind, a
// 2-worker gang of 4 GPUs each (takes both nodes, so the others queue behind
// it), a CPU-only job, one that exits 3 on purpose, and two that depend on
// others (one on a success, one on that failure), a 2 x 2 sweep and a
// two-job pipeline (prep-data, then train-small). `run_tag` makes the
// idempotency keys unique to this run.
std::vector<DemoJob> demo_jobs(const std::string& gpu_type, const std::string& run_tag);

// What went wrong: one line per job that ended otherwise than expected (or is
// missing from `views`, matched by position). Empty when the demo behaved.
std::vector<std::string> demo_problems(const std::vector<DemoJob>& jobs,
                                       const std::vector<pb::JobView>& views);

// Counts per state, then one row per job: ID NAME KIND STATE EXIT DURATION.
std::string demo_summary(const std::vector<pb::JobView>& views);

}  // namespace troupe::gateway

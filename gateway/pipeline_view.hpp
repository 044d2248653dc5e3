// `troupe pipeline submit|status|cancel` and `troupe jobs --pipeline|--label`,
// the pure half (docs/api.md, "Pipelines"): the pipeline file, the request
// and its reply, the jobs request's filters, a pipeline's state and its
// table. No NATS, no clock: unit-tested in tests/unit/gateway_pipeline_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "job_spec.pb.h"

namespace troupe::gateway {

// A pipeline file (YAML, or JSON when it starts with '{'): `name`, `team`,
// `idempotency_key` and `jobs` (job specs; a member names a sibling it
// depends on by `depends_on: [{name: N}]`). Read with the job spec's schema
// (spec::parse_text), so a member reads as `troupe submit` reads a spec file.
struct PipelineFile {
  bool ok = false;
  pb::Pipeline pipeline;
  std::string error;  // what is wrong, as a user reads it
};
PipelineFile parse_pipeline_file(std::string_view text);

// The pipeline's team: `flag` (--team), else the file's `team:`, else its
// first job's `team:`. Returns "" and sets `team`, or what is wrong: no team
// anywhere, or a member of another team than the pipeline's.
std::string pipeline_team(const std::string& flag, const pb::Pipeline& p, std::string* team);

// The body of troupe.<team>.pipeline: the pipeline with `team` set, zeros
// and empty fields left out.
std::string pipeline_request(const pb::Pipeline& p, const std::string& team);

// The reply: the pipeline id and each member's job id, in dependency order;
// or the scheduler's error (`error` "<code>: <text>", `code` alone too).
struct PipelineMember {
  std::string name;
  std::string job_id;
};
struct PipelineReply {
  std::string pipeline_id;
  std::vector<PipelineMember> jobs;
  std::string error;
  std::string code;
};
PipelineReply parse_pipeline_reply(std::string_view body);

// `troupe pipeline submit`: the pipeline id on its own line, then one line
// per job: its name and job id, the names padded to one width.
std::string pipeline_submit_text(const PipelineReply& r);

// The filters of troupe.<team>.jobs / troupe.sys.jobs besides paging: a job
// state, a pipeline id, a label "key=value" (each "" for none).
struct JobsFilter {
  std::string state;
  std::string pipeline;
  std::string label;
  std::string schedule;  // its runs (the scheduler reads it as a label)
  std::string cluster;   // at a front door: only its jobs in this cluster
};
// `{"limit","after","state","pipeline","label","schedule"}` (limit 0 and
// empty fields left out: the scheduler's defaults; it refuses more than one
// of pipeline, label and schedule).
std::string jobs_filter_request(int64_t limit, const std::string& after, const JobsFilter& f);

// "" when `label` reads "key=value" (a key before the first '='), else the
// error for `--label`.
std::string check_label_filter(const std::string& label);

// The jobs of `list` that carry the label troupe.pipeline = `pipeline_id`,
// in the list's order (the scheduler's: submit order, upstream first).
std::vector<pb::JobView> pipeline_members(const pb::JobList& list, const std::string& pipeline_id);

// A pipeline's state from its jobs' states: succeeded when every job
// succeeded; failed when any failed or was canceled; running when any is
// starting or running; pending otherwise (blocked, queued, placing). No
// jobs: "".
std::string pipeline_state(const std::vector<std::string>& states);

// Whether a job ended canceled because a job it depended on cannot end as
// it needs (cause dependency_failed; its reason names the upstream job).
bool dependency_failed(const pb::JobView& j);

// `troupe pipeline status`: NAME JOB STATE REASON, one row per job in the
// given order (the reason of a job that ended failed or canceled: the
// upstream job for dependency_failed ones), then a blank line and
// "pipeline <id>: <state> (<n> jobs: <count> <state>, ...)" with the counts
// in the order of the job states.
std::string pipeline_status_text(const std::string& pipeline_id,
                                 const std::vector<pb::JobView>& jobs);
// The same as JSON: {"pipeline_id","state","counts":{state: n},"jobs":[JobView]}
// (counts in the order of the states).
std::string pipeline_status_json(const std::string& pipeline_id,
                                 const std::vector<pb::JobView>& jobs);

// `troupe pipeline cancel`: the jobs not ended yet, last first (downstream
// before upstream, so each ends canceled by request, not dependency_failed).
std::vector<pb::JobView> cancel_order(const std::vector<pb::JobView>& jobs);

}  // namespace troupe::gateway

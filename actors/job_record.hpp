// Pure helpers over a job's record (pb::JobRecord): its edge views (JobView,
// JobEvent) and its placement request. No actors here.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "actors/policy/arrays.hpp"
#include "actors/policy/placement.hpp"
#include "actors/policy/queue_order.hpp"
#include "job_spec.pb.h"
#include "messages/event_json.hpp"
#include "records.pb.h"

namespace troupe {

pb::JobView job_view(const pb::JobRecord& r);
// A purged job's view rebuilt from its stored events (JobEvent JSON, stream
// order): team, name, kind, the newest state, attempt, placement, exit code
// and reason, submit/start/end times; `purged` set. nullopt when no event of
// `job_id` reads.
std::optional<pb::JobView> view_from_events(const std::string& job_id,
                                            const std::vector<std::string>& events);
pb::JobEvent job_event(const pb::JobRecord& r, int64_t now_ms);
// The event the record's last state change announced (its seq, time and cause).
pb::JobEvent last_event(const pb::JobRecord& r);
// What one worker of the job needs (its pool is the record's, set by the caller).
policy::PlacementRequest placement_request(const pb::JobSpec& s);
int worker_count(const pb::JobSpec& s);
// Port for the rank-0 coordinator of a gang (stable per job).
int coordinator_port(const std::string& job_id);
using spec::rfc3339;  // (messages/event_json.hpp)

// Arrays and sweeps (policy/arrays.hpp): the grid of a sweep spec (empty for
// an array), and task `index` of an array's record as a new job's record
// (state ""): the array's spec and admission, its own id, env and label.
policy::arrays::Grid grid_of(const pb::JobSpec& s);
pb::JobRecord task_record(const pb::JobRecord& array, int index, int64_t now_ms);
// How many of the team's max_queued_jobs the record holds: 1 for a job not
// started yet, an array's tasks not started yet, else 0.
int queued_slots(const pb::JobRecord& r);
// The nodes whose agents may have made the job's checkpoint dir (every
// attempt's nodes, the current placement's too), each once, sorted; none
// when the job has no checkpoint dir. A forgotten job's dir is removed by
// their agents (wire::Forget).
std::vector<std::string> checkpoint_nodes(const pb::JobRecord& r);

}  // namespace troupe

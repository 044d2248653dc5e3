#include "actors/job_record.hpp"

#include <algorithm>
#include <charconv>
#include <ctime>
#include <functional>
#include <nlohmann/json.hpp>

#include "actors/policy/admission.hpp"
#include "messages/event_json.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"

namespace troupe {

int worker_count(const pb::JobSpec& s) {
  return s.has_workers() ? s.workers() : 1;
}

policy::PlacementRequest placement_request(const pb::JobSpec& s) {
  policy::PlacementRequest r;
  r.gpus = s.resources().gpus();
  r.gpu_type = s.resources().gpu_type();
  r.cpus = s.resources().cpus();
  r.memory_mb = s.resources().memory_mb();
  r.workers = worker_count(s);
  r.image = s.image();
  r.gpu_memory_mb = s.resources().gpu_memory_mb();
  r.share_key = s.team();  // ticket_of widens it to "*" where the pool shares across teams
  return r;
}

pb::JobView job_view(const pb::JobRecord& r) {
  pb::JobView v;
  v.set_job_id(r.job_id());
  v.set_team(r.spec().team());
  v.set_name(r.spec().name());
  v.set_kind(r.spec().kind());
  v.set_state(r.state());
  v.set_attempt(r.attempt());
  v.set_gpus(r.spec().resources().gpus());
  v.set_workers(worker_count(r.spec()));
  *v.mutable_placement() = r.placement();
  v.set_submit_ms(r.submit_ms());
  v.set_start_ms(r.start_ms());
  v.set_end_ms(r.end_ms());
  if (r.has_exit_code()) v.set_exit_code(r.exit_code());
  v.set_reason(r.reason());
  v.set_priority(r.spec().priority());
  v.set_gpu_type(r.spec().resources().gpu_type());
  v.set_pool(r.pool());
  v.set_borrowed(r.borrowed());
  *v.mutable_attempts() = r.attempts();
  v.set_retries_used(r.retries_used());
  v.set_infra_requeues(r.infra_requeues());
  v.set_preemptions(r.preempted_ms_size());
  v.set_last_checkpoint(r.last_checkpoint());
  v.set_last_checkpoint_ms(r.last_checkpoint_ms());
  *v.mutable_depends_on() = r.spec().depends_on();
  *v.mutable_labels() = r.spec().labels();
  if (spec::is_array(r.spec())) {
    // Started tasks count as queued here; the job supervisor, which sees
    // their records, tells queued from running (and lists the tasks).
    auto* a = v.mutable_array();
    auto c = policy::arrays::count(r.array_tasks());
    a->set_count(static_cast<int32_t>(r.array_tasks().size()));
    a->set_parallelism(spec::array_parallelism(r.spec()));
    a->set_queued(c.pending + c.started);
    a->set_succeeded(c.succeeded);
    a->set_failed(c.failed);
    a->set_canceled(c.canceled);
    if (auto end = policy::arrays::end_of(c, r.cancel_requested());
        end && names::is_terminal(r.state()))
      a->set_outcome(end->outcome);
  }
  return v;
}

std::optional<pb::JobView> view_from_events(const std::string& job_id,
                                            const std::vector<std::string>& events) {
  std::optional<pb::JobView> v;
  for (const auto& json : events) {
    pb::JobEvent e;
    if (!spec::read_event_json(json, &e) || e.job_id() != job_id || e.state().empty()) continue;
    if (!v) {
      v.emplace();
      v->set_job_id(job_id);
      v->set_submit_ms(e.ts_ms());
      v->set_purged(true);
    }
    if (!e.team().empty()) v->set_team(e.team());
    if (!e.name().empty()) v->set_name(e.name());
    if (!e.kind().empty()) v->set_kind(e.kind());
    if (e.attempt() != v->attempt()) {  // a new attempt: its own start and placement
      v->set_start_ms(0);
      v->clear_placement();
    }
    v->set_state(e.state());
    v->set_attempt(e.attempt());
    if (e.workers_size() > 0) *v->mutable_placement() = e.workers();
    if (e.state() == names::kRunning && v->start_ms() == 0) v->set_start_ms(e.ts_ms());
    if (names::is_terminal(e.state())) v->set_end_ms(e.ts_ms());
    if (e.has_exit_code()) v->set_exit_code(e.exit_code());
    if (!e.reason().empty()) v->set_reason(e.reason());
  }
  return v;
}

pb::JobEvent job_event(const pb::JobRecord& r, int64_t now) {
  pb::JobEvent e;
  e.set_job_id(r.job_id());
  e.set_team(r.spec().team());
  e.set_state(r.state());
  e.set_attempt(r.attempt());
  e.set_ts_ms(now);
  e.set_ts(rfc3339(now));
  *e.mutable_workers() = r.placement();
  if (r.has_exit_code()) e.set_exit_code(r.exit_code());
  e.set_reason(r.reason());
  e.set_name(r.spec().name());
  e.set_kind(r.spec().kind());
  e.set_seq(r.event_seq());
  if (spec::is_array(r.spec())) e.set_tasks(static_cast<int32_t>(r.array_tasks().size()));
  return e;
}

pb::JobEvent last_event(const pb::JobRecord& r) {
  auto e = job_event(r, r.event_ts_ms());
  e.set_cause(r.event_cause());
  return e;
}

policy::arrays::Grid grid_of(const pb::JobSpec& s) {
  policy::arrays::Grid g;
  for (const auto& [name, list] : s.sweep().params()) {
    std::vector<policy::arrays::Value> values;
    for (const auto& v : list.values()) {
      policy::arrays::Value x;
      switch (v.kind_case()) {
        case google::protobuf::Value::kNumberValue: {
          char buf[64];
          auto res = std::to_chars(buf, buf + sizeof buf, v.number_value());
          x.text.assign(buf, res.ptr);
          x.json = x.text;
          break;
        }
        case google::protobuf::Value::kBoolValue:
          x.text = v.bool_value() ? "true" : "false";
          x.json = x.text;
          break;
        default:
          x.text = v.string_value();
          x.json = nlohmann::json(v.string_value()).dump();
          break;
      }
      values.push_back(std::move(x));
    }
    g.emplace_back(name, std::move(values));
  }
  std::sort(g.begin(), g.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return g;
}

pb::JobRecord task_record(const pb::JobRecord& array, int index, int64_t now_ms) {
  namespace arr = policy::arrays;
  pb::JobRecord t;
  *t.mutable_spec() = array.spec();
  auto& s = *t.mutable_spec();
  auto grid = s.has_sweep() ? grid_of(s) : arr::Grid{};
  s.clear_array();
  s.clear_sweep();
  s.clear_idempotency_key();  // the array's; each task is its own job
  s.clear_depends_on();       // met by the array already
  t.set_job_id(arr::task_id(array.job_id(), index));
  (*s.mutable_labels())[arr::kArrayLabel] = array.job_id();
  auto& env = *s.mutable_env();
  env[arr::kArrayIdEnv] = array.job_id();
  env[arr::kIndexEnv] = std::to_string(index);
  env[arr::kCountEnv] = std::to_string(array.array_tasks().size());
  if (!grid.empty()) {
    auto p = arr::point(grid, index);
    for (const auto& [name, v] : p) env[arr::param_env(name)] = v.text;
    env[arr::kParamsEnv] = arr::point_json(p);
  }
  t.set_seq(array.seq());
  t.set_submit_ms(now_ms);
  t.set_pool(array.pools_size() > 0 ? array.pools(0) : array.pool());
  *t.mutable_pools() = array.pools();
  t.set_priority_value(array.priority_value());
  t.set_preemptible(array.preemptible());
  t.set_infra_cap(array.infra_cap());
  if (array.has_run_as()) t.set_run_as(array.run_as());
  *t.mutable_las_thresholds_gpu_s() = array.las_thresholds_gpu_s();
  t.set_las_promote_after_s(array.las_promote_after_s());
  t.set_sjf_band(array.sjf_band());
  t.set_sjf_promote_after_s(array.sjf_promote_after_s());
  t.set_share_across_teams(array.share_across_teams());
  t.set_default_memory_mb(array.default_memory_mb());
  t.set_max_grace_s(array.max_grace_s());
  if (!array.checkpoint_dir().empty())
    t.set_checkpoint_dir(array.checkpoint_dir() + "/" + std::to_string(index));
  return t;
}

int queued_slots(const pb::JobRecord& r) {
  if (names::is_terminal(r.state())) return 0;
  if (spec::is_array(r.spec())) {
    auto n = r.array_tasks().empty() ? spec::array_tasks(r.spec())
                                     : policy::arrays::count(r.array_tasks()).pending;
    return static_cast<int>(n);
  }
  return policy::awaiting_first_start(r.state(), r.attempts_size()) ? 1 : 0;
}

std::vector<std::string> checkpoint_nodes(const pb::JobRecord& r) {
  std::vector<std::string> out;
  if (r.checkpoint_dir().empty()) return out;
  for (const auto& a : r.attempts())
    for (const auto& n : a.nodes()) out.push_back(n);
  for (const auto& w : r.placement()) out.push_back(w.node());
  out.erase(std::remove(out.begin(), out.end(), std::string()), out.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

int coordinator_port(const std::string& job_id) {
  return 29500 + static_cast<int>(std::hash<std::string>{}(job_id) % 500);
}

}  // namespace troupe

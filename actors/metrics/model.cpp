// The pure half of the scheduler's metrics (see model.hpp): the
// series table, cause labels, the event tracker and the reply readers.
#include "actors/metrics/model.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>

#include "messages/json_text.hpp"
#include "messages/names.hpp"

namespace troupe::metrics {

namespace {

const std::vector<double> kWaitBuckets = {0.01, 0.05, 0.1, 0.25, 0.5,  1,    2.5,  5,     10,   30,
                                          60,   120,  300, 600,  1800, 3600, 7200, 21600, 86400};
const std::vector<double> kPlacementBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,  1,
                                               2.5,   5,    10,    30,   60,  300,  1800, 3600};

SeriesInfo gauge(std::string name, std::vector<std::string> labels, std::string help) {
  return {std::move(name), Type::kGauge, std::move(labels), std::move(help), {}};
}
SeriesInfo counter(std::string name, std::vector<std::string> labels, std::string help) {
  return {std::move(name), Type::kCounter, std::move(labels), std::move(help), {}};
}
SeriesInfo histogram(std::string name, std::vector<std::string> labels, std::string help,
                     std::vector<double> buckets) {
  return {std::move(name), Type::kHistogram, std::move(labels), std::move(help),
          std::move(buckets)};
}

bool starts_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}

// Drops a leading "retry N of M after: " and "rank N ".
std::string_view core_reason(std::string_view r) {
  if (starts_with(r, "retry ")) {
    auto at = r.find(" after: ");
    if (at != std::string_view::npos) r.remove_prefix(at + 8);
  }
  if (starts_with(r, "rank ")) {
    size_t i = 5;
    while (i < r.size() && std::isdigit(static_cast<unsigned char>(r[i]))) ++i;
    if (i > 5 && i < r.size() && r[i] == ' ') r.remove_prefix(i + 1);
  }
  return r;
}

bool contains(std::string_view s, std::string_view p) {
  return s.find(p) != std::string_view::npos;
}

int int_of(const Json& j, const char* key) {
  return static_cast<int>(num(j, key));
}

std::string str_of(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

const std::vector<SeriesInfo>& scheduler_series() {
  static const std::vector<SeriesInfo> table = {
      // Capacity (troupe.sys.nodes, troupe.sys.queues), per pool and GPU type.
      gauge("troupe_gpus_capacity", {"pool", "gpu_type"}, "GPUs on alive nodes."),
      gauge("troupe_gpus_allocated", {"pool", "gpu_type"}, "GPUs allocated to running work."),
      gauge("troupe_gpus_reserved", {"pool", "gpu_type"},
            "GPUs reserved under a lease while a placement is negotiated."),
      gauge("troupe_gpus_free", {"pool", "gpu_type"}, "GPUs neither allocated nor reserved."),
      gauge("troupe_gpus_held_idle", {"pool", "gpu_type"},
            "Free GPUs on nodes held by a backfill reservation for a large job."),
      gauge("troupe_gpus_fragmented", {"pool", "gpu_type"},
            "Free GPUs (outside holds) on which no pending GPU job's worker fits; 0 when "
            "nothing with GPUs is pending."),
      gauge("troupe_gpu_memory_allocated_bytes", {"pool", "gpu_type"},
            "GPU memory that shared jobs (resources.gpu_memory_mb) hold, on alive nodes."),
      gauge("troupe_gpu_memory_stranded_bytes", {"pool", "gpu_type"},
            "Memory left free on GPUs that shared jobs use part of: no whole-GPU job can use "
            "it (the fragmentation shared placement keeps low)."),
      gauge("troupe_gpu_allocation_ratio", {}, "Allocated GPUs / GPUs on alive nodes (0..1)."),
      gauge("troupe_nodes", {"state"}, "Nodes known to the scheduler, alive or dead."),
      gauge("troupe_workers_running", {}, "Workers the node agents report running."),
      // Queues and fair share (troupe.sys.queues), per team and pool.
      gauge("troupe_queue_jobs", {"team", "pool"}, "Jobs waiting in the team's queue."),
      gauge("troupe_queue_pending_gpus", {"team", "pool"}, "GPUs the team's waiting jobs ask for."),
      gauge("troupe_queue_flexible_jobs", {"team", "pool"},
            "Of troupe_queue_jobs, any-type jobs (counted in their first candidate pool only)."),
      gauge("troupe_team_gpus_in_use", {"team", "pool"}, "GPUs the team's running work holds."),
      gauge("troupe_team_gpus_borrowed", {"team", "pool"},
            "GPUs the team holds beyond its guarantee."),
      gauge("troupe_team_gpus_guaranteed", {"team", "pool"}, "The team's guaranteed GPUs."),
      gauge("troupe_team_weight", {"team", "pool"}, "The team's fair-share weight."),
      gauge("troupe_team_dominant_share", {"team", "pool"},
            "The team's DRF dominant share of the pool (0..1)."),
      gauge("troupe_team_weighted_share", {"team", "pool"},
            "Dominant share divided by weight: the fair-share order key."),
      // Cumulative scheduler values (troupe.sys.queues, troupe.sys.stats).
      counter("troupe_reserved_idle_gpu_seconds_total", {},
              "GPU-seconds left idle on nodes held by backfill reservations."),
      counter("troupe_grants_total", {}, "Placements granted by the pool arbiter."),
      counter("troupe_preemptions_total", {},
              "Jobs preempted (stopped to free GPUs for a more important job), as the pool "
              "arbiter counts them."),
      counter("troupe_reclaims_total", {},
              "Of the preemptions: jobs of borrowed GPUs stopped so that a team below its "
              "guarantee gets it back (not counted against the preemption budget)."),
      counter("troupe_preemption_lost_gpu_seconds_total", {},
              "GPU-seconds of work the preempted jobs lost (since their last checkpoint), as the "
              "pool arbiter estimates it when it chooses them."),
      counter("troupe_submissions_total", {"result"},
              "Submissions by result: accepted, rejected, duplicate, intake_error."),
      counter("troupe_bus_messages_total", {"direction"},
              "NATS messages the scheduler received (in) and published (out)."),
      counter("troupe_bus_malformed_messages_total", {}, "Messages the scheduler could not parse."),
      counter("troupe_actor_restarts_total", {"actor"},
              "Crashed actors restarted by their supervisor (job, queue, node, gang)."),
      counter("troupe_snapshot_writes_total", {"result"},
              "Actor snapshots written to the KV bucket TROUPE_STATE: ok, error (NATS away: "
              "written again with the next flush), conflict (another scheduler wrote: deposed)."),
      counter("troupe_events_republished_total", {},
              "Job events the TROUPE_EVENTS stream did not acknowledge, published again."),
      // Job events (troupe.*.events.>).
      histogram("troupe_queue_wait_seconds", {"team", "kind"},
                "Per attempt: from its queued event to its first running event.", kWaitBuckets),
      histogram("troupe_placement_latency_seconds", {"kind"},
                "From submission (queued, attempt 1) to the launch decision (starting).",
                kPlacementBuckets),
      histogram(
          "troupe_guarantee_restore_seconds", {"team", "pool"},
          "From a team being below its guarantee with work waiting in a pool to its "
          "being back at it (the scheduler's pool arbiter measures it).",
          std::vector<double>(names::kRestoreBucketsS.begin(), names::kRestoreBucketsS.end())),
      counter("troupe_jobs_finished_total", {"team", "kind", "state", "cause"},
              "Jobs that reached a terminal state, by state and cause."),
      counter("troupe_job_attempts_ended_total", {"team", "cause"},
              "Attempts that ended (requeued or terminal), by cause."),
      gauge("troupe_job_success_ratio", {},
            "succeeded / (succeeded + failed) since the scheduler started (canceled left out)."),
      // The collector itself.
      counter("troupe_metrics_events_total", {"result"},
              "Job events the collector read: ok or malformed."),
      counter("troupe_metrics_poll_errors_total", {"subject"},
              "Polls of troupe.sys.* that got no usable reply."),
  };
  return table;
}

const std::vector<SeriesInfo>& node_series() {
  static const std::vector<SeriesInfo> table = {
      counter("troupe_node_workers_launched_total", {"node"}, "Workers this agent launched."),
      gauge("troupe_node_workers_running", {"node"}, "Workers running on this node."),
      counter("troupe_node_workers_exited_total", {"node", "cause"},
              "Workers that exited, by cause (succeeded, exit_code, signal, max_runtime, "
              "stopped, launch_failed, other)."),
      counter("troupe_node_heartbeats_sent_total", {"node"}, "Heartbeats sent to the scheduler."),
      gauge("troupe_node_gpu_probe_up", {"node"},
            "1 when the last nvidia-smi query answered, 0 when it failed or is absent."),
      gauge("troupe_node_gpu_utilization_ratio", {"node", "gpu"},
            "GPU busy fraction from nvidia-smi (0..1)."),
      gauge("troupe_node_gpu_memory_used_bytes", {"node", "gpu"}, "GPU memory in use."),
      gauge("troupe_node_gpu_memory_total_bytes", {"node", "gpu"}, "GPU memory in all."),
      gauge("troupe_node_gpu_allocated", {"node", "gpu"},
            "1 while a worker of a job holds the GPU, 0 while it is free."),
      counter("troupe_node_agent_events_total", {"node", "event"},
              "What the agent counted itself, by kind: bad_messages (malformed or unexpected "
              "messages dropped), fenced (Launch, Stop or Forget of a deposed scheduler "
              "refused), duplicates, launch_failures, checkpoints, log_chunks, "
              "disk_limit_kills, folders_removed, folders_removed_for_space, "
              "folder_removal_failures, checkpoint_dirs_removed, "
              "checkpoint_dir_removal_failures."),
  };
  return table;
}

const std::vector<SeriesInfo>& dispatch_series() {
  static const std::vector<SeriesInfo> table = {
      gauge("troupe_dispatch_cluster_up", {"cluster"},
            "1 while the cluster answers the front door's polls, 0 once it has not for "
            "unreachable_after_ms (its running jobs then show unreachable)."),
      gauge("troupe_dispatch_cluster_gpus", {"cluster", "gpu_type"},
            "GPUs of the cluster's alive nodes, by type, as last reported."),
      gauge("troupe_dispatch_cluster_gpus_free", {"cluster", "gpu_type"},
            "Free GPUs of the cluster's alive nodes, by type, as last reported."),
      gauge("troupe_dispatch_cluster_jobs", {"cluster", "state"},
            "The cluster's jobs waiting to start (state=queued) and running, as last reported."),
      counter("troupe_dispatch_actions_total", {"action"},
              "What the front door did, by kind (the counters of troupe.sys.clusters: sent, "
              "spilled, redispatched, duplicates, claims_granted, claims_refused, "
              "claims_withdrawn, events_mirrored, malformed, ...)."),
  };
  return table;
}

std::string key_of(const Cumulative& c) {
  std::string key = c.series;
  for (const auto& [k, v] : c.labels) key += "," + k + "=" + v;
  return key;
}

DispatchSample dispatch_sample(const Json& view) {
  DispatchSample out;
  if (!view.is_object()) return out;
  auto text = [](const Json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (auto cs = view.find("clusters"); cs != view.end() && cs->is_array()) {
    for (const auto& c : *cs) {
      if (!c.is_object()) continue;
      const std::string name = text(c, "name");
      if (name.empty()) continue;
      out.gauges.push_back({"troupe_dispatch_cluster_up",
                            {{"cluster", name}},
                            text(c, "state") == "reachable" ? 1.0 : 0.0});
      if (auto ts = c.find("gpu_types"); ts != c.end() && ts->is_object())
        for (auto t = ts->begin(); t != ts->end(); ++t) {
          if (!t->is_object()) continue;
          const std::map<std::string, std::string> l{{"cluster", name}, {"gpu_type", t.key()}};
          out.gauges.push_back({"troupe_dispatch_cluster_gpus", l, num(*t, "total")});
          out.gauges.push_back({"troupe_dispatch_cluster_gpus_free", l, num(*t, "free")});
        }
      for (const char* state : {"queued", "running"})
        out.gauges.push_back(
            {"troupe_dispatch_cluster_jobs", {{"cluster", name}, {"state", state}}, num(c, state)});
    }
  }
  if (auto ns = view.find("counters"); ns != view.end() && ns->is_object())
    for (auto n = ns->begin(); n != ns->end(); ++n)
      if (n->is_number())
        out.counters.push_back(
            {"troupe_dispatch_actions_total", {{"action", n.key()}}, n->get<double>()});
  return out;
}

std::vector<std::string> sample_names(const SeriesInfo& s) {
  if (s.type != Type::kHistogram) return {s.name};
  return {s.name + "_bucket", s.name + "_sum", s.name + "_count"};
}

const SeriesInfo* find_series(const std::vector<SeriesInfo>& table, std::string_view name) {
  for (const auto& s : table)
    if (s.name == name) return &s;
  return nullptr;
}

const std::vector<std::string>& known_causes() {
  static const std::vector<std::string> causes = {
      "succeeded",  "exit_code",   "signal",        "oom_killed", "log_limit",
      "disk_limit", "max_runtime", "launch_failed", "node_lost",  "agent_lost",
      "preempted",  "canceled",    "stopped",       "other"};
  return causes;
}

std::string cause_of(std::string_view state, std::string_view reason,
                     std::string_view event_cause) {
  if (!event_cause.empty()) {
    const auto& k = known_causes();
    return std::find(k.begin(), k.end(), event_cause) != k.end() ? std::string(event_cause)
                                                                 : "other";
  }
  if (state == "succeeded") return "succeeded";
  if (state == "canceled") return "canceled";
  auto r = core_reason(reason);
  if (starts_with(r, "exited with code")) return "exit_code";
  if (starts_with(r, "log_limit")) return "log_limit";
  if (starts_with(r, "disk_limit")) return "disk_limit";
  if (contains(r, "oom") || contains(r, "OOM") || contains(r, "out of memory")) return "oom_killed";
  if (starts_with(r, "killed by signal")) return "signal";
  if (starts_with(r, "exceeded max_runtime")) return "max_runtime";
  if (starts_with(r, "launch failed")) return "launch_failed";
  if (contains(r, "preempt")) return "preempted";
  if (contains(r, "agent") && contains(r, "lost")) return "agent_lost";
  if (contains(r, "lost")) return "node_lost";
  if (starts_with(r, "canceled")) return "canceled";
  if (r == "stopped" || starts_with(r, "stopped")) return "stopped";
  return "other";
}

double num(const Json& j, const char* key, double def) {
  if (!j.is_object()) return def;
  auto it = j.find(key);
  if (it == j.end()) return def;
  if (it->is_number()) return it->get<double>();
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    return end != s.c_str() ? v : def;
  }
  return def;
}

std::optional<JobEvent> parse_event(std::string_view body) {
  Json j = json_text::parse<Json>(body.begin(), body.end());
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  JobEvent e;
  e.job_id = str_of(j, "job_id");
  e.state = str_of(j, "state");
  e.ts_ms = static_cast<int64_t>(num(j, "ts_ms"));
  if (e.job_id.empty() || e.state.empty() || e.ts_ms <= 0) return std::nullopt;
  e.team = str_of(j, "team");
  e.kind = str_of(j, "kind");
  if (e.kind.empty()) e.kind = "training";  // the spec's default
  e.reason = str_of(j, "reason");
  e.cause = str_of(j, "cause");
  e.attempt = std::max(1, int_of(j, "attempt"));
  return e;
}

EventTracker::Job& EventTracker::job(const std::string& id) {
  auto [it, fresh] = jobs_.try_emplace(id);
  if (fresh) {
    order_.push_back(id);
    evict();
  }
  return jobs_.at(id);  // evict() never drops the newest
}

void EventTracker::evict() {
  while (jobs_.size() > max_jobs_ && !order_.empty()) {
    jobs_.erase(order_.front());
    order_.pop_front();
  }
  // Ids of jobs that ended stay in order_ until they reach the front; keep it bounded.
  while (order_.size() > 2 * max_jobs_ + 16) {
    if (jobs_.count(order_.front()) == 0) {
      order_.pop_front();
    } else {
      order_.push_back(order_.front());
      order_.pop_front();
    }
  }
}

Observations EventTracker::on_event(const JobEvent& ev) {
  Observations o;
  Job& j = job(ev.job_id);
  if (ev.attempt < j.attempt) return o;  // a stale event of an earlier attempt
  if (ev.state == "queued") {
    if (ev.attempt > j.attempt && j.attempt > 0) {
      // The previous attempt ended and the job was requeued.
      o.attempt_ended = cause_of("failed", ev.reason, ev.cause);
    }
    if (ev.attempt != j.attempt || j.queued_ms == 0) {
      j.attempt = ev.attempt;
      j.queued_ms = ev.ts_ms;
      j.wait_seen = false;
    }
    if (ev.attempt == 1 && j.submit_ms == 0) j.submit_ms = ev.ts_ms;
    return o;
  }
  if (ev.attempt > j.attempt) {  // joined late: this attempt's queued event was missed
    j.attempt = ev.attempt;
    j.queued_ms = 0;
    j.wait_seen = false;
  }
  if (ev.state == "starting") {
    if (ev.attempt == 1 && j.submit_ms > 0 && !j.placement_seen) {
      j.placement_seen = true;
      o.placement_latency_s = std::max<int64_t>(0, ev.ts_ms - j.submit_ms) / 1000.0;
    }
    return o;
  }
  if (ev.state == "running") {
    if (j.queued_ms > 0 && !j.wait_seen) {
      j.wait_seen = true;
      o.queue_wait_s = std::max<int64_t>(0, ev.ts_ms - j.queued_ms) / 1000.0;
    }
    return o;
  }
  if (ev.state == "succeeded" || ev.state == "failed" || ev.state == "canceled") {
    auto cause = cause_of(ev.state, ev.reason, ev.cause);
    o.finished = Finished{ev.state, cause};
    o.attempt_ended = cause;
    jobs_.erase(ev.job_id);
  }
  return o;
}

double CounterMirror::delta(double now) {
  double d = !seen_ ? now : now >= last_ ? now - last_ : now;
  seen_ = true;
  last_ = now;
  return d < 0 ? 0 : d;
}

std::optional<HistogramIncrement> HistogramMirror::delta(const Json& row, size_t bounds) {
  const Json* h = row.contains("guarantee_restore") ? &row["guarantee_restore"] : nullptr;
  if (!h || !h->is_object() || !h->contains("buckets") || !(*h)["buckets"].is_array())
    return std::nullopt;
  std::vector<double> now(bounds + 1, 0);
  const Json& given = (*h)["buckets"];
  for (size_t k = 0; k < now.size() && k < given.size(); ++k)
    if (given[k].is_number()) now[k] = std::max(0.0, given[k].get<double>());
  int64_t count = h->value("count", int64_t{0});
  double sum = h->value("sum_s", 0.0);
  bool restarted = count < last_count_;
  HistogramIncrement out;
  out.team = row.value("team", std::string());
  out.pool = row.value("pool", std::string());
  out.buckets.resize(now.size());
  for (size_t k = 0; k < now.size(); ++k) {
    double before = restarted || k >= last_buckets_.size() ? 0 : last_buckets_[k];
    out.buckets[k] = std::max(0.0, now[k] - before);
  }
  out.sum = std::max(0.0, sum - (restarted ? 0 : last_sum_));
  bool any = count != last_count_ || restarted;
  last_buckets_ = std::move(now);
  last_sum_ = sum;
  last_count_ = count;
  if (!any) return std::nullopt;
  return out;
}

std::vector<HistogramIncrement> restore_increments(const Json& queues,
                                                   std::map<std::string, HistogramMirror>& seen) {
  std::vector<HistogramIncrement> out;
  if (!queues.contains("teams") || !queues["teams"].is_array()) return out;
  for (const auto& row : queues["teams"]) {
    if (!row.is_object()) continue;
    std::string key = row.value("team", std::string()) + "/" + row.value("pool", std::string());
    if (auto d = seen[key].delta(row, names::kRestoreBucketsS.size())) out.push_back(*d);
  }
  return out;
}

std::vector<Cumulative> cumulative_values(const Json& stats, const Json& queues) {
  std::vector<Cumulative> out = {
      {"troupe_reserved_idle_gpu_seconds_total", {}, num(queues, "reserved_idle_gpu_seconds")},
      {"troupe_grants_total", {}, num(queues, "grants")},
      {"troupe_preemptions_total", {}, num(queues, "preemptions")},
      {"troupe_reclaims_total", {}, num(queues, "reclaims")},
      {"troupe_preemption_lost_gpu_seconds_total", {}, num(queues, "gpu_seconds_lost")},
      {"troupe_submissions_total", {{"result", "accepted"}}, num(stats, "accepted")},
      {"troupe_submissions_total", {{"result", "rejected"}}, num(stats, "rejected")},
      {"troupe_submissions_total", {{"result", "duplicate"}}, num(stats, "duplicates")},
      {"troupe_submissions_total", {{"result", "intake_error"}}, num(stats, "intake_errors")},
      {"troupe_submissions_total", {{"result", "handed_off"}}, num(stats, "handed_off")},
      {"troupe_bus_messages_total", {{"direction", "in"}}, num(stats, "bus_messages_in")},
      {"troupe_bus_messages_total", {{"direction", "out"}}, num(stats, "bus_messages_out")},
      {"troupe_bus_malformed_messages_total", {}, num(stats, "malformed")},
  };
  Json restarts =
      stats.is_object() && stats.contains("restarts") ? stats["restarts"] : Json::object();
  for (const char* actor : {"job", "queue", "node", "gang"})
    out.push_back({"troupe_actor_restarts_total", {{"actor", actor}}, num(restarts, actor)});
  Json snaps =
      stats.is_object() && stats.contains("snapshots") ? stats["snapshots"] : Json::object();
  double errors = num(snaps, "errors"), conflicts = num(snaps, "conflicts");
  out.push_back({"troupe_snapshot_writes_total",
                 {{"result", "ok"}},
                 std::max(0.0, num(snaps, "writes") - errors - conflicts)});
  out.push_back({"troupe_snapshot_writes_total", {{"result", "error"}}, errors});
  out.push_back({"troupe_snapshot_writes_total", {{"result", "conflict"}}, conflicts});
  out.push_back({"troupe_events_republished_total", {}, num(stats, "events_retried")});
  return out;
}

std::string label_or_none(const std::string& s) {
  return s.empty() ? "none" : s;
}

std::optional<std::vector<PendingShape>> shapes_from_queues(const Json& queues) {
  if (!queues.is_object() || !queues.contains("teams") || !queues["teams"].is_array())
    return std::nullopt;
  bool present = false;
  std::vector<PendingShape> out;
  for (const auto& row : queues["teams"]) {
    auto it = row.find("pending_shapes");
    if (it == row.end() || !it->is_array()) continue;
    present = true;
    for (const auto& s : *it)
      out.push_back({int_of(s, "gpus"), str_of(s, "gpu_type"),
                     s.contains("pool") ? str_of(s, "pool") : str_of(row, "pool")});
  }
  if (!present) return std::nullopt;
  return out;
}

std::vector<PendingShape> shapes_from_jobs(const Json& jobs) {
  std::vector<PendingShape> out;
  if (!jobs.is_object() || !jobs.contains("jobs") || !jobs["jobs"].is_array()) return out;
  for (const auto& v : jobs["jobs"])
    if (str_of(v, "state") == "queued")
      out.push_back({int_of(v, "gpus"), str_of(v, "gpu_type"), str_of(v, "pool")});
  return out;
}

bool any_pending(const Json& queues) {
  if (!queues.is_object() || !queues.contains("teams") || !queues["teams"].is_array()) return false;
  for (const auto& row : queues["teams"])
    if (num(row, "pending_jobs") > 0) return true;
  return false;
}

Sample build_sample(const Json& nodes, const Json& queues,
                    const std::vector<PendingShape>& pending) {
  Sample s;
  // Nodes held by a backfill reservation, by name.
  std::set<std::string> held;
  if (queues.is_object() && queues.contains("pools") && queues["pools"].is_array())
    for (const auto& p : queues["pools"])
      if (auto h = p.find("hold"); h != p.end() && h->is_object() && h->contains("nodes"))
        for (const auto& n : (*h)["nodes"])
          if (n.is_string()) held.insert(n.get<std::string>());

  std::vector<PendingShape> wants;
  for (const auto& p : pending)
    if (p.gpus > 0) wants.push_back(p);

  std::map<std::pair<std::string, std::string>, GpuRow> rows;
  int total = 0, allocated = 0;
  if (nodes.is_object() && nodes.contains("nodes") && nodes["nodes"].is_array()) {
    for (const auto& n : nodes["nodes"]) {
      bool alive = n.value("alive", false);
      if (!alive) {
        ++s.nodes_dead;
        continue;
      }
      ++s.nodes_alive;
      s.workers_running += int_of(n, "running");
      std::string pool = label_or_none(str_of(n, "pool"));
      std::string type = label_or_none(str_of(n, "gpu_type"));
      GpuRow& r = rows[{pool, type}];
      r.pool = pool;
      r.gpu_type = type;
      int t = int_of(n, "gpus_total"), a = int_of(n, "gpus_allocated"),
          res = int_of(n, "gpus_reserved");
      int f = n.contains("gpus_free") ? int_of(n, "gpus_free") : std::max(0, t - a - res);
      r.total += t;
      r.allocated += a;
      r.reserved += res;
      r.free += f;
      r.memory_shared_mb += static_cast<int64_t>(num(n, "gpu_memory_shared_mb", 0));
      r.memory_stranded_mb += static_cast<int64_t>(num(n, "gpu_memory_stranded_mb", 0));
      total += t;
      allocated += a;
      if (f <= 0) continue;
      if (held.count(str_of(n, "node"))) {
        r.held_idle += f;
        continue;
      }
      // Fragmented: free GPUs that work waiting in this node's pool cannot
      // use. A pool with nothing waiting has idle GPUs, not fragmented ones.
      bool pool_waits = std::any_of(wants.begin(), wants.end(), [&](const PendingShape& w) {
        return w.pool.empty() || w.pool == str_of(n, "pool");
      });
      if (!pool_waits) continue;
      bool usable = std::any_of(wants.begin(), wants.end(), [&](const PendingShape& w) {
        return w.gpus <= f && (w.gpu_type.empty() || w.gpu_type == str_of(n, "gpu_type")) &&
               (w.pool.empty() || w.pool == str_of(n, "pool"));
      });
      if (!usable) r.fragmented += f;
    }
  }
  for (auto& [k, r] : rows) s.gpus.push_back(r);
  s.allocation_ratio = total > 0 ? static_cast<double>(allocated) / total : 0.0;

  if (queues.is_object() && queues.contains("teams") && queues["teams"].is_array()) {
    for (const auto& row : queues["teams"]) {
      TeamRow t;
      t.team = str_of(row, "team");
      if (t.team.empty()) continue;
      t.pool = label_or_none(str_of(row, "pool"));
      t.weight = num(row, "weight", 1);
      t.guaranteed = int_of(row, "guaranteed");
      t.in_use = int_of(row, "in_use");
      t.borrowed = int_of(row, "borrowed");
      t.pending_jobs = int_of(row, "pending_jobs");
      t.pending_gpus = int_of(row, "pending_gpus");
      t.pending_flexible = int_of(row, "pending_flexible");
      t.dominant_share = num(row, "dominant_share");
      t.weighted_share = num(row, "weighted_share");
      s.teams.push_back(t);
    }
  }
  return s;
}

}  // namespace troupe::metrics

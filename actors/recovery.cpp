#include "actors/recovery.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <limits>

#include "actors/job_record.hpp"
#include "actors/policy/arrays.hpp"
#include "actors/policy/ledger.hpp"
#include "bus/subjects.hpp"
#include "messages/event_json.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"

namespace troupe::recovery {

namespace {

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool parse(google::protobuf::MessageLite& m, std::string_view bytes) {
  return bytes.size() <= static_cast<size_t>(std::numeric_limits<int>::max()) &&
         m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

// The job id of a serialized JobRecord (field 1; the last one, as a parse
// takes the last) without parsing the rest; nothing when the bytes do not
// read as a message.
std::optional<std::string> peek_job_id(std::string_view bytes) {
  using google::protobuf::internal::WireFormatLite;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) return std::nullopt;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  std::optional<std::string> id;
  for (uint32_t tag = in.ReadTag(); tag != 0; tag = in.ReadTag()) {
    if (tag == WireFormatLite::MakeTag(pb::JobRecord::kJobIdFieldNumber,
                                       WireFormatLite::WIRETYPE_LENGTH_DELIMITED)) {
      std::string v;
      if (!WireFormatLite::ReadString(&in, &v)) return std::nullopt;
      id = std::move(v);
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return std::nullopt;
    }
  }
  if (!in.ConsumedEntireMessage() || in.CurrentPosition() != static_cast<int>(bytes.size()))
    return std::nullopt;
  return id;
}

std::string check_placement(const google::protobuf::RepeatedPtrField<pb::WorkerPlacement>& ps,
                            int workers) {
  for (const auto& p : ps) {
    if (!subjects::check_token(p.node()).empty()) return "a worker's node is not a node name";
    if (p.rank() < 0 || p.rank() >= workers) return "a worker's rank is out of range";
    for (int g : p.gpus())
      if (g < 0 || g >= policy::kMaxGpuIndex) return "a worker's GPU index is out of range";
  }
  return {};
}

}  // namespace

std::string check_job(const pb::JobRecord& r) {
  if (auto e = subjects::check_token(r.job_id()); !e.empty()) return "job id " + e;
  if (!subjects::valid_team(r.spec().team())) return "team '" + r.spec().team() + "' is not valid";
  spec::Limits limits;
  limits.priority_classes = {r.spec().priority()};  // classes come from the config of its day
  if (auto e = spec::validate(r.spec(), limits); !e.empty()) return "spec: " + e;
  if (!r.state().empty() && !names::known_state(r.state()))
    return "unknown state '" + r.state() + "'";
  if (r.attempt() < 0) return "negative attempt";
  return check_placement(r.placement(), std::max(1, r.spec().workers()));
}

std::string check_node(const pb::NodeRecord& n) {
  if (auto e = subjects::check_token(n.node()); !e.empty()) return "node name " + e;
  if (n.gpus() < 0 || n.gpus() > policy::kMaxGpuIndex) return "GPU count out of range";
  for (const auto& h : n.holds()) {
    std::string job;
    int attempt = 0, rank = 0;
    if (!policy::parse_hold_id(h.id(), &job, &attempt, &rank) || job != h.job_id())
      return "hold '" + h.id() + "' is malformed";
    for (int g : h.gpus())
      if (g < 0 || g >= policy::kMaxGpuIndex) return "hold '" + h.id() + "': GPU out of range";
  }
  return {};
}

bool add_snapshot(State& s, std::string_view key, std::string_view bytes) {
  if (starts_with(key, "job.")) {
    if (bytes.empty()) {  // purged: ended and forgotten after its retention
      s.purged.insert(std::string(key.substr(4)));
      return true;
    }
    pb::JobRecord r;
    if (!parse(r, bytes) || r.job_id().empty()) {
      ++s.bad;
      return false;
    }
    if (auto why = check_job(r); !why.empty() || key != "job." + r.job_id()) {
      s.quarantined[std::string(key)] = why.empty() ? "stored under another job's key" : why;
      return false;
    }
    s.jobs[r.job_id()] = std::move(r);
    return true;
  }
  if (starts_with(key, "sched.")) {
    if (bytes.empty()) return true;  // deleted
    pb::ScheduleRecord r;
    if (!parse(r, bytes) || r.name().empty()) {
      ++s.bad;
      return false;
    }
    if (!subjects::valid_team(r.team()) || key != "sched." + r.team() + "." + r.name()) {
      s.quarantined[std::string(key)] = "a schedule stored under another key";
      return false;
    }
    s.schedules[std::string(key)] = std::move(r);
    return true;
  }
  if (starts_with(key, "node.")) {
    if (bytes.empty()) return true;  // removed (troupe.sys.remove_node)
    pb::NodeRecord n;
    if (!parse(n, bytes) || n.node().empty()) {
      ++s.bad;
      return false;
    }
    if (auto why = check_node(n); !why.empty() || key != "node." + n.node()) {
      s.quarantined[std::string(key)] = why.empty() ? "stored under another node's key" : why;
      return false;
    }
    s.nodes[n.node()] = std::move(n);
    return true;
  }
  return false;
}

bool add_intake(State& s, std::string_view bytes, std::string_view subject) {
  // A pipeline's record: each of its jobs as a record of its team's intake.
  if (auto team = subjects::token(subject, 3);
      !subject.empty() && subject == subjects::intake_pipeline(team)) {
    pb::PipelineRecord p;
    if (!parse(p, bytes)) {
      ++s.bad;
      return false;
    }
    bool added = false;
    const std::string one = subjects::intake(team);
    for (const auto& job : p.jobs()) added |= add_intake(s, job.SerializeAsString(), one);
    return added;
  }
  // The record of a job a snapshot already holds (or purged) brings nothing:
  // known from its id alone, without parsing its spec (a restore reads every
  // intake record of the last 15 s).
  if (auto id = peek_job_id(bytes); id && (s.jobs.count(*id) || s.purged.count(*id))) return false;
  pb::JobRecord r;
  if (!parse(r, bytes) || r.job_id().empty()) {
    ++s.bad;
    return false;
  }
  std::string why = check_job(r);
  if (why.empty() && !subject.empty() && subject != subjects::intake(r.spec().team()) &&
      !subjects::is_handoff(subject, r.spec().team()))
    why = "its team is not the one of its subject";
  if (why.empty() && (!r.state().empty() || r.placement_size() != 0))
    why = "an intake record is a new job (no state or placement)";
  if (!why.empty()) {
    s.quarantined["intake " +
                  (subject.empty() ? r.job_id() : std::string(subject) + " " + r.job_id())] = why;
    return false;
  }
  if (s.jobs.count(r.job_id()) || s.purged.count(r.job_id())) return false;
  if (!subject.empty() && subjects::is_handoff(subject, r.spec().team()))
    s.handed_off.push_back(r.job_id());
  s.changed.insert(r.job_id());
  s.jobs[r.job_id()] = std::move(r);  // state "": its actor starts it as a new job
  return true;
}

bool apply_event(pb::JobRecord& rec, const pb::JobEvent& e) {
  if (e.seq() <= rec.event_seq() || e.state().empty()) return false;
  const std::string& state = e.state();
  bool new_attempt = e.attempt() != rec.attempt();
  rec.set_event_seq(e.seq());
  rec.set_event_ts_ms(e.ts_ms());
  rec.set_event_cause(e.cause());
  rec.set_state(state);
  rec.set_attempt(e.attempt());
  rec.set_reason(e.reason());
  *rec.mutable_placement() = e.workers();
  if (e.has_exit_code()) rec.set_exit_code(e.exit_code());
  if (new_attempt || state == names::kQueued || state == names::kStarting) {
    rec.clear_started_ranks();
    rec.clear_exited_ranks();
    rec.clear_failed_exit_code();
    rec.clear_failed_reason();
    rec.clear_end_cause();
    rec.clear_end_kind();
    rec.set_preempt_requested(false);
  }
  if (state == names::kQueued) rec.set_not_before_ms(0);
  if (state == names::kRunning) {
    rec.set_start_ms(e.ts_ms());
    rec.clear_started_ranks();
    for (const auto& p : e.workers()) rec.add_started_ranks(p.rank());
  }
  if (names::is_terminal(state)) rec.set_end_ms(e.ts_ms());
  return true;
}

std::optional<pb::JobEvent> read_event(std::string_view json) {
  std::optional<pb::JobEvent> e(std::in_place);
  if (!spec::read_event_json(json, &*e)) e.reset();
  return e;
}

bool add_event(State& s, std::string_view json, std::string_view subject) {
  return add_read_event(s, read_event(json), subject);
}

namespace {

// A task of an array (`<array id>-<index>`) whose own record never reached
// the store (a task has no intake record: the job supervisor makes it) is
// rebuilt from its array's record, as the supervisor made it, so that its
// events bring it forward: it ran, or runs, and is not started again. The
// array's record, when it came from the intake alone, gets its tasks'
// bytes (all waiting; the supervisor catches them up with the tasks).
std::map<std::string, pb::JobRecord>::iterator rebuilt_task(State& s, const pb::JobEvent& e) {
  namespace arr = policy::arrays;
  auto t = arr::split_task_id(e.job_id());
  if (!t || s.purged.count(e.job_id())) return s.jobs.end();
  auto a = s.jobs.find(t->first);
  if (a == s.jobs.end() || !spec::is_array(a->second.spec()) || a->second.spec().team() != e.team())
    return s.jobs.end();
  pb::JobRecord& array = a->second;
  const auto n = static_cast<int>(spec::array_tasks(array.spec()));
  if (t->second < 0 || t->second >= n) return s.jobs.end();
  if (array.array_tasks().empty()) {
    array.set_array_tasks(std::string(static_cast<size_t>(n), arr::kPending));
    s.changed.insert(array.job_id());
  }
  return s.jobs.emplace(e.job_id(), task_record(array, t->second, e.ts_ms())).first;
}

}  // namespace

bool add_read_event(State& s, const std::optional<pb::JobEvent>& read, std::string_view subject) {
  if (!read) {
    ++s.bad;
    return false;
  }
  const auto& e = *read;
  auto it = s.jobs.find(e.job_id());
  std::string why;
  if (!subjects::check_token(e.job_id()).empty() || !subjects::valid_team(e.team()))
    why = "job id or team is not valid";
  else if (!subject.empty() && subject != subjects::job_events(e.team(), e.job_id()))
    why = "its job or team is not the one of its subject";
  else if (!e.state().empty() && !names::known_state(e.state()))
    why = "unknown state '" + e.state() + "'";
  else if (it == s.jobs.end() && (it = rebuilt_task(s, e)) != s.jobs.end() &&
           !check_placement(e.workers(), std::max(1, it->second.spec().workers())).empty()) {
    why = check_placement(e.workers(), std::max(1, it->second.spec().workers()));
    s.jobs.erase(it);  // (rebuilt for this event only)
    it = s.jobs.end();
  } else if (it != s.jobs.end() && it->second.spec().team() != e.team())
    why = "its team is not its job's";
  else if (it != s.jobs.end())
    why = check_placement(e.workers(), std::max(1, it->second.spec().workers()));
  if (!why.empty()) {
    s.quarantined["event " + (subject.empty() ? e.job_id() : std::string(subject)) + " #" +
                  std::to_string(e.seq())] = why;
    return false;
  }
  s.stored_seqs[e.job_id()].insert(e.seq());
  if (it == s.jobs.end() || !apply_event(it->second, e)) return false;
  s.changed.insert(e.job_id());
  return true;
}

void derive_holds(State& s) {
  for (auto& [name, n] : s.nodes) {
    n.clear_holds();
    n.set_restored(true);
  }
  for (const auto& [id, r] : s.jobs) {
    if (r.state() != names::kStarting && r.state() != names::kRunning) continue;
    for (const auto& p : r.placement()) {
      auto& n = s.nodes[p.node()];
      if (n.node().empty()) {
        n.set_node(p.node());  // known only from its job: the agent fills in the rest
        n.set_restored(true);
      }
      auto* h = n.add_holds();
      h->set_id(policy::hold_id(id, r.attempt(), p.rank()));
      h->set_job_id(id);
      h->set_attempt(r.attempt());
      h->set_rank(p.rank());
      *h->mutable_gpus() = p.gpus();
      h->set_cpus(r.spec().resources().cpus());
      h->set_memory_mb(r.spec().resources().memory_mb());
      h->set_committed(true);
      h->set_launched(true);
    }
  }
}

std::string durable_node_record(const std::string& bytes) {
  pb::NodeRecord rec;
  if (!rec.ParseFromString(bytes)) return {};
  rec.clear_holds();
  return rec.SerializeAsString();
}

bool shape_known(const pb::NodeRecord& n) {
  return !n.gpu_type().empty() || n.gpus() > 0 || n.cpus() > 0 || n.memory_mb() > 0;
}

std::vector<pb::JobEvent> unannounced(const State& s, int64_t since_ms) {
  static const std::set<int64_t> kNone;
  std::vector<pb::JobEvent> out;
  for (const auto& [id, r] : s.jobs) {
    if (r.event_seq() <= 0) continue;
    auto it = s.stored_seqs.find(id);
    const auto& stored = it == s.stored_seqs.end() ? kNone : it->second;
    auto missing = [&](const pb::JobEvent& e) {
      return e.seq() > 0 && e.seq() <= r.event_seq() && e.ts_ms() >= since_ms &&
             !stored.count(e.seq());
    };
    bool last_kept = false;
    for (const auto& e : r.earlier()) {
      last_kept = last_kept || e.seq() == r.event_seq();
      if (missing(e)) out.push_back(e);
    }
    // The last event (seq = event_seq, at event_ts_ms) without a copy: built
    // from the record, only when missing.
    if (!last_kept && r.event_ts_ms() >= since_ms && !stored.count(r.event_seq()))
      out.push_back(last_event(r));
  }
  return out;
}

void remember_announced(pb::JobRecord& r, int64_t now_ms) {
  auto* earlier = r.mutable_earlier();
  if (r.event_seq() > 0) *earlier->Add() = last_event(r);
  int keep_from = std::max(0, earlier->size() - kEarlierEventsMax);
  while (keep_from < earlier->size() && earlier->Get(keep_from).ts_ms() < now_ms - kEarlierEventsMs)
    ++keep_from;
  if (keep_from > 0) earlier->DeleteSubrange(0, keep_from);
}

std::vector<std::string> idempotency_keys(const State& s) {
  std::vector<std::string> out;
  for (const auto& [id, r] : s.jobs) {
    if (r.spec().idempotency_key().empty()) continue;
    out.push_back(r.spec().team() + "/" + r.spec().idempotency_key());
    out.push_back(id);
  }
  return out;
}

void order_handoffs(State& s) {
  std::set<std::string> handed(s.handed_off.begin(), s.handed_off.end());
  uint64_t m = 0;
  for (const auto& [id, r] : s.jobs)
    if (handed.count(id) == 0) m = std::max<uint64_t>(m, r.seq());
  for (const auto& id : s.handed_off)
    if (auto it = s.jobs.find(id); it != s.jobs.end()) it->second.set_seq(++m);
}

uint64_t max_seq(const State& s) {
  uint64_t m = 0;
  for (const auto& [id, r] : s.jobs) m = std::max<uint64_t>(m, r.seq());
  return m;
}

void keep_shard(State& s, const policy::ShardScope& scope, const policy::ClusterConfig& cfg) {
  if (!scope.sharded()) return;
  for (auto it = s.jobs.begin(); it != s.jobs.end();) {
    if (scope.owns_job(cfg, it->first)) {
      ++it;
      continue;
    }
    s.changed.erase(it->first);
    s.stored_seqs.erase(it->first);
    it = s.jobs.erase(it);
  }
  for (auto it = s.nodes.begin(); it != s.nodes.end();)
    it = scope.owns_node(cfg, it->second.pool(), it->second.gpu_type()) ? std::next(it)
                                                                        : s.nodes.erase(it);
  if (!scope.coordinator(cfg)) s.schedules.clear();
}

}  // namespace troupe::recovery

#include "actors/recovery.hpp"

#include <google/protobuf/util/json_util.h>

#include <algorithm>

#include "actors/job_record.hpp"
#include "actors/policy/ledger.hpp"
#include "messages/names.hpp"

namespace troupe::recovery {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

bool add_snapshot(State& s, const std::string& key, const std::string& bytes) {
  if (starts_with(key, "job.")) {
    pb::JobRecord r;
    if (!r.ParseFromString(bytes) || r.job_id().empty()) {
      ++s.bad;
      return false;
    }
    s.jobs[r.job_id()] = std::move(r);
    return true;
  }
  if (starts_with(key, "node.")) {
    pb::NodeRecord n;
    if (!n.ParseFromString(bytes) || n.node().empty()) {
      ++s.bad;
      return false;
    }
    s.nodes[n.node()] = std::move(n);
    return true;
  }
  return false;
}

bool add_intake(State& s, const std::string& bytes) {
  pb::JobRecord r;
  if (!r.ParseFromString(bytes) || r.job_id().empty()) {
    ++s.bad;
    return false;
  }
  if (s.jobs.count(r.job_id())) return false;
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

bool add_event(State& s, const std::string& json) {
  pb::JobEvent e;
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(json, &e, o).ok()) {
    ++s.bad;
    return false;
  }
  s.stored_seqs[e.job_id()].insert(e.seq());
  auto it = s.jobs.find(e.job_id());
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
    for (const auto& e : r.earlier())
      if (missing(e)) out.push_back(e);
    auto last = last_event(r);
    if (missing(last)) out.push_back(std::move(last));
  }
  return out;
}

void keep_earlier(pb::JobRecord& r, int64_t now_ms) {
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

uint64_t max_seq(const State& s) {
  uint64_t m = 0;
  for (const auto& [id, r] : s.jobs) m = std::max<uint64_t>(m, r.seq());
  return m;
}

}  // namespace troupe::recovery

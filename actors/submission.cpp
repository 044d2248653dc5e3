#include "actors/submission.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "actors/job_record.hpp"
#include "actors/policy/dependencies.hpp"
#include "actors/policy/sjf.hpp"
#include "actors/views.hpp"
#include "bus/subjects.hpp"
#include "messages/ids.hpp"
#include "messages/names.hpp"

namespace troupe::submission {

using policy::Refusal;

using ids::append_base36;

std::string job_id_prefix(int64_t start_ms) {
  std::string p = "j-";
  append_base36(p, static_cast<uint64_t>(std::max<int64_t>(0, start_ms)), 8);
  return p;
}

std::string shard_job_id_prefix(std::string_view pool, int64_t start_ms) {
  std::string p = "j-";
  p += pool;
  p += '-';
  append_base36(p, static_cast<uint64_t>(std::max<int64_t>(0, start_ms)), 8);
  return p;
}

std::string job_id(const std::string& prefix, uint64_t number) {
  std::string id = prefix;
  append_base36(id, number, 5);
  return id;
}

Opened open(std::string_view subject, const std::vector<uint8_t>& data) {
  Opened o;
  // (a submission another shard read and handed over names its team last)
  auto handed = subjects::shard_submit_team(subject);
  o.team = std::string(handed.empty() ? subjects::token(subject, subjects::kTeamToken) : handed);
  if (!subjects::valid_team(o.team)) {
    o.verdict = {Refusal::not_allowed, "team name '" + o.team + "' is not allowed"};
    return o;
  }
  if (wire::json_text(data)) return o;
  o.envelope = wire::submit_request(data);
  if (o.envelope == nullptr) {
    o.verdict = {Refusal::malformed,
                 "malformed submission: neither a JSON job spec nor a FlatBuffers SubmitRequest"};
    return o;
  }
  o.flatbuffers = true;
  return o;
}

namespace {
// A job submitted alone: checked, and its upstream jobs named by id.
Read check_alone(pb::JobSpec spec, const std::string& team, const policy::ClusterConfig& cfg,
                 const spec::Limits& limits) {
  Read r = check_spec(std::move(spec), team, cfg, limits);
  if (!r.verdict.ok()) return r;
  // By name only inside a pipeline (read_pipeline resolves them).
  for (const auto& d : r.spec.depends_on())
    if (d.job().empty())
      r.verdict = {Refusal::invalid_spec, "depends_on: name " + d.name() +
                                              " names a pipeline member; a job submitted alone "
                                              "names its upstream jobs by id (job: ID)"};
  return r;
}
}  // namespace

Read read(const Opened& o, const std::vector<uint8_t>& data, const policy::ClusterConfig& cfg,
          const spec::Limits& limits, uint64_t stream_seq, const std::string& msg_id) {
  Read r;
  spec::Parsed p = o.flatbuffers ? spec::from_wire(o.envelope->body_as_SubmitRequest()->spec())
                                 : spec::from_json(std::string_view(
                                       reinterpret_cast<const char*>(data.data()), data.size()));
  if (!p.ok) {
    r.verdict = {o.flatbuffers ? Refusal::invalid_spec : Refusal::malformed, p.error};
    return r;
  }
  if (stream_seq != 0 && p.spec.idempotency_key().empty())
    p.spec.set_idempotency_key(msg_id.empty() ? "enqueue-" + std::to_string(stream_seq) : msg_id);
  return check_alone(std::move(p.spec), o.team, cfg, limits);
}

Handed read_handed(std::string_view subject, const std::vector<uint8_t>& data,
                   const policy::ClusterConfig& cfg, const spec::Limits& limits) {
  Handed h;
  h.opened.team = std::string(subjects::shard_submit_team(subject));
  if (!subjects::valid_team(h.opened.team)) {
    h.opened.verdict = {Refusal::not_allowed, "team name '" + h.opened.team + "' is not allowed"};
    return h;
  }
  pb::ShardSubmission m;
  if (!m.ParseFromArray(data.data(), static_cast<int>(data.size()))) {
    h.opened.verdict = {Refusal::malformed, "malformed submission handed over by a shard"};
    return h;
  }
  h.opened.flatbuffers = m.flatbuffers();
  h.original.assign(m.original().begin(), m.original().end());
  h.read = check_alone(std::move(*m.mutable_spec()), h.opened.team, cfg, limits);
  return h;
}

std::string hand_over(const pb::JobSpec& spec, bool flatbuffers,
                      const std::vector<uint8_t>& original) {
  pb::ShardSubmission m;
  *m.mutable_spec() = spec;
  m.set_flatbuffers(flatbuffers);
  m.set_original(original.data(), original.size());
  return m.SerializeAsString();
}

std::string shard_report(const ShardReport& r) {
  pb::ShardRate m;
  m.set_shard(r.shard);
  for (const auto& [team, n] : r.taken) (*m.mutable_taken())[team] = n;
  m.set_has_queued(r.has_queued);
  for (const auto& [team, n] : r.queued)
    if (n > 0) (*m.mutable_queued())[team] = n;
  for (const auto& [pool, room] : r.rooms) {
    auto& out = (*m.mutable_rooms())[pool];
    out.set_free_gpus(room.free_gpus);
    out.set_largest_free(room.largest_free);
    out.set_pending_gpus(room.pending_gpus);
    out.set_total_gpus(room.total_gpus);
  }
  return m.SerializeAsString();
}

bool read_shard_report(const std::vector<uint8_t>& data, ShardReport* r) {
  constexpr size_t kMaxTeams = 4096;
  pb::ShardRate m;
  if (!m.ParseFromArray(data.data(), static_cast<int>(data.size()))) return false;
  *r = ShardReport{};
  r->shard = m.shard();
  for (const auto& [team, n] : m.taken())
    if (r->taken.size() < kMaxTeams && subjects::valid_team(team) && std::isfinite(n) && n > 0)
      r->taken.emplace_back(team, n);
  r->has_queued = m.has_queued();
  for (const auto& [team, n] : m.queued())
    if (r->queued.size() < kMaxTeams && subjects::valid_team(team) && n > 0)
      r->queued.emplace_back(team, n);
  for (const auto& [pool, room] : m.rooms())
    if (r->rooms.size() < kMaxTeams && subjects::check_token(pool).empty()) {
      policy::PoolRoom p;
      p.free_gpus = std::max(room.free_gpus(), 0);
      p.largest_free = std::max(room.largest_free(), 0);
      p.pending_gpus = std::max(room.pending_gpus(), 0);
      p.total_gpus = std::max(room.total_gpus(), 0);
      r->rooms.emplace_back(pool, p);
    }
  return true;
}

Read check_spec(pb::JobSpec spec, const std::string& team, const policy::ClusterConfig& cfg,
                const spec::Limits& limits) {
  Read r;
  auto& s = r.spec;
  s = std::move(spec);
  if (s.team().empty()) s.set_team(team);
  for (const auto& [k, v] : s.labels())
    if (k.rfind(names::kReservedLabelPrefix, 0) == 0) {
      r.verdict = {Refusal::invalid_spec,
                   "label " + k.substr(0, 64) + ": keys starting 'troupe.' are the scheduler's"};
      return r;
    }
  if (s.team() != team) {
    r.verdict = {Refusal::wrong_team, "spec team '" + s.team().substr(0, 128) +
                                          "' does not match subject team '" + team + "'"};
    return r;
  }
  if (s.priority().empty()) s.set_priority(cfg.default_class);
  spec::apply_defaults(s);
  if (auto v = spec::check(s, limits); !v.ok()) {
    r.verdict = {
        v.kind == spec::Verdict::Kind::too_large ? Refusal::too_large : Refusal::invalid_spec,
        v.error};
    return r;
  }
  if (!cfg.open && !cfg.team(team)) {
    r.verdict = {Refusal::not_allowed, "unknown team '" + team + "' (not in the cluster config)"};
    return r;
  }
  r.adm = policy::admit(cfg, s.team(), s.pool(), s.resources().gpu_type(), s.resources().gpus(),
                        s.priority(),
                        {s.resources().gpu_types().begin(), s.resources().gpu_types().end()});
  if (!r.adm.error.empty()) r.verdict = {Refusal::invalid_spec, r.adm.error};
  return r;
}

std::string key_of(const std::string& team, const pb::JobSpec& s) {
  return s.idempotency_key().empty() ? std::string() : team + "/" + s.idempotency_key();
}

std::string intake_msg_id(const std::string& team, const std::string& key, const std::string& reply,
                          const std::vector<uint8_t>& body, const std::string& job_id) {
  if (!key.empty()) return key;
  if (reply.empty()) return job_id;
  return team + "/reply:" + reply + "/" +
         spec::digest(std::string_view(reinterpret_cast<const char*>(body.data()), body.size()));
}

pb::JobRecord make_record(pb::JobSpec spec, const policy::Admission& adm,
                          const policy::ClusterConfig& cfg, const std::string& checkpoint_root,
                          const std::string& job_id, uint64_t seq, int64_t now_ms) {
  pb::JobRecord rec;
  std::string team = spec.team();
  rec.set_job_id(job_id);
  *rec.mutable_spec() = std::move(spec);
  rec.set_seq(seq);
  rec.set_submit_ms(now_ms);
  rec.set_pool(adm.pool);
  for (const auto& p : adm.pools) rec.add_pools(p);
  rec.set_priority_value(adm.priority_value);
  rec.set_preemptible(adm.preemptible);
  rec.set_infra_cap(cfg.preemption.infra_requeue_cap);
  if (const auto* tc = cfg.team(team); tc != nullptr && tc->run_as) rec.set_run_as(*tc->run_as);
  if (const auto* tc = cfg.team(team); tc != nullptr && tc->las) {
    for (double t : cfg.las.thresholds_gpu_s) rec.add_las_thresholds_gpu_s(t);
    rec.set_las_promote_after_s(cfg.las.promote_after_s);
  } else if (tc != nullptr && tc->sjf) {
    const auto& s = rec.spec();
    const int64_t gpus = int64_t{s.resources().gpus()} * std::max(1, s.workers());
    rec.set_sjf_band(policy::sjf_band(s.max_runtime_s(), gpus));
    rec.set_sjf_promote_after_s(cfg.sjf.promote_after_s);
  }
  if (const auto* pc = cfg.pool(adm.pool); pc != nullptr && pc->share_gpus_across_teams)
    rec.set_share_across_teams(true);
  rec.set_default_memory_mb(cfg.job_defaults.memory_mb);
  rec.set_max_grace_s(cfg.preemption.max_grace_s);
  if (!checkpoint_root.empty()) rec.set_checkpoint_dir(checkpoint_root + "/" + job_id);
  return rec;
}

DuplicateAnswer answer_duplicate(const std::string& original, const std::string& key,
                                 const std::string& fingerprint) {
  DuplicateAnswer a;
  pb::JobRecord rec;
  if (!rec.ParseFromString(original) || rec.job_id().empty()) {
    a.verdict = {Refusal::unavailable,
                 "the intake stream holds an unreadable record under this submission's message "
                 "id; retry later"};
    return a;
  }
  a.job_id = rec.job_id();
  a.fingerprint = spec::fingerprint(rec.spec());
  if (!key.empty()) a.verdict = policy::check_idempotency(key, a.fingerprint, fingerprint);
  return a;
}

std::vector<uint8_t> reply(bool flatbuffers, const std::string& job_id, const std::string& error,
                           Refusal code) {
  const char* c = policy::code_name(code);
  if (flatbuffers) return wire::submit_reply(job_id, error, c);
  auto j = views::submit_json(job_id, error, c);
  return std::vector<uint8_t>(j.begin(), j.end());
}

std::string not_recorded(const std::string& error) {
  return "submission not recorded (intake stream: " + error + "); retry";
}

std::vector<uint8_t> appended_reply(bool flatbuffers, const std::string& job_id, bool ok,
                                    bool duplicate, const std::string& error,
                                    const std::string& original, const std::string& key,
                                    const std::string& fingerprint) {
  if (!ok) return reply(flatbuffers, {}, not_recorded(error), Refusal::unavailable);
  if (!duplicate) return reply(flatbuffers, job_id, {});
  auto a = answer_duplicate(original, key, fingerprint);
  if (a.job_id.empty() || !a.verdict.ok())
    return reply(flatbuffers, {}, a.verdict.error, a.verdict.code);
  return reply(flatbuffers, a.job_id, {});
}

PipelineRead read_pipeline(const Opened& o, const std::vector<uint8_t>& data,
                           const policy::ClusterConfig& cfg, const spec::Limits& limits) {
  PipelineRead r;
  auto refuse = [&](Refusal code, std::string error) {
    r.verdict = {code, std::move(error)};
    r.members.clear();
    return std::move(r);
  };
  if (o.flatbuffers) return refuse(Refusal::malformed, "a pipeline is a JSON request");
  pb::Pipeline p;
  if (auto err = spec::parse_json(
          std::string_view(reinterpret_cast<const char*>(data.data()), data.size()), p);
      !err.empty())
    return refuse(Refusal::malformed, "malformed pipeline: " + err);
  if (!p.team().empty() && p.team() != o.team)
    return refuse(Refusal::wrong_team, "pipeline team '" + p.team().substr(0, 128) +
                                           "' does not match subject team '" + o.team + "'");
  if (p.jobs().empty()) return refuse(Refusal::invalid_spec, "a pipeline needs jobs");
  if (p.jobs_size() > limits.max_pipeline_jobs)
    return refuse(Refusal::too_large, "the pipeline has " + std::to_string(p.jobs_size()) +
                                          " jobs (limit max_pipeline_jobs " +
                                          std::to_string(limits.max_pipeline_jobs) + ")");
  if (auto c = p.idempotency_key();
      c.size() > static_cast<size_t>(limits.max_idempotency_key_bytes))
    return refuse(Refusal::too_large, "idempotency_key is longer than " +
                                          std::to_string(limits.max_idempotency_key_bytes) +
                                          " characters");
  r.name = p.name().substr(0, static_cast<size_t>(limits.max_name_bytes));
  r.idempotency_key = p.idempotency_key();
  // Each member checked as a job of its own; names unique tokens.
  std::map<std::string, int> index;
  std::vector<Read> read;
  for (int i = 0; i < p.jobs_size(); ++i) {
    auto& js = *p.mutable_jobs(i);
    std::string at = "jobs[" + std::to_string(i) + "]";
    if (auto err = names::check_token(js.name()); !err.empty())
      return refuse(Refusal::invalid_spec, at + ": name " + err);
    at += " (" + js.name() + ")";
    if (!index.emplace(js.name(), i).second)
      return refuse(Refusal::invalid_spec, at + ": a second job named " + js.name());
    if (!js.idempotency_key().empty())
      return refuse(Refusal::invalid_spec,
                    at + ": a member has no idempotency_key of its own (the pipeline's applies)");
    if (spec::is_array(js))
      return refuse(Refusal::invalid_spec,
                    at + ": an array or sweep cannot be a pipeline member; submit it on its own "
                         "with depends_on naming the pipeline's jobs");
    auto one = check_spec(std::move(js), o.team, cfg, limits);
    if (!one.verdict.ok()) return refuse(one.verdict.code, at + ": " + one.verdict.error);
    read.push_back(std::move(one));
  }
  // depends_on by name: a member; no cycle.
  std::vector<std::pair<std::string, std::vector<std::string>>> graph;
  for (const auto& m : read) {
    std::vector<std::string> ups;
    for (const auto& d : m.spec.depends_on()) {
      if (d.name().empty()) continue;
      if (!d.job().empty())
        return refuse(Refusal::invalid_spec,
                      "jobs (" + m.spec.name() + "): a depends_on entry has both job and name");
      if (index.count(d.name()) == 0)
        return refuse(Refusal::invalid_spec, "jobs (" + m.spec.name() + "): depends_on name " +
                                                 d.name() + " is no job of the pipeline");
      ups.push_back(d.name());
    }
    graph.emplace_back(m.spec.name(), std::move(ups));
  }
  if (auto cycle = policy::deps::find_cycle(graph); !cycle.empty()) {
    std::string path;
    for (const auto& n : cycle) path += (path.empty() ? "" : " -> ") + n;
    return refuse(Refusal::invalid_spec, "depends_on forms a cycle: " + path);
  }
  // Upstream first (Kahn's order, file order among the ready).
  std::vector<int> pending(read.size(), 0);
  for (size_t i = 0; i < graph.size(); ++i) pending[i] = static_cast<int>(graph[i].second.size());
  std::vector<bool> placed(read.size(), false);
  for (size_t done = 0; done < read.size();) {
    for (size_t i = 0; i < read.size(); ++i) {
      if (placed[i] || pending[i] > 0) continue;
      placed[i] = true;
      ++done;
      for (size_t j = 0; j < graph.size(); ++j)
        for (const auto& up : graph[j].second)
          if (up == read[i].spec.name()) --pending[j];
      r.members.push_back(Member{std::move(read[i].spec), std::move(read[i].adm)});
      break;
    }
  }
  return r;
}

}  // namespace troupe::submission

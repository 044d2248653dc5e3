#include "actors/router.hpp"

#include <spdlog/spdlog.h>

#include <charconv>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <unordered_map>

#include "actors/errors.hpp"
#include "actors/intake_reader.hpp"
#include "actors/job_record.hpp"
#include "actors/policy/admission.hpp"
#include "actors/policy/config.hpp"
#include "actors/policy/pages.hpp"
#include "actors/policy/shards.hpp"
#include "actors/policy/usage.hpp"
#include "actors/recovery.hpp"
#include "actors/shrink.hpp"
#include "actors/submission.hpp"
#include "actors/views.hpp"
#include "bus/subjects.hpp"
#include "messages/event_json.hpp"
#include "messages/json_text.hpp"
#include "messages/log_chunks.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"
#include "messages/wire.hpp"
#include "records.pb.h"

namespace troupe {

using namespace troupe::atoms;
using nlohmann::json;

namespace {

// A shard reports its queued jobs to the others this often (when they
// changed); a shard not heard for kPeerStaleMs counts nothing (it died: its
// pools' new owner counts their jobs).
constexpr auto kShardReportEvery = std::chrono::milliseconds(250);
constexpr auto kEarlyReport = std::chrono::milliseconds(20);
// How long a keyed any-type submission waits for the other shards to say
// whether they hold its key.
constexpr int64_t kKeyAskMs = 1000;
constexpr size_t kMaxKeyAsks = 8192;  // waiting at once; more are refused unavailable
constexpr int64_t kPeerStaleMs = 3000;
// How long a submission handed to another pool's owner waits for its answer
// before this shard records it for that owner, and how many wait at once
// (more are handed with the client's own reply subject, unwatched).
constexpr int64_t kHandMs = 3000;
constexpr size_t kMaxHanding = 16384;
// An enqueued submission whose pool nobody serves is delivered again this
// much later.
constexpr int64_t kEnqueuedRetryMs = 1000;

struct Waiter {
  std::string reply;
  bool flatbuffers = false;
};

struct Pending {
  std::string record;  // the serialized JobRecord: the intake's bytes, then the job supervisor's
  std::string idempotency_key;  // as the spec gives it
  std::string key;              // team/idempotency key ("" when none)
  std::vector<Waiter> waiters;
  uint64_t stream_seq = 0;  // from the enqueue consumer: acknowledged once recorded
  std::string team;
  std::string fingerprint;  // of the spec, when it has a key (spec::fingerprint)
  int64_t slots = 1;        // of the team's max_queued_jobs: an array's tasks
};

// What a job holds of its team's max_queued_jobs while none of it started:
// one, or an array's tasks (each a job; the rate limit counts it once).
int64_t slots_of(const pb::JobSpec& s) {
  return spec::is_array(s) ? std::max<int64_t>(spec::array_tasks(s), 1) : 1;
}

// A pipeline being recorded (one intake record for all its jobs).
struct PendingPipeline {
  std::vector<std::string> records;                       // its jobs' records, upstream first
  std::vector<std::pair<std::string, std::string>> jobs;  // (name, job id), the same order
  std::vector<std::string> keys;                          // each job's team/key ("" when none)
  std::vector<Waiter> waiters;
  std::string team;
  std::string key;  // team/the pipeline's key ("" when none)
};

using Counters = views::Counters;  // troupe.sys.stats (actors/views.hpp)

// A keyed any-type submission of a shard, asked about in the other
// candidates' shards: the first one, any more with the same key meanwhile,
// the pools not answered yet, what was found, and until when it waits.
struct KeyAsk {
  std::vector<ReadSubmission> subs;
  std::set<std::string> waiting;
  std::string job_id, fingerprint;  // found in another shard
  int64_t until_ms = 0;
};

// A submission of another shard's pool handed to its owner, until the owner
// answers (forwarded to the client) or does not (record_for_owner).
struct Handing {
  std::string reply;     // the client's
  std::string asked_as;  // the reply subject the owner saw (this shard's answers)
  bool flatbuffers = false;
  std::string team, pool;
  pb::JobSpec spec;
  policy::Admission adm;
  std::string handed;  // what the owner was sent
  int64_t until_ms = 0;
};

struct RouterState {
  Wiring w;
  OutboxPtr out;
  IntakePtr intake;
  SchedulerOptions opts;
  Counters n;
  policy::ClusterConfig cfg = policy::open_config();
  std::string id_prefix;
  int64_t started_ms = 0;
  std::unordered_map<std::string, std::string> pool_prefixes;  // a shard's, by pool
  uint64_t next_seq = 0;
  std::unordered_map<std::string, std::string> keys;           // team/key -> job id
  std::unordered_map<std::string, Pending> pending;            // job id -> awaiting intake ack
  std::unordered_map<std::string, std::string> pending_keys;   // team/key -> job id
  std::unordered_map<std::string, PendingPipeline> pipelines;  // pipeline id -> being recorded
  std::unordered_map<std::string, std::string> pipeline_keys;  // team/key -> pipeline id
  // Admission (actors/policy/admission.hpp, docs/admission.md).
  std::unordered_map<std::string, std::string> fingerprints;  // team/key -> spec fingerprint
  // By team: jobs accepted or being recorded that have not left `queued` yet.
  std::unordered_map<std::string, int64_t> queued;
  std::map<std::string, policy::NodeShape> nodes;  // by node, as registered (pool: as named)
  std::vector<policy::NodeShape> shapes;           // the same, pools resolved with cfg
  bool shapes_stale = false;
  std::vector<IntakeReaderActor> readers;  // a team's submissions go to readers[hash % size]
  // A shard: the other shards' queued jobs per team (troupe.sys.shard.rate),
  // and what it last reported of its own, how many ticks ago.
  policy::PeerQueued peers;
  std::unordered_map<std::string, int64_t> reported_queued;
  int ticks_since_report = 0;
  bool report_due = false;  // a report_atom is on its way
  // A shard: its own pools' rooms (from their arbiters), and what it last
  // reported of them.
  std::map<std::string, policy::PoolRoom> rooms, reported_rooms;
  // A shard: keyed any-type submissions waiting for the owners of their
  // other candidate pools to say whether they hold the key (key_ask below),
  // by ask number; the keys being asked about, to their ask.
  std::map<uint64_t, KeyAsk> key_asks;
  std::unordered_map<std::string, uint64_t> asking_keys;
  uint64_t next_ask = 0;
  // A shard: submissions handed to their pool's owner, by hand number.
  std::map<uint64_t, Handing> handing;
  uint64_t next_hand = 0;
  // Schedule runs being submitted (fire_atom), by their internal reply token:
  // (team, name, tick); the schedule keeper hears the job id or the refusal.
  std::unordered_map<std::string, std::tuple<std::string, std::string, int64_t>> fires;
  uint64_t next_fire = 0;
  // A team's requests other than submissions, against its request_rate.
  std::unordered_map<std::string, policy::TokenBucket> request_buckets;
  static inline const char* name = "router";
};

using Self = RouterActor::stateful_pointer<RouterState>;

void log_bad(const std::string& what, int64_t count) {
  // Logged, but not one line per message when someone floods us.
  if (count <= 10 || count % 1000 == 0)
    spdlog::warn("dropped bad input ({} so far): {}", count, what);
}

constexpr size_t kMaxCountedTeams = 1024;  // refused_by_team; bounded against made-up teams

// A schedule run's submission answers the schedule keeper, not a subject:
// its "reply" is this prefix and a number (never published).
constexpr std::string_view kFireReply = "\x01fire.";

bool answer_fire(Self self, const Waiter& w, const std::string& job_id, const std::string& error) {
  if (w.reply.compare(0, kFireReply.size(), kFireReply) != 0) return false;
  auto& st = self->state;
  if (auto it = st.fires.find(w.reply); it != st.fires.end()) {
    auto [team, name, tick] = it->second;
    st.fires.erase(it);
    self->send(st.w.schedules, fired_atom_v, team, name, tick, job_id, error);
  }
  return true;
}

// Replies to a submission: the job id, or an error with its stable code.
void reply_submit(Self self, const Waiter& w, const std::string& job_id, const std::string& error,
                  policy::Refusal code = policy::Refusal::none) {
  if (answer_fire(self, w, job_id, error)) return;
  if (w.reply.empty()) return;
  self->state.out->publish(w.reply, submission::reply(w.flatbuffers, job_id, error, code));
}

// A team's row of a count by team: its own while fewer than kMaxCountedTeams
// teams are counted, else "(other)" (made-up teams cannot grow it).
template <class V>
V& by_team(std::map<std::string, V>& counts, const std::string& team) {
  bool known = counts.count(team) != 0;
  return counts[known || counts.size() < kMaxCountedTeams ? team : "(other)"];
}

// A team's request (`verb`) against its request_rate: true to go on, else
// answered rate_limited (shards: by the coordinator alone; every shard hears
// the team's requests, so their buckets go alike) and counted.
bool answers_for_all(Self self);

bool take_request_token(Self self, const std::string& team, std::string_view verb,
                        const Inbound& in) {
  auto& st = self->state;
  const auto lim = st.cfg.limits_of(team);
  if (lim.request_rate <= 0) return true;
  const int64_t now = st.w.now_ms();
  if (st.request_buckets.size() >= kMaxCountedTeams && st.request_buckets.count(team) == 0)
    policy::forget_full_buckets(st.request_buckets, now, [&](const std::string& t) {
      auto l = st.cfg.limits_of(t);
      return std::pair{l.request_rate, l.request_burst};
    });
  auto v = policy::check_request_rate(st.request_buckets[team], lim, team, verb, now);
  if (v.ok()) return true;
  ++st.n.requests_rate_limited;
  ++by_team(st.n.requests_rate_limited_by_team, team);
  if (!in.reply.empty() && (!st.opts.shards.sharded() || answers_for_all(self)))
    st.out->publish(in.reply, errors::error_json(policy::code_name(v.code), v.error));
  return false;
}

// Counts a refused submission (by code, and by team) and answers it.
void reject(Self self, const Waiter& w, policy::Refusal code, const std::string& error,
            const std::string& team) {
  auto& n = self->state.n;
  const char* c = policy::code_name(code);
  ++n.refused[c];
  if (!team.empty()) ++by_team(n.refused_by_team, team)[c];
  if (code == policy::Refusal::malformed) {
    log_bad(error, ++n.malformed);
  } else if (code != policy::Refusal::unavailable) {  // unavailable: intake_errors

    ++n.rejected;
  }
  reply_submit(self, w, {}, error, code);
}

// A keyed submission whose key names `job` already (`held`: the fingerprint
// of that job's spec): its id, or idempotency_conflict when the spec differs.
void answer_duplicate(Self self, const Waiter& w, const std::string& team, const pb::JobSpec& s,
                      const std::string& held, const std::string& fp, const std::string& job) {
  if (auto v = policy::check_idempotency(s.idempotency_key(), held, fp); !v.ok()) {
    reject(self, w, v.code, v.error, team);
    return;
  }
  ++self->state.n.duplicates;
  reply_submit(self, w, job, {});
}

// The registered nodes' shapes with their pools resolved by the current config.
const std::vector<policy::NodeShape>& shapes(RouterState& st) {
  if (st.shapes_stale) {
    st.shapes.clear();
    for (const auto& [name, n] : st.nodes) {
      auto r = n;
      r.pool = st.cfg.pool_of_node(n.pool, n.gpu_type);
      st.shapes.push_back(std::move(r));
    }
    st.shapes_stale = false;
  }
  return st.shapes;
}

// A team queued `n` more jobs here. A shard tells the others soon (within
// kEarlyReport, not at the next tick) when the team has a max_queued_jobs,
// so that what a team submitting to several shards at once can queue past
// its limit is what it submits in that time.
void queue_more(Self self, const std::string& team, int64_t n) {
  auto& st = self->state;
  st.queued[team] += n;
  if (st.report_due || !st.opts.shards.sharded() || st.opts.shard_id.empty() ||
      st.cfg.limits_of(team).max_queued_jobs < 0)
    return;
  st.report_due = true;
  self->delayed_send(self, kEarlyReport, report_atom_v);
}

void unqueue(RouterState& st, const std::string& team, int64_t n = 1) {
  auto it = st.queued.find(team);
  if (it == st.queued.end()) return;
  if ((it->second -= n) <= 0) st.queued.erase(it);
}

// The team's queued jobs, here and (a shard) in the other shards.
int64_t queued_of(RouterState& st, const std::string& team) {
  auto q = st.queued.find(team);
  return (q == st.queued.end() ? 0 : q->second) +
         policy::peers_queued(st.peers, team, st.w.now_ms(), kPeerStaleMs);
}

// A shard's job ids name the job's pool (policy::pool_of_job_id).
std::string new_job_id(Self self, const std::string& pool) {
  auto& st = self->state;
  if (!st.opts.shards.sharded()) return submission::job_id(st.id_prefix, ++st.next_seq);
  auto& prefix = st.pool_prefixes[pool];
  if (prefix.empty()) prefix = submission::shard_job_id_prefix(pool, st.started_ms);
  return submission::job_id(prefix, ++st.next_seq);
}

// Acknowledges a consumer-delivered submission on every way out of submit()
// except the one that hands it to the intake stream (acknowledged there).
struct ConsumerAck {
  Intake& intake;
  uint64_t seq;
  bool handed_on = false;
  ~ConsumerAck() {
    if (seq != 0 && !handed_on) intake.ack(seq);
  }
};

// A team's submission goes to its intake reader (actors/intake_reader.hpp),
// which sends it back read and checked (submit below).
const IntakeReaderActor& reader_of(const RouterState& st, const std::string& team) {
  return st.readers[std::hash<std::string>{}(team) % st.readers.size()];
}

// A pool's room (its arbiter's, or another shard's report) to every intake
// reader: they pick the pool of an any-type job (policy::pick_pool).
void tell_readers_room(RouterState& st, const std::string& pool, const policy::PoolRoom& r) {
  for (const auto& reader : st.readers)
    caf::anon_send(reader, room_atom_v, pool, r.free_gpus, r.largest_free, r.pending_gpus,
                   r.total_gpus);
}
void to_reader(Self self, const std::string& team, const Inbound& in) {
  self->send(reader_of(self->state, team), in);
}

void record(Self self, const Inbound& in, const Waiter& w, const std::string& team,
            const std::string& key, std::string fp, pb::JobSpec s, const policy::Admission& adm);
void submit_pipeline(Self self, const Inbound& in, const Waiter& w, const std::string& team,
                     submission::PipelineRead p);
void report_usage(Self self, const Inbound& in, const std::string& team, const json& req);

// A submission its intake reader read: the checks that need the router's
// state (idempotency keys, the team's GPUs and queued jobs, the registered
// nodes), then the record to the intake stream.
bool ask_keys_elsewhere(Self self, const ReadSubmission& r, const std::string& key,
                        ConsumerAck& consumer);
void on_key_answer(Self self, uint64_t n, const Inbound& in);

std::string watch_hand(Self self, const submission::Checked& c, const std::string& reply,
                       const std::string& pool, const std::string& body);

void submit(Self self, const ReadSubmission& r, bool keys_asked = false) {
  using policy::Refusal;
  auto& st = self->state;
  if (!r.checked) return;  // only readers send it, always with a result
  const Inbound& in = r.in;
  auto& checked = *r.checked;  // the message's alone: moved from
  // A shard answers the submissions of its pools (a pipeline: its first
  // member's), the coordinator those refused before they had one; every
  // shard hears them all.
  const std::string pool = !checked.verdict.ok() ? std::string()
                           : checked.pipeline    ? (checked.pipeline->members.empty()
                                                        ? std::string()
                                                        : checked.pipeline->members.front().adm.pool)
                                                 : checked.adm.pool;
  // Of shards, one of the queue group reads each troupe.<team>.submit: it
  // answers a refusal itself and hands a submission of another shard's pool
  // to that pool's owner (the client's reply subject kept). A pipeline is
  // still heard by every shard; its first member's owner keeps it.
  const bool handed = !subjects::shard_submit_team(in.subject).empty();
  const bool queued_read = st.opts.shards.sharded() &&
                           subjects::token(in.subject, 2) == subjects::kSubmit &&
                           in.stream_seq == 0;
  // An enqueued one (one shard reads it off the durable consumer) likewise;
  // handed over, it is acknowledged once its owner answered (shard_answers).
  const bool enqueued = st.opts.shards.sharded() && in.stream_seq != 0;
  // (a refusal of one it read, or was handed, it answers itself)
  if (!((queued_read || handed || enqueued) && pool.empty()) &&
      !st.opts.shards.owns_submission(st.cfg, pool)) {
    // A schedule's run (only the coordinator keeps schedules) for another
    // shard's pool: refused, and the schedule says so (last_error).
    if (answer_fire(self, Waiter{in.reply, false}, {},
                    "pool " + pool +
                        " is another shard's: schedules run jobs in the coordinator's pools only "
                        "(docs/recovery.md, Shards)"))
      return;
    if (queued_read || enqueued) {  // as read: its owner does not parse it again
      const auto& answers = st.opts.shard_answers;
      auto body = submission::hand_over(checked.spec, checked.flatbuffers && !enqueued, in.data);
      std::string reply;
      if (!enqueued)
        reply = watch_hand(self, checked, in.reply, pool, body);
      else if (!answers.empty())
        reply = answers + "." + std::to_string(in.stream_seq);
      st.out->publish(subjects::shard_read(pool, checked.team), body, reply);
      ++st.n.handed_over;
      if (enqueued && answers.empty()) st.intake->ack(in.stream_seq);  // nobody hears an answer
      return;
    }
    if (handed) {  // its pool moved meanwhile (or the shards' configs differ): asked again
      reject(self, Waiter{in.reply, checked.flatbuffers}, Refusal::unavailable,
             "pool " + pool + " is not served here now; submit again", checked.team);
      return;
    }
    ++st.n.other_shard;
    return;
  }
  if (!keys_asked) ++st.n.submitted;                // (asked about in other shards: counted then)
  ConsumerAck consumer{*st.intake, in.stream_seq};  // also a refused enqueued one: for good
  const std::string& team = checked.team;
  Waiter w{in.reply, checked.flatbuffers};
  if (!checked.verdict.ok()) {
    reject(self, w, checked.verdict.code, checked.verdict.error,
           checked.verdict.code == Refusal::not_allowed ? std::string() : team);
    return;
  }
  if (checked.pipeline) {
    submit_pipeline(self, in, w, team, std::move(*checked.pipeline));
    return;
  }
  auto& s = checked.spec;
  const auto& adm = checked.adm;
  auto lim = st.cfg.limits_of(team);
  // The same key: the same job, unless the spec differs. Before the limits
  // below: a retry of an accepted submission always gets its job id.
  std::string key = submission::key_of(team, s);
  std::string fp = key.empty() ? std::string() : spec::fingerprint(s);
  if (!key.empty()) {
    if (auto it = st.keys.find(key); it != st.keys.end()) {
      auto f = st.fingerprints.find(key);
      answer_duplicate(self, w, team, s, f == st.fingerprints.end() ? "" : f->second, fp,
                       it->second);
      return;
    }
    if (auto it = st.pending_keys.find(key); it != st.pending_keys.end()) {
      auto& pend = st.pending[it->second];
      if (auto v = policy::check_idempotency(s.idempotency_key(), pend.fingerprint, fp); !v.ok()) {
        reject(self, w, v.code, v.error, team);
        return;
      }
      ++st.n.duplicates;
      pend.waiters.push_back(w);
      return;
    }
    if (!keys_asked && ask_keys_elsewhere(self, r, key, consumer)) return;
  }
  if (auto v = policy::check_job_gpus(lim, team, s.workers(), s.resources().gpus()); !v.ok()) {
    reject(self, w, v.code, v.error, team);
    return;
  }
  auto req = placement_request(s);
  req.pool = adm.pool;
  req.pools = adm.pools;
  if (auto v = policy::check_feasible(shapes(st), req); !v.ok()) {
    reject(self, w, v.code, v.error, team);
    return;
  }
  if (auto v = policy::check_queued(lim, team, queued_of(st, team), slots_of(s)); !v.ok()) {
    reject(self, w, v.code, v.error, team);
    return;
  }
  if (s.depends_on_size() == 0) {
    record(self, in, w, team, key, std::move(fp), std::move(s), adm);
    consumer.handed_on = true;
    return;
  }
  // Its upstream jobs must be jobs of its team the job supervisor knows.
  std::vector<std::string> upstream;
  for (const auto& d : s.depends_on()) upstream.push_back(d.job());
  consumer.handed_on = true;  // acknowledged below, or once recorded
  self->request(st.w.jobs, caf::infinite, deps_atom_v, team, std::move(upstream))
      .then([=, in = in, s = std::move(s), adm = adm](const std::string& error) mutable {
        if (error.empty()) {
          record(self, in, w, team, key, std::move(fp), std::move(s), adm);
          return;
        }
        ConsumerAck refused{*self->state.intake, in.stream_seq};
        reject(self, w, Refusal::invalid_spec, error, team);
      });
}

// An accepted submission to the intake stream: its job is spawned once the
// stream holds it (on_intake).
void record(Self self, const Inbound& in, const Waiter& w, const std::string& team,
            const std::string& key, std::string fp, pb::JobSpec s, const policy::Admission& adm) {
  auto& st = self->state;
  Pending pend;
  pend.slots = slots_of(s);
  // Until the job (each task) first leaves `queued` (unqueued_atom) or is not recorded.
  queue_more(self, team, pend.slots);
  auto job_id = new_job_id(self, adm.pool);
  {
    auto rec = submission::make_record(std::move(s), adm, st.cfg, st.opts.checkpoint_root, job_id,
                                       st.next_seq, st.w.now_ms());
    pend.idempotency_key = rec.spec().idempotency_key();
    rec.SerializeToString(&pend.record);  // once: the stream's record and the supervisor's
  }
  pend.key = key;
  pend.team = team;
  pend.fingerprint = std::move(fp);
  pend.waiters.push_back(w);
  pend.stream_seq = in.stream_seq;
  std::vector<uint8_t> bytes(pend.record.begin(), pend.record.end());
  if (!key.empty()) st.pending_keys[key] = job_id;
  st.pending.emplace(job_id, std::move(pend));
  RouterActor me{self};
  st.intake->append(subjects::intake(team), std::move(bytes),
                    submission::intake_msg_id(team, key, in.reply, in.data, job_id),
                    [me, job_id](Intake::Appended a) {
                      caf::anon_send(me, intake_atom_v, job_id, a.ok, a.duplicate,
                                     std::move(a.error), std::move(a.original));
                    });
}

// The stream holds a record under this one's message id (a key the router
// did not know: learnt from a restart or never): the submitters get the
// original's job id, the key is learnt, and `pend`'s own job never exists.
void on_duplicate(Self self, Pending pend, const std::string& original) {
  auto& st = self->state;
  unqueue(st, pend.team, pend.slots);
  auto a = submission::answer_duplicate(original, pend.idempotency_key, pend.fingerprint);
  if (a.job_id.empty()) {
    ++st.n.intake_errors;  // a consumer-delivered one is redelivered (not acknowledged)
    spdlog::warn("intake: {}", a.verdict.error);
    for (const auto& w : pend.waiters) reject(self, w, a.verdict.code, a.verdict.error, pend.team);
    return;
  }
  if (pend.stream_seq != 0) st.intake->ack(pend.stream_seq);
  if (!pend.key.empty()) {
    st.keys[pend.key] = a.job_id;
    st.fingerprints[pend.key] = a.fingerprint;
  }
  if (!a.verdict.ok()) {
    for (const auto& w : pend.waiters) reject(self, w, a.verdict.code, a.verdict.error, pend.team);
    return;
  }
  ++st.n.duplicates;  // the first submitter (those who joined it were counted then)
  for (const auto& w : pend.waiters) reply_submit(self, w, a.job_id, {});
}

void on_pipeline_intake(Self self, PendingPipeline pend, bool ok, bool duplicate,
                        const std::string& error, const std::string& original);

void on_intake(Self self, const std::string& job_id, bool ok, bool duplicate,
               const std::string& error, const std::string& original) {
  auto& st = self->state;
  if (auto p = st.pipelines.find(job_id); p != st.pipelines.end()) {
    auto pend = std::move(p->second);
    st.pipelines.erase(p);
    if (!pend.key.empty()) st.pipeline_keys.erase(pend.key);
    on_pipeline_intake(self, std::move(pend), ok, duplicate, error, original);
    return;
  }
  auto it = st.pending.find(job_id);
  if (it == st.pending.end()) return;
  Pending pend = std::move(it->second);
  st.pending.erase(it);
  if (!pend.key.empty()) st.pending_keys.erase(pend.key);
  shrink_if_sparse(st.pending);
  shrink_if_sparse(st.pending_keys);
  if (ok && duplicate) {
    on_duplicate(self, std::move(pend), original);
    return;
  }
  if (!ok) {
    ++st.n.intake_errors;  // a consumer-delivered one is redelivered (not acknowledged)
    unqueue(st, pend.team, pend.slots);
    for (const auto& w : pend.waiters)
      reject(self, w, policy::Refusal::unavailable, submission::not_recorded(error), pend.team);
    return;
  }
  ++st.n.accepted;
  if (pend.stream_seq != 0) st.intake->ack(pend.stream_seq);
  if (!pend.key.empty()) {
    st.keys[pend.key] = job_id;
    st.fingerprints[pend.key] = pend.fingerprint;
  }
  self->send(st.w.jobs, spawn_atom_v, job_id, std::move(pend.record));
  for (const auto& w : pend.waiters) reply_submit(self, w, job_id, {});
}

// --- pipelines (docs/api.md "Pipelines") -------------------------------------

// A pipeline's id: its first job's, as p-… ("j-" dropped): unique as job ids are.
std::string pipeline_id_of(const std::string& first_job_id) {
  return "p-" + first_job_id.substr(std::min<size_t>(2, first_job_id.size()));
}

void record_pipeline(Self self, const Inbound& in, const Waiter& w, const std::string& team,
                     submission::PipelineRead p);

// A pipeline read and checked (submission::read_pipeline): a retry of one
// accepted under its idempotency key gets the same answer; then the team's
// limits for each job (queued: all of them), its upstream jobs by id, and
// one intake record for all.
void submit_pipeline(Self self, const Inbound& in, const Waiter& w, const std::string& team,
                     submission::PipelineRead p) {
  using policy::Refusal;
  auto& st = self->state;
  std::string pkey = p.idempotency_key.empty() ? std::string() : team + "/" + p.idempotency_key;
  if (!pkey.empty()) {
    // Each job's key is the pipeline's and its name: a restart learns them
    // from the jobs' records like any other key.
    std::vector<std::pair<std::string, std::string>> known;
    for (auto& m : p.members) {
      m.spec.set_idempotency_key(p.idempotency_key + "/" + m.spec.name());
      if (auto it = st.keys.find(submission::key_of(team, m.spec)); it != st.keys.end())
        known.emplace_back(m.spec.name(), it->second);
    }
    if (!known.empty()) {
      if (known.size() != p.members.size()) {
        reject(self, w, Refusal::idempotency_conflict,
               "idempotency_key '" + p.idempotency_key +
                   "' was used before with other jobs; use a new key for a new pipeline",
               team);
        return;
      }
      ++st.n.duplicates;
      if (!w.reply.empty())
        st.out->publish(w.reply, views::pipeline_json(pipeline_id_of(known[0].second), known));
      return;
    }
    if (auto it = st.pipeline_keys.find(pkey); it != st.pipeline_keys.end()) {
      ++st.n.duplicates;
      st.pipelines[it->second].waiters.push_back(w);
      return;
    }
  }
  auto lim = st.cfg.limits_of(team);
  std::vector<std::string> upstream;  // jobs outside the pipeline, by id
  for (const auto& m : p.members) {
    const auto& s = m.spec;
    auto req = placement_request(s);
    req.pool = m.adm.pool;
    req.pools = m.adm.pools;
    for (auto v : {policy::check_job_gpus(lim, team, s.workers(), s.resources().gpus()),
                   policy::check_feasible(shapes(st), req)})
      if (!v.ok()) {
        reject(self, w, v.code, "job " + s.name() + ": " + v.error, team);
        return;
      }
    for (const auto& d : s.depends_on())
      if (!d.job().empty()) upstream.push_back(d.job());
  }
  int64_t queued = queued_of(st, team) + static_cast<int64_t>(p.members.size());
  if (auto v = policy::check_queued(lim, team, queued - 1); !v.ok()) {
    reject(self, w, v.code, v.error, team);
    return;
  }
  if (upstream.empty()) {
    record_pipeline(self, in, w, team, std::move(p));
    return;
  }
  self->request(st.w.jobs, caf::infinite, deps_atom_v, team, std::move(upstream))
      .then([=, in = in, p = std::move(p)](const std::string& error) mutable {
        if (error.empty())
          record_pipeline(self, in, w, team, std::move(p));
        else
          reject(self, w, Refusal::invalid_spec, error, team);
      });
}

// The pipeline's jobs get their ids (upstream first: the submit order is the
// dependency order), their depends_on by name those ids, the pipeline's
// label; one record holds them all.
void record_pipeline(Self self, const Inbound& in, const Waiter& w, const std::string& team,
                     submission::PipelineRead p) {
  auto& st = self->state;
  PendingPipeline pend;
  pend.team = team;
  pend.waiters.push_back(w);
  if (!p.idempotency_key.empty()) pend.key = team + "/" + p.idempotency_key;
  std::map<std::string, std::string> ids;  // name -> job id
  std::vector<uint64_t> seqs;
  for (const auto& m : p.members) {
    // (a pipeline is its first member's shard's, whole)
    auto id = new_job_id(self, p.members.front().adm.pool);
    ids[m.spec.name()] = id;
    seqs.push_back(st.next_seq);
    pend.jobs.emplace_back(m.spec.name(), id);
  }
  const std::string pid = pipeline_id_of(pend.jobs.front().second);
  pb::PipelineRecord record;
  record.set_pipeline_id(pid);
  for (size_t i = 0; i < p.members.size(); ++i) {
    auto& s = p.members[i].spec;
    for (auto& d : *s.mutable_depends_on())
      if (!d.name().empty()) d.set_job(ids[d.name()]);
    (*s.mutable_labels())[std::string(names::kPipelineLabel)] = pid;
    pend.keys.push_back(submission::key_of(team, s));
    auto* rec = record.add_jobs();
    *rec = submission::make_record(std::move(s), p.members[i].adm, st.cfg, st.opts.checkpoint_root,
                                   pend.jobs[i].second, seqs[i], st.w.now_ms());
    pend.records.emplace_back(rec->SerializeAsString());
  }
  queue_more(self, team, static_cast<int64_t>(p.members.size()));  // until each leaves `queued`
  std::string bytes = record.SerializeAsString();
  std::string msg_id = submission::intake_msg_id(team, pend.key, in.reply, in.data, pid);
  if (!pend.key.empty()) st.pipeline_keys[pend.key] = pid;
  st.pipelines.emplace(pid, std::move(pend));
  RouterActor me{self};
  st.intake->append(subjects::intake_pipeline(team),
                    std::vector<uint8_t>(bytes.begin(), bytes.end()), msg_id,
                    [me, pid](Intake::Appended a) {
                      caf::anon_send(me, intake_atom_v, pid, a.ok, a.duplicate, std::move(a.error),
                                     std::move(a.original));
                    });
}

void on_pipeline_intake(Self self, PendingPipeline pend, bool ok, bool duplicate,
                        const std::string& error, const std::string& original) {
  auto& st = self->state;
  auto n = static_cast<int64_t>(pend.records.size());
  auto unqueue_all = [&] {
    for (int64_t i = 0; i < n; ++i) unqueue(st, pend.team);
  };
  if (!ok || duplicate) {
    unqueue_all();
    pb::PipelineRecord held;
    std::vector<std::pair<std::string, std::string>> jobs;
    if (ok && held.ParseFromString(original))
      for (const auto& r : held.jobs()) jobs.emplace_back(r.spec().name(), r.job_id());
    if (jobs.empty()) {
      ++st.n.intake_errors;
      for (const auto& w : pend.waiters)
        reject(self, w, policy::Refusal::unavailable,
               "pipeline not recorded (intake stream: " +
                   (ok ? std::string("an unreadable record holds its message id") : error) +
                   "); retry",
               pend.team);
      return;
    }
    ++st.n.duplicates;
    for (const auto& w : pend.waiters)
      if (!w.reply.empty())
        st.out->publish(w.reply, views::pipeline_json(held.pipeline_id(), jobs));
    return;
  }
  st.n.accepted += n;
  for (size_t i = 0; i < pend.records.size(); ++i) {
    if (!pend.keys[i].empty()) st.keys[pend.keys[i]] = pend.jobs[i].second;
    self->send(st.w.jobs, spawn_atom_v, pend.jobs[i].second, std::move(pend.records[i]));
  }
  auto answer = views::pipeline_json(pipeline_id_of(pend.jobs.front().second), pend.jobs);
  for (const auto& w : pend.waiters)
    if (!w.reply.empty()) st.out->publish(w.reply, answer);
}

// A record a standby wrote to the intake stream while no leader answered
// (troupe.sys.intake.<team>.handoff, from the handoff consumer), or another
// shard for one of this shard's pools (….handoff.<pool>, record_for_owner). Its job is
// spawned unless the job supervisor knows it already (restored, or taken
// before a redelivery); acknowledged once it has answered. A record that does
// not read as a new job of its subject's team is dropped, counted as
// malformed.
void take_handoff(Self self, const Inbound& in) {
  auto& st = self->state;
  std::string team(subjects::token(in.subject, 3));
  pb::JobRecord rec;
  std::string why;
  if (!rec.ParseFromArray(in.data.data(), static_cast<int>(in.data.size())) || rec.job_id().empty())
    why = "unreadable";
  else if (auto e = recovery::check_job(rec); !e.empty())
    why = e;
  else if (rec.spec().team() != team)
    why = "its team is not the one of its subject";
  else if (!rec.state().empty() || rec.placement_size() != 0)
    why = "not a new job";
  else if (auto pool = subjects::token(in.subject, 5); !pool.empty() && rec.pool() != pool)
    why = "its pool is not the one of its subject";
  uint64_t seq = in.stream_seq;
  if (!why.empty()) {
    log_bad("handoff record on " + in.subject + ": " + why, ++st.n.malformed);
    st.intake->ack_handoff(seq);
    return;
  }
  if (st.opts.shards.sharded() && !st.opts.shards.owns_pool(rec.pool())) {
    // (its pool's consumer is opened by its owner only: left to it)
    spdlog::warn("handoff record {} of pool {}: not this shard's pool; left to its owner",
                 rec.job_id(), rec.pool());
    return;
  }
  rec.set_seq(++st.next_seq);  // its place in the submit order: now
  std::string key = submission::key_of(team, rec.spec());
  std::string fp = key.empty() ? std::string() : spec::fingerprint(rec.spec());
  std::string bytes;
  rec.SerializeToString(&bytes);
  self->request(st.w.jobs, caf::infinite, handoff_atom_v, rec.job_id(), std::move(bytes))
      .then([=](bool taken) {
        auto& st = self->state;
        if (taken) {
          ++st.n.handed_off;
          queue_more(self, team, slots_of(rec.spec()));  // until each first leaves `queued`
          if (!key.empty() && st.keys.count(key) == 0) {
            st.keys[key] = rec.job_id();
            st.fingerprints[key] = fp;
          }
        }
        st.intake->ack_handoff(seq);
      });
}

// Parses a small JSON request; replies with an error and returns false when bad.
// Whether this scheduler answers what belongs to no shard in particular: a
// bad request, the cluster's views. One scheduler always; of shards, the
// coordinator (policy::ShardScope::coordinator).
bool answers_for_all(Self self) {
  return self->state.opts.shards.coordinator(self->state.cfg);
}

bool parse_request(Self self, const Inbound& in, json& out) {
  out = json_text::parse<json>(in.data.begin(), in.data.end());
  if (in.data.empty()) out = json::object();
  if (out.is_discarded() || !out.is_object()) {
    if (!answers_for_all(self)) return false;
    log_bad("bad JSON request on " + in.subject, ++self->state.n.malformed);
    if (!in.reply.empty())
      self->state.out->publish(
          in.reply, errors::error_json(errors::kBadRequest, "request is not a JSON object"));
    return false;
  }
  return true;
}

// {"job_id": ID}, or {"jobId": ID} (lowerCamelCase, as protobuf's JSON
// mapping accepts in specs).
bool job_id_of(Self self, const Inbound& in, const json& req, std::string& id) {
  for (const char* key : {"job_id", "jobId"}) {
    if (!req.contains(key) || !req[key].is_string()) continue;
    id = req[key].get<std::string>();
    if (!subjects::check_token(id).empty()) break;
    if (self->state.opts.shards.owns_job(self->state.cfg, id)) return true;
    ++self->state.n.other_shard;  // its shard answers
    return false;
  }
  if (!answers_for_all(self)) return false;
  ++self->state.n.rejected;
  if (!in.reply.empty())
    self->state.out->publish(in.reply,
                             errors::error_json(errors::kBadRequest, "job_id is required"));
  return false;
}

// troupe.<team>.jobs and troupe.sys.jobs: {"limit","after","state","label"|"pipeline"} (each
// optional) to the job supervisor, which answers one page.
void list_jobs(Self self, const Inbound& in, const std::string& team, const json& req) {
  policy::PageRequest page;
  if (auto err = policy::parse_page_request(req, &page); !err.empty()) {
    ++self->state.n.rejected;
    if (!in.reply.empty())
      self->state.out->publish(in.reply, errors::error_json(errors::kBadRequest, err));
    return;
  }
  self->send(self->state.w.jobs, list_atom_v, team, page.limit, page.after, page.state, page.label,
             in.reply);
}

// troupe.sys.shard.part: {"subject", "pool", "request"}, a part of a view
// for the coordinator of shards (actors/shell/shard_views.hpp), answered by
// the owner of `pool` only ("" : the coordinator, for job ids of no pool):
// troupe.sys.nodes and troupe.sys.queues whole (the coordinator keeps the
// pool's rows), a jobs list only of the jobs whose id names the pool.
void shard_part(Self self, const Inbound& in) {
  auto& st = self->state;
  json req = json_text::parse<json>(in.data.begin(), in.data.end());
  if (!req.is_object() || !req.contains("pool") || !req["pool"].is_string() ||
      !req.contains("subject") || !req["subject"].is_string()) {
    log_bad("bad shard part request", ++st.n.malformed);
    return;
  }
  const std::string pool = req["pool"].get<std::string>();
  const std::string subject = req["subject"].get<std::string>();
  if (pool.empty() ? !answers_for_all(self) : !st.opts.shards.owns_pool(pool)) return;
  if (subject == subjects::kSysNodes) {
    self->send(st.w.arbiter, list_atom_v, in.reply);
    return;
  }
  if (subject == subjects::kSysQueues) {
    self->send(st.w.arbiter, queues_atom_v, in.reply);
    return;
  }
  const auto team = subjects::token(subject, subjects::kTeamToken);
  if (subjects::token(subject, 2) != subjects::kJobs || subjects::token(subject, 0) != "troupe" ||
      !subjects::token(subject, 3).empty() || !subjects::check_token(team).empty()) {
    log_bad("shard part of an unknown view " + subject, ++st.n.malformed);
    return;
  }
  policy::PageRequest page;
  const json body =
      req.contains("request") && req["request"].is_object() ? req["request"] : json::object();
  if (auto err = policy::parse_page_request(body, &page); !err.empty()) {
    if (!in.reply.empty()) st.out->publish(in.reply, errors::error_json(errors::kBadRequest, err));
    return;
  }
  Strings pools;
  for (const auto& p : st.cfg.pools) pools.push_back(p.name);
  self->send(st.w.jobs, list_atom_v, std::string(team), page.limit, page.after, page.state,
             page.label, pool, std::move(pools), in.reply);
}

// A shard: the owner of another pool answered an enqueued submission this
// one handed it (troupe.sys.shard.answer.<this>.<stream seq>). Taken (a job
// id) or refused for good: acknowledged in the stream. Unavailable (its pool
// moving) or unreadable: left to be delivered again, and handed over again
// (its idempotency key makes one job of it); nobody there (no responders):
// delivered again a second later.
void on_hand_answer(Self self, uint64_t n, const Inbound& in);

void on_shard_answer(Self self, const Inbound& in) {
  auto& st = self->state;
  auto last = std::string_view(in.subject).substr(in.subject.rfind('.') + 1);
  const char kind = !last.empty() && (last[0] == 'k' || last[0] == 'h') ? last[0] : '\0';
  if (kind != '\0') last.remove_prefix(1);
  uint64_t seq = 0;
  auto [end, ec] = std::from_chars(last.data(), last.data() + last.size(), seq);
  if (ec != std::errc() || end != last.data() + last.size() || seq == 0) {
    log_bad("shard answer on " + in.subject + ": no stream sequence", ++st.n.malformed);
    return;
  }
  if (kind == 'k') {
    on_key_answer(self, seq, in);
    return;
  }
  if (kind == 'h') {
    on_hand_answer(self, seq, in);
    return;
  }
  if (in.no_responders) {
    // Nobody serves its pool now (its owner died, or is restoring): asked
    // again in a second, not after the consumer's ack wait; handed over
    // again by whichever shard reads it then, the pool's new owner
    // included.
    ++st.n.enqueued_retried;
    st.intake->retry(seq, kEnqueuedRetryMs);
    return;
  }
  auto j = json_text::parse<json>(in.data.begin(), in.data.end());
  const bool taken = j.is_object() && j.contains("job_id");
  const bool refused = j.is_object() && j.contains("code") && j["code"].is_string() &&
                       j["code"].get<std::string>() != errors::kUnavailable;
  if (taken || refused) {
    st.intake->ack(seq);
    return;
  }
  spdlog::warn("enqueued submission {} not taken by its pool's owner ({}): delivered again later",
               seq,
               j.is_discarded() ? std::string("unreadable")
                                : j.dump(-1, ' ', false, json::error_handler_t::replace));
}

// A shard's keyed any-type submission may have been taken before by the
// shard of another of its candidates (each goes to the pool with room:
// intake_reader.cpp): before it is recorded here, the owners of those
// pools are asked whether they hold the key (troupe.sys.shard.key.<pool>.
// <team>, answered to this shard's answers subject, "k<ask>"). False when
// there is nobody to ask (it is recorded now).
bool ask_keys_elsewhere(Self self, const ReadSubmission& r, const std::string& key,
                        ConsumerAck& consumer) {
  auto& st = self->state;
  const auto& answers = st.opts.shard_answers;
  const auto& pools = r.checked->adm.pools;
  if (!st.opts.shards.sharded() || answers.empty() || pools.size() < 2) return false;
  if (auto it = st.asking_keys.find(key); it != st.asking_keys.end()) {
    st.key_asks[it->second].subs.push_back(r);  // the same key, asked already
    consumer.handed_on = true;
    return true;
  }
  if (st.key_asks.size() >= kMaxKeyAsks) {
    reject(self, Waiter{r.in.reply, r.checked->flatbuffers}, policy::Refusal::unavailable,
           "too many keyed submissions are waiting for the other shards' answers; retry",
           r.checked->team);
    consumer.handed_on = true;  // an enqueued one: not acknowledged, delivered again later
    return true;
  }
  KeyAsk ask;
  for (const auto& p : pools)
    if (!st.opts.shards.owns_pool(p)) ask.waiting.insert(p);
  if (ask.waiting.empty()) return false;
  const uint64_t n = ++st.next_ask;
  const json body = {{"idempotency_key", r.checked->spec.idempotency_key()}};
  for (const auto& p : ask.waiting)
    st.out->publish(subjects::shard_key(p, r.checked->team), body.dump(),
                    answers + ".k" + std::to_string(n));
  ++st.n.key_asks;
  ask.until_ms = st.w.now_ms() + kKeyAskMs;
  ask.subs.push_back(r);
  st.key_asks.emplace(n, std::move(ask));
  st.asking_keys[key] = n;
  consumer.handed_on = true;  // acknowledged once recorded
  return true;
}

// An ask answered by every pool asked, or timed out: the job another shard
// holds under the key (a spec that differs: idempotency_conflict), else
// recorded here.
void finish_key_ask(Self self, uint64_t n) {
  auto& st = self->state;
  auto it = st.key_asks.find(n);
  if (it == st.key_asks.end()) return;
  KeyAsk ask = std::move(it->second);
  st.key_asks.erase(it);
  for (auto k = st.asking_keys.begin(); k != st.asking_keys.end();)
    k = k->second == n ? st.asking_keys.erase(k) : std::next(k);
  for (const auto& r : ask.subs) {
    if (ask.job_id.empty()) {
      submit(self, r, true);
      continue;
    }
    ConsumerAck consumer{*st.intake, r.in.stream_seq};
    const auto& c = *r.checked;
    answer_duplicate(self, Waiter{r.in.reply, c.flatbuffers}, c.team, c.spec, ask.fingerprint,
                     spec::fingerprint(c.spec), ask.job_id);
  }
}

// An owner's answer to an ask: {"pool", "job_id"?, "fingerprint"?}.
void on_key_answer(Self self, uint64_t n, const Inbound& in) {
  auto& st = self->state;
  auto it = st.key_asks.find(n);
  if (it == st.key_asks.end()) return;  // timed out meanwhile
  // The server's "no responders": one of the pools asked has no owner now
  // (which one, it does not say); the ask's deadline settles it.
  if (in.no_responders) return;
  auto j = json_text::parse<json>(in.data.begin(), in.data.end());
  if (!j.is_object() || !j.contains("pool") || !j["pool"].is_string()) {
    log_bad("shard key answer on " + in.subject + ": no pool", ++st.n.malformed);
    return;
  }
  auto& ask = it->second;
  if (ask.waiting.erase(j["pool"].get<std::string>()) == 0) return;
  if (j.contains("job_id") && j["job_id"].is_string() && ask.job_id.empty()) {
    ask.job_id = j["job_id"].get<std::string>();
    if (j.contains("fingerprint") && j["fingerprint"].is_string())
      ask.fingerprint = j["fingerprint"].get<std::string>();
  }
  if (ask.waiting.empty() || !ask.job_id.empty()) finish_key_ask(self, n);
}

// Asks whose owners did not all answer in time (one dead, its pool not
// taken over yet): recorded here with what is known (the intake stream's
// duplicate window still holds the key for 2 minutes).
void sweep_key_asks(Self self) {
  auto& st = self->state;
  const int64_t now = st.w.now_ms();
  std::vector<uint64_t> late;
  for (const auto& [n, ask] : st.key_asks)
    if (now >= ask.until_ms) late.push_back(n);
  for (uint64_t n : late) {
    ++st.n.key_ask_timeouts;
    finish_key_ask(self, n);
  }
}

// --- submissions handed to another shard's pool -------------------------------

// A submission this shard read for another shard's pool goes to that pool's
// owner with this shard's answers subject ("h<n>") as its reply, so that
// this shard hears when nobody answers: the owner died, or is restoring
// after it took a pool. The reply subject to give the owner: the client's
// own when nothing can be watched (no reply, too many out at once).
std::string watch_hand(Self self, const submission::Checked& c, const std::string& reply,
                       const std::string& pool, const std::string& body) {
  auto& st = self->state;
  const auto& answers = st.opts.shard_answers;
  if (answers.empty() || reply.empty() || st.handing.size() >= kMaxHanding) return reply;
  const uint64_t n = ++st.next_hand;
  Handing h;
  h.reply = reply;
  h.asked_as = answers + ".h" + std::to_string(n);
  h.flatbuffers = c.flatbuffers;
  h.team = c.team;
  h.pool = pool;
  h.spec = c.spec;
  h.adm = c.adm;
  h.handed = body;
  h.until_ms = st.w.now_ms() + kHandMs;
  std::string asked_as = h.asked_as;
  st.handing.emplace(n, std::move(h));
  return asked_as;
}

// Nobody answered for the pool's owner: this shard records the submission
// for it (troupe.sys.intake.<team>.handoff.<pool>), under the message id the
// owner would have used (the reply subject it saw and the bytes it was
// sent; else the key), so that one the owner did record is one job; and
// answers the client with the job id. The pool's owner, this one's
// successor or itself once restored, spawns the job (its handoff consumer
// of the pool, or its restore). Checked as read (the spec, the team, the
// pool); not against the owner's state (the team's rate, max_queued_jobs,
// older idempotency keys), as a standby's front door does.
void record_for_owner(Self self, Handing h) {
  auto& st = self->state;
  ++st.n.recorded_for_owner;
  const std::string key = submission::key_of(h.team, h.spec);
  const std::string fp = key.empty() ? std::string() : spec::fingerprint(h.spec);
  const std::string idem = h.spec.idempotency_key();
  auto job_id = new_job_id(self, h.pool);
  std::string record;
  submission::make_record(std::move(h.spec), h.adm, st.cfg, st.opts.checkpoint_root, job_id,
                          st.next_seq, st.w.now_ms())
      .SerializeToString(&record);
  const std::vector<uint8_t> handed(h.handed.begin(), h.handed.end());
  // Answered from the append's thread: nothing here waits for it, and it is
  // answered even when this actor has stopped meanwhile.
  st.intake->append(
      subjects::handoff(h.team, h.pool), std::vector<uint8_t>(record.begin(), record.end()),
      submission::intake_msg_id(h.team, key, h.asked_as, handed, job_id),
      [out = st.out, reply = std::move(h.reply), fb = h.flatbuffers, job_id, idem,
       fp](Intake::Appended a) {
        out->publish(reply, submission::appended_reply(fb, job_id, a.ok, a.duplicate, a.error,
                                                       a.original, idem, fp));
      });
}

// Handed submissions whose owner did not answer in time (hung, or cut off),
// or with `all` (stopping: this shard's pools changed, or the process ends)
// every one not answered yet: recorded here for their owners, not left
// unanswered (one the owner recorded is the same job: the message id).
void record_handing(Self self, bool all) {
  auto& st = self->state;
  const int64_t now = st.w.now_ms();
  while (!st.handing.empty()) {  // (in order of their deadlines)
    auto it = st.handing.begin();
    const bool late = it->second.until_ms <= now;
    if (!late && !all) return;
    Handing h = std::move(it->second);
    st.handing.erase(it);
    if (late) ++st.n.hand_timeouts;
    record_for_owner(self, std::move(h));
  }
}

// The owner's answer (as it gave it, to the client), or the server's "no
// responders" (nobody hears the pool's subject now).
void on_hand_answer(Self self, uint64_t n, const Inbound& in) {
  auto& st = self->state;
  auto it = st.handing.find(n);
  if (it == st.handing.end()) return;  // recorded here meanwhile (no answer in time)
  Handing h = std::move(it->second);
  st.handing.erase(it);
  if (in.no_responders) {
    record_for_owner(self, std::move(h));
    return;
  }
  st.out->publish(h.reply, in.data);
}

// Another shard asks whether this one holds a team's key (the owner of the
// pool in the subject answers; the job may still be being recorded).
void answer_key_ask(Self self, const Inbound& in) {
  auto& st = self->state;
  const std::string pool(subjects::shard_key_pool(in.subject));
  const std::string team(subjects::team_after(subjects::kShardKeyPrefix, in.subject));
  if (in.reply.empty() || pool.empty() || !st.opts.shards.owns_pool(pool)) return;
  auto j = json_text::parse<json>(in.data.begin(), in.data.end());
  if (!j.is_object() || !j.contains("idempotency_key") || !j["idempotency_key"].is_string()) {
    log_bad("shard key ask on " + in.subject + ": no idempotency_key", ++st.n.malformed);
    return;
  }
  const std::string key = team + "/" + j["idempotency_key"].get<std::string>();
  json out = {{"pool", pool}};
  std::string job;
  if (auto k = st.keys.find(key); k != st.keys.end()) {
    job = k->second;
    if (auto f = st.fingerprints.find(key); f != st.fingerprints.end())
      out["fingerprint"] = f->second;
  } else if (auto p = st.pending_keys.find(key); p != st.pending_keys.end()) {
    job = p->second;
    if (auto pend = st.pending.find(job); pend != st.pending.end())
      out["fingerprint"] = pend->second.fingerprint;
  }
  if (!job.empty()) out["job_id"] = job;
  st.out->publish(in.reply, out.dump());
}

// Another shard's report: what it admitted (each team's reader debits it),
// or its whole count of queued jobs (kept for max_queued_jobs).
void on_shard_rate(Self self, const Inbound& in) {
  auto& st = self->state;
  submission::ShardReport r;
  if (!submission::read_shard_report(in.data, &r)) {
    log_bad("malformed shard report on " + in.subject, ++st.n.malformed);
    return;
  }
  if (r.shard == st.opts.shard_id) return;  // its own
  for (const auto& [team, n] : r.taken) self->send(reader_of(st, team), debit_atom_v, team, n);
  if (r.has_queued) policy::peer_reported(st.peers, r.shard, r.queued, st.w.now_ms(), kPeerStaleMs);
  for (const auto& [pool, room] : r.rooms)  // another's pools of the config only
    if (!st.opts.shards.owns_pool(pool) && st.cfg.pool(pool)) tell_readers_room(st, pool, room);
}

// A shard's own count of queued jobs and its pools' rooms, to the others:
// when they changed (every tick, 250 ms), and every fourth tick while any
// are queued or any room is known (so that the others do not take them for
// gone).
void report_queued(Self self) {
  auto& st = self->state;
  ++st.ticks_since_report;
  const bool changed = st.queued != st.reported_queued || st.rooms != st.reported_rooms;
  if (!changed && ((st.queued.empty() && st.rooms.empty()) || st.ticks_since_report < 4)) return;
  submission::ShardReport r;
  r.shard = st.opts.shard_id;
  r.has_queued = true;
  r.queued.assign(st.queued.begin(), st.queued.end());
  r.rooms.assign(st.rooms.begin(), st.rooms.end());
  st.out->publish(subjects::kShardRate, submission::shard_report(r));
  st.reported_queued = st.queued;
  st.reported_rooms = st.rooms;
  st.ticks_since_report = 0;
}

void on_inbound(Self self, const Inbound& in) {
  auto& st = self->state;
  if (const auto& answers = st.opts.shard_answers;
      !answers.empty() && in.subject.size() > answers.size() + 1 &&
      in.subject.compare(0, answers.size(), answers) == 0 && in.subject[answers.size()] == '.') {
    on_shard_answer(self, in);
    return;
  }
  auto team_tok = subjects::token(in.subject, subjects::kTeamToken);
  auto verb = subjects::token(in.subject, 2);
  if (team_tok == names::kSysToken) {
    if (in.stream_seq != 0 && subjects::is_handoff(in.subject, subjects::token(in.subject, 3))) {
      take_handoff(self, in);
      return;
    }
    if (in.stream_seq != 0) st.intake->ack(in.stream_seq);  // troupe.sys.enqueue: refused
    if (auto handed = subjects::shard_submit_team(in.subject); !handed.empty()) {
      to_reader(self, std::string(handed), in);  // another shard read it: its pool is ours
      return;
    }
    if (in.subject == subjects::kShardRate) {
      on_shard_rate(self, in);
      return;
    }
    if (!subjects::team_after(subjects::kShardKeyPrefix, in.subject).empty()) {
      answer_key_ask(self, in);
      return;
    }
    if (verb == "agent") {
      std::string node(subjects::token(in.subject, subjects::kAgentNodeToken));
      auto* e = wire::open(in.data);
      if (e == nullptr || !subjects::check_token(node).empty()) {
        log_bad("malformed agent message on " + in.subject, ++st.n.malformed);
        return;
      }
      // A node speaks only for itself, and only as an agent does.
      if (auto why = wire::check_agent_message(*e, node); !why.empty()) {
        int64_t c = ++st.n.distrusted["agent_message_not_from_node"];
        log_bad("refused agent message on " + in.subject + ": " + why, c);
        return;
      }
      self->send(st.w.nodes, route_atom_v, node, Envelope{in.data});
      return;
    }
    if (in.subject == subjects::kSysCordon || in.subject == subjects::kSysUncordon ||
        in.subject == subjects::kSysDrain || in.subject == subjects::kSysRemoveNode) {
      json req;
      if (!parse_request(self, in, req)) return;
      std::string node = req.value("node", std::string());
      if (!subjects::check_token(node).empty()) {
        ++st.n.rejected;
        if (!in.reply.empty())
          st.out->publish(in.reply, errors::error_json(errors::kBadRequest, "node is required"));
        return;
      }
      if (in.subject == subjects::kSysRemoveNode) {
        self->send(st.w.nodes, remove_atom_v, node, in.reply);
        return;
      }
      bool on = in.subject != subjects::kSysUncordon;
      // Why, as the operator said it (shown by troupe nodes); bounded.
      std::string reason = req.contains("reason") && req["reason"].is_string()
                               ? req["reason"].get<std::string>()
                               : std::string();
      if (reason.size() > names::kMaxNodeReasonBytes || !names::printable(reason)) {
        ++st.n.rejected;
        if (!in.reply.empty())
          st.out->publish(in.reply, errors::error_json(
                                        errors::kBadRequest,
                                        "reason must be printable text of at most " +
                                            std::to_string(names::kMaxNodeReasonBytes) + " bytes"));
        return;
      }
      self->send(st.w.nodes, cordon_atom_v, node, on, in.subject == subjects::kSysDrain,
                 on ? reason : std::string(), in.reply);
      return;
    }
    if (in.subject == subjects::kSysDebugCrash) {
      json req;
      if (!parse_request(self, in, req)) return;
      std::string kind = req.value("kind", std::string());
      std::string id = req.value("id", std::string());
      bool known = kind == "job" || kind == "queue" || kind == "node";
      std::string error = !st.opts.debug_crash
                              ? "debug requests are off (troupe-scheduler --debug-crash)"
                          : !known                             ? "kind must be job, queue or node"
                          : !subjects::check_token(id).empty() ? "id is required"
                                                               : "";
      // (every shard acts on it; one answers)
      const bool answer = !in.reply.empty() && answers_for_all(self);
      if (!error.empty()) {
        ++st.n.rejected;
        if (answer) st.out->publish(in.reply, errors::error_json(errors::kBadRequest, error));
        return;
      }
      if (kind == "job")
        self->send(st.w.jobs, crash_atom_v, id);
      else if (kind == "queue")
        self->send(st.w.queues, crash_atom_v, id);
      else
        self->send(st.w.nodes, crash_atom_v, id);
      if (answer) st.out->publish(in.reply, json{{"crashed", kind + " " + id}}.dump());
      return;
    }
    if (in.subject == subjects::kSysShardPart) {
      shard_part(self, in);
      return;
    }
    // The cluster's views: one answer. Of shards, the coordinator's shell
    // puts nodes, queues and jobs together from each pool's part
    // (shard_part); stats and usage are the coordinator's.
    const bool gathered = in.subject == subjects::kSysQueues || in.subject == subjects::kSysNodes ||
                          verb == subjects::kJobs;
    const bool views = gathered || in.subject == subjects::kSysStats || verb == subjects::kUsage;
    if (views && st.opts.shards.sharded() && (gathered || !answers_for_all(self))) {
      ++st.n.other_shard;
      return;
    }
    if (in.subject == subjects::kSysQueues) {
      self->send(st.w.arbiter, queues_atom_v, in.reply);
      return;
    }
    if (in.subject == subjects::kSysNodes) {
      self->send(st.w.arbiter, list_atom_v, in.reply);
      return;
    }
    if (in.subject == subjects::kSysStats) {
      std::vector<std::string> codes;
      for (auto r : policy::kAllRefusals) codes.emplace_back(policy::code_name(r));
      std::string extra = st.opts.extra_stats ? st.opts.extra_stats() : std::string();
      if (st.opts.shards.sharded()) {
        // A shard: the other shards' queued jobs per team, as last reported.
        json j = extra.empty() ? json::object() : json_text::parse<json>(extra);
        if (!j.is_object()) j = json::object();
        json others = json::object();
        for (const auto& [shard, peer] : st.peers.peers)
          for (const auto& [team, n] : peer.queued)
            if (!others.contains(team))
              others[team] = policy::peers_queued(st.peers, team, st.w.now_ms(), kPeerStaleMs);
        j["queued_in_other_shards"] = std::move(others);
        extra = j.dump();
      }
      st.out->publish(in.reply, views::stats_json(st.n, st.out->published(), codes, extra));
      return;
    }
    if (verb == subjects::kJobs) {
      json req;
      if (parse_request(self, in, req)) list_jobs(self, in, std::string(names::kSysToken), req);
      return;
    }
    if (verb == subjects::kUsage) {
      json req;
      if (parse_request(self, in, req)) report_usage(self, in, std::string(names::kSysToken), req);
      return;
    }
    if (in.subject == subjects::kSysFind) {
      json req;
      std::string id;
      if (!parse_request(self, in, req) || !job_id_of(self, in, req, id)) return;
      self->send(st.w.jobs, find_atom_v, id, in.reply);
      return;
    }
    if (verb == subjects::kSubmit) {
      if (in.reply.empty()) return;  // (also a standby's handover marker: shell/standby.hpp)
      reject(self, Waiter{in.reply, false}, policy::Refusal::not_allowed,
             "team name 'sys' is reserved", {});
      return;
    }
    return;
  }
  std::string team(team_tok);
  if (verb == subjects::kSubmit || verb == subjects::kEnqueue || verb == subjects::kPipeline) {
    to_reader(self, team, in);
    return;
  }
  if (st.opts.shards.sharded() &&
      (verb == subjects::kJobs ||
       ((verb == subjects::kSchedule || verb == subjects::kUsage) && !answers_for_all(self)))) {
    // Schedules and usage: the coordinator's; a team's jobs: put together by
    // the coordinator's shell from each pool's part (shard_part).
    ++st.n.other_shard;
    return;
  }
  if (!take_request_token(self, team, verb, in)) return;
  if (verb == subjects::kSchedule) {  // the schedule keeper reads and answers it
    self->send(st.w.schedules, schedule_atom_v, team, std::string(in.data.begin(), in.data.end()),
               in.reply);
    return;
  }
  json req;
  if (!parse_request(self, in, req)) return;
  if (verb == subjects::kJobs) {
    list_jobs(self, in, team, req);
    return;
  }
  if (verb == subjects::kUsage) {
    report_usage(self, in, team, req);
    return;
  }
  std::string id;
  if (!job_id_of(self, in, req, id)) return;
  if (verb == subjects::kStatus) {
    self->send(st.w.jobs, status_atom_v, id, team, in.reply);
  } else if (verb == subjects::kWhy) {
    self->send(st.w.jobs, why_atom_v, id, team, in.reply);
  } else if (verb == subjects::kCancel) {
    // "if_queued": true cancels only a job not started yet (docs/api.md).
    auto it = req.find("if_queued");
    if (it != req.end() && !it->is_null() && !it->is_boolean()) {
      ++st.n.rejected;
      if (!in.reply.empty())
        st.out->publish(in.reply,
                        errors::error_json(errors::kBadRequest, "if_queued must be true or false"));
      return;
    }
    bool if_queued = it != req.end() && it->is_boolean() && it->get<bool>();
    self->send(st.w.jobs, cancel_atom_v, id, team, in.reply, if_queued);
  } else if (verb == subjects::kLogs) {
    // (as the agent reads it: a float's cast to an integer out of range
    // is undefined behaviour, so only integers are taken)
    logchunks::PageRequest page;
    if (auto err = logchunks::read_page_request(req, &page); !err.empty()) {
      ++st.n.rejected;
      if (!in.reply.empty())
        st.out->publish(in.reply, errors::error_json(errors::kBadRequest, err));
      return;
    }
    self->send(st.w.jobs, logs_atom_v, id, team, page.rank, page.offset, page.max_bytes, in.reply);
  } else if (verb == subjects::kHistory) {
    // The job supervisor checks the job is the team's, then hands it back
    // (history_atom below) to be read.
    self->send(st.w.jobs, history_atom_v, id, team, in.reply);
  }
}

// What is read from a job's stored events: its history, or (a purged job)
// its status rebuilt from them.
enum class FromEvents { history, history_if_any, status };

// A job's stored events are read (a worker thread of the History port) and
// the reply is published from there. Only troupe.<team>.events.<id> is read,
// so another team's job has none: history_if_any and status then answer as
// for no job at all (a job the job supervisor no longer holds).
void read_history(Self self, const std::string& id, const std::string& team,
                  const std::string& reply, FromEvents what = FromEvents::history) {
  auto& st = self->state;
  if (reply.empty()) return;
  if (!st.opts.history) {
    st.out->publish(reply, what == FromEvents::history
                               ? errors::error_json(errors::kUnavailable,
                                                    "this scheduler does not read job histories")
                               : errors::no_job(id));
    return;
  }
  st.opts.history->read(
      team, id,
      [out = st.out, id, reply, what](std::vector<std::string> events, std::string error) {
        if (!error.empty()) {
          out->publish(reply, errors::error_json(errors::kUnavailable, error));
          return;
        }
        if (what == FromEvents::status) {
          auto view = view_from_events(id, events);
          out->publish(reply, view ? spec::view_json(*view) : errors::no_job(id));
          return;
        }
        if (what == FromEvents::history_if_any && !view_from_events(id, events)) {
          out->publish(reply, errors::no_job(id));
          return;
        }
        out->publish(reply, policy::history_reply(id, events, policy::kMaxReplyBytes));
      });
}

// troupe.<team>.usage and troupe.sys.usage (every team): {"since_ms",
// "until_ms", "by"} (each optional: the last 7 days, by team) -> the report
// of policy/usage.hpp, read from the events stream on the history reader's
// thread. Events stored up to a day before `since_ms` are read too: an
// attempt that started then still counts from `since_ms` on.
void report_usage(Self self, const Inbound& in, const std::string& team, const json& req) {
  auto& st = self->state;
  if (in.reply.empty()) return;
  auto refuse = [&](const std::string& why) {
    ++st.n.rejected;
    st.out->publish(in.reply, errors::error_json(errors::kBadRequest, why));
  };
  policy::usage::Query q;
  if (auto why = policy::usage::parse_query(req, st.w.now_ms(), &q); !why.empty())
    return refuse(why);
  if (!st.opts.history) {
    st.out->publish(in.reply, errors::error_json(errors::kUnavailable,
                                                 "this scheduler does not read job events"));
    return;
  }
  auto counter = std::make_shared<policy::usage::Counter>(q);
  std::string filter = team == names::kSysToken
                           ? std::string(subjects::kAllEvents)
                           : subjects::team_verb(team, subjects::kEvents) + ".>";
  st.opts.history->scan(
      filter, policy::usage::scan_from_ms(q),
      [counter](std::string_view event) {
        pb::JobEvent e;
        if (spec::read_event_json(event, &e)) counter->add(e);
      },
      [out = st.out, reply = in.reply, counter](std::string error) {
        out->publish(reply, error.empty() ? counter->json()
                                          : errors::error_json(errors::kUnavailable, error));
      });
}

RouterActor::behavior_type router_behavior(Self self, OutboxPtr out, IntakePtr intake,
                                           SchedulerOptions opts) {
  auto& st = self->state;
  st.opts = std::move(opts);
  st.out = std::move(out);
  st.intake = std::move(intake);
  st.started_ms = st.opts.clock ? st.opts.clock->now_ms() : system_now_ms();
  st.id_prefix = submission::job_id_prefix(st.started_ms);
  const bool reports = st.opts.shards.sharded() && !st.opts.shard_id.empty();
  if (reports) self->delayed_send(self, kShardReportEvery, tick_atom_v);
  for (int i = 0; i < std::max(1, st.opts.intake_readers); ++i)
    st.readers.push_back(spawn_intake_reader(self, RouterActor{self}, st.opts.clock, st.opts.shards,
                                             reports ? st.out : nullptr,
                                             reports ? st.opts.shard_id : std::string()));
  // As CAF's default (a normal exit of a linked actor is ignored), and first
  // the handed submissions not answered yet are recorded for their owners.
  self->set_exit_handler([=](caf::exit_msg& m) {
    if (!m.reason) return;
    record_handing(self, true);
    self->quit(std::move(m.reason));
  });
  return {
      [=](const Wiring& w) { self->state.w = w; },
      [=](const Inbound& in) {
        ++self->state.n.bus_in;
        try {
          on_inbound(self, in);
        } catch (const std::exception& e) {
          // Bad input must never take the router down.
          log_bad(std::string("request failed: ") + e.what(), ++self->state.n.malformed);
          if (!in.reply.empty())
            self->state.out->publish(
                in.reply,
                errors::error_json(errors::kBadRequest, std::string("bad request: ") + e.what()));
        }
      },
      [=](config_atom, const std::string& text) {
        if (auto err = policy::load_config_or_open(text, self->state.cfg); !err.empty()) {
          spdlog::error("router: config refused: {}", err);
          return;
        }
        self->state.shapes_stale = true;  // pools may have moved
        for (const auto& r : self->state.readers) self->send(r, config_atom_v, text);
      },
      [=](restore_atom, const std::vector<std::string>& keys, uint64_t next_seq,
          const std::vector<std::string>& fingerprints, const std::vector<std::string>& queued) {
        // After a scheduler restart: idempotency keys (team/key, job id pairs)
        // and their specs' fingerprints (team/key, fingerprint pairs), the
        // submit order, and a team per restored job still awaiting its first
        // start (max_queued_jobs).
        auto& st = self->state;
        for (size_t i = 0; i + 1 < keys.size(); i += 2) st.keys[keys[i]] = keys[i + 1];
        for (size_t i = 0; i + 1 < fingerprints.size(); i += 2)
          st.fingerprints[fingerprints[i]] = fingerprints[i + 1];
        for (const auto& team : queued) ++st.queued[team];
        st.next_seq = std::max(st.next_seq, next_seq);
      },
      [=](shape_atom, const policy::NodeCapacity& c) {
        // A node registered (node supervisor): what it could ever hold.
        auto& st = self->state;
        policy::NodeShape n{c.name,       c.pool,       c.gpu_type,
                            c.gpus_total, c.cpus_total, c.memory_total_mb};
        auto it = st.nodes.find(c.name);
        if (it != st.nodes.end() && it->second.pool == n.pool &&
            it->second.gpu_type == n.gpu_type && it->second.gpus == n.gpus &&
            it->second.cpus == n.cpus && it->second.memory_mb == n.memory_mb)
          return;
        st.nodes[c.name] = std::move(n);
        st.shapes_stale = true;
      },
      [=](remove_atom, const std::string& node) {
        // A lost node removed (node supervisor): what it could hold counts
        // no more for admission.
        if (self->state.nodes.erase(node) != 0) self->state.shapes_stale = true;
      },
      [=](fire_atom, const std::string& team, const std::string& name, int64_t tick,
          const std::string& spec_json) {
        // A schedule's run: read and checked as a submission of its team
        // (the schedule's labels set after the check, which refuses them
        // from users), then submitted; the keeper hears how it went.
        auto& st = self->state;
        std::string token = std::string(kFireReply) + std::to_string(++st.next_fire);
        st.fires[token] = {team, name, tick};
        auto c = std::make_shared<submission::Checked>();
        c->team = team;
        auto parsed = spec::from_json(spec_json);
        if (!parsed.ok) {
          c->verdict = {policy::Refusal::invalid_spec, parsed.error};
        } else {
          spec::Limits lim;
          lim.priority_classes = st.cfg.class_names();
          auto read = submission::check_spec(std::move(parsed.spec), team, st.cfg, lim);
          c->verdict = std::move(read.verdict);
          c->spec = std::move(read.spec);
          c->adm = std::move(read.adm);
          auto& labels = *c->spec.mutable_labels();
          labels[std::string(names::kScheduleLabel)] = name;
          labels[std::string(names::kScheduleTickLabel)] = std::to_string(tick);
        }
        submit(self, ReadSubmission{Inbound(subjects::team_submit(team), token, {}), std::move(c)});
      },
      [=](unqueued_atom, const std::string& team) {
        // A job left `queued` for the first time (job supervisor).
        unqueue(self->state, team);
      },
      [=](stats_atom, const std::string& kind, int64_t restarts) {
        self->state.n.restarts[kind] = restarts;
      },
      [=](distrust_atom, const std::string& what) { ++self->state.n.distrusted[what]; },
      [=](report_atom) {
        self->state.report_due = false;
        report_queued(self);
      },
      [=](tick_atom) {
        report_queued(self);
        sweep_key_asks(self);
        record_handing(self, false);
        self->delayed_send(self, kShardReportEvery, tick_atom_v);
      },
      [=](heard_atom, int64_t other_pools) { self->state.n.other_pool_agent = other_pools; },
      [=](room_atom, const std::string& pool, int32_t free, int32_t largest, int32_t waiting,
          int32_t total) {
        auto& st = self->state;
        if (!st.opts.shards.sharded() || !st.opts.shards.owns_pool(pool)) return;
        policy::PoolRoom r;
        r.free_gpus = free;
        r.largest_free = largest;
        r.pending_gpus = waiting;
        r.total_gpus = total;
        st.rooms[pool] = r;
        tell_readers_room(st, pool, r);
      },
      [=](why_atom, const std::string& reply, const std::string& body) {
        if (!reply.empty()) self->state.out->publish(reply, body);
      },
      [=](intake_atom, const std::string& job_id, bool ok, bool duplicate, const std::string& error,
          const std::string& original) { on_intake(self, job_id, ok, duplicate, error, original); },
      [=](history_atom, const std::string& id, const std::string& team, const std::string& reply) {
        read_history(self, id, team, reply);
      },
      [=](status_atom, const std::string& id, const std::string& team, const std::string& reply) {
        read_history(self, id, team, reply, FromEvents::status);
      },
      [=](purged_atom, const std::string& key, const std::string& job_id) {
        auto& st = self->state;
        if (auto it = st.keys.find(key); it != st.keys.end() && it->second == job_id) {
          st.keys.erase(it);
          st.fingerprints.erase(key);  // the key's spec, known only while the key is
          shrink_if_sparse(st.keys);
          shrink_if_sparse(st.fingerprints);
        }
      },
      [=](history_atom, const std::string& id, const std::string& team, const std::string& reply,
          bool) { read_history(self, id, team, reply, FromEvents::history_if_any); },
      [=](const ReadSubmission& r) {
        try {
          submit(self, r);
        } catch (const std::exception& e) {
          log_bad(std::string("submission failed: ") + e.what(), ++self->state.n.malformed);
          if (!r.in.reply.empty())
            self->state.out->publish(
                r.in.reply,
                errors::error_json(errors::kBadRequest, std::string("bad request: ") + e.what()));
        }
      },
  };
}

}  // namespace

RouterActor spawn_router(caf::actor_system& sys, OutboxPtr out, IntakePtr intake,
                         SchedulerOptions opts) {
  return sys.spawn(router_behavior, std::move(out), std::move(intake), std::move(opts));
}

}  // namespace troupe

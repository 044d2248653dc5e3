#include "actors/job_actor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <optional>
#include <utility>

#include "actors/errors.hpp"
#include "actors/job_record.hpp"
#include "actors/policy/dependencies.hpp"
#include "actors/policy/las.hpp"
#include "actors/policy/ledger.hpp"
#include "actors/policy/preemption.hpp"
#include "actors/policy/retry.hpp"
#include "actors/recovery.hpp"
#include "actors/views.hpp"
#include "bus/subjects.hpp"
#include "messages/event_json.hpp"
#include "messages/names.hpp"
#include "messages/wire.hpp"

namespace troupe {

using namespace troupe::atoms;

namespace {

constexpr int kStopGraceS = 10;
constexpr std::string_view kPreempted = "preempted";
constexpr auto kStopResend = std::chrono::seconds(15);
// A front door's job its front door did not answer about (or refused for
// now): placed again after this long, and asks again.
constexpr auto kClaimAgain = std::chrono::seconds(2);

// The job's phase: one at a time, the actor's own. The record, its events and
// its replies carry the phase's name (names::k*): name_of / phase_of, here only.
//   queued --placed--> starting --all Started--> running --all Exited--> an end
//   an attempt preempted: preempted --> queued (or failed)
//   blocked (waiting for its depends_on jobs) is a record's only: the job
//   supervisor keeps such a job, which has no actor.
enum class Phase { blocked, queued, starting, running, preempted, succeeded, failed, canceled };

constexpr std::pair<Phase, std::string_view> kPhaseNames[] = {
    {Phase::blocked, names::kBlocked},   {Phase::queued, names::kQueued},
    {Phase::starting, names::kStarting}, {Phase::running, names::kRunning},
    {Phase::preempted, kPreempted},      {Phase::succeeded, names::kSucceeded},
    {Phase::failed, names::kFailed},     {Phase::canceled, names::kCanceled},
};

std::string_view name_of(Phase phase) {
  for (const auto& [p, name] : kPhaseNames)
    if (p == phase) return name;
  return {};
}

std::optional<Phase> phase_of(std::string_view name) {
  for (const auto& [p, n] : kPhaseNames)
    if (n == name) return p;
  return std::nullopt;
}

bool terminal(Phase p) {
  return p == Phase::succeeded || p == Phase::failed || p == Phase::canceled;
}

// An attempt is placed: its workers start, run, or are being stopped.
bool placed(Phase p) {
  return p == Phase::starting || p == Phase::running;
}

struct JobState {
  pb::JobRecord rec;
  Phase phase = Phase::queued;
  Wiring w;
  OutboxPtr out;
  bool stop_sent = false;
  // The Launches of the current attempt wait until the events stream holds
  // its `starting` event (this seq): a scheduler killed in between restores
  // the job as starting (its nodes then say the workers never ran) and never
  // places it again under a worker id an agent already runs.
  int64_t launch_after_seq = 0;
  // The last stop asked of the current attempt, sent again every kStopResend
  // until the attempt ends (a Stop can die with a crashed node actor's mailbox;
  // agents take a repeated Stop as the same request).
  struct StopOrder {
    std::string reason;
    int signal = SIGTERM;
    int grace_s = kStopGraceS;
  } stop;
  int infra_cap = 10;
  // A front door's job (spec.dispatch) not granted yet: the placement it
  // holds while its front door is asked (claim `claim`), in memory only (a
  // restarted actor is queued again and asks again).
  std::optional<Assignment> awaiting;
  int64_t claim = 0;
  static inline const char* name = "job";
};

using Self = JobActor::stateful_pointer<JobState>;

bool has(const google::protobuf::RepeatedField<int32_t>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// An ended job's actor lingers to answer late messages: its supervisor sends
// it done_atom once Wiring::linger_ms passed (one sweep for every ended job,
// not a timer each).
void linger(Self self) {
  self->send(self->state.w.jobs, done_atom_v, self->state.rec.job_id());
}

void save(Self self) {
  std::string bytes;
  self->state.rec.SerializeToString(&bytes);
  self->send(self->state.w.jobs, snapshot_atom_v, self->state.rec.job_id(), std::move(bytes));
}

void announce(Self self, bool write_ahead) {
  const auto& r = self->state.rec;
  Outbox::Stored stored;
  if (write_ahead)
    stored = [me = JobActor{self}, attempt = r.attempt(), seq = r.event_seq()] {
      caf::anon_send(me, stored_atom_v, static_cast<int32_t>(attempt), static_cast<int64_t>(seq));
    };
  else if (terminal(self->state.phase))
    // Its end is stored: the jobs that depend on it may go on (only then, so
    // that their events come after this one).
    stored = [jobs = self->state.w.jobs, id = r.job_id()] {
      caf::anon_send(jobs, ended_atom_v, id);
    };
  auto [subject, json] = last_event_message(r);
  self->state.out->publish_event(subject, json, std::move(stored));
}

// The record's side of a state change (also for a job without an actor).
void enter_record(pb::JobRecord& r, Phase phase, std::string reason, const std::string& cause,
                  int64_t now_ms) {
  r.set_state(std::string(name_of(phase)));
  r.set_reason(std::move(reason));
  r.set_event_seq(r.event_seq() + 1);
  // The first event is dated by the submission (kept in the intake stream):
  // a job restored from the intake after a kill announces it identical.
  r.set_event_ts_ms(r.event_seq() == 1 && r.submit_ms() > 0 ? r.submit_ms() : now_ms);
  r.set_event_cause(cause);
  if (phase == Phase::running) r.set_start_ms(r.event_ts_ms());
  if (terminal(phase)) r.set_end_ms(r.event_ts_ms());
  // The event as announced, kept: what the record becomes later (the next
  // attempt, its placement cleared) must not rewrite it if it is sent again.
  recovery::remember_announced(r, now_ms);
}

// Every state change: record, snapshot, event (in that order). `write_ahead`:
// this actor hears (stored_atom) once the events stream holds the event.
void enter(Self self, Phase phase, std::string reason = {}, const std::string& cause = {},
           bool write_ahead = false) {
  self->state.phase = phase;
  enter_record(self->state.rec, phase, std::move(reason), cause, self->state.w.now_ms());
  save(self);
  announce(self, write_ahead);
}

void to_node(Self self, const std::string& node, Envelope env) {
  self->send(self->state.w.nodes, route_atom_v, node, std::move(env));
}

void enqueue(Self self) {
  self->send(self->state.w.queues, enqueue_atom_v, ticket_of(self->state.rec));
}

// Frees every hold of `attempt` on `nodes`, and gives the team's usage back
// to the arbiter. Called after the event that ends the attempt is out.
void release_holds(Self self, const std::string& job_id, int attempt,
                   const std::vector<std::string>& nodes) {
  self->send(self->state.w.arbiter, done_atom_v, job_id, self->state.rec.pool());
  for (size_t rank = 0; rank < nodes.size(); ++rank)
    to_node(self, nodes[rank],
            Envelope{wire::release(policy::hold_id(job_id, attempt, static_cast<int>(rank)),
                                   "attempt ended")});
}

std::vector<std::string> placed_nodes(const pb::JobRecord& r) {
  std::vector<std::string> nodes;
  for (const auto& p : r.placement()) nodes.push_back(p.node());
  return nodes;
}

// A preemption's grace: the spec's, capped by the config's max_grace_s (on the record).
int preempt_grace(const pb::JobRecord& r) {
  return policy::preempt_grace_s(
      r.spec().has_grace_s() ? std::optional<int>(r.spec().grace_s()) : std::nullopt,
      r.max_grace_s());
}

int signal_number(const std::string& name) {
  if (name.empty() || name == "SIGUSR1" || name == "USR1") return SIGUSR1;
  if (name == "SIGUSR2" || name == "USR2") return SIGUSR2;
  if (name == "SIGTERM" || name == "TERM") return SIGTERM;
  if (name == "SIGINT" || name == "INT") return SIGINT;
  int n = std::atoi(name.c_str());
  return n > 0 ? n : SIGUSR1;
}

// Asks every rank still running to stop: `signal` first, SIGTERM after
// `grace_s`, SIGKILL a little later (the agent escalates).
void send_stops(Self self) {
  auto& st = self->state;
  for (const auto& p : st.rec.placement()) {
    if (has(st.rec.exited_ranks(), p.rank())) continue;
    to_node(self, p.node(),
            Envelope{wire::stop(st.rec.job_id(), st.rec.attempt(), p.rank(), st.stop.grace_s,
                                st.stop.reason, st.stop.signal, 5, st.w.epoch)});
  }
}

void stop_all(Self self, const std::string& reason, int signal = SIGTERM,
              int grace_s = kStopGraceS) {
  auto& st = self->state;
  if (st.stop_sent) return;
  st.stop_sent = true;
  st.stop = {reason, signal, grace_s};
  send_stops(self);
  self->delayed_send(self, kStopResend, restop_atom_v, static_cast<int32_t>(st.rec.attempt()));
}

void finish(Self self, Phase phase, const std::string& cause) {
  enter(self, phase, self->state.rec.reason(), cause);
  linger(self);
}

// Records the attempt that just ended in the job's history.
void record_attempt(pb::JobRecord& r, const std::string& cause, const std::string& kind,
                    int64_t now_ms) {
  auto* a = r.add_attempts();
  a->set_attempt(r.attempt());
  for (const auto& p : r.placement()) a->add_nodes(p.node());
  a->set_cause(cause);
  a->set_kind(kind);
  if (r.has_failed_exit_code()) a->set_exit_code(r.failed_exit_code());
  a->set_reason(r.failed_reason());
  a->set_start_ms(r.start_ms());
  a->set_end_ms(now_ms);
}

// The job goes back to its queue for the next attempt (keeping its submit order).
void requeue(Self self, const std::string& why, const std::string& cause, int64_t delay_ms) {
  auto& r = self->state.rec;
  r.set_attempt(r.attempt() + 1);
  r.clear_placement();
  r.clear_started_ranks();
  r.clear_exited_ranks();
  r.clear_failed_exit_code();
  r.clear_failed_reason();
  r.clear_end_cause();
  r.clear_end_kind();
  r.set_preempt_requested(false);
  r.set_not_before_ms(delay_ms > 0 ? self->state.w.now_ms() + delay_ms : 0);
  enter(self, Phase::queued, why, cause);
  if (delay_ms > 0)
    self->delayed_send(self, std::chrono::milliseconds(delay_ms), retry_atom_v);
  else
    enqueue(self);
}

// All ranks of the current attempt have exited: decide what comes next.
void attempt_over(Self self) {
  auto& r = self->state.rec;
  auto nodes = placed_nodes(r);
  int attempt = r.attempt();
  self->state.stop_sent = false;
  std::string cause = r.end_cause().empty() ? "succeeded" : r.end_cause();
  std::string kind = r.end_kind().empty() ? "none" : r.end_kind();
  if (r.cancel_requested()) {
    cause = "canceled";
    kind = "none";
  } else if (r.preempt_requested()) {
    cause = "preempted";
    kind = "infra";
  }
  record_attempt(r, cause, kind, self->state.w.now_ms());
  if (r.cancel_requested()) {
    r.set_reason("canceled by request");
    finish(self, Phase::canceled, "canceled");
  } else if (r.preempt_requested()) {
    r.set_infra_requeues(r.infra_requeues() + 1);
    std::string why = "preempted on attempt " + std::to_string(attempt);
    enter(self, Phase::preempted, why, "preempted");
    self->send(self->state.w.arbiter, retried_atom_v, std::string("preempted"),
               std::string("infra"));
    policy::RetryBudget b;
    b.infra_cap = self->state.infra_cap;
    b.infra_used = r.infra_requeues() - 1;
    if (policy::decide_retry({policy::FailureKind::kInfra, "preempted"}, b).retry) {
      requeue(self, why + "; back in the queue", "preempted", 0);
    } else {
      r.set_reason("preempted too often: " + std::to_string(r.infra_requeues()) + " requeues");
      finish(self, Phase::failed, "preempted");
    }
  } else if (kind != "none") {
    policy::Outcome o{kind == "user" ? policy::FailureKind::kUser : policy::FailureKind::kInfra,
                      cause};
    policy::RetryBudget b;
    b.max_retries = r.spec().max_retries();
    b.retries_used = r.retries_used();
    b.infra_cap = self->state.infra_cap;
    b.infra_used = r.infra_requeues();
    auto d = policy::decide_retry(o, b);
    if (d.retry) {
      std::string why;
      if (o.kind == policy::FailureKind::kUser) {
        r.set_retries_used(r.retries_used() + 1);
        why = "retry " + std::to_string(r.retries_used()) + " of " + std::to_string(b.max_retries) +
              " after: " + r.failed_reason();
      } else {
        r.set_infra_requeues(r.infra_requeues() + 1);
        why = "requeued (infrastructure: " + cause + ", no retry used) after: " + r.failed_reason();
      }
      self->send(self->state.w.arbiter, retried_atom_v, cause, kind);
      requeue(self, why, cause, d.delay_ms);
    } else {
      if (r.has_failed_exit_code()) r.set_exit_code(r.failed_exit_code());
      r.set_reason(r.failed_reason() + " (" + d.why + ")");
      finish(self, Phase::failed, cause);
    }
  } else {
    r.set_exit_code(0);
    r.set_reason("all workers exited with code 0");
    finish(self, Phase::succeeded, "succeeded");
  }
  release_holds(self, r.job_id(), attempt, nodes);
}

// Whether rank `rank` of the current attempt is placed on `node`: only that
// node's report about it counts.
bool placed_on(const pb::JobRecord& r, int rank, const flatbuffers::String* node) {
  for (const auto& p : r.placement())
    if (p.rank() == rank) return node != nullptr && node->string_view() == p.node();
  return false;
}

void on_started(Self self, const wire::Started* s) {
  auto& r = self->state.rec;
  if (s->attempt() != r.attempt() || has(r.started_ranks(), s->rank())) return;
  if (!placed_on(r, s->rank(), s->node())) return;
  r.add_started_ranks(s->rank());
  if (self->state.phase == Phase::starting && r.started_ranks_size() == r.placement_size())
    enter(self, Phase::running);
  else
    save(self);
}

void on_exited(Self self, const wire::Exited* x) {
  auto& r = self->state.rec;
  if (x->attempt() != r.attempt() || has(r.exited_ranks(), x->rank())) return;
  if (!placed(self->state.phase)) return;
  if (!placed_on(r, x->rank(), x->node())) return;
  r.add_exited_ranks(x->rank());
  bool stopping = r.cancel_requested() || r.preempt_requested();
  auto o = policy::classify_exit(x->exit_code(), x->signal(), wire::str(x->reason()), stopping,
                                 r.preempt_requested() && !r.cancel_requested());
  bool failed = o.kind != policy::FailureKind::kNone;
  if (!stopping && failed && r.end_cause().empty()) {
    r.set_end_cause(o.cause);
    r.set_end_kind(policy::kind_name(o.kind));
    if (x->exit_code() >= 0) r.set_failed_exit_code(x->exit_code());
    std::string why = wire::str(x->reason());
    if (why.empty()) why = "exited with code " + std::to_string(x->exit_code());
    if (worker_count(r.spec()) > 1) why = "rank " + std::to_string(x->rank()) + " " + why;
    r.set_failed_reason(why);
  }
  if (r.exited_ranks_size() >= r.placement_size()) {
    attempt_over(self);
    return;
  }
  save(self);
  // A gang is stopped whole: one rank's end (failure, lost node) ends them all.
  if (failed && !stopping) stop_all(self, "another rank ended: " + o.cause);
}

void on_checkpointed(Self self, const wire::Checkpointed* c) {
  auto& r = self->state.rec;
  auto path = wire::str(c->path());
  if (path.empty() || path.find("..") != std::string::npos) return;
  r.set_last_checkpoint(path);
  r.set_last_checkpoint_ms(c->ts_ms());
  save(self);
  self->send(self->state.w.arbiter, checkpoint_atom_v, r.job_id(), r.pool(),
             static_cast<int64_t>(c->ts_ms()));
}

// Sends the Launch of one rank of the current attempt to its node.
void send_launch(Self self, int rank) {
  const auto& r = self->state.rec;
  if (rank < 0 || rank >= r.placement_size()) return;
  const auto& p = r.placement(rank);
  const auto& s = r.spec();
  std::map<std::string, std::string> env(s.env().begin(), s.env().end());
  if (!r.last_checkpoint().empty() && !r.checkpoint_dir().empty())
    env["TROUPE_RESUME_FROM"] = r.checkpoint_dir() + "/" + r.last_checkpoint();
  wire::LaunchFields l;
  l.job_id = r.job_id();
  l.team = s.team();
  l.attempt = r.attempt();
  l.rank = rank;
  l.world_size = r.placement_size();
  l.coordinator = r.coordinator();
  l.gpus.assign(p.gpus().begin(), p.gpus().end());
  l.command.assign(s.command().begin(), s.command().end());
  l.env.assign(env.begin(), env.end());
  l.max_runtime_s = s.max_runtime_s();
  l.grace_s = kStopGraceS;
  l.checkpoint_dir = r.checkpoint_dir();
  l.epoch = self->state.w.epoch;
  l.image = s.image();
  // The worker's cgroup: the spec's resources, else the config's job_defaults.
  l.cpus = s.resources().cpus();
  l.memory_mb = s.resources().memory_mb() > 0 ? s.resources().memory_mb() : r.default_memory_mb();
  l.run_as_uid = r.has_run_as() ? r.run_as() : -1;
  l.gpu_memory_mb = s.resources().gpu_memory_mb();
  to_node(self, p.node(), Envelope{wire::launch(l)});
}

// Gives a placement the job does not run back, only what was never launched:
// not the holds the job keeps of that attempt (the running attempt's, or
// those of the placement its front door is being asked about). Its arbiter
// forgets it, unless the job keeps a placement in that pool.
void hand_back(Self self, const Assignment& a, const std::string& why) {
  const auto& st = self->state;
  const auto& r = st.rec;
  std::vector<std::string> kept;
  std::string kept_pool;
  bool keeps = false;
  if (a.attempt == r.attempt() && placed(st.phase)) {
    keeps = true;
    kept = placed_nodes(r);
    kept_pool = r.pool();
  } else if (st.awaiting && a.attempt == st.awaiting->attempt) {
    keeps = true;
    kept = st.awaiting->nodes;
    kept_pool = st.awaiting->pool;
  }
  // Not the kept attempt's, or an any-type job's second placement in
  // another pool: that pool's arbiter forgets it.
  if (!keeps || a.pool != kept_pool) self->send(st.w.arbiter, done_atom_v, a.job_id, a.pool);
  for (size_t rank = 0; rank < a.nodes.size(); ++rank) {
    if (keeps && rank < kept.size() && kept[rank] == a.nodes[rank]) continue;
    to_node(self, a.nodes[rank],
            Envelope{wire::release(policy::hold_id(a.job_id, a.attempt, static_cast<int>(rank)),
                                   why, true)});
  }
}

// The placement held while the front door was asked goes back (a cancel, a
// preemption, a verdict other than granted).
void drop_awaiting(Self self, const std::string& why) {
  auto& st = self->state;
  if (!st.awaiting) return;
  auto a = std::move(*st.awaiting);
  st.awaiting.reset();
  hand_back(self, a, why);
}

// A front door's job starts only once its front door granted it (once: later
// attempts do not ask again). No gate bound: every claim is granted.
bool needs_grant(Self self) {
  const auto& r = self->state.rec;
  return !r.spec().dispatch().empty() && !r.dispatch_granted() && self->state.w.dispatch;
}

// The attempt starts on assignment `a`: starting, its Launches once that
// event is stored.
void start_attempt(Self self, const Assignment& a) {
  auto& r = self->state.rec;
  r.clear_placement();
  if (r.pools_size() > 0 && !a.pool.empty()) r.set_pool(a.pool);  // an any-type job's pool now
  int world = static_cast<int>(a.nodes.size());
  for (int rank = 0; rank < world; ++rank) {
    auto* p = r.add_placement();
    p->set_rank(rank);
    p->set_node(a.nodes[static_cast<size_t>(rank)]);
    for (int g : a.gpus[static_cast<size_t>(rank)]) p->add_gpus(g);
    p->set_gpu_memory_mb(r.spec().resources().gpu_memory_mb());
  }
  r.set_coordinator(a.hosts.front() + ":" + std::to_string(coordinator_port(r.job_id())));
  enter(self, Phase::starting, {}, {}, true);
  self->state.launch_after_seq = r.event_seq();  // the Launches go on stored_atom
}

void on_placed(Self self, const Assignment& a) {
  auto& st = self->state;
  const auto& r = st.rec;
  if (st.phase != Phase::queued || a.attempt != r.attempt() || st.awaiting) {
    // Late or stale: the job moved on (canceled, say), a second grant of the
    // attempt that runs, or of the one whose front door is being asked.
    hand_back(self, a, "stale placement");
    return;
  }
  if (!needs_grant(self)) {
    start_attempt(self, a);
    return;
  }
  // Not started before its front door grants it (troupe.sys.dispatch.claim):
  // it stays queued, holding the placement, until the verdict comes.
  st.awaiting = a;
  st.w.dispatch->claim(r.spec().team(), r.job_id(), r.spec().dispatch(), r.submit_ms(),
                       [me = JobActor{self}, claim = ++st.claim](DispatchGate::Verdict v) {
                         caf::anon_send(me, dispatch_atom_v, claim, v.granted, v.withdrawn,
                                        std::move(v.reason));
                       });
}

// The front door's verdict on claim `claim` (a stale one is dropped: the
// placement it was about went back meanwhile).
void on_verdict(Self self, int64_t claim, bool granted, bool withdrawn, const std::string& why) {
  auto& st = self->state;
  auto& r = st.rec;
  if (!st.awaiting || claim != st.claim || st.phase != Phase::queued) return;
  if (granted) {
    auto a = std::move(*st.awaiting);
    st.awaiting.reset();
    r.set_dispatch_granted(true);
    start_attempt(self, a);
    return;
  }
  if (withdrawn) {
    // The front door sent it to another cluster: it never starts here.
    drop_awaiting(self, "withdrawn by the front door");
    r.set_reason("withdrawn by the front door " + r.spec().dispatch() +
                 ": sent to another cluster" + (why.empty() ? "" : " (" + why + ")"));
    finish(self, Phase::canceled, "canceled");
    return;
  }
  // No answer, or not now: placed again later (not a retry, not a failure).
  spdlog::debug("job {}: front door {} did not grant it ({}); asking again", r.job_id(),
                r.spec().dispatch(), why.empty() ? "no answer" : why);
  drop_awaiting(self, "not granted by the front door");
  self->delayed_send(self, kClaimAgain, retry_atom_v);
}

// The events stream holds event `seq`: the Launches that waited for it go.
void on_stored(Self self, int32_t attempt, int64_t seq) {
  auto& st = self->state;
  const auto& r = st.rec;
  if (st.launch_after_seq == 0 || seq != st.launch_after_seq || attempt != r.attempt() ||
      st.phase != Phase::starting)
    return;  // the attempt moved on meanwhile (canceled, lost, ...)
  st.launch_after_seq = 0;
  for (int rank = 0; rank < r.placement_size(); ++rank) send_launch(self, rank);
}

// A node asks about a hold of this job that waited too long (policy::judge_hold).
void on_hold_check(Self self, const std::string& node, const std::string& hold_id, int32_t attempt,
                   int32_t rank, bool launched) {
  const auto& r = self->state.rec;
  if (const auto& a = self->state.awaiting; a && attempt == a->attempt && rank >= 0 &&
                                            static_cast<size_t>(rank) < a->nodes.size() &&
                                            a->nodes[static_cast<size_t>(rank)] == node)
    return;  // held while its front door is asked: kept
  policy::JobSide job;
  job.state = std::string(name_of(self->state.phase));
  job.attempt = r.attempt();
  if (rank >= 0 && rank < r.placement_size()) job.node_of_rank = r.placement(rank).node();
  job.rank_started = has(r.started_ranks(), rank);
  switch (policy::judge_hold(job, {node, attempt, launched})) {
    case policy::HoldAnswer::release:
      to_node(self, node, Envelope{wire::release(hold_id, "not the job's (hold check)")});
      break;
    case policy::HoldAnswer::relaunch:
      if (self->state.launch_after_seq != 0) break;  // still waiting for its event to be kept
      spdlog::warn("job {}: rank {} on {} never launched; sending its Launch again", r.job_id(),
                   rank, node);
      send_launch(self, rank);
      break;
    case policy::HoldAnswer::keep:
      break;
  }
}

void reply_json(Self self, const std::string& reply, std::string_view state) {
  if (!reply.empty())
    self->state.out->publish(reply, views::job_state_json(self->state.rec.job_id(), state));
}

JobActor::behavior_type job_behavior(Self self, Wiring w, OutboxPtr out, std::string snapshot,
                                     bool woken) {
  auto& st = self->state;
  st.w = std::move(w);
  st.out = std::move(out);
  st.rec.ParseFromString(snapshot);
  auto& r = st.rec;
  if (r.infra_cap() > 0) st.infra_cap = r.infra_cap();
  // A restarted job takes up the phase its record names (any other name: it
  // was between two attempts, as a preempted one is).
  st.phase = phase_of(r.state()).value_or(Phase::preempted);
  if (r.state().empty()) {
    r.set_attempt(1);
    enter(self, Phase::queued);
    enqueue(self);
  } else if (st.phase == Phase::queued && woken) {
    // Waited without an actor: its placement is the next message.
  } else if (st.phase == Phase::queued) {
    // Restarted: make sure the queue has it (it ignores duplicates).
    int64_t wait = r.not_before_ms() - self->state.w.now_ms();
    if (wait > 0)
      self->delayed_send(self, std::chrono::milliseconds(wait), retry_atom_v);
    else
      enqueue(self);
  } else if (terminal(st.phase)) {
    linger(self);
  } else if (!placed(st.phase)) {
    // Restored between an attempt's end and its requeue (e.g. "preempted"):
    // the attempt is over; the job goes back to its queue.
    requeue(self, "recovered after a scheduler restart in state " + r.state(), "recovered", 0);
  } else {
    // starting / running: the workers' agents report (adopted, ended, or
    // lost). Started or Exited messages that died with the previous actor's
    // mailbox: its nodes tell again what they know.
    for (const auto& p : r.placement())
      self->send(st.w.nodes, sync_atom_v, p.node(), r.job_id(), static_cast<int32_t>(r.attempt()),
                 static_cast<int32_t>(p.rank()));
    // A stop asked before the restart is asked again (it may not have gone out).
    if (r.cancel_requested())
      stop_all(self, "canceled");
    else if (r.preempt_requested())
      stop_all(self, r.reason(), signal_number(r.spec().checkpoint_signal()), preempt_grace(r));
    else if (!r.end_cause().empty())
      stop_all(self, "another rank ended: " + r.end_cause());
  }
  return {
      [=](placed_atom, const Assignment& a) { on_placed(self, a); },
      [=](const Envelope& env) {
        auto* e = wire::open(env.bytes);
        if (e == nullptr) return;
        if (auto* s = e->body_as_Started()) on_started(self, s);
        if (auto* x = e->body_as_Exited()) on_exited(self, x);
        if (auto* c = e->body_as_Checkpointed()) on_checkpointed(self, c);
      },
      [=](cancel_atom, const std::string& reply, bool if_queued) {
        auto& r = self->state.rec;
        auto phase = self->state.phase;
        if (if_queued && phase != Phase::queued) {
          // Placed or ended: left as it is. Checked here, where placements
          // come in too, so none can start a job answered as canceled.
          if (!reply.empty())
            self->state.out->publish(reply, errors::not_queued(r.job_id(), name_of(phase)));
        } else if (terminal(phase)) {
          reply_json(self, reply, name_of(phase));
        } else if (phase == Phase::queued) {
          drop_awaiting(self, "canceled");
          self->send(self->state.w.queues, dequeue_atom_v, r.spec().team(), r.job_id());
          r.set_cancel_requested(true);
          r.set_reason("canceled by request");
          finish(self, Phase::canceled, "canceled");
          reply_json(self, reply, name_of(Phase::canceled));
        } else {
          r.set_cancel_requested(true);
          save(self);
          self->state.stop_sent = false;  // a cancel overrides a preemption's gentler stop
          stop_all(self, "canceled");
          reply_json(self, reply, "canceling");
        }
      },
      [=](preempt_atom, const std::string& why) {
        auto& r = self->state.rec;
        if (self->state.awaiting) {
          // Not started yet (its front door is being asked): its placement
          // goes back at once, and the job to its queue.
          drop_awaiting(self, "preempted: " + why);
          enqueue(self);
          return;
        }
        if (!placed(self->state.phase)) return;
        if (r.preempt_requested() || r.cancel_requested()) return;
        r.set_preempt_requested(true);
        r.add_preempted_ms(self->state.w.now_ms());
        r.set_reason("preempting: " + why);
        save(self);
        stop_all(self, "preempted: " + why, signal_number(r.spec().checkpoint_signal()),
                 preempt_grace(r));
      },
      [=](requeue_atom) {
        auto& r = self->state.rec;
        if (self->state.phase == Phase::queued && !self->state.awaiting &&
            r.not_before_ms() <= self->state.w.now_ms())
          enqueue(self);
      },
      [=](retry_atom) {
        if (self->state.phase == Phase::queued && !self->state.awaiting) enqueue(self);
      },
      [=](hold_atom, const std::string& node, const std::string& hold_id, int32_t attempt,
          int32_t rank,
          bool launched) { on_hold_check(self, node, hold_id, attempt, rank, launched); },
      [=](stored_atom, int32_t attempt, int64_t seq) { on_stored(self, attempt, seq); },
      [=](restop_atom, int32_t attempt) {
        auto& st = self->state;
        const auto& r = st.rec;
        if (!st.stop_sent || attempt != r.attempt() || !placed(st.phase)) return;
        send_stops(self);
        self->delayed_send(self, kStopResend, restop_atom_v, attempt);
      },
      [=](crash_atom) { self->quit(caf::sec::runtime_error); },
      [=](done_atom) { self->quit(); },
      [=](dispatch_atom, int64_t claim, bool granted, bool withdrawn, const std::string& why) {
        on_verdict(self, claim, granted, withdrawn, why);
      },
  };
}

}  // namespace

JobActor spawn_job(caf::local_actor* parent, Wiring w, OutboxPtr out, std::string snapshot,
                   bool woken) {
  return parent->spawn(job_behavior, std::move(w), std::move(out), std::move(snapshot), woken);
}

bool may_wait_asleep(const pb::JobRecord& r, int64_t now_ms) {
  return r.state() == names::kQueued && r.attempts_size() == 0 && r.not_before_ms() <= now_ms &&
         !r.cancel_requested();
}

void enter_first_queued(pb::JobRecord& r, int64_t now_ms) {
  r.set_attempt(1);
  enter_record(r, Phase::queued, {}, {}, now_ms);
}

void enter_canceled_queued(pb::JobRecord& r, int64_t now_ms) {
  r.set_cancel_requested(true);
  enter_record(r, Phase::canceled, "canceled by request", "canceled", now_ms);
}

void enter_blocked(pb::JobRecord& r, int64_t now_ms) {
  enter_record(r, Phase::blocked, {}, {}, now_ms);
}

void enter_dependency_failed(pb::JobRecord& r, std::string reason, int64_t now_ms) {
  enter_record(r, Phase::canceled, std::move(reason), policy::deps::kDependencyFailed, now_ms);
}

void enter_array(pb::JobRecord& r, std::string_view state, std::string reason,
                 const std::string& cause, int64_t now_ms) {
  for (const auto& [p, name] : kPhaseNames)
    if (name == state) enter_record(r, p, std::move(reason), cause, now_ms);
}

JobTicket ticket_of(const pb::JobRecord& r) {
  JobTicket t;
  t.job_id = r.job_id();
  t.team = r.spec().team();
  t.attempt = r.attempt();
  t.priority = r.priority_value();
  t.seq = r.seq();  // a requeued job keeps its place: its submit order
  t.max_runtime_s = r.spec().max_runtime_s();
  t.preemptible = r.preemptible();
  t.req = placement_request(r.spec());
  t.req.pool = r.pools_size() > 0 ? r.pools(0) : r.pool();  // it waits in its first candidate
  t.req.pools.assign(r.pools().begin(), r.pools().end());
  if (r.share_across_teams()) t.req.share_key = "*";
  if (r.las_thresholds_gpu_s_size() > 0) {
    t.las_thresholds.assign(r.las_thresholds_gpu_s().begin(), r.las_thresholds_gpu_s().end());
    for (const auto& a : r.attempts())
      t.attained_gpu_s +=
          policy::attempt_gpu_s(t.req.gpus, t.req.workers, a.start_ms(), a.end_ms());
    // Waiting since its last event (queued, or its attempt's end).
    int64_t since = r.event_ts_ms() > 0 ? r.event_ts_ms() : r.submit_ms();
    auto w = policy::waiting_band(t.attained_gpu_s, t.las_thresholds, r.las_promote_after_s(),
                                  since, since);
    t.band = w.band;
    t.promote_at_ms = w.promote_at_ms;
  } else if (r.sjf_band() > 0) {
    // order: sjf: the band of its declared work (policy/sjf.hpp), until the
    // starvation guard moves it to band 0 (the queue does so at once when
    // that time has passed). Its age counts from its submit: a requeued job
    // keeps it, as it keeps its place (seq).
    t.band = r.sjf_band();
    t.promote_at_ms =
        r.sjf_promote_after_s() > 0 ? r.submit_ms() + r.sjf_promote_after_s() * 1000 : 0;
  }
  return t;
}

std::pair<std::string, std::string> last_event_message(const pb::JobRecord& r) {
  return {subjects::job_events(r.spec().team(), r.job_id()), spec::event_json(last_event(r))};
}

}  // namespace troupe

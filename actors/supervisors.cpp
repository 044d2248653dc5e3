// The four supervisors (job, queue, node, gang) on one skeleton, `supervise`:
// shutdown, a child's down message (crash -> restart from its snapshot, end ->
// forget), restart counts to the router, Wiring and (stats_atom) are written
// once there, and Children (actors/children.hpp) is the one owner of the live
// children. Each supervisor adds only its own handlers. What each owns and
// which messages it handles: actors/supervisors.hpp.
#include "actors/supervisors.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "actors/children.hpp"
#include "actors/errors.hpp"
#include "actors/gang_reservation_actor.hpp"
#include "actors/job_actor.hpp"
#include "actors/job_record.hpp"
#include "actors/node_actor.hpp"
#include "actors/policy/admission.hpp"
#include "actors/policy/arrays.hpp"
#include "actors/policy/config.hpp"
#include "actors/policy/deadlines.hpp"
#include "actors/policy/dependencies.hpp"
#include "actors/policy/ledger.hpp"
#include "actors/policy/pages.hpp"
#include "actors/policy/shards.hpp"
#include "actors/policy/why.hpp"
#include "actors/recovery.hpp"
#include "actors/shrink.hpp"
#include "actors/team_queue_actor.hpp"
#include "actors/views.hpp"
#include "bus/subjects.hpp"
#include "messages/log_chunks.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"
#include "messages/wire.hpp"
#include "records.pb.h"

namespace troupe {

using namespace troupe::atoms;

namespace {

// --- the skeleton -------------------------------------------------------------

// What every supervisor's state holds. `make` starts a child from its id and
// last snapshot, and starts it again after a crash.
template <class Handle>
struct SupState {
  SupState(const char* kind, bool keep) : children(kind, keep) {}
  Wiring w;
  OutboxPtr out;
  SnapshotStorePtr store;  // null: in memory only
  Children<Handle> children;
  typename Children<Handle>::Factory make;
  template <class Self>
  Handle start(Self* self, const std::string& id, const std::string& snapshot) {
    return children.start(self, id, snapshot, make);
  }
  // Keeps a child's snapshot (for restarts) and hands it to the durable store.
  void snapshot(const std::string& id, const std::string& key, std::string bytes) {
    if (store) store->put(key, bytes);
    children.snapshot(id, std::move(bytes));
  }
};

// Written once for every supervisor:
// - an exit message stops every child, then the supervisor;
// - a child's down message: a crashed child is started again from its
//   snapshot (Children::on_down), `restarted(id)` runs, and the router hears
//   how many children this supervisor restarted (troupe.sys.stats); a child
//   that ended, or crashed too often, is forgotten and `ended(id)` runs;
// - Wiring, and (stats_atom) -> the restarts so far (SupervisorActor);
// then `own`, the supervisor's own handlers: `Interface` (actors/protocol.hpp)
// is SupervisorActor extended by them.
template <class Interface, class Self, class Factory, class Restarted, class Ended, class... Own>
typename Interface::behavior_type supervise(Self self, Factory make, Restarted restarted,
                                            Ended ended, Own... own) {
  self->state.make = std::move(make);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    bool again = false;
    auto id = st.children.on_down(self, dm, st.make, st.w.now_ms(), &again);
    if (!again) {
      ended(id);
      return;
    }
    restarted(id);
    self->send(st.w.router, stats_atom_v, st.children.kind(),
               static_cast<int64_t>(st.children.total_restarts()));
  });
  self->set_exit_handler([=](caf::exit_msg& m) {
    self->state.children.for_each(
        [&](const std::string&, const auto& a) { self->send_exit(a, m.reason); });
    self->quit(m.reason);
  });
  return {
      [=](const Wiring& w) { self->state.w = w; },
      [=](stats_atom) { return static_cast<int64_t>(self->state.children.total_restarts()); },
      std::move(own)...,
  };
}

// For a `restarted` or `ended` with nothing of its own to do.
void nothing(const std::string&) {}

// The live child `id`, or else what `absent()` gives: it may start the child,
// or answer for it and give none.
template <class Self, class Absent>
auto child_or(Self self, const std::string& id, Absent absent) {
  if (auto a = self->state.children.find(id)) return a;
  return absent();
}

// (crash_atom, id): the debug crash, passed to the child to act out.
template <class Self>
auto pass_crash(Self self) {
  return [=](crash_atom, const std::string& id) {
    if (auto a = self->state.children.find(id)) self->send(a, crash_atom_v);
  };
}

// --- jobs ---------------------------------------------------------------------

struct JobSupState : SupState<JobActor> {
  JobSupState() : SupState("job", true) {}
  // Every job in list order, submit order: (JobRecord.seq, job id) -> team.
  // The seq goes on across scheduler restarts (the router's restore). A
  // job's seq is in its record (its snapshot): never changed once listed.
  std::map<std::pair<uint64_t, std::string>, std::string> order;
  // Jobs that have not left `queued` yet (job id -> team): the router counts
  // them against max_queued_jobs and hears (unqueued_atom) when each leaves.
  // (An array's tasks not started yet are counted by the array's record:
  // each sends its unqueued_atom when it starts as a job or is canceled.)
  std::unordered_map<std::string, std::string> unstarted;
  void track(const pb::JobRecord& rec) {
    if (!spec::is_array(rec.spec()) && queued_slots(rec) > 0)
      unstarted.emplace(rec.job_id(), rec.spec().team());
  }
  // `id` left `queued` for good (started, ended, or its actor is gone).
  void left(const std::string& id) {
    auto it = unstarted.find(id);
    if (it == unstarted.end()) return;
    caf::anon_send(w.router, unqueued_atom_v, it->second);
    unstarted.erase(it);
    shrink_if_sparse(unstarted);
  }
  // An array's tasks are not listed on their own: its row counts them.
  void index(const pb::JobRecord& rec) {
    if (rec.spec().labels().count(policy::arrays::kArrayLabel) != 0) return;
    order.emplace(std::make_pair(rec.seq(), rec.job_id()), rec.spec().team());
  }
  // Where job `id` is in the list (order.end() when it is not).
  decltype(order)::iterator listed(const std::string& id) {
    auto* snap = children.snapshot_of(id);
    pb::JobRecord rec;
    if (snap == nullptr || !rec.ParseFromString(*snap)) return order.end();
    return order.find(std::make_pair(rec.seq(), id));
  }
  // Ended jobs whose actor is gone, (when, id) in that order: each is
  // forgotten retention_ms later (<= 0: never).
  int64_t retention_ms = 0;
  std::deque<std::pair<int64_t, std::string>> ended;
  // Ended jobs whose actor lingers, until when: each is told done_atom then
  // (one sweep for them all, not a timer each). An actor restarted while it
  // lingered lingers anew: only its last time counts.
  policy::Deadlines lingering;
  bool sweep_armed = false;
  StoredLogsPtr logs;  // an ended job's logs are read from TROUPE_LOGS_<team> (null: agents only)
  // Blocked jobs (depends_on) by an upstream job they wait for: judged again
  // when it ends (ended_atom). One that is no longer blocked is passed over.
  std::unordered_map<std::string, std::vector<std::string>> blocked_on;
  // Arrays and sweeps not ended (their record, with a byte per task, is
  // their snapshot; they never have an actor).
  std::unordered_set<std::string> arrays;
  // The state of job `id` of `team` as its record says; "" when there is no
  // such job here (another team's job reads as none).
  std::string state_of(const std::string& id, const std::string& team) {
    auto* snap = children.snapshot_of(id);
    pb::JobRecord rec;
    if (snap == nullptr || !rec.ParseFromString(*snap) || rec.spec().team() != team) return {};
    return rec.state();
  }
  static inline const char* name = "job_supervisor";
};
using JobSup = JobSupervisorActor::stateful_pointer<JobSupState>;

// How often the job supervisor looks for ended jobs past their retention
// and lingering actors past Wiring::linger_ms.
constexpr auto kSweepEvery = std::chrono::seconds(1);

void arm_sweep(JobSup self) {
  auto& st = self->state;
  bool forgets = !st.ended.empty() && st.retention_ms > 0;
  if (st.sweep_armed || (!forgets && st.lingering.empty())) return;
  st.sweep_armed = true;
  self->delayed_send(self, kSweepEvery, tick_atom_v);
}

// An ended job's actor is gone (or it was restored ended): it is forgotten
// `retention_ms` after `since_ms`.
void retire(JobSup self, const std::string& id, int64_t since_ms) {
  auto& st = self->state;
  if (st.retention_ms <= 0) return;
  st.ended.emplace_back(since_ms, id);
  arm_sweep(self);
}

// Forgets `id` for good, when it is still ended and its actor gone: its
// snapshot, its place in the lists, its KV key (purged), its idempotency key,
// its checkpoint dir (wire::Forget to the nodes it ran on).
void forget_job(JobSup self, const std::string& id) {
  auto& st = self->state;
  if (st.children.find(id)) return;
  auto* snap = st.children.snapshot_of(id);
  pb::JobRecord rec;
  if (snap == nullptr || !rec.ParseFromString(*snap) || !names::is_terminal(rec.state())) return;
  if (!rec.spec().idempotency_key().empty())
    self->send(st.w.router, purged_atom_v, rec.spec().team() + "/" + rec.spec().idempotency_key(),
               id);
  st.order.erase(std::make_pair(rec.seq(), id));
  st.children.forget(id);
  if (st.store) st.store->purge(job_key(id));
  // Its checkpoint dir outlived its attempts; it goes with the job: each
  // node it ran on is told (an agent removes what it finds; on storage the
  // nodes share, the first one does).
  for (const auto& node : checkpoint_nodes(rec))
    self->send(st.w.nodes, route_atom_v, node,
               Envelope{wire::forget(id, rec.checkpoint_dir(), st.w.epoch)});
}

// The record of a job without an actor, here and in the store, and its
// event.
void keep_announced(JobSup self, const pb::JobRecord& rec) {
  auto& st = self->state;
  std::string bytes;
  rec.SerializeToString(&bytes);
  st.snapshot(rec.job_id(), job_key(rec.job_id()), std::move(bytes));
  auto [subject, json] = last_event_message(rec);
  st.out->publish_event(subject, json, {});
}

// A queued job waiting without an actor (actors/job_actor.hpp): its record
// and event, its ticket to its team's queue.
void keep_asleep(JobSup self, const pb::JobRecord& rec) {
  keep_announced(self, rec);
  self->send(self->state.w.queues, enqueue_atom_v, ticket_of(rec));
}

// The record of a job waiting without an actor in `state` (none when it has
// an actor, or is in another state).
std::optional<pb::JobRecord> waiting_in(JobSup self, const std::string& id,
                                        std::string_view state) {
  auto& st = self->state;
  if (st.children.find(id)) return std::nullopt;
  auto* snap = st.children.snapshot_of(id);
  pb::JobRecord rec;
  if (snap == nullptr || !rec.ParseFromString(*snap) || rec.state() != state) return std::nullopt;
  return rec;
}

// A queued job waiting without an actor.
std::optional<pb::JobRecord> asleep(JobSup self, const std::string& id) {
  return waiting_in(self, id, names::kQueued);
}

std::vector<policy::deps::Dependency> deps_of(const pb::JobRecord& rec) {
  std::vector<policy::deps::Dependency> d;
  for (const auto& x : rec.spec().depends_on()) d.push_back({x.job(), x.on()});
  return d;
}

// --- arrays and sweeps (policy/arrays.hpp, docs/api.md "Arrays and sweeps") --

namespace arr = policy::arrays;

void new_job(JobSup self, const std::string& id, const std::string& record);

// The record of array `id` not ended yet (none for any other job).
std::optional<pb::JobRecord> array_record(JobSup self, const std::string& id) {
  auto& st = self->state;
  if (st.arrays.count(id) == 0) return std::nullopt;
  auto* snap = st.children.snapshot_of(id);
  pb::JobRecord rec;
  if (snap == nullptr || !rec.ParseFromString(*snap)) return std::nullopt;
  return rec;
}

// An array's record kept, without an event (its tasks' bytes changed).
void keep_array(JobSup self, const pb::JobRecord& rec) {
  std::string bytes;
  rec.SerializeToString(&bytes);
  self->state.snapshot(rec.job_id(), job_key(rec.job_id()), std::move(bytes));
}

// Its tasks not started yet are canceled with it: each leaves the team's
// count of queued jobs.
void end_pending_tasks(JobSup self, pb::JobRecord& rec) {
  if (!spec::is_array(rec.spec())) return;
  for (auto& t : *rec.mutable_array_tasks())
    if (t == arr::kPending) {
      t = arr::kCanceled;
      self->send(self->state.w.router, unqueued_atom_v, rec.spec().team());
    }
}

// Starts as many of the array's tasks as its parallelism lets, in index
// order, each a new job of its own (queued, without an actor until placed).
void start_tasks(JobSup self, pb::JobRecord& rec) {
  auto& tasks = *rec.mutable_array_tasks();
  int n = arr::may_start(arr::count(tasks), spec::array_parallelism(rec.spec()),
                         rec.cancel_requested());
  const int64_t now = self->state.w.now_ms();
  for (auto i = tasks.find(arr::kPending); n > 0 && i != std::string::npos;
       i = tasks.find(arr::kPending, i + 1), --n) {
    tasks[i] = arr::kStarted;
    std::string bytes;
    task_record(rec, static_cast<int>(i), now).SerializeToString(&bytes);
    new_job(self, arr::task_id(rec.job_id(), static_cast<int>(i)), bytes);
  }
}

// The array's end once every task ended: its record and event. Returns
// whether it ended (its dependents are then judged).
bool settle_array(JobSup self, pb::JobRecord& rec) {
  auto end = arr::end_of(arr::count(rec.array_tasks()), rec.cancel_requested());
  if (!end) return false;
  auto& st = self->state;
  const int64_t now = st.w.now_ms();
  enter_array(rec, end->state, end->reason, end->outcome, now);
  keep_announced(self, rec);
  st.arrays.erase(rec.job_id());
  retire(self, rec.job_id(), now);
  return true;
}

// A new array (or one whose dependencies are met): queued and announced, its
// first tasks started. Returns whether it ended (it cannot: count >= 1).
bool start_array(JobSup self, pb::JobRecord rec) {
  auto& st = self->state;
  enter_first_queued(rec, st.w.now_ms());
  keep_announced(self, rec);
  st.arrays.insert(rec.job_id());
  start_tasks(self, rec);
  keep_array(self, rec);
  return settle_array(self, rec);
}

// The array of task `id`, when `id` is a task of an array not ended here.
std::optional<std::pair<std::string, int>> task_of(JobSup self, const std::string& id) {
  auto t = arr::split_task_id(id);
  if (!t || self->state.arrays.count(t->first) == 0) return std::nullopt;
  return t;
}

// Task `id` ended (its end event stored): its byte, the next tasks, maybe
// the array's end. Returns the array's id when the array ended with it.
std::optional<std::string> task_ended(JobSup self, const std::string& id) {
  auto t = task_of(self, id);
  if (!t) return std::nullopt;
  auto rec = array_record(self, t->first);
  auto* snap = self->state.children.snapshot_of(id);
  pb::JobRecord task;
  if (!rec || snap == nullptr || !task.ParseFromString(*snap) || !names::is_terminal(task.state()))
    return std::nullopt;
  auto& tasks = *rec->mutable_array_tasks();
  auto i = static_cast<size_t>(t->second);
  if (i >= tasks.size() || tasks[i] != arr::kStarted) return std::nullopt;  // counted already
  tasks[i] = arr::mark_of(task.state());
  start_tasks(self, *rec);
  if (settle_array(self, *rec)) return t->first;
  keep_array(self, *rec);
  return std::nullopt;
}

// A task's record changed: its array is `running` from its first running task.
void task_changed(JobSup self, const std::string& id, const std::string& bytes) {
  auto t = task_of(self, id);
  if (!t) return;
  auto rec = array_record(self, t->first);
  pb::JobRecord task;
  if (!rec || rec->state() != names::kQueued || !task.ParseFromString(bytes) ||
      task.state() != names::kRunning)
    return;
  enter_array(*rec, names::kRunning, {}, {}, self->state.w.now_ms());
  keep_announced(self, *rec);
}

// After a restore: an array's bytes caught up with its tasks' records (a
// task's record may be newer than its array's), the tasks that should run
// started. Returns whether it ended.
bool reconcile_array(JobSup self, pb::JobRecord rec) {
  auto& st = self->state;
  st.arrays.insert(rec.job_id());
  if (rec.array_tasks().empty())  // restored from its intake record alone: none started yet
    rec.set_array_tasks(
        std::string(static_cast<size_t>(spec::array_tasks(rec.spec())), arr::kPending));
  auto& tasks = *rec.mutable_array_tasks();
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i] != arr::kPending && tasks[i] != arr::kStarted) continue;
    auto id = arr::task_id(rec.job_id(), static_cast<int>(i));
    auto* snap = st.children.snapshot_of(id);
    pb::JobRecord task;
    if (snap != nullptr && task.ParseFromString(*snap)) {
      // Counted twice by the restore (as pending here, and as its own job).
      if (tasks[i] == arr::kPending) self->send(st.w.router, unqueued_atom_v, rec.spec().team());
      tasks[i] = names::is_terminal(task.state()) ? arr::mark_of(task.state()) : arr::kStarted;
    } else if (tasks[i] == arr::kStarted) {
      tasks[i] = arr::kPending;  // its record never reached the store: started again below
    }
  }
  start_tasks(self, rec);
  if (settle_array(self, rec)) return true;
  keep_array(self, rec);
  return false;
}

// A blocked job judged (policy/dependencies.hpp): queued when every upstream
// job ended as it needs; canceled (dependency_failed) when one cannot; else it
// waits, and with `watch` it is noted under each upstream job not ended yet.
// Returns whether it ended (its own dependents are then judged in turn).
bool judge_blocked(JobSup self, pb::JobRecord rec, bool watch) {
  auto& st = self->state;
  const std::string team = rec.spec().team();
  auto deps = deps_of(rec);
  auto state_of = [&](const std::string& job) { return st.state_of(job, team); };
  auto v = policy::deps::judge(deps, state_of);
  const int64_t now = st.w.now_ms();
  switch (v.status) {
    case policy::deps::Status::met:
      if (spec::is_array(rec.spec())) return start_array(self, std::move(rec));
      enter_first_queued(rec, now);
      keep_asleep(self, rec);
      return false;
    case policy::deps::Status::never: {
      std::string on;
      for (const auto& d : deps)
        if (d.job == v.upstream) on = d.on;
      enter_dependency_failed(rec, policy::deps::failed_reason(v, on), now);
      end_pending_tasks(self, rec);
      keep_announced(self, rec);
      st.arrays.erase(rec.job_id());
      st.left(rec.job_id());
      retire(self, rec.job_id(), now);
      return true;
    }
    case policy::deps::Status::waiting:
      if (watch)
        for (const auto& d : deps)
          if (!names::is_terminal(state_of(d.job))) st.blocked_on[d.job].push_back(rec.job_id());
      return false;
  }
  return false;
}

// Job `id` ended (its end event stored, or ended here): the jobs blocked on it
// are judged again, and those that end for it, theirs in turn.
void upstream_ended(JobSup self, const std::string& id) {
  auto& st = self->state;
  std::deque<std::string> ended{id};
  while (!ended.empty()) {
    auto job = std::move(ended.front());
    ended.pop_front();
    if (auto array = task_ended(self, job)) ended.push_back(std::move(*array));
    auto it = st.blocked_on.find(job);
    if (it == st.blocked_on.end()) continue;
    auto waiting = std::move(it->second);
    st.blocked_on.erase(it);
    for (const auto& down : waiting)
      if (auto rec = waiting_in(self, down, names::kBlocked))
        if (judge_blocked(self, std::move(*rec), false)) ended.push_back(down);
  }
}

// A new job's record (state ""): an array gets a byte per task; one that
// depends on other jobs enters blocked (true), to be judged once its
// upstream jobs' records are here.
bool enter_new(JobSup self, pb::JobRecord& rec) {
  if (spec::is_array(rec.spec()) && rec.array_tasks().empty())
    rec.set_array_tasks(
        std::string(static_cast<size_t>(spec::array_tasks(rec.spec())), arr::kPending));
  if (rec.spec().depends_on_size() == 0) return false;
  enter_blocked(rec, self->state.w.now_ms());
  return true;
}

// A new job (the router: accepted, or handed off by a standby): queued and
// announced, without an actor until its placement comes; blocked first when
// it depends on other jobs.
void new_job(JobSup self, const std::string& id, const std::string& record) {
  auto& st = self->state;
  pb::JobRecord rec;
  if (!rec.ParseFromString(record) || !rec.state().empty()) {
    st.start(self, id, record);  // (not a new job: its actor takes it up)
    return;
  }
  if (enter_new(self, rec)) {
    st.index(rec);
    st.track(rec);
    keep_announced(self, rec);
    if (judge_blocked(self, std::move(rec), true)) upstream_ended(self, id);
    return;
  }
  if (spec::is_array(rec.spec())) {
    st.index(rec);
    if (start_array(self, std::move(rec))) upstream_ended(self, id);
    return;
  }
  enter_first_queued(rec, st.w.now_ms());
  st.index(rec);
  st.track(rec);
  keep_asleep(self, rec);
}

// A cancel with if_queued of job `id` (its record `rec`, no actor): the state
// that refuses it, none while the job has not started (queued or blocked).
// An array has not started while each task is pending or queued without an
// actor (a placement wakes one here, so none starts meanwhile); else the
// state of its first task that started: its end, its record's state, or
// `starting` while that still says queued (it has an actor: it was placed).
std::optional<std::string> left_queued(JobSup self, const std::string& id,
                                       const pb::JobRecord& rec) {
  if (rec.state() == names::kBlocked) return std::nullopt;
  if (rec.state() != names::kQueued) return rec.state();
  if (!spec::is_array(rec.spec()) || self->state.arrays.count(id) == 0) return std::nullopt;
  const auto& tasks = rec.array_tasks();
  for (size_t i = 0; i < tasks.size(); ++i) {
    auto task = arr::task_id(id, static_cast<int>(i));
    switch (tasks[i]) {
      case arr::kPending:
        continue;
      case arr::kSucceeded:
        return std::string(names::kSucceeded);
      case arr::kFailed:
        return std::string(names::kFailed);
      case arr::kCanceled:
        return std::string(names::kCanceled);
      default:
        break;
    }
    if (asleep(self, task)) continue;
    auto state = self->state.state_of(task, rec.spec().team());
    return state.empty() || state == names::kQueued ? std::string(names::kStarting) : state;
  }
  return std::nullopt;
}

// Cancels job `id` (its record `rec`) and answers `reply` (none: ""). An
// array: its tasks not started are canceled, its started ones canceled each.
// With `if_queued`, only a job not started yet: else it answers not_queued
// and nothing changes (a job with an actor decides in its actor).
void cancel_job(JobSup self, const std::string& id, pb::JobRecord rec, const std::string& reply,
                bool if_queued = false) {
  auto& st = self->state;
  if (auto a = st.children.find(id); a && !names::is_terminal(rec.state())) {
    self->send(a, cancel_atom_v, reply, if_queued);
    return;
  }
  if (auto state = if_queued ? left_queued(self, id, rec) : std::nullopt) {
    if (!reply.empty()) st.out->publish(reply, errors::not_queued(id, *state));
    return;
  }
  if (spec::is_array(rec.spec()) && st.arrays.count(id) != 0) {
    rec.set_cancel_requested(true);
    end_pending_tasks(self, rec);
    keep_array(self, rec);
    const auto& tasks = rec.array_tasks();
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (tasks[i] != arr::kStarted) continue;
      auto task = arr::task_id(id, static_cast<int>(i));
      pb::JobRecord t;
      if (auto* snap = st.children.snapshot_of(task); snap && t.ParseFromString(*snap))
        cancel_job(self, task, std::move(t), {});  // its end comes back as task_ended
    }
    if (auto now = array_record(self, id)) {
      if (settle_array(self, *now)) upstream_ended(self, id);
      rec = std::move(*now);
    } else if (auto* snap = st.children.snapshot_of(id)) {
      rec.ParseFromString(*snap);  // it ended with its last task
    }
  } else if ((rec.state() == names::kBlocked || rec.state() == names::kQueued) &&
             !st.children.find(id)) {
    // Waiting without an actor: out of its queue, canceled, ended.
    bool blocked = rec.state() == names::kBlocked;
    if (!blocked) self->send(st.w.queues, dequeue_atom_v, rec.spec().team(), id);
    enter_canceled_queued(rec, st.w.now_ms());
    end_pending_tasks(self, rec);  // a blocked array's
    keep_announced(self, rec);
    st.left(id);
    retire(self, id, st.w.now_ms());
    upstream_ended(self, id);
  }
  if (!reply.empty()) st.out->publish(reply, views::job_state_json(id, rec.state()));
}

// The view of a job; an array's with its started tasks told queued from
// running and, with `tasks`, each task listed (a sweep's with its point of
// the grid when the grid is small enough for one reply).
pb::JobView view_of(JobSup self, const pb::JobRecord& rec, bool tasks) {
  auto v = job_view(rec);
  if (!spec::is_array(rec.spec())) return v;
  auto& st = self->state;
  auto* a = v.mutable_array();
  const std::string& team = rec.spec().team();
  const auto& marks = rec.array_tasks();
  constexpr size_t kMaxListedPoints = 1000;
  auto grid = tasks && marks.size() <= kMaxListedPoints ? grid_of(rec.spec()) : arr::Grid{};
  int queued = 0, running = 0;
  for (size_t i = 0; i < marks.size(); ++i) {
    auto id = arr::task_id(rec.job_id(), static_cast<int>(i));
    std::string state;
    switch (marks[i]) {
      case arr::kSucceeded:
        state = names::kSucceeded;
        break;
      case arr::kFailed:
        state = names::kFailed;
        break;
      case arr::kCanceled:
        state = names::kCanceled;
        break;
      case arr::kStarted:
        state = st.state_of(id, team);
        break;
      default:
        break;
    }
    if (state.empty() || names::is_terminal(state) == false) {
      if (state.empty() || state == names::kQueued || state == names::kBlocked) {
        ++queued;
        if (state.empty()) state = names::kQueued;
      } else {
        ++running;
      }
    }
    if (!tasks) continue;
    auto* t = a->add_tasks();
    t->set_index(static_cast<int32_t>(i));
    t->set_job_id(id);
    t->set_state(state);
    if (!grid.empty())
      for (auto& [name, value] : arr::point(grid, static_cast<int64_t>(i)))
        (*t->mutable_params())[name] = value.text;
  }
  a->set_queued(queued);
  a->set_running(running);
  return v;
}

void sweep(JobSup self) {
  auto& st = self->state;
  st.sweep_armed = false;
  int64_t now = st.w.now_ms();
  for (const auto& id : st.lingering.take_due(now))
    if (auto j = st.children.find(id)) self->send(j, done_atom_v);
  while (st.retention_ms > 0 && !st.ended.empty() &&
         st.ended.front().first + st.retention_ms <= now) {
    auto id = std::move(st.ended.front().second);
    st.ended.pop_front();
    forget_job(self, id);
  }
  arm_sweep(self);
}

bool load(JobSup self, const std::string& id, const std::string& team, pb::JobRecord& rec,
          const std::string& reply) {
  auto* snap = self->state.children.snapshot_of(id);
  if (snap == nullptr || !rec.ParseFromString(*snap) || rec.spec().team() != team) {
    // The same reply for another team's job as for no job at all.
    if (!reply.empty()) self->state.out->publish(reply, errors::no_job(id));
    return false;
  }
  return true;
}

// Whether the job's spec has the label `kv` ("key=value").
bool has_label(const pb::JobRecord& r, const std::string& kv) {
  auto eq = kv.find('=');
  auto it = r.spec().labels().find(kv.substr(0, eq));
  return it != r.spec().labels().end() && eq != std::string::npos &&
         it->second == kv.substr(eq + 1);
}

// The team of a purged job is read from its events (troupe.*.events.<id>):
// troupe.sys.find (admin) only; a team from a subject is never "*".
constexpr const char* kAnyTeam = "*";

// Whether the job supervisor holds `id` (live, or ended within its retention).
bool holds(JobSup self, const std::string& id) {
  return self->state.children.snapshot_of(id) != nullptr;
}

// For a job whose actor is gone (ended): a late placement, and a hold a node
// asks about, are handed back.
void give_back(JobSup self, const std::string& node, const std::string& hold_id) {
  self->send(self->state.w.nodes, route_atom_v, node, Envelope{wire::release(hold_id, "job gone")});
}

void hand_back(JobSup self, const Assignment& a) {
  self->send(self->state.w.arbiter, done_atom_v, a.job_id, a.pool);
  for (size_t rank = 0; rank < a.nodes.size(); ++rank)
    give_back(self, a.nodes[rank], policy::hold_id(a.job_id, a.attempt, static_cast<int>(rank)));
}

JobSupervisorActor::behavior_type job_sup_behavior(JobSup self, OutboxPtr out,
                                                   SnapshotStorePtr store, int64_t retention_ms,
                                                   StoredLogsPtr logs) {
  self->state.out = std::move(out);
  self->state.store = std::move(store);
  self->state.retention_ms = retention_ms;
  self->state.logs = std::move(logs);
  auto make = [=](const std::string&, const std::string& snap) {
    return spawn_job(self, self->state.w, self->state.out, snap);
  };
  return supervise<JobSupervisorActor>(
      self, make, nothing,
      [=](const std::string& id) {
        self->state.left(id);
        if (!id.empty()) retire(self, id, self->state.w.now_ms());
      },
      [=](spawn_atom, const std::string& id, const std::string& record) {
        new_job(self, id, record);
      },
      // Routed to one job (its actor, or handed back when it is gone).
      [=](placed_atom, Assignment& a) {
        auto& st = self->state;
        auto j = st.children.find(a.job_id);
        if (!j) {
          // Its placement wakes a job that waited without an actor.
          if (auto rec = asleep(self, a.job_id); rec && rec->attempt() == a.attempt)
            j = st.children.start(self, a.job_id, *st.children.snapshot_of(a.job_id),
                                  [=](const std::string&, const std::string& snap) {
                                    return spawn_job(self, self->state.w, self->state.out, snap,
                                                     true);
                                  });
        }
        if (j)
          self->send(j, placed_atom_v, std::move(a));
        else
          hand_back(self, a);
      },
      [=](route_atom, const std::string& id, Envelope& env) {
        if (auto j = self->state.children.find(id)) self->send(j, std::move(env));
      },
      [=](hold_atom, const std::string& id, const std::string& node, const std::string& hold,
          int32_t attempt, int32_t rank, bool launched) {
        if (auto j = self->state.children.find(id))
          self->send(j, hold_atom_v, node, hold, attempt, rank, launched);
        else
          give_back(self, node, hold);
      },
      [=](preempt_atom, const std::string& id, const std::string& why) {
        if (auto j = self->state.children.find(id)) self->send(j, preempt_atom_v, why);
      },
      [=](snapshot_atom, const std::string& id, std::string& bytes) {
        if (self->state.unstarted.count(id) != 0) {
          pb::JobRecord rec;
          if (rec.ParseFromString(bytes) &&
              !policy::awaiting_first_start(rec.state(), rec.attempts_size()))
            self->state.left(id);
        }
        task_changed(self, id, bytes);
        self->state.snapshot(id, job_key(id), std::move(bytes));
      },
      [=](restore_atom, std::vector<std::string>& records) {
        // After a scheduler restart: ended jobs are kept as snapshots only
        // (until their retention ends, counted from their end); the others
        // get their actor back in the state they were in.
        std::vector<std::pair<int64_t, std::string>> ended;
        std::vector<std::string> blocked, arrays;
        for (auto& bytes : records) {
          pb::JobRecord rec;
          if (!rec.ParseFromString(bytes) || rec.job_id().empty()) continue;
          self->state.index(rec);
          self->state.track(rec);  // the router's count: actors/main.cpp tells it
          if (rec.state().empty()) {
            // Known from the intake alone (no event of it stored): a new job,
            // as new_job makes one, its record here (a blocked job judges it
            // known) and its event out; judged (blocked), or its tasks
            // caught up (an array), below like the others.
            if (enter_new(self, rec)) {
              blocked.push_back(rec.job_id());
              keep_announced(self, rec);
            } else if (spec::is_array(rec.spec())) {
              enter_first_queued(rec, self->state.w.now_ms());
              arrays.push_back(rec.job_id());
              keep_announced(self, rec);
            } else {
              enter_first_queued(rec, self->state.w.now_ms());
              keep_asleep(self, rec);
            }
          } else if (names::is_terminal(rec.state())) {
            // (a record without its end time counts from now)
            ended.emplace_back(rec.end_ms() > 0 ? rec.end_ms() : self->state.w.now_ms(),
                               rec.job_id());
            self->state.children.snapshot(rec.job_id(), std::move(bytes));
          } else if (rec.state() == names::kBlocked) {
            blocked.push_back(rec.job_id());  // judged once every record is back
            self->state.children.snapshot(rec.job_id(), std::move(bytes));
          } else if (spec::is_array(rec.spec())) {
            arrays.push_back(rec.job_id());  // caught up once every task's record is back
            self->state.children.snapshot(rec.job_id(), std::move(bytes));
          } else if (may_wait_asleep(rec, self->state.w.now_ms())) {
            self->state.children.snapshot(rec.job_id(), bytes);
            self->send(self->state.w.queues, enqueue_atom_v, ticket_of(rec));
          } else
            self->state.start(self, rec.job_id(), bytes);
        }
        std::sort(ended.begin(), ended.end());
        for (auto& [end_ms, id] : ended) retire(self, id, end_ms);
        // Arrays: their tasks may have moved on, or ended, meanwhile.
        for (const auto& id : arrays) {
          self->state.arrays.insert(id);  // (array_record reads only those)
          if (auto rec = array_record(self, id))
            if (reconcile_array(self, std::move(*rec))) upstream_ended(self, id);
        }
        // Blocked jobs: their upstream jobs may have ended meanwhile.
        for (const auto& id : blocked)
          if (auto rec = waiting_in(self, id, names::kBlocked))
            if (judge_blocked(self, std::move(*rec), true)) upstream_ended(self, id);
      },
      [=](status_atom, const std::string& id, const std::string& team, const std::string& reply) {
        if (!holds(self, id)) {  // purged (or never was): the router reads its events
          self->send(self->state.w.router, status_atom_v, id, team, reply);
          return;
        }
        pb::JobRecord rec;
        if (load(self, id, team, rec, reply))
          self->state.out->publish(reply, spec::view_json(view_of(self, rec, true)));
      },
      [=](cancel_atom, const std::string& id, const std::string& team, const std::string& reply,
          bool if_queued) {
        pb::JobRecord rec;
        if (!load(self, id, team, rec, reply)) return;
        cancel_job(self, id, std::move(rec), reply, if_queued);
      },
      [=](why_atom, const std::string& id, const std::string& team, const std::string& reply) {
        pb::JobRecord rec;
        if (!load(self, id, team, rec, reply)) return;
        if (spec::is_array(rec.spec()) && !names::is_terminal(rec.state()) &&
            rec.state() != names::kBlocked) {
          auto a = view_of(self, rec, false).array();
          int k = a.parallelism();
          std::string reason = std::to_string(a.running()) + " of " + std::to_string(a.count()) +
                               " tasks placed or running, " + std::to_string(a.queued()) +
                               " queued, " +
                               std::to_string(a.succeeded() + a.failed() + a.canceled()) + " ended";
          if (k > 0)
            reason += "; at most " + std::to_string(k) +
                      " at once (parallelism): the others wait for a free slot";
          reason += "; troupe why " + arr::task_id(id, 0) + " asks about one task";
          self->state.out->publish(reply, views::why_json(id, rec.state(), a.queued() > 0,
                                                          policy::why::kArrayTasks, reason));
          return;
        }
        if (rec.state() == names::kQueued) {
          // An any-type job: every candidate pool, comma-separated (pool
          // names are tokens); the front asks each.
          std::string pools = rec.pools_size() > 1 ? rec.pools(0) : rec.pool();
          for (int i = 1; i < rec.pools_size(); ++i) pools += "," + rec.pools(i);
          self->send(self->state.w.arbiter, why_atom_v, id, team, pools, reply);
          return;
        }
        if (rec.state() == names::kBlocked) {
          const std::string& t = rec.spec().team();
          auto& st = self->state;
          st.out->publish(reply, views::why_json(id, rec.state(), true, policy::why::kBlocked,
                                                 policy::deps::why_blocked(
                                                     deps_of(rec), [&](const std::string& j) {
                                                       return st.state_of(j, t);
                                                     })));
          return;
        }
        std::string reason;
        if (names::is_terminal(rec.state()))
          reason = "not pending: the job ended " + rec.state() + " (" + rec.reason() + ")";
        else
          reason = "not pending: the job is " + rec.state() + " on " +
                   (rec.placement_size() ? rec.placement(0).node() : std::string("its nodes"));
        self->state.out->publish(
            reply, views::why_json(id, rec.state(), false, policy::why::kNotPending, reason));
      },
      [=](logs_atom, const std::string& id, const std::string& team, int32_t rank, int64_t offset,
          int64_t max_bytes, const std::string& reply) {
        pb::JobRecord rec;
        if (!load(self, id, team, rec, reply)) return;
        for (const auto& p : rec.placement()) {
          if (p.rank() != rank) continue;
          nlohmann::json q{{"job_id", id},
                           {"attempt", rec.attempt()},
                           {"rank", rank},
                           {"offset", offset},
                           {"max_bytes", max_bytes}};
          const std::string to_agent = subjects::scheduler_to_agent(p.node(), subjects::kLogs);
          // An ended job: its log as its agent shipped it (the node may be
          // gone), read on the reader's thread; the agent when none is stored.
          if (self->state.logs && names::is_terminal(rec.state())) {
            auto out = self->state.out;  // thread-safe; the actor's state is not
            self->state.logs->read(subjects::log_chunks(p.node(), team, id, rec.attempt(), rank),
                                   [out, reply, to_agent, body = q.dump(), offset, max_bytes](
                                       bool found, std::string log, std::string) {
                                     if (found)
                                       out->publish(reply,
                                                    logchunks::page_json(log, offset, max_bytes));
                                     else
                                       out->publish(to_agent, body, reply);
                                   });
            return;
          }
          // The agent answers the user directly (same reply inbox).
          self->state.out->publish(to_agent, q.dump(), reply);
          return;
        }
        // An array's workers are its tasks', each a job of its own; a job
        // that ended unplaced never wrote any.
        std::string why = "job " + id + " has no rank " + std::to_string(rank) + " placed (state " +
                          rec.state() + "); ";
        if (spec::is_array(rec.spec()))
          why += "it is an array of " + std::to_string(spec::array_tasks(rec.spec())) +
                 " tasks, each with its own log: troupe logs " + id + "-0 (task 0)";
        else if (names::is_terminal(rec.state()) && rec.placement().empty())
          why += "it ended with no worker placed, so there is no log to show";
        else
          why += "no logs yet";
        self->state.out->publish(reply, errors::error_json(errors::kNoRank, why));
      },
      [=](list_atom, const std::string& team, int64_t limit, const std::string& after,
          const std::string& state, const std::string& label, const std::string& reply) {
        self->send(self, list_atom_v, team, limit, after, state, label, std::string(), Strings(),
                   reply);
      },
      [=](list_atom, const std::string& team, int64_t limit, const std::string& after,
          const std::string& state, const std::string& label, const std::string& pool,
          const Strings& pools, const std::string& reply) {
        // One page in submit order ("sys": every team's jobs), after the job
        // `after`; {"jobs":[JobView...],"next"} (actors/policy/pages.hpp).
        auto& st = self->state;
        bool every_team = team == names::kSysToken;
        auto first = st.order.begin();
        if (!after.empty()) {
          auto at = st.listed(after);
          if (at == st.order.end() || (!every_team && at->second != team)) {
            st.out->publish(reply,
                            errors::error_json(errors::kBadRequest, "after: no job " + after));
            return;
          }
          first = std::next(at);
        }
        using Item = decltype(st.order)::value_type;
        pb::JobRecord rec;
        std::string parsed;  // the job whose snapshot `rec` holds
        auto record = [&](const Item& item) -> const pb::JobRecord* {
          const auto& id = item.first.second;
          if (parsed == id) return &rec;
          parsed.clear();
          auto* snap = st.children.snapshot_of(id);
          if (snap == nullptr || !rec.ParseFromString(*snap)) return nullptr;
          parsed = id;
          return &rec;
        };
        auto page = policy::take_page(
            first, st.order.end(), static_cast<size_t>(limit), policy::kMaxReplyBytes,
            [&](const Item& item) {
              if (!every_team && item.second != team) return false;
              if (!pools.empty() && policy::pool_of_job_id(pools, item.first.second) != pool)
                return false;
              auto* r = record(item);
              return r != nullptr && (state.empty() || r->state() == state) &&
                     (label.empty() || has_label(*r, label));
            },
            [&](const Item& item) { return spec::view_json(view_of(self, *record(item), false)); },
            [](const Item& item) { return item.first.second; });
        st.out->publish(reply, page.body);
      },
      [=](find_atom, const std::string& id, const std::string& reply) {
        // troupe.sys.find (admin): the team of a job.
        pb::JobRecord rec;
        auto* snap = self->state.children.snapshot_of(id);
        if (reply.empty()) return;
        if (snap == nullptr) {  // purged (or never was): its events, of any team
          self->send(self->state.w.router, status_atom_v, id, std::string(kAnyTeam), reply);
          return;
        }
        if (snap == nullptr || !rec.ParseFromString(*snap)) {
          self->state.out->publish(reply, errors::no_job(id));
          return;
        }
        self->state.out->publish(reply, views::job_state_json(id, rec.state(), rec.spec().team()));
      },
      [=](history_atom, const std::string& id, const std::string& team, const std::string& reply) {
        // troupe.<team>.history: only a job of that team; the router reads it
        // (a purged job's too: only its team's events subject is read).
        if (!holds(self, id)) {  // purged, or never was: no events means no job
          self->send(self->state.w.router, history_atom_v, id, team, reply, true);
          return;
        }
        pb::JobRecord rec;
        if (load(self, id, team, rec, reply))
          self->send(self->state.w.router, history_atom_v, id, team, reply);
      },
      [=](tick_atom) { sweep(self); },
      [=](ended_atom, const std::string& id) { upstream_ended(self, id); },
      [=](done_atom, const std::string& id) {
        auto& st = self->state;
        st.lingering.set(id, st.w.now_ms() + st.w.linger_ms);
        arm_sweep(self);
      },
      [=](state_atom, const std::string& id) {
        pb::JobRecord rec;
        auto* snap = self->state.children.snapshot_of(id);
        return snap != nullptr && rec.ParseFromString(*snap) ? rec.state() : std::string();
      },
      [=](deps_atom, const std::string& team, const std::vector<std::string>& jobs) {
        // The same answer for another team's job as for no job at all.
        for (const auto& j : jobs)
          if (self->state.state_of(j, team).empty())
            return "depends_on: no job " + j + " in team " + team +
                   " (a job of the same team, submitted before and not yet forgotten)";
        return std::string();
      },
      [=](handoff_atom, const std::string& id, const std::string& record) {
        // Known already: restored (the restore reads the intake stream's
        // handoff records too), or taken before (a redelivery).
        auto& st = self->state;
        if (st.children.find(id) || st.children.snapshot_of(id)) return false;
        new_job(self, id, record);
        return true;
      },
      [=](requeue_atom, const std::string& team) {
        auto& st = self->state;
        st.children.for_each([&](const std::string& id, const JobActor& a) {
          pb::JobRecord rec;
          auto* snap = st.children.snapshot_of(id);
          if (snap && rec.ParseFromString(*snap) && rec.spec().team() == team)
            self->send(a, requeue_atom_v);
        });
        // Those waiting without an actor are among the jobs not started yet.
        for (const auto& [id, t] : st.unstarted)
          if (t == team)
            if (auto rec = asleep(self, id))
              self->send(st.w.queues, enqueue_atom_v, ticket_of(*rec));
      },
      pass_crash(self));
}

// --- queues -------------------------------------------------------------------

struct QueueSupState : SupState<TeamQueueActor> {
  QueueSupState() : SupState("queue", false) {}
  std::unordered_set<std::string> seen;  // teams that had a queue
  static inline const char* name = "queue_supervisor";
};
using QueueSup = QueueSupervisorActor::stateful_pointer<QueueSupState>;

// A queue made again: its team's queued jobs enqueue themselves again.
void refill(QueueSup self, const std::string& team) {
  self->send(self->state.w.jobs, requeue_atom_v, team);
}

// The queue of `team`, started on first use.
TeamQueueActor queue_of(QueueSup self, const std::string& team) {
  return child_or(self, team, [&] {
    auto q = self->state.start(self, team, {});
    // A queue made again after one that crashed too often: refill it.
    if (!self->state.seen.insert(team).second) refill(self, team);
    return q;
  });
}

QueueSupervisorActor::behavior_type queue_sup_behavior(QueueSup self) {
  auto make = [=](const std::string& team, const std::string&) {
    return spawn_team_queue(self, self->state.w, team);
  };
  return supervise<QueueSupervisorActor>(
      self, make, [=](const std::string& team) { refill(self, team); }, nothing,
      [=](enqueue_atom, JobTicket& t) {
        self->send(queue_of(self, t.team), enqueue_atom_v, std::move(t));
      },
      [=](dequeue_atom, const std::string& team, const std::string& job_id) {
        self->send(queue_of(self, team), dequeue_atom_v, job_id);
      },
      [=](crash_atom, const std::string& team) {
        if (auto a = self->state.children.find(team)) self->send_exit(a, caf::sec::runtime_error);
      });
}

// --- nodes --------------------------------------------------------------------

struct NodeSupState : SupState<NodeActor> {
  NodeSupState() : SupState("node", false) {}
  NodeOptions opts;
  policy::ClusterConfig cfg = policy::open_config();     // its node roster
  std::unordered_map<std::string, std::string> durable;  // node -> what the store holds
  // A shard: its pools; the nodes that registered in another shard's pool
  // (their agents' messages are dropped here), and when a node not heard
  // registering yet was last asked to (troupe.sys.node.<n>.hello).
  policy::ShardScope shards;
  std::unordered_set<std::string> foreign;
  std::unordered_map<std::string, int64_t> asked_ms;
  int64_t other_pool = 0;  // agents' messages (not registers) of nodes not its own
  AgentWatchPtr agents;    // a shard: listens to the agents of its nodes only
  static inline const char* name = "node_supervisor";
};
using NodeSup = NodeSupervisorActor::stateful_pointer<NodeSupState>;

// Starts a node's actor, and (a shard) listens to its agent from now on.
NodeActor start_node(NodeSup self, const std::string& node, const std::string& snapshot) {
  auto a = self->state.start(self, node, snapshot);
  if (self->state.agents) self->state.agents->watch(node);
  return a;
}

// Tells the router what a node could ever hold (its admission feasibility
// check): on every NodeRegister, and for every node restored.
void tell_shape(NodeSup self, const std::string& node, const std::string& gpu_type,
                const std::string& named_pool, int gpus, int cpus, int64_t memory_mb) {
  policy::NodeCapacity c;
  c.name = node;
  c.gpu_type = gpu_type;
  c.pool = named_pool;
  c.gpus_total = c.gpus_free = gpus;
  c.cpus_total = c.cpus_free = cpus;
  c.memory_total_mb = c.memory_free_mb = memory_mb;
  self->send(self->state.w.router, shape_atom_v, c);
}

void tell_shape(NodeSup self, const std::string& node, const Envelope& env) {
  auto* e = wire::open(env.bytes);
  auto* r = e ? e->body_as_NodeRegister() : nullptr;
  if (r == nullptr) return;
  tell_shape(self, node, wire::str(r->gpu_type()), wire::str(r->pool()),
             r->gpus() ? static_cast<int>(r->gpus()->size()) : 0, r->cpus(), r->memory_mb());
}

// A message for a node without an actor: only an agent's own word starts one,
// and only for a node on the roster.
NodeActor admit(NodeSup self, const std::string& node, const Envelope& env) {
  auto* e = wire::open(env.bytes);
  if (auto& st = self->state; st.shards.sharded() && e && wire::is_agent_report(e->body_type()))
    self->send(st.w.router, heard_atom_v, ++st.other_pool);  // not its own node's agent
  bool from_agent =
      e && (e->body_type() == wire::Body::NodeRegister || e->body_type() == wire::Body::Heartbeat);
  if (!from_agent) return {};
  if (!self->state.cfg.node_allowed(node)) {
    // Not on the roster (`nodes:` in the cluster config): no actor,
    // no capacity, no Launch ever goes there.
    self->send(self->state.w.router, distrust_atom_v, std::string("node_not_in_roster"));
    return {};
  }
  if (auto& st = self->state; st.shards.sharded()) {
    // A shard keeps the nodes of its pools only: a node's pool is known from
    // its register; one heard first by its heartbeat is asked to register
    // (every 5 s at most), and gets no actor before.
    auto* reg = e->body_as_NodeRegister();
    if (reg == nullptr) {
      if (st.foreign.count(node) != 0 || st.children.snapshot_of(node) != nullptr) return {};
      if (st.asked_ms.size() > 100000) st.asked_ms.clear();  // bounded against made-up names
      int64_t now = st.w.now_ms();
      if (auto& at = st.asked_ms[node]; now - at >= 5000) {
        at = now;
        st.out->publish(subjects::scheduler_to_agent(node, subjects::kHello), std::string());
      }
      return {};
    }
    if (!st.shards.owns_node(st.cfg, wire::str(reg->pool()), wire::str(reg->gpu_type()))) {
      if (st.foreign.size() < 100000) st.foreign.insert(node);
      return {};
    }
    st.foreign.erase(node);
    st.asked_ms.erase(node);
  }
  // From its last snapshot, if it had one (it crashed too often to be
  // restarted at once): its ledger must not forget what runs there.
  auto* snap = self->state.children.snapshot_of(node);
  return start_node(self, node, snap ? *snap : std::string());
}

NodeSupervisorActor::behavior_type node_sup_behavior(NodeSup self, OutboxPtr out,
                                                     SnapshotStorePtr store, NodeOptions opts,
                                                     policy::ShardScope shards,
                                                     AgentWatchPtr agents) {
  self->state.opts = opts;
  self->state.agents = std::move(agents);
  self->state.shards = std::move(shards);
  self->state.out = std::move(out);
  self->state.store = std::move(store);
  auto make = [=](const std::string& node, const std::string& snap) {
    return spawn_node(self, self->state.w, self->state.out, node, snap, self->state.opts);
  };
  return supervise<NodeSupervisorActor>(
      self, make, nothing, nothing,
      [=](route_atom, const std::string& node, Envelope& env) {
        auto a = child_or(self, node, [&] { return admit(self, node, env); });
        if (!a) return;
        tell_shape(self, node, env);
        caf::anon_send(a, std::move(env));  // one-way: its answer goes nowhere
      },
      [=](sync_atom, const std::string& node, const std::string& job, int32_t attempt,
          int32_t rank) {
        if (auto a = self->state.children.find(node))
          self->send(a, sync_atom_v, job, attempt, rank);
      },
      [=](snapshot_atom, const std::string& node, std::string& bytes) {
        // The whole record (holds too) for a restart of the node actor; the
        // store gets it without holds, and only when that part changed (a
        // restore derives the holds from the jobs).
        auto& st = self->state;
        auto durable = recovery::durable_node_record(bytes);
        if (auto& last = st.durable[node]; !durable.empty() && durable != last) {
          if (st.store) st.store->put(node_key(node), durable);
          last = std::move(durable);
        }
        st.children.snapshot(node, std::move(bytes));
      },
      [=](config_atom, const std::string& text) {
        policy::load_config_or_open(text, self->state.cfg);  // a bad one: logged by the router
      },
      [=](restore_atom, const std::vector<std::string>& records) {
        for (const auto& bytes : records) {
          pb::NodeRecord rec;
          if (!rec.ParseFromString(bytes) || rec.node().empty()) continue;
          if (recovery::shape_known(rec))
            tell_shape(self, rec.node(), rec.gpu_type(), rec.pool(), rec.gpus(), rec.cpus(),
                       rec.memory_mb());
          start_node(self, rec.node(), bytes);
        }
      },
      [=](cordon_atom, const std::string& node, bool on, bool drain, const std::string& reason,
          const std::string& reply) {
        auto& st = self->state;
        if (auto a = st.children.find(node)) {
          self->send(a, cordon_atom_v, on, drain, reason, reply);
          return;
        }
        // Of shards, its owner answers; one no shard knows, the coordinator.
        if (st.shards.sharded() && (st.foreign.count(node) != 0 || !st.shards.coordinator(st.cfg)))
          return;
        if (!reply.empty())
          self->state.out->publish(
              reply, errors::error_json(errors::kUnknownNode, "unknown node " + node));
      },
      [=](remove_atom, const std::string& node, const std::string& reply) {
        // troupe.sys.remove_node: a lost node its node actor agrees to let
        // go (silent agent, nothing held) is forgotten: its actor, its
        // record in the store, its shape (router) and capacity (arbiters).
        auto& st = self->state;
        auto a = st.children.find(node);
        if (!a) {
          if (st.shards.sharded() &&
              (st.foreign.count(node) != 0 || !st.shards.coordinator(st.cfg)))
            return;  // (of shards, its owner answers; one no shard knows, the coordinator)
          if (!reply.empty())
            st.out->publish(reply,
                            errors::error_json(errors::kUnknownNode, "unknown node " + node));
          return;
        }
        self->request(a, caf::infinite, remove_atom_v)
            .then(
                [=](const std::string& code, const std::string& text, const Strings& dirs) {
                  auto& st = self->state;
                  if (!code.empty()) {
                    if (!reply.empty()) st.out->publish(reply, errors::error_json(code, text));
                    return;
                  }
                  // (its actor quits normally: the supervisor drops its snapshot)
                  if (st.store) st.store->purge(node_key(node));
                  st.durable.erase(node);
                  self->send(st.w.router, remove_atom_v, node);
                  self->send(st.w.arbiter, remove_atom_v, node);
                  spdlog::warn(
                      "node {} removed (troupe.sys.remove_node); {} checkpoint dir(s) of "
                      "purged jobs it held are left on its disk{}",
                      node, dirs.size(), dirs.empty() ? "" : ": remove them by hand");
                  for (const auto& d : dirs) spdlog::warn("node {}: left: {}", node, d);
                  if (!reply.empty())
                    st.out->publish(reply, nlohmann::json{{"node", node},
                                                          {"state", "removed"},
                                                          {"running", 0},
                                                          {"checkpoint_dirs_left", dirs}}
                                               .dump());
                },
                [=](const caf::error&) {
                  // Its actor ended before it answered (removed by a
                  // request just before this one, or crashed): never an
                  // unhandled error here, which would end this supervisor.
                  if (!reply.empty())
                    self->state.out->publish(
                        reply, errors::error_json(errors::kUnknownNode,
                                                  "node " + node + " went away meanwhile"));
                });
      },
      pass_crash(self));
}

// --- gang reservations --------------------------------------------------------

struct GangPlan {
  JobTicket t;
  CandidateList c;
  TeamQueueActor queue;
};

struct GangSupState : SupState<GangActor> {
  GangSupState() : SupState("gang", false) {}
  std::unordered_map<std::string, GangPlan> plans;
  // Every live gang's deadline (placement_timeout_ms after its start), checked
  // once a second while there are any: one timer, not one per request.
  policy::Deadlines due;
  bool tick_armed = false;
  static inline const char* name = "gang_supervisor";
};
using GangSup = GangSupervisorActor::stateful_pointer<GangSupState>;

constexpr auto kGangCheckEvery = std::chrono::seconds(1);

void arm_gang_check(GangSup self) {
  auto& st = self->state;
  if (st.tick_armed || st.due.empty()) return;
  st.tick_armed = true;
  self->delayed_send(self, kGangCheckEvery, tick_atom_v);
}

GangSupervisorActor::behavior_type gang_sup_behavior(GangSup self) {
  // A gang restarted after a crash reports unplaced at once (what it had
  // reserved is not known to it: those leases expire).
  auto recover = [=](const std::string& id, const std::string&) {
    auto& p = self->state.plans[id];
    return spawn_gang_reservation(self, p.t, p.c, p.queue, true);
  };
  return supervise<GangSupervisorActor>(
      self, recover, nothing,
      [=](const std::string& id) {
        self->state.plans.erase(id);
        self->state.due.clear(id);
      },
      [=](spawn_atom, std::vector<Grant>& grants) {
        // A round's grants, each of one worker or many (the one placement path).
        for (auto& g : grants) {
          auto id = policy::hold_id(g.ticket.job_id, g.ticket.attempt, 0);
          if (self->state.children.find(id)) {
            // A second grant of an attempt being placed (its first answer
            // went to a queue that crashed): this one's queue hears it is not
            // placed.
            self->send(g.queue, unplaced_atom_v, g.ticket.job_id, g.ticket.req.pool,
                       std::string("a placement of this attempt is under way"));
            continue;
          }
          auto& plan = self->state.plans[id] =
              GangPlan{std::move(g.ticket), std::move(g.nodes), std::move(g.queue)};
          self->state.due.set(id, self->state.w.now_ms() + placement_timeout_ms(plan.c));
          self->state.children.start(
              self, id, {}, [=, &plan](const std::string&, const std::string&) {
                return spawn_gang_reservation(self, plan.t, plan.c, plan.queue, false);
              });
        }
        arm_gang_check(self);
      },
      [=](tick_atom) {
        auto& st = self->state;
        st.tick_armed = false;
        for (const auto& id : st.due.take_due(st.w.now_ms()))
          if (auto g = st.children.find(id)) self->send(g, lease_atom_v);
        arm_gang_check(self);
      });
}

}  // namespace

JobSupervisorActor spawn_job_supervisor(caf::actor_system& sys, OutboxPtr out,
                                        SnapshotStorePtr store, int64_t retention_ms,
                                        StoredLogsPtr logs) {
  return sys.spawn(job_sup_behavior, std::move(out), std::move(store), retention_ms,
                   std::move(logs));
}
QueueSupervisorActor spawn_queue_supervisor(caf::actor_system& sys) {
  return sys.spawn(queue_sup_behavior);
}
NodeSupervisorActor spawn_node_supervisor(caf::actor_system& sys, OutboxPtr out,
                                          SnapshotStorePtr store, NodeOptions opts,
                                          policy::ShardScope shards, AgentWatchPtr agents) {
  return sys.spawn(node_sup_behavior, std::move(out), std::move(store), opts, std::move(shards),
                   std::move(agents));
}
GangSupervisorActor spawn_gang_supervisor(caf::actor_system& sys) {
  return sys.spawn(gang_sup_behavior);
}

}  // namespace troupe

#include "actors/job_actor.hpp"

#include <algorithm>
#include <chrono>

#include "actors/job_record.hpp"
#include "actors/policy/ledger.hpp"
#include "actors/policy/retry.hpp"
#include "bus/subjects.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"
#include "messages/wire.hpp"

namespace troupe {

using namespace troupe::atoms;

namespace {

// How long an ended job's actor lingers to answer late messages.
constexpr auto kLinger = std::chrono::seconds(30);

struct JobState {
  pb::JobRecord rec;
  Wiring w;
  OutboxPtr out;
  bool stop_sent = false;
  static inline const char* name = "job";
};

using Self = caf::stateful_actor<JobState>;

bool has(const google::protobuf::RepeatedField<int32_t>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

void save(Self* self) {
  std::string bytes;
  self->state.rec.SerializeToString(&bytes);
  self->send(self->state.w.jobs, snapshot_atom_v, self->state.rec.job_id(), std::move(bytes));
}

void announce(Self* self) {
  auto& r = self->state.rec;
  self->state.out->publish(subjects::job_events(r.spec().team(), r.job_id()),
                           spec::to_json(job_event(r, now_ms())));
}

// Every state change: record, snapshot, event (in that order).
void enter(Self* self, std::string_view state, std::string reason = {}) {
  auto& r = self->state.rec;
  r.set_state(std::string(state));
  r.set_reason(std::move(reason));
  if (state == names::kRunning) r.set_start_ms(now_ms());
  if (names::is_terminal(state)) r.set_end_ms(now_ms());
  save(self);
  announce(self);
}

void to_node(Self* self, const std::string& node, Envelope env) {
  self->send(self->state.w.nodes, route_atom_v, node, caf::make_message(std::move(env)));
}

void enqueue(Self* self) {
  auto& r = self->state.rec;
  JobTicket t;
  t.job_id = r.job_id();
  t.team = r.spec().team();
  t.attempt = r.attempt();
  t.priority = r.priority_value();
  t.seq = r.seq();
  t.max_runtime_s = r.spec().max_runtime_s();
  t.req = placement_request(r.spec());
  t.req.pool = r.pool();
  self->send(self->state.w.queues, route_atom_v, t.team, caf::make_message(enqueue_atom_v, t));
}

// Frees every hold of `attempt` on the nodes of `placement`, and gives the
// team's usage back to the arbiter.
void release_holds(Self* self, const std::string& job_id, int attempt,
                   const std::vector<std::string>& nodes) {
  self->send(self->state.w.arbiter, done_atom_v, job_id);
  for (size_t rank = 0; rank < nodes.size(); ++rank) {
    flatbuffers::FlatBufferBuilder fbb;
    auto id = policy::hold_id(job_id, attempt, static_cast<int>(rank));
    auto body = wire::CreateRelease(fbb, fbb.CreateString(id), fbb.CreateString("job ended"));
    to_node(self, nodes[rank], Envelope{wire::seal(fbb, body)});
  }
}

std::vector<std::string> placed_nodes(const pb::JobRecord& r) {
  std::vector<std::string> nodes;
  for (const auto& p : r.placement()) nodes.push_back(p.node());
  return nodes;
}

void stop_all(Self* self, const std::string& reason) {
  auto& st = self->state;
  if (st.stop_sent) return;
  st.stop_sent = true;
  for (const auto& p : st.rec.placement()) {
    if (has(st.rec.exited_ranks(), p.rank())) continue;
    flatbuffers::FlatBufferBuilder fbb;
    auto body = wire::CreateStop(fbb, fbb.CreateString(st.rec.job_id()), st.rec.attempt(),
                                 p.rank(), 10, fbb.CreateString(reason));
    to_node(self, p.node(), Envelope{wire::seal(fbb, body)});
  }
}

void finish(Self* self, std::string_view state) {
  enter(self, state, self->state.rec.reason());
  self->delayed_send(self, kLinger, done_atom_v);
}

// All ranks of the current attempt have exited: decide what comes next.
void attempt_over(Self* self) {
  auto& r = self->state.rec;
  auto nodes = placed_nodes(r);
  int attempt = r.attempt();
  self->state.stop_sent = false;
  if (r.cancel_requested()) {
    r.set_reason("canceled by request");
    finish(self, names::kCanceled);
  } else if (r.has_failed_exit_code() || !r.failed_reason().empty()) {
    auto d = policy::decide_retry(r.retries_used(), r.spec().max_retries());
    if (d.retry) {
      r.set_retries_used(r.retries_used() + 1);
      r.set_attempt(attempt + 1);
      std::string why = "retry " + std::to_string(r.retries_used()) + " of " +
                        std::to_string(r.spec().max_retries()) + " after: " + r.failed_reason();
      r.clear_placement();
      r.clear_started_ranks();
      r.clear_exited_ranks();
      r.clear_failed_exit_code();
      r.clear_failed_reason();
      enter(self, names::kQueued, why);
      release_holds(self, r.job_id(), attempt, nodes);
      enqueue(self);
      return;
    }
    if (r.has_failed_exit_code()) r.set_exit_code(r.failed_exit_code());
    r.set_reason(r.failed_reason());
    finish(self, names::kFailed);
  } else {
    r.set_exit_code(0);
    r.set_reason("all workers exited with code 0");
    finish(self, names::kSucceeded);
  }
  release_holds(self, r.job_id(), attempt, nodes);
}

void on_started(Self* self, const wire::Started* s) {
  auto& r = self->state.rec;
  if (s->attempt() != r.attempt() || has(r.started_ranks(), s->rank())) return;
  r.add_started_ranks(s->rank());
  if (r.state() == names::kStarting && r.started_ranks_size() == r.placement_size())
    enter(self, names::kRunning);
  else
    save(self);
}

void on_exited(Self* self, const wire::Exited* x) {
  auto& r = self->state.rec;
  if (x->attempt() != r.attempt() || has(r.exited_ranks(), x->rank())) return;
  if (r.state() != names::kStarting && r.state() != names::kRunning) return;
  r.add_exited_ranks(x->rank());
  bool failed = x->exit_code() != 0 || x->signal() != 0;
  if (failed && !r.has_failed_exit_code() && r.failed_reason().empty()) {
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
  if (failed || r.cancel_requested()) stop_all(self, failed ? "another rank failed" : "canceled");
}

void on_placed(Self* self, const Assignment& a) {
  auto& r = self->state.rec;
  if (r.state() != names::kQueued || a.attempt != r.attempt()) {
    // Late or stale: the job moved on (canceled, say). Give the GPUs back.
    release_holds(self, a.job_id, a.attempt, a.nodes);
    return;
  }
  r.clear_placement();
  int world = static_cast<int>(a.nodes.size());
  for (int rank = 0; rank < world; ++rank) {
    auto* p = r.add_placement();
    p->set_rank(rank);
    p->set_node(a.nodes[static_cast<size_t>(rank)]);
    for (int g : a.gpus[static_cast<size_t>(rank)]) p->add_gpus(g);
  }
  enter(self, names::kStarting);
  std::string coordinator = a.hosts.front() + ":" + std::to_string(coordinator_port(r.job_id()));
  const auto& s = r.spec();
  for (int rank = 0; rank < world; ++rank) {
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<flatbuffers::Offset<flatbuffers::String>> cmd;
    for (const auto& c : s.command()) cmd.push_back(fbb.CreateString(c));
    std::vector<flatbuffers::Offset<wire::KeyValue>> env;
    for (const auto& [k, v] : s.env())
      env.push_back(wire::CreateKeyValue(fbb, fbb.CreateString(k), fbb.CreateString(v)));
    const auto& gpus = a.gpus[static_cast<size_t>(rank)];
    auto body = wire::CreateLaunch(
        fbb, fbb.CreateString(r.job_id()), fbb.CreateString(s.team()), r.attempt(), rank, world,
        fbb.CreateString(coordinator), fbb.CreateVector(gpus), fbb.CreateVector(cmd),
        fbb.CreateVectorOfSortedTables(&env), s.max_runtime_s(), 10);
    to_node(self, a.nodes[static_cast<size_t>(rank)], Envelope{wire::seal(fbb, body)});
  }
}

void reply_json(Self* self, const std::string& reply, const std::string& state,
                const std::string& error = {}) {
  if (reply.empty()) return;
  std::string body = error.empty()
                         ? "{\"job_id\":\"" + self->state.rec.job_id() + "\",\"state\":\"" + state + "\"}"
                         : "{\"error\":\"" + error + "\"}";
  self->state.out->publish(reply, body);
}

}  // namespace

namespace {

caf::behavior job_behavior(Self* self, Wiring w, OutboxPtr out, std::string snapshot) {
  auto& st = self->state;
  st.w = std::move(w);
  st.out = std::move(out);
  st.rec.ParseFromString(snapshot);
  auto& r = st.rec;
  if (r.state().empty()) {
    r.set_attempt(1);
    enter(self, names::kQueued);
    enqueue(self);
  } else if (r.state() == names::kQueued) {
    enqueue(self);  // restarted: make sure the queue has it (it ignores duplicates)
  } else if (names::is_terminal(r.state())) {
    self->delayed_send(self, kLinger, done_atom_v);
  }
  return {
      [=](placed_atom, const Assignment& a) { on_placed(self, a); },
      [=](const Envelope& env) {
        auto* e = wire::open(env.bytes);
        if (e == nullptr) return;
        if (auto* s = e->body_as_Started()) on_started(self, s);
        if (auto* x = e->body_as_Exited()) on_exited(self, x);
      },
      [=](cancel_atom, const std::string& reply) {
        auto& r = self->state.rec;
        if (names::is_terminal(r.state())) {
          reply_json(self, reply, r.state());
        } else if (r.state() == names::kQueued) {
          self->send(self->state.w.queues, route_atom_v, r.spec().team(),
                     caf::make_message(dequeue_atom_v, r.job_id()));
          r.set_cancel_requested(true);
          r.set_reason("canceled by request");
          finish(self, names::kCanceled);
          reply_json(self, reply, r.state());
        } else {
          r.set_cancel_requested(true);
          save(self);
          stop_all(self, "canceled");
          reply_json(self, reply, "canceling");
        }
      },
      [=](requeue_atom) {
        if (self->state.rec.state() == names::kQueued) enqueue(self);
      },
      [=](crash_atom) { self->quit(caf::sec::runtime_error); },
      [=](done_atom) { self->quit(); },
  };
}

}  // namespace

caf::actor spawn_job(caf::event_based_actor* parent, Wiring w, OutboxPtr out,
                     std::string snapshot) {
  return parent->spawn(job_behavior, std::move(w), std::move(out), std::move(snapshot));
}

}  // namespace troupe

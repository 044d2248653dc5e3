// In-process tests of the scheduler's actors with fake ports: the whole job
// life through router, supervisors, queue, arbiter and node actor, and
// supervision (a crashed actor is restarted from its snapshot).
//
// The whole scheduler (start_scheduler) runs on CAF's test coordinator
// (tests/unit/actor_test_kit.hpp): every actor runs on this thread, and the
// fixture runs every message to the end (the system is quiescent) before it
// returns, so what the fake outbox holds is all the actors will say. Time
// stands still: a ManualClock (actors/ports.hpp) is the only time the actors
// read, and a timer (a retry back-off, the node's hold check) fires only when
// the test lets time pass (Fixture::pass). No threads, no waits, no sleeps.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <cstring>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "actor_test_kit.hpp"
#include "actors/policy/ledger.hpp"
#include "actors/recovery.hpp"
#include "actors/scheduler.hpp"
#include "bus/subjects.hpp"
#include "messages/wire.hpp"
#include "records.pb.h"

using namespace troupe;
using namespace troupe::atoms;
using nlohmann::json;

namespace {

struct Published {
  std::string subject;
  std::string reply;
  std::vector<uint8_t> data;
  std::string text() const { return std::string(data.begin(), data.end()); }
};

// What the actors published, in order. Only the test's thread runs actors:
// no lock is needed.
class FakeOutbox : public Outbox {
 public:
  // Job events: taken as stored at once, or (hold_events) only on
  // store_events() — a JetStream that has not acknowledged them yet.
  bool hold_events = false;  // set before any job exists

  // Acknowledges the held events (their `stored` callbacks run now, on this
  // thread) and stops holding; returns how many were held.
  size_t store_events() {
    std::vector<Stored> now;
    now.swap(unstored_);
    hold_events = false;
    for (auto& f : now) f();
    return now.size();
  }

  // The first published message satisfying `pred` (null: none). A deque:
  // what it points to stays put while more is published.
  template <class Pred>
  const Published* find(Pred pred) const {
    for (const auto& m : log_)
      if (pred(m)) return &m;
    return nullptr;
  }
  // Where the first published message satisfying `pred` is in the order of
  // publication (-1: none).
  template <class Pred>
  long position(Pred pred) const {
    for (size_t i = 0; i < log_.size(); ++i)
      if (pred(log_[i])) return static_cast<long>(i);
    return -1;
  }
  template <class Pred>
  size_t count(Pred pred) const {
    size_t n = 0;
    for (const auto& m : log_) n += pred(m) ? 1 : 0;
    return n;
  }

 protected:
  void send(const std::string& subject, const void* data, size_t size,
            const std::string& reply) override {
    auto* p = static_cast<const uint8_t*>(data);
    log_.push_back({subject, reply, std::vector<uint8_t>(p, p + size)});
  }
  void send_event(const std::string& subject, const std::string& data, Stored stored) override {
    send(subject, data.data(), data.size(), {});
    if (hold_events && stored) {
      unstored_.push_back(std::move(stored));
      return;
    }
    if (stored) stored();
  }

 private:
  std::deque<Published> log_;
  std::vector<Stored> unstored_;
};

// Stores every submission at once: `done` runs inline (it only sends to the
// router, which handles it when the coordinator runs it). Like the stream, it
// drops a record whose msg_id it holds and answers with the one it holds.
class InstantIntake : public Intake {
 public:
  void append(const std::string& subject, std::vector<uint8_t> bytes, const std::string& msg_id,
              Done done) override {
    subjects.push_back(subject);
    appended.emplace_back(subject, std::string(bytes.begin(), bytes.end()));
    auto [it, added] = stored_.emplace(msg_id, std::string(bytes.begin(), bytes.end()));
    done({true, !added, {}, added ? std::string() : it->second});
  }
  void ack(uint64_t stream_seq) override { acked.push_back(stream_seq); }
  void retry(uint64_t stream_seq, int64_t) override { retried.push_back(stream_seq); }
  std::vector<uint64_t> acked;        // enqueued submissions acknowledged, in order
  std::vector<uint64_t> retried;      // ... and to be delivered again soon
  std::vector<std::string> subjects;  // where each append went
  std::vector<std::pair<std::string, std::string>> appended;  // (subject, bytes), in order

 private:
  std::map<std::string, std::string> stored_;  // by msg_id
};

std::vector<uint8_t> bytes_of(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

// What the tests look for in the outbox.
auto reply_to(const std::string& inbox) {
  return [inbox](const Published& p) { return p.subject == inbox; };
}
auto event_of(const std::string& job, const std::string& state) {
  return [job, state](const Published& p) {
    return p.subject == subjects::job_events("t", job) &&
           json::parse(p.text()).value("state", "") == state;
  };
}
const wire::Launch* launch_in(const Published& p, const std::string& node) {
  if (p.subject != subjects::scheduler_to_agent(node, subjects::kLaunch)) return nullptr;
  auto* e = wire::open(p.data);
  return e ? e->body_as_Launch() : nullptr;
}
// A Launch of `job` to node `node`.
auto launch_of(const std::string& node, const std::string& job) {
  return [node, job](const Published& p) {
    auto* l = launch_in(p, node);
    return l && wire::str(l->job_id()) == job;
  };
}
// A Launch of attempt `attempt` (of any job) to node `node`.
auto launch_attempt(const std::string& node, int32_t attempt) {
  return [node, attempt](const Published& p) {
    auto* l = launch_in(p, node);
    return l && l->attempt() == attempt;
  };
}

constexpr int64_t kStartMs = 1'800'000'000'000;  // the manual clock's start (2027)

struct Fixture : testing::TestSystem {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(kStartMs);
  std::shared_ptr<FakeOutbox> out = std::make_shared<FakeOutbox>();
  Wiring w;
  int replies = 0;

  explicit Fixture(SchedulerOptions opts = {},
                   std::shared_ptr<InstantIntake> intake = std::make_shared<InstantIntake>()) {
    opts.clock = clock;
    // Time stands still in settle(): rounds come at once, unless a test asks
    // for another gap than the default.
    if (opts.round_gap_us == SchedulerOptions{}.round_gap_us) opts.round_gap_us = 0;
    w = start_scheduler(*sys, out, std::move(intake), std::move(opts));
    settle();
  }
  ~Fixture() {
    stop_scheduler(w);
    settle();
  }

  // Runs every message sent so far, and every message they send, to the end.
  // Timers do not fire: time stands still.
  void settle() { sched->run(); }
  // Lets `ms` pass, in steps of 100 ms: the actors' clock and CAF's timer
  // clock move together, and each step's due timers fire and are settled.
  void pass(int64_t ms) {
    constexpr int64_t kStep = 100;
    for (int64_t left = ms; left > 0; left -= kStep) {
      int64_t d = std::min(left, kStep);
      clock->advance(d);
      sched->advance_time(std::chrono::milliseconds(d));
      settle();
    }
  }

  // Hands the router a message from the bus (post: not yet handled).
  void post(const std::string& subject, std::vector<uint8_t> data, std::string reply = {}) {
    caf::anon_send(w.router, Inbound{subject, std::move(reply), std::move(data)});
  }
  void inbound(const std::string& subject, std::vector<uint8_t> data, std::string reply = {}) {
    post(subject, std::move(data), std::move(reply));
    settle();
  }
  std::string submit(const std::string& spec_json) {
    std::string reply = "_INBOX.test." + std::to_string(++replies);
    inbound(subjects::team_submit("t"), std::vector<uint8_t>(spec_json.begin(), spec_json.end()),
            reply);
    auto* r = out->find(reply_to(reply));
    REQUIRE(r);
    auto j = json::parse(r->text());
    REQUIRE(j.contains("job_id"));
    return j["job_id"];
  }
  // `runtime`: its agent's container runtime (troupe-node --runtime), "" for none.
  void register_node(const std::string& name, int gpus, const std::string& runtime = {},
                     const std::string& gpu_type = "a100") {
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<flatbuffers::Offset<wire::Gpu>> g;
    for (int i = 0; i < gpus; ++i)
      g.push_back(wire::CreateGpu(fbb, i, fbb.CreateString(gpu_type), 80000));
    auto body = wire::CreateNodeRegister(fbb, fbb.CreateString(name), fbb.CreateString("127.0.0.1"),
                                         fbb.CreateString(gpu_type), fbb.CreateVector(g), 16, 64000,
                                         false, 0, 0, 0, 0, fbb.CreateString(runtime));
    inbound(subjects::agent_to_scheduler(name, subjects::kRegister), wire::seal(fbb, body));
  }
  // The Launch of `job` on `node` (it must have gone out).
  const wire::Launch* launched(const std::string& node, const std::string& job) {
    auto* m = out->find(launch_of(node, job));
    REQUIRE(m);
    return launch_in(*m, node);
  }
  // The agent of `node` reports the worker of Launch `l` started, then
  // exited with `exit_code` (post: not yet handled).
  void post_reports(const std::string& node, const wire::Launch* l, int exit_code) {
    flatbuffers::FlatBufferBuilder a;
    auto started =
        wire::CreateStarted(a, a.CreateString(node), a.CreateString(wire::str(l->job_id())),
                            l->attempt(), l->rank(), 4242);
    post(subjects::agent_to_scheduler(node, subjects::kStarted), wire::seal(a, started));
    flatbuffers::FlatBufferBuilder b;
    auto exited = wire::CreateExited(
        b, b.CreateString(node), b.CreateString(wire::str(l->job_id())), l->attempt(), l->rank(),
        exit_code, 0, b.CreateString("exited with code " + std::to_string(exit_code)));
    post(subjects::agent_to_scheduler(node, subjects::kExited), wire::seal(b, exited));
  }
  void agent_reports(const std::string& node, const wire::Launch* l, int exit_code) {
    post_reports(node, l, exit_code);
    settle();
  }
  bool event(const std::string& job, const std::string& state) {
    return out->find(event_of(job, state)) != nullptr;
  }
  // Sends an Envelope to node `node`'s actor, as the other actors do.
  void to_node(const std::string& node, std::vector<uint8_t> bytes) {
    caf::anon_send(w.nodes, route_atom_v, node, Envelope{std::move(bytes)});
    settle();
  }
  // How many workers node `node` counts as running (launched, not exited).
  int running_on(const std::string& node) {
    std::string reply = "_INBOX.cordon." + std::to_string(++replies);
    caf::anon_send(w.nodes, cordon_atom_v, node, false, false, std::string(), reply);
    settle();
    auto* r = out->find(reply_to(reply));
    REQUIRE(r);
    return json::parse(r->text())["running"].get<int>();
  }
  // The restarts supervisor `sup` counts (stats_atom), asked by a probe actor
  // that lives until the answer comes. (Any handle: typed or not.)
  template <class Handle>
  int64_t restarts(const Handle& sup) {
    auto n = std::make_shared<int64_t>(-1);
    sys->spawn([sup, n](caf::event_based_actor* self) {
      self->request(sup, caf::infinite, stats_atom_v)
          .then([n](int64_t x) { *n = x; }, [](caf::error&) {});
    });
    settle();
    return *n;
  }
  // What troupe.sys.queues answers now.
  json queues() {
    std::string reply = "_INBOX.queues." + std::to_string(++replies);
    inbound(subjects::kSysQueues, {}, reply);
    auto* r = out->find(reply_to(reply));
    REQUIRE(r);
    return json::parse(r->text());
  }
  // Crashes job `id`'s actor (the debug crash, through its supervisor).
  void crash_job(const std::string& id) {
    caf::anon_send(w.jobs, crash_atom_v, id);
    settle();
  }
};

const char* kJob = R"({"command":["true"],"resources":{"gpus":1}})";

}  // namespace

TEST_CASE("a job runs through the actors: queued, starting, running, succeeded", "[actors]") {
  Fixture f;
  f.register_node("n1", 4);
  auto id = f.submit(kJob);
  CHECK(f.event(id, "queued"));
  auto* l = f.launched("n1", id);
  CHECK(l->gpus()->size() == 1);
  CHECK(f.event(id, "starting"));
  f.agent_reports("n1", l, 0);
  CHECK(f.event(id, "running"));
  CHECK(f.event(id, "succeeded"));
  // In that order, and launched once.
  CHECK(f.out->position(event_of(id, "queued")) < f.out->position(event_of(id, "starting")));
  CHECK(f.out->position(event_of(id, "starting")) < f.out->position(event_of(id, "running")));
  CHECK(f.out->position(event_of(id, "running")) < f.out->position(event_of(id, "succeeded")));
  CHECK(f.out->count(launch_of("n1", id)) == 1);
}

TEST_CASE("a submission addressed to a pool (troupe.<team>.submit.<pool>) is one like any other",
          "[actors]") {
  Fixture f;
  f.register_node("n1", 4);
  const std::string reply = "_INBOX.test.addressed";
  f.inbound(subjects::team_submit_to("t", "a100"),
            std::vector<uint8_t>(kJob, kJob + std::strlen(kJob)), reply);
  auto* r = f.out->find(reply_to(reply));
  REQUIRE(r);
  auto j = json::parse(r->text());
  REQUIRE(j.contains("job_id"));
  const std::string id = j["job_id"];
  CHECK(f.event(id, "queued"));
  CHECK(f.out->count(launch_of("n1", id)) == 1);
  // Its team is the subject's: another team's spec is refused.
  const std::string other = "_INBOX.test.other";
  const std::string spec = R"({"team":"u","command":["true"]})";
  f.inbound(subjects::team_submit_to("t", "a100"), std::vector<uint8_t>(spec.begin(), spec.end()),
            other);
  auto* refused = f.out->find(reply_to(other));
  REQUIRE(refused);
  CHECK(json::parse(refused->text()).value("code", "") == "wrong_team");
}

TEST_CASE("a failing job with max_retries runs again with the next attempt", "[actors]") {
  Fixture f;
  f.register_node("n1", 4);
  auto id = f.submit(R"({"command":["false"],"resources":{"gpus":1},"max_retries":1})");
  auto* l1 = f.launched("n1", id);
  REQUIRE(l1->attempt() == 1);
  f.agent_reports("n1", l1, 1);
  // The retry waits out its back-off (1 s for the first) ...
  f.pass(900);
  CHECK_FALSE(f.out->find(launch_attempt("n1", 2)));
  f.pass(200);
  // ... then runs as attempt 2.
  auto* second = f.out->find(launch_attempt("n1", 2));
  REQUIRE(second);
  f.agent_reports("n1", launch_in(*second, "n1"), 1);
  CHECK(f.event(id, "failed"));
  CHECK_FALSE(f.out->find(launch_attempt("n1", 3)));
}

TEST_CASE("a crashed job actor is restarted from its snapshot and still runs",
          "[actors][supervision]") {
  Fixture f;
  f.register_node("n1", 2);
  auto id = f.submit(kJob);
  auto* l = f.launched("n1", id);
  REQUIRE(l);
  CHECK(f.restarts(f.w.jobs) == 0);
  f.crash_job(id);  // starting: its actor was started by its placement
  // The restart is visible in the supervisor's count...
  CHECK(f.restarts(f.w.jobs) == 1);
  // ...and the restored job still hears its worker.
  f.agent_reports("n1", l, 0);
  CHECK(f.event(id, "succeeded"));
}

TEST_CASE(
    "a queued job has no actor: a crash finds none, its placement starts one, and a "
    "cancel ends it without one",
    "[actors][supervision]") {
  Fixture f;
  auto id = f.submit(kJob);  // no node yet: stays queued
  REQUIRE(f.event(id, "queued"));
  f.crash_job(id);
  CHECK(f.restarts(f.w.jobs) == 0);  // nothing to crash
  auto canceled = f.submit(kJob);
  REQUIRE(f.event(canceled, "queued"));
  std::string body = "{\"job_id\":\"" + canceled + "\"}";
  f.inbound(subjects::team_cancel("t"), std::vector<uint8_t>(body.begin(), body.end()),
            "_INBOX.cancel");
  CHECK(f.event(canceled, "canceled"));
  f.register_node("n1", 2);
  auto* l = f.launched("n1", id);
  REQUIRE(l);
  f.agent_reports("n1", l, 0);
  CHECK(f.event(id, "succeeded"));
  CHECK(f.out->position(launch_of("n1", canceled)) == -1);
}

TEST_CASE("an ended job's actor lingers linger_ms on its supervisor's one sweep, then goes",
          "[actors][supervision]") {
  Fixture f;
  f.register_node("n1", 8);
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(f.submit(kJob));
  size_t timers = f.sched->clock().schedule().size();
  for (const auto& id : ids) f.agent_reports("n1", f.launched("n1", id), 0);
  for (const auto& id : ids) REQUIRE(f.event(id, "succeeded"));
  // Five actors linger on the supervisor's sweep (one timer), not on a timer each.
  CHECK(f.sched->clock().schedule().size() <= timers + 1);
  f.pass(f.w.linger_ms - 1000);
  f.crash_job(ids[0]);  // still there: it crashes and is restarted (it lingers anew)
  CHECK(f.restarts(f.w.jobs) == 1);
  f.pass(2000);  // the others' linger is over, and the sweep has come
  f.crash_job(ids[1]);
  CHECK(f.restarts(f.w.jobs) == 1);  // gone: nothing to crash
  f.crash_job(ids[0]);               // restarted later: still lingering
  CHECK(f.restarts(f.w.jobs) == 2);
}

TEST_CASE("a crashed node actor is restarted and keeps placing", "[actors][supervision]") {
  Fixture f;
  auto hello = [](const Published& p) {
    return p.subject == subjects::scheduler_to_agent("n1", subjects::kHello);
  };
  f.register_node("n1", 2);
  auto a = f.submit(kJob);
  f.agent_reports("n1", f.launched("n1", a), 0);
  REQUIRE(f.event(a, "succeeded"));
  size_t hellos = f.out->count(hello);
  caf::anon_send(f.w.nodes, crash_atom_v, std::string("n1"));
  f.settle();
  CHECK(f.restarts(f.w.nodes) == 1);
  // The restarted actor asks its agent to register again (as the agent does).
  CHECK(f.out->count(hello) == hellos + 1);
  f.register_node("n1", 2);
  auto b = f.submit(kJob);
  f.agent_reports("n1", f.launched("n1", b), 0);
  CHECK(f.event(b, "succeeded"));
}

TEST_CASE("malformed agent messages are dropped and counted", "[actors][input]") {
  Fixture f;
  f.inbound("troupe.sys.agent.n1.heartbeat", {1, 2, 3, 4, 5, 6, 7, 8});
  f.inbound("troupe.t.status", {'{', 'x'}, "_INBOX.s");
  f.inbound("troupe.sys.stats", {}, "_INBOX.stats");
  auto* r = f.out->find(reply_to("_INBOX.stats"));
  REQUIRE(r);
  CHECK(json::parse(r->text())["malformed"] == 2);
  auto* s = f.out->find(reply_to("_INBOX.s"));
  REQUIRE(s);
  CHECK(json::parse(s->text()).contains("error"));
}

TEST_CASE("a key only the intake stream holds is answered with its original job, not a new one",
          "[actors][idempotency]") {
  auto intake = std::make_shared<InstantIntake>();
  const char* keyed = R"({"command":["true"],"resources":{"gpus":1},"idempotency_key":"k"})";
  std::string original;
  {
    Fixture first({}, intake);
    first.register_node("n1", 4);
    first.submit(kJob);
    original = first.submit(keyed);
  }
  // The next scheduler knows no key (nothing restored); the stream still
  // holds "t/k". (Its first fresh id is the first one's first.)
  Fixture f({}, intake);
  f.register_node("n1", 4);
  CHECK(f.submit(keyed) == original);
  CHECK(f.submit(keyed) == original);  // learnt: answered from the key map
  f.inbound("troupe.sys.stats", {}, "_INBOX.stats");
  auto* r = f.out->find(reply_to("_INBOX.stats"));
  REQUIRE(r);
  auto stats = json::parse(r->text());
  CHECK(stats["duplicates"] == 2);
  CHECK(stats["accepted"] == 0);
  CHECK(f.out->count([](const Published& p) { return launch_in(p, "n1") != nullptr; }) == 0);
  // The same key with another spec: refused as a conflict.
  Fixture g({}, intake);
  g.register_node("n1", 4);
  std::string reply = "_INBOX.conflict";
  std::string changed = R"({"command":["false"],"resources":{"gpus":1},"idempotency_key":"k"})";
  g.inbound(subjects::team_submit("t"), std::vector<uint8_t>(changed.begin(), changed.end()),
            reply);
  auto* c = g.out->find(reply_to(reply));
  REQUIRE(c);
  CHECK(json::parse(c->text()).value("code", "") == "idempotency_conflict");
}

TEST_CASE("a give-up release never frees a launched hold, the job's own release does",
          "[actors][holds]") {
  // A second grant of a running attempt (its placement lost with a crashed
  // queue) ends in a gang or queue giving up: its release must not free the
  // GPUs the running worker uses.
  Fixture f;
  f.register_node("n1", 1);
  auto a = f.submit(kJob);
  auto* l = f.launched("n1", a);
  auto hold = troupe::policy::hold_id(a, l->attempt(), l->rank());
  REQUIRE(f.running_on("n1") == 1);
  f.to_node("n1", wire::release(hold, "gang not placed", true));
  CHECK(f.running_on("n1") == 1);
  f.to_node("n1", wire::release(hold, "attempt ended"));
  CHECK(f.running_on("n1") == 0);
}

TEST_CASE("a hold whose placement never reached its job is handed back by the node's hold check",
          "[actors][holds]") {
  // A placement that died with a crashed actor's mailbox leaves the node a
  // committed hold nobody launches. The node asks the job, which disowns it.
  // 3 s instead of 10 s: the fake agents send no heartbeats, and a node
  // silent for 10 s is lost.
  SchedulerOptions opts;
  opts.hold_check_ms = 3000;
  Fixture f(opts);
  f.register_node("n1", 1);
  auto a = f.submit(kJob);
  f.agent_reports("n1", f.launched("n1", a), 0);
  REQUIRE(f.event(a, "succeeded"));
  // An orphan of job a's first attempt on the node's only GPU.
  auto orphan = troupe::policy::hold_id(a, 1, 0);
  {
    flatbuffers::FlatBufferBuilder fbb;
    auto res = wire::CreateResources(fbb, 1, fbb.CreateString(""), 0, 0);
    f.to_node("n1", wire::seal(fbb, wire::CreateReserve(fbb, fbb.CreateString(orphan),
                                                        fbb.CreateString(a), fbb.CreateString(a),
                                                        fbb.CreateString("t"), res, 60000, 0)));
    flatbuffers::FlatBufferBuilder c;
    f.to_node("n1", wire::seal(c, wire::CreateCommit(c, c.CreateString(orphan))));
  }
  // Job b needs that GPU: it waits while the orphan holds it (the node's
  // ticks, every second, find it too young to ask about) ...
  auto b = f.submit(kJob);
  CHECK(f.event(b, "queued"));
  f.pass(2500);
  CHECK_FALSE(f.out->find(launch_of("n1", b)));
  // ... and is placed once the hold check has handed the orphan back.
  f.pass(1600);
  auto* l = f.launched("n1", b);
  CHECK(l->gpus()->size() == 1);
  f.agent_reports("n1", l, 0);
  CHECK(f.event(b, "succeeded"));
}

TEST_CASE("a job actor crashed as its worker exits still ends with the real exit code",
          "[actors][holds]") {
  // The Exited may die with the crashed actor's mailbox: the restarted job
  // asks its node (sync), and the hold check tells it again.
  Fixture f;
  f.register_node("n1", 1);
  auto a = f.submit(R"({"command":["false"],"resources":{"gpus":1}})");
  auto* l = f.launched("n1", a);
  SECTION("the worker's reports die in the crashed actor's mailbox") {
    // The crash reaches the job actor first; the Started and Exited then
    // queue behind it (its supervisor still routes to it) and die with it.
    caf::anon_send(f.w.jobs, crash_atom_v, a);
    REQUIRE(f.sched->prioritize(f.w.jobs));
    f.sched->run_once();
    f.post_reports("n1", l, 3);
    auto doomed = [](caf::resumable* r) {
      auto* s = dynamic_cast<caf::scheduled_actor*>(r);
      auto* m = s ? s->mailbox().peek() : nullptr;
      return m != nullptr && m->content().match_elements<crash_atom>();
    };
    f.sched->run_jobs_filtered([&](caf::resumable* r) { return !doomed(r); });
    // Only the doomed actor is left to run: its crash, then the worker's
    // Started and Exited.
    REQUIRE(f.sched->jobs.size() == 1);
    CHECK(f.sched->next_job<caf::scheduled_actor>().mailbox().size() == 3);
    CHECK_FALSE(f.event(a, "failed"));
    f.settle();
  }
  SECTION("the worker's reports reach the restarted actor") {
    f.crash_job(a);
    f.agent_reports("n1", l, 3);
  }
  CHECK(f.restarts(f.w.jobs) == 1);
  REQUIRE(f.event(a, "failed"));
  CHECK(json::parse(f.out->find(event_of(a, "failed"))->text())["exit_code"] == 3);
  CHECK(f.out->count(event_of(a, "failed")) == 1);
}

TEST_CASE("a restarted job whose rank its node does not hold has it stopped and runs again",
          "[actors][holds]") {
  Fixture f;
  f.register_node("n1", 1);
  auto a = f.submit(kJob);
  auto* l1 = f.launched("n1", a);
  REQUIRE(l1->attempt() == 1);
  f.to_node("n1", wire::release(troupe::policy::hold_id(a, 1, 0), "lost track"));
  REQUIRE(f.running_on("n1") == 0);
  f.crash_job(a);
  // The node stops whatever runs of attempt 1 (SIGKILL) ...
  auto* stop = f.out->find([&](const Published& p) {
    if (p.subject != subjects::scheduler_to_agent("n1", subjects::kStop)) return false;
    auto* e = wire::open(p.data);
    auto* s = e ? e->body_as_Stop() : nullptr;
    return s && wire::str(s->job_id()) == a && s->attempt() == 1 && s->signal() == SIGKILL;
  });
  CHECK(stop);
  // ... and the job runs again as attempt 2 (an infrastructure failure).
  auto* second = f.out->find(launch_attempt("n1", 2));
  REQUIRE(second);
  f.agent_reports("n1", launch_in(*second, "n1"), 0);
  CHECK(f.event(a, "succeeded"));
}

TEST_CASE("a job's Launch waits until the events stream holds its starting event",
          "[actors][holds]") {
  Fixture f;
  f.out->hold_events = true;  // JetStream has not acknowledged anything yet
  f.register_node("n1", 1);
  auto id = f.submit(R"({"name":"wal","team":"t","command":["true"],"resources":{"gpus":1}})");
  auto is_launch = [&](const Published& p) {
    return p.subject == subjects::scheduler_to_agent("n1", subjects::kLaunch);
  };
  // The placement is decided and announced...
  REQUIRE(f.event(id, "starting"));
  // ...but no Launch goes while the event is not kept (a scheduler killed now
  // must not leave a worker its restored state does not know of), not even
  // after a few seconds.
  CHECK_FALSE(f.out->find(is_launch));
  f.pass(3000);
  CHECK_FALSE(f.out->find(is_launch));
  CHECK(f.out->store_events() == 1);  // the starting event (the others need no answer)
  f.settle();
  const auto* l = f.launched("n1", id);
  CHECK(l->attempt() == 1);
  CHECK(f.out->count(is_launch) == 1);
  f.agent_reports("n1", l, 0);
  REQUIRE(f.event(id, "succeeded"));
}

TEST_CASE("a job canceled before its Launch keeps its GPU until it has announced its end",
          "[actors][holds]") {
  // The Launch waits for the starting event to be kept; a cancel meanwhile
  // stops a rank that never ran. Its GPU must not be announced as another
  // job's before this job's own end is.
  Fixture f;
  f.out->hold_events = true;
  f.register_node("n1", 1);
  auto a = f.submit(kJob);
  REQUIRE(f.event(a, "starting"));
  auto b = f.submit(kJob);  // waits for n1's only GPU
  REQUIRE(f.event(b, "queued"));
  CHECK_FALSE(f.event(b, "starting"));
  std::string body = "{\"job_id\":\"" + a + "\"}";
  f.inbound(subjects::team_cancel("t"), std::vector<uint8_t>(body.begin(), body.end()),
            "_INBOX.cancel");
  REQUIRE(f.event(a, "canceled"));
  REQUIRE(f.event(b, "starting"));
  CHECK(f.out->position(event_of(a, "canceled")) < f.out->position(event_of(b, "starting")));
  // The starting event is kept only now: job a's Launch never goes.
  f.out->store_events();
  f.settle();
  auto* l = f.launched("n1", b);
  f.agent_reports("n1", l, 0);
  REQUIRE(f.event(b, "succeeded"));
  CHECK(f.out->position(launch_of("n1", a)) == -1);
}

TEST_CASE("a Launch carries the worker's isolation from the spec and the cluster config",
          "[actors][isolation]") {
  Fixture f;
  apply_config(f.w,
               "pools: [{name: a100, gpu_type: a100}]\n"
               "teams: [{name: t, run_as: 5001}]\n"
               "job_defaults: {memory_mb: 8192}\n");
  f.settle();
  f.register_node("n1", 8, "podman");
  auto img = f.submit(
      R"({"command":["true"],"image":"localhost/troupe-busybox:latest","resources":{"gpus":1,"cpus":2}})");
  auto* l = f.launched("n1", img);
  CHECK(wire::str(l->image()) == "localhost/troupe-busybox:latest");
  CHECK(l->cpus() == 2);
  CHECK(l->memory_mb() == 8192);  // none in the spec: job_defaults
  CHECK(l->run_as_uid() == 5001);
  auto own = f.submit(R"({"command":["true"],"resources":{"gpus":1,"memory_mb":100}})");
  auto* l2 = f.launched("n1", own);
  CHECK(wire::str(l2->image()).empty());
  CHECK(l2->cpus() == 0);
  CHECK(l2->memory_mb() == 100);  // the spec's own
  CHECK(l2->run_as_uid() == 5001);
}

TEST_CASE("without run_as a Launch leaves the user to the agent (-1)", "[actors][isolation]") {
  Fixture f;
  f.register_node("n1", 8);
  auto id = f.submit(kJob);
  auto* l = f.launched("n1", id);
  CHECK(l->run_as_uid() == -1);
  CHECK(l->memory_mb() == 0);
}

TEST_CASE("a job with an image waits for a node that runs images, never the host",
          "[actors][isolation]") {
  Fixture f;
  f.register_node("plain", 8);
  auto img = f.submit(
      R"({"command":["true"],"image":"localhost/troupe-busybox:latest","resources":{"gpus":1}})");
  auto host = f.submit(kJob);  // behind it in the queue: it still runs on the plain node
  f.launched("plain", host);
  // Why it waits: the runtime, by its code (every round so far is done).
  std::string ask = json{{"job_id", img}}.dump();
  f.inbound(subjects::team_why("t"), std::vector<uint8_t>(ask.begin(), ask.end()), "_INBOX.why");
  auto* why = f.out->find(reply_to("_INBOX.why"));
  REQUIRE(why);
  CHECK(json::parse(why->text()).value("code", "") == "no_runtime");
  // A node with a runtime joins: the job runs there.
  f.register_node("podman", 8, "podman");
  f.launched("podman", img);
  CHECK(f.out->position(launch_of("plain", img)) == -1);
}

TEST_CASE("a team's jobs waiting for a full pool hold up none of its jobs for another pool",
          "[actors][pools]") {
  Fixture f;
  apply_config(f.w,
               "pools: [{name: a100, gpu_type: a100}, {name: h100, gpu_type: h100}]\n"
               "teams: [{name: t}]\n");
  f.settle();
  f.register_node("h", 1, "", "h100");
  f.register_node("a", 1, "", "a100");
  const char* h100 = R"({"command":["true"],"resources":{"gpus":1,"gpu_type":"h100"}})";
  auto first = f.submit(h100);
  f.launched("h", first);  // runs and keeps the pool's one GPU
  std::vector<std::string> waiting;
  for (int i = 0; i < 40; ++i) waiting.push_back(f.submit(h100));
  // Behind 40 jobs of its team in line, but the only one for its pool.
  auto other = f.submit(R"({"command":["true"],"resources":{"gpus":1,"gpu_type":"a100"}})");
  f.launched("a", other);
  for (const auto& id : waiting) CHECK(f.out->position(launch_of("h", id)) == -1);
  // Each pool counts its own pending jobs, once.
  int h100_pending = -1, a100_pending = -1;
  auto view = f.queues();
  for (const auto& row : view["teams"]) {
    if (row["team"] != "t") continue;
    if (row["pool"] == "h100") h100_pending = row["pending_jobs"];
    if (row["pool"] == "a100") a100_pending = row["pending_jobs"];
  }
  CHECK(h100_pending == 40);
  CHECK(a100_pending == 0);
  // Each pool has its own arbiter, and the front puts their rows together.
  std::vector<std::string> pools;
  for (const auto& p : view["pools"]) pools.push_back(p["pool"]);
  CHECK(pools == std::vector<std::string>{"a100", "h100"});
}

namespace {
// The troupe.sys.queues row of team t in `pool` (null when absent).
json team_row(const json& view, const std::string& pool) {
  for (const auto& row : view["teams"])
    if (row["team"] == "t" && row["pool"] == pool) return row;
  return nullptr;
}
json pool_row_of(const json& view, const std::string& pool) {
  for (const auto& row : view["pools"])
    if (row["pool"] == pool) return row;
  return nullptr;
}
const char* kAnyType = R"({"command":["true"],"resources":{"gpus":1}})";
}  // namespace

TEST_CASE("an any-type job goes to the preferred pool with room and counts once while it waits",
          "[actors][pools][anytype]") {
  Fixture f;
  apply_config(f.w,
               "pools: [{name: a100, gpu_type: a100}, {name: h100, gpu_type: h100}]\n"
               "teams: [{name: t, pool_preference: [h100]}]\n");
  f.settle();
  f.register_node("a", 1, "", "a100");
  f.register_node("h", 1, "", "h100");
  auto first = f.submit(kAnyType);
  auto* on_h = f.launched("h", first);  // its preferred pool has room
  CHECK_FALSE(f.out->find(launch_of("a", first)));
  auto second = f.submit(kAnyType);
  f.launched("a", second);  // h100 is full: the next candidate
  auto third = f.submit(kAnyType);
  CHECK_FALSE(f.out->find(launch_of("h", third)));
  CHECK_FALSE(f.out->find(launch_of("a", third)));
  auto view = f.queues();
  INFO(view.dump());
  CHECK(team_row(view, "h100")["pending_jobs"] == 1);
  CHECK(team_row(view, "h100")["pending_flexible"] == 1);
  json a100 = team_row(view, "a100");
  CHECK((a100.is_null() || a100["pending_jobs"] == 0));
  // Its preferred pool frees first: it runs there.
  f.agent_reports("h", on_h, 0);
  CHECK(f.event(first, "succeeded"));
  f.launched("h", third);
  CHECK_FALSE(f.out->find(launch_of("a", third)));
}

TEST_CASE("a second placement of an any-type job in another pool is given back, not run",
          "[actors][pools][anytype]") {
  Fixture f;
  apply_config(f.w,
               "pools: [{name: a100, gpu_type: a100}, {name: h100, gpu_type: h100}]\n"
               "teams: [{name: t, pool_preference: [h100]}]\n");
  f.settle();
  f.register_node("a", 1, "", "a100");
  f.register_node("h", 1, "", "h100");
  auto x = f.submit(kAnyType);
  auto* l = f.launched("h", x);
  // Pool a100 granted it in the same instant, and its reservation went
  // through on node a: the same hold id there, committed.
  auto hold = troupe::policy::hold_id(x, l->attempt(), 0);
  {
    flatbuffers::FlatBufferBuilder fbb;
    auto res = wire::CreateResources(fbb, 1, fbb.CreateString(""), 0, 0);
    f.to_node("a", wire::seal(fbb, wire::CreateReserve(fbb, fbb.CreateString(hold),
                                                       fbb.CreateString(x), fbb.CreateString(x),
                                                       fbb.CreateString("t"), res, 60000, 0)));
    flatbuffers::FlatBufferBuilder c;
    f.to_node("a", wire::seal(c, wire::CreateCommit(c, c.CreateString(hold))));
  }
  REQUIRE(pool_row_of(f.queues(), "a100")["gpus_free"] == 0);
  Assignment dup;
  dup.job_id = x;
  dup.attempt = l->attempt();
  dup.nodes = {"a"};
  dup.hosts = {"127.0.0.1"};
  dup.gpus = {{0}};
  dup.pool = "a100";
  caf::anon_send(f.w.jobs, placed_atom_v, dup);
  f.settle();
  // Node a's GPU is free again, nothing was launched there, and x runs on h.
  CHECK(pool_row_of(f.queues(), "a100")["gpus_free"] == 1);
  CHECK_FALSE(f.out->find(launch_of("a", x)));
  CHECK(f.running_on("h") == 1);  // its worker on h keeps its GPU
  f.agent_reports("h", l, 0);
  CHECK(f.event(x, "succeeded"));
}

TEST_CASE(
    "order las: a job past its band's threshold yields to a job of its team with less service",
    "[actors][las]") {
  Fixture f;
  apply_config(f.w,
               "pools: [{name: a100, gpu_type: a100}]\n"
               "teams: [{name: t, order: las}]\n"
               "las: {thresholds_gpu_s: [4], promote_after_s: 0}\n");
  f.settle();
  f.register_node("n1", 1);
  auto a = f.submit(kJob);
  auto* la = f.launched("n1", a);
  {
    flatbuffers::FlatBufferBuilder fbb;
    f.post(subjects::agent_to_scheduler("n1", subjects::kStarted),
           wire::seal(fbb, wire::CreateStarted(fbb, fbb.CreateString("n1"), fbb.CreateString(a),
                                               la->attempt(), 0, 4242)));
    f.settle();
  }
  f.pass(2000);  // a: 2 GPU-seconds, band 0
  auto b = f.submit(kJob);
  auto stop_of_a = [&](const Published& p) {
    if (p.subject != subjects::scheduler_to_agent("n1", subjects::kStop)) return false;
    auto* e = wire::open(p.data);
    auto* s = e ? e->body_as_Stop() : nullptr;
    return s && wire::str(s->job_id()) == a && s->attempt() == la->attempt();
  };
  f.pass(1000);  // same band as b: no preemption, b waits
  CHECK_FALSE(f.out->find(stop_of_a));
  CHECK_FALSE(f.out->find(launch_of("n1", b)));
  f.pass(2500);  // a crossed 4 GPU-seconds: band 1, above b's band 0
  REQUIRE(f.out->find(stop_of_a));
  {
    flatbuffers::FlatBufferBuilder fbb;
    f.post(subjects::agent_to_scheduler("n1", subjects::kExited),
           wire::seal(fbb, wire::CreateExited(fbb, fbb.CreateString("n1"), fbb.CreateString(a),
                                              la->attempt(), 0, 0, 10,
                                              fbb.CreateString("checkpointed and exited"))));
    f.settle();
  }
  CHECK(f.event(a, "preempted"));
  auto* lb = f.launched("n1", b);  // the shorter job runs first
  CHECK_FALSE(f.out->find(launch_attempt("n1", 2)));
  f.agent_reports("n1", lb, 0);
  CHECK(f.event(b, "succeeded"));
  REQUIRE(f.out->find(launch_attempt("n1", 2)));  // then a goes on
}

TEST_CASE("why says reclaiming, with the teams, while borrowed GPUs are taken back",
          "[actors][preemption][reclaim]") {
  Fixture f;
  apply_config(f.w,
               "pools: [{name: a100, gpu_type: a100}]\n"
               "teams: [{name: lender, quotas: {a100: {guaranteed: 1}}}, {name: borrower}]\n");
  f.settle();
  f.register_node("n1", 1);
  auto submit_as = [&](const std::string& team) {
    std::string reply = "_INBOX.as." + team;
    f.inbound(subjects::team_submit(team), std::vector<uint8_t>(kJob, kJob + strlen(kJob)), reply);
    auto* r = f.out->find(reply_to(reply));
    REQUIRE(r);
    return json::parse(r->text())["job_id"].get<std::string>();
  };
  auto b = submit_as("borrower");
  auto* lb = f.launched("n1", b);
  auto l = submit_as("lender");
  // The borrower's job is asked to stop (its agent has not answered yet).
  REQUIRE(f.out->find([&](const Published& p) {
    if (p.subject != subjects::scheduler_to_agent("n1", subjects::kStop)) return false;
    auto* e = wire::open(p.data);
    auto* st = e ? e->body_as_Stop() : nullptr;
    return st && wire::str(st->job_id()) == b;
  }));
  std::string ask = json{{"job_id", l}}.dump();
  f.inbound(subjects::team_why("lender"), std::vector<uint8_t>(ask.begin(), ask.end()),
            "_INBOX.why.l");
  auto* why = f.out->find(reply_to("_INBOX.why.l"));
  REQUIRE(why);
  auto w = json::parse(why->text());
  INFO(w.dump());
  CHECK(w.value("code", "") == "reclaiming");
  CHECK_THAT(w.value("reason", ""), Catch::Contains("borrower"));
  // The borrower's worker stops: the lender's job runs.
  f.agent_reports("n1", lb, 0);
  f.launched("n1", l);
}

TEST_CASE("a pool plans at most one round per round gap: what comes in meanwhile waits for it",
          "[actors][pools]") {
  SchedulerOptions opts;
  opts.round_gap_us = 5000;
  Fixture f(opts);
  f.register_node("n1", 4);  // a round (nothing to place) right now
  auto id = f.submit(kJob);
  // Time stands still: the next round is 5 ms away.
  CHECK(f.out->position(launch_of("n1", id)) == -1);
  f.pass(100);
  f.launched("n1", id);
}

TEST_CASE("submissions read off the router keep each team's order, and a flood is refused by rate",
          "[actors][submission]") {
  SchedulerOptions opts;
  opts.intake_readers = 3;
  Fixture f(opts);
  apply_config(f.w,
               "pools: [{name: a100, gpu_type: a100}]\n"
               "teams: [{name: a}, {name: b}, {name: c}, {name: d},\n"
               "        {name: r, limits: {submit_rate: 1, submit_burst: 2}}]\n");
  f.settle();
  f.register_node("n1", 8);
  // Four teams' submissions, interleaved, all posted before any is handled:
  // spread over three readers, and back at the router in any order across
  // teams, but in its own order within each team.
  const std::vector<std::string> teams = {"a", "b", "c", "d"};
  constexpr int kEach = 12;
  std::map<std::string, std::vector<std::string>> inboxes;
  for (int i = 0; i < kEach; ++i) {
    for (const auto& t : teams) {
      std::string spec = R"({"command":["true"],"resources":{"gpus":1}})";
      std::string reply = "_INBOX." + t + "." + std::to_string(i);
      f.post(subjects::team_submit(t), std::vector<uint8_t>(spec.begin(), spec.end()), reply);
      inboxes[t].push_back(reply);
    }
  }
  // And a flood from a team allowed a burst of 2: refused before the router
  // looks at it, but counted and answered by the router.
  std::vector<std::string> flood;
  for (int i = 0; i < 5; ++i) {
    std::string spec = R"({"command":["true"],"resources":{"gpus":1}})";
    flood.push_back("_INBOX.r." + std::to_string(i));
    f.post(subjects::team_submit("r"), std::vector<uint8_t>(spec.begin(), spec.end()),
           flood.back());
  }
  f.settle();
  for (const auto& t : teams) {
    std::vector<std::string> ids;
    for (const auto& inbox : inboxes[t]) {
      auto* r = f.out->find(reply_to(inbox));
      REQUIRE(r);
      auto j = json::parse(r->text());
      REQUIRE(j.contains("job_id"));
      ids.push_back(j["job_id"]);
    }
    // Job ids number the submit order (one width: they compare as strings).
    CHECK(std::is_sorted(ids.begin(), ids.end()));
    CHECK(std::set<std::string>(ids.begin(), ids.end()).size() == ids.size());
  }
  int accepted = 0, limited = 0;
  for (const auto& inbox : flood) {
    auto* r = f.out->find(reply_to(inbox));
    REQUIRE(r);
    auto j = json::parse(r->text());
    if (j.contains("job_id")) ++accepted;
    if (j.value("code", "") == "rate_limited") ++limited;
  }
  CHECK(accepted == 2);
  CHECK(limited == 3);
  f.inbound(subjects::kSysStats, {}, "_INBOX.stats");
  auto* stats = f.out->find(reply_to("_INBOX.stats"));
  REQUIRE(stats);
  auto s = json::parse(stats->text());
  CHECK(s["refused"]["rate_limited"] == 3);
  CHECK(s["submitted"] == 4 * kEach + 5);
}

TEST_CASE(
    "a shard counts a team's submit rate for its own pools, whichever shard of the queue group "
    "read the submission",
    "[actors][input][shards]") {
  SchedulerOptions opts;
  opts.shards.pools = {"a100"};
  Fixture f(opts);
  apply_config(f.w,
               "pools: [{name: a100, gpu_type: a100}, {name: h100, gpu_type: h100}]\n"
               "teams: [{name: r, borrow: true, limits: {submit_rate: 1, submit_burst: 2}}]\n");
  f.settle();
  f.register_node("n1", 8);
  auto spec_of = [](const std::string& type) {
    std::string s = R"({"command":["true"],"resources":{"gpus":1,"gpu_type":")" + type + "\"}}";
    return std::vector<uint8_t>(s.begin(), s.end());
  };
  auto answer = [&](const std::string& inbox) {
    auto* r = f.out->find(reply_to(inbox));
    REQUIRE(r);
    return json::parse(r->text());
  };
  // Five of the other shard's pool read here: handed over as read, none
  // counted here (their owner counts them), none answered here.
  for (int i = 0; i < 5; ++i)
    f.post(subjects::team_submit("r"), spec_of("h100"), "_INBOX.h." + std::to_string(i));
  f.settle();
  auto handed = [](const Published& p) { return p.subject == subjects::shard_read("h100", "r"); };
  REQUIRE(f.out->count(handed) == 5);
  CHECK(f.out->find(handed)->reply == "_INBOX.h.0");
  CHECK(f.out->find(reply_to("_INBOX.h.0")) == nullptr);
  // Its own pool's: read here or handed here by the other shard, one bucket.
  f.inbound(subjects::team_submit("r"), spec_of("a100"), "_INBOX.a.0");
  CHECK(answer("_INBOX.a.0").contains("job_id"));
  // What the other shard hands over is the same message as it handed the h100
  // ones: the owner checks it again and counts it.
  const auto& other = *f.out->find(handed);
  pb::ShardSubmission m;
  REQUIRE(m.ParseFromArray(other.data.data(), static_cast<int>(other.data.size())));
  m.mutable_spec()->mutable_resources()->set_gpu_type("a100");
  const auto body = m.SerializeAsString();
  for (int i = 1; i < 4; ++i)
    f.post(subjects::shard_read("a100", "r"), std::vector<uint8_t>(body.begin(), body.end()),
           "_INBOX.a." + std::to_string(i));
  f.settle();
  CHECK(answer("_INBOX.a.1").contains("job_id"));
  // The burst of 2 is spent: refused, and answered here (not "unavailable").
  CHECK(answer("_INBOX.a.2").value("code", "") == "rate_limited");
  CHECK(answer("_INBOX.a.3").value("code", "") == "rate_limited");
}

// A shard holding pool a100 of two (two_pools), its answers subject "me".
SchedulerOptions shard_of_a100() {
  SchedulerOptions opts;
  opts.shards.pools = {"a100"};
  opts.shard_answers = subjects::shard_answers("me");
  return opts;
}
void two_pools(Fixture& f) {
  apply_config(f.w,
               "pools: [{name: a100, gpu_type: a100}, {name: h100, gpu_type: h100}]\n"
               "teams: [{name: r, borrow: true}]\n");
  f.settle();
}

TEST_CASE(
    "a shard hands an enqueued submission of another's pool over and acknowledges it once its "
    "owner took it",
    "[actors][input][shards]") {
  auto intake = std::make_shared<InstantIntake>();
  Fixture f(shard_of_a100(), intake);
  two_pools(f);
  f.register_node("n1", 8);
  auto enqueue = [&](const std::string& type, uint64_t seq) {
    std::string s = R"({"command":["true"],"resources":{"gpus":1,"gpu_type":")" + type + "\"}}";
    Inbound in{
        subjects::team_verb("r", subjects::kEnqueue), {}, std::vector<uint8_t>(s.begin(), s.end())};
    in.stream_seq = seq;
    caf::anon_send(f.w.router, std::move(in));
    f.settle();
  };
  // Its own pool's: taken here, acknowledged once recorded.
  enqueue("a100", 7);
  CHECK(intake->acked == std::vector<uint64_t>{7});
  // Another's: handed over, its owner to answer on this shard's subject.
  enqueue("h100", 8);
  auto handed = [](const Published& p) { return p.subject == subjects::shard_read("h100", "r"); };
  REQUIRE(f.out->count(handed) == 1);
  const std::string answer = f.out->find(handed)->reply;
  CHECK(answer == subjects::shard_answers("me") + ".8");
  pb::ShardSubmission m;
  const auto& data = f.out->find(handed)->data;
  REQUIRE(m.ParseFromArray(data.data(), static_cast<int>(data.size())));
  CHECK(m.spec().idempotency_key() == "enqueue-8");  // one job however often handed over
  CHECK(intake->acked == std::vector<uint64_t>{7});  // not yet
  // Its pool moving: left for the stream to deliver again.
  f.inbound(answer, bytes_of(R"({"error":"moving","code":"unavailable"})"));
  CHECK(intake->acked == std::vector<uint64_t>{7});
  f.inbound(answer, bytes_of("not json"));
  CHECK(intake->acked == std::vector<uint64_t>{7});
  // Taken (or refused for good): acknowledged.
  f.inbound(answer, bytes_of(R"({"job_id":"j-h100-abc"})"));
  CHECK(intake->acked == std::vector<uint64_t>{7, 8});
  enqueue("h100", 9);
  f.inbound(subjects::shard_answers("me") + ".9",
            bytes_of(R"({"error":"no","code":"rate_limited"})"));
  CHECK(intake->acked == std::vector<uint64_t>{7, 8, 9});
  // No sequence there: malformed, nothing acknowledged.
  f.inbound(subjects::shard_answers("me") + ".x", bytes_of(R"({"job_id":"j-1"})"));
  CHECK(intake->acked.size() == 3);
}

TEST_CASE(
    "a shard hands a submission of another's pool over with its own reply subject, passes the "
    "owner's answer on, and records it for the owner when nobody serves the pool",
    "[actors][input][shards]") {
  SchedulerOptions opts = shard_of_a100();
  opts.shard_id = "me";  // (its timer sweeps what was not answered in time)
  auto intake = std::make_shared<InstantIntake>();
  Fixture f(opts, intake);
  two_pools(f);
  const std::string spec = R"({"command":["true"],"resources":{"gpus":1,"gpu_type":"h100"}})";
  auto handed_with = [&](const std::string& reply) {
    const size_t before = f.out->count([](const Published&) { return true; });
    f.inbound(subjects::team_submit("r"), bytes_of(spec), reply);
    std::string asked_as;  // the last one handed over
    f.out->count([&](const Published& p) {
      if (p.subject == subjects::shard_read("h100", "r")) asked_as = p.reply;
      return false;
    });
    CHECK(f.out->count([](const Published&) { return true; }) == before + 1);
    return asked_as;
  };
  // The owner answers: passed on to the client as it came.
  const std::string first = handed_with("_INBOX.c.1");
  CHECK(first == subjects::shard_answers("me") + ".h1");
  f.inbound(first, bytes_of(R"({"job_id":"j-h100-owner1"})"));
  REQUIRE(f.out->find(reply_to("_INBOX.c.1")));
  CHECK(f.out->find(reply_to("_INBOX.c.1"))->text() == R"({"job_id":"j-h100-owner1"})");
  // Nobody listens for the pool (the server's "no responders"): recorded here
  // for the owner, and the client gets its id.
  const std::string second = handed_with("_INBOX.c.2");
  CHECK(second == subjects::shard_answers("me") + ".h2");
  Inbound none{second, {}, {}};
  none.no_responders = true;
  caf::anon_send(f.w.router, std::move(none));
  f.settle();
  REQUIRE(f.out->find(reply_to("_INBOX.c.2")));
  const json answered = json::parse(f.out->find(reply_to("_INBOX.c.2"))->text());
  INFO(answered.dump());
  CHECK(answered.value("job_id", "").rfind("j-h100-", 0) == 0);
  CHECK(intake->subjects == std::vector<std::string>{subjects::handoff("r", "h100")});
  // A late answer for either is dropped (the client was answered).
  const size_t published = f.out->count([](const Published&) { return true; });
  f.inbound(second, bytes_of(R"({"job_id":"j-h100-late"})"));
  f.inbound(first, bytes_of(R"({"job_id":"j-h100-late"})"));
  CHECK(f.out->count([](const Published&) { return true; }) == published);
  // No answer within 3 s (a hung owner): recorded for it too.
  handed_with("_INBOX.c.3");
  f.pass(3500);
  REQUIRE(f.out->find(reply_to("_INBOX.c.3")));
  CHECK(json::parse(f.out->find(reply_to("_INBOX.c.3"))->text()).contains("job_id"));
  CHECK(intake->subjects.size() == 2);
  // An enqueued one handed to nobody is delivered again soon.
  std::string enq = spec;
  Inbound e{subjects::team_verb("r", subjects::kEnqueue), {}, bytes_of(enq)};
  e.stream_seq = 12;
  caf::anon_send(f.w.router, std::move(e));
  f.settle();
  Inbound gone{subjects::shard_answers("me") + ".12", {}, {}};
  gone.no_responders = true;
  caf::anon_send(f.w.router, std::move(gone));
  f.settle();
  CHECK(intake->retried == std::vector<uint64_t>{12});
  CHECK(intake->acked.empty());
  // A keyed any-type job, picked for a100 here: h100's owner is asked
  // whether it holds the key. The server's "no responders" to that ask is
  // no bad input; the ask's deadline settles it, and the job is recorded.
  f.register_node("n1", 8);
  f.inbound(subjects::team_submit("r"),
            bytes_of(R"({"command":["true"],"idempotency_key":"k1",)"
                     R"("resources":{"gpus":1,"gpu_types":["a100","h100"]}})"),
            "_INBOX.c.4");
  std::string asked;
  f.out->count([&](const Published& p) {
    if (p.subject == subjects::shard_key("h100", "r")) asked = p.reply;
    return false;
  });
  REQUIRE_FALSE(asked.empty());
  CHECK_FALSE(f.out->find(reply_to("_INBOX.c.4")));
  Inbound no_owner{asked, {}, {}};
  no_owner.no_responders = true;
  caf::anon_send(f.w.router, std::move(no_owner));
  f.settle();
  f.pass(1500);
  REQUIRE(f.out->find(reply_to("_INBOX.c.4")));
  CHECK(json::parse(f.out->find(reply_to("_INBOX.c.4"))->text()).contains("job_id"));
  f.inbound(subjects::kSysStats, bytes_of("{}"), "_INBOX.stats");
  REQUIRE(f.out->find(reply_to("_INBOX.stats")));
  const json stats = json::parse(f.out->find(reply_to("_INBOX.stats"))->text());
  CHECK(stats.value("malformed", -1) == 0);
  CHECK(stats.value("key_ask_timeouts", -1) == 1);
  CHECK(stats.value("recorded_for_owner", -1) == 2);
  CHECK(stats.value("enqueued_retried", -1) == 1);
}

TEST_CASE("status takes job_id, and jobId as protobuf's JSON spells it", "[actors][input]") {
  Fixture f;
  f.register_node("n1", 1);
  auto id = f.submit(kJob);
  for (const std::string key : {"job_id", "jobId"}) {
    std::string body = "{\"" + key + "\":\"" + id + "\"}";
    std::string reply = "_INBOX.status." + key;
    f.inbound("troupe.t.status", std::vector<uint8_t>(body.begin(), body.end()), reply);
    auto* r = f.out->find(reply_to(reply));
    REQUIRE(r);
    INFO(r->text());
    CHECK(json::parse(r->text()).value("job_id", "") == id);
  }
  std::string bad = R"({"jobid":"x"})";
  f.inbound("troupe.t.status", std::vector<uint8_t>(bad.begin(), bad.end()), "_INBOX.bad");
  auto* r = f.out->find(reply_to("_INBOX.bad"));
  REQUIRE(r);
  CHECK(json::parse(r->text()).value("code", "") == "bad_request");
}

TEST_CASE("drain and cordon keep the operator's reason, shown in troupe.sys.nodes",
          "[actors][cordon]") {
  Fixture f;
  f.register_node("n1", 2);
  auto request = [&](const std::string& subject, const std::string& body) {
    std::string reply = "_INBOX.op." + std::to_string(++f.replies);
    f.inbound(subject, std::vector<uint8_t>(body.begin(), body.end()), reply);
    auto* r = f.out->find(reply_to(reply));
    REQUIRE(r);
    return json::parse(r->text());
  };
  auto drained = request("troupe.sys.drain", R"({"node":"n1","reason":"disk swap, ticket 42"})");
  CHECK(drained.value("state", "") == "drained");
  auto nodes = request("troupe.sys.nodes", "{}");
  INFO(nodes.dump());
  REQUIRE(nodes["nodes"].size() == 1);
  CHECK(nodes["nodes"][0].value("reason", "") == "disk swap, ticket 42");
  CHECK(nodes["nodes"][0].value("draining", false));
  // Hostile reasons: control characters, or too long.
  auto ctl = request("troupe.sys.cordon", "{\"node\":\"n1\",\"reason\":\"a\\u001b[31mb\"}");
  CHECK(ctl.value("code", "") == "bad_request");
  auto longer =
      request("troupe.sys.cordon", R"({"node":"n1","reason":")" + std::string(300, 'x') + R"("})");
  CHECK(longer.value("code", "") == "bad_request");
  // Uncordoned: the reason goes with it.
  request("troupe.sys.uncordon", R"({"node":"n1"})");
  nodes = request("troupe.sys.nodes", "{}");
  CHECK(nodes["nodes"][0].value("reason", "") == "");
}

// --- dependencies (depends_on) --------------------------------------------------

namespace {
std::string after(const std::string& upstream, const std::string& on = {},
                  const std::string& command = "true") {
  json d{{"job", upstream}};
  if (!on.empty()) d["on"] = on;
  return json{{"command", {command}}, {"resources", {{"gpus", 1}}}, {"depends_on", {d}}}.dump();
}
// The reply to a submission (an error, or the job id).
json submit_reply(Fixture& f, const std::string& team, const std::string& spec) {
  std::string reply = "_INBOX.submit." + std::to_string(++f.replies);
  f.inbound(subjects::team_submit(team), std::vector<uint8_t>(spec.begin(), spec.end()), reply);
  auto* r = f.out->find(reply_to(reply));
  REQUIRE(r);
  return json::parse(r->text());
}
json ask(Fixture& f, const std::string& subject, const std::string& id) {
  std::string reply = "_INBOX.ask." + std::to_string(++f.replies);
  std::string body = json{{"job_id", id}}.dump();
  f.inbound(subject, std::vector<uint8_t>(body.begin(), body.end()), reply);
  auto* r = f.out->find(reply_to(reply));
  REQUIRE(r);
  return json::parse(r->text());
}
json last_event(Fixture& f, const std::string& id, const std::string& state) {
  auto* e = f.out->find(event_of(id, state));
  REQUIRE(e);
  return json::parse(e->text());
}
}  // namespace

TEST_CASE("a job with depends_on is blocked until its upstream's end is stored, then runs",
          "[actors][deps]") {
  Fixture f;
  f.out->hold_events = true;
  f.register_node("n1", 4);
  auto a = f.submit(kJob);
  auto b = f.submit(after(a));
  CHECK(f.event(b, "blocked"));
  CHECK_FALSE(f.event(b, "queued"));
  f.out->store_events();  // A's starting event is stored: it launches
  f.settle();
  auto* l = f.launched("n1", a);
  // Why B waits: A, in its state.
  auto why = ask(f, subjects::team_why("t"), b);
  CHECK(why.value("code", "") == "waiting_for_dependencies");
  CHECK(why.value("reason", "") == "waiting for " + a + " (starting) to succeed");
  f.out->hold_events = true;
  f.agent_reports("n1", l, 0);
  REQUIRE(f.event(a, "succeeded"));
  // A's end is not stored yet: B waits.
  CHECK_FALSE(f.event(b, "queued"));
  auto view = ask(f, subjects::team_status("t"), b);
  CHECK(view.value("state", "") == "blocked");
  CHECK(view["depends_on"][0].value("job", "") == a);
  CHECK(view["depends_on"][0].value("on", "") == "succeeded");
  f.out->store_events();
  f.settle();
  REQUIRE(f.event(b, "queued"));
  CHECK(f.out->position(event_of(a, "succeeded")) < f.out->position(event_of(b, "queued")));
  f.out->store_events();
  f.settle();
  auto* lb = f.launched("n1", b);
  f.agent_reports("n1", lb, 0);
  CHECK(f.event(b, "succeeded"));
}

TEST_CASE("an upstream that fails cancels its dependents (dependency_failed) down the chain",
          "[actors][deps]") {
  Fixture f;
  f.register_node("n1", 4);
  auto a = f.submit(R"({"command":["false"],"resources":{"gpus":1}})");
  auto b = f.submit(after(a));
  auto c = f.submit(after(b));
  auto on_fail = f.submit(after(a, "failed"));
  auto any_end = f.submit(after(a, "finished"));
  f.agent_reports("n1", f.launched("n1", a), 1);
  REQUIRE(f.event(a, "failed"));
  auto eb = last_event(f, b, "canceled");
  CHECK(eb.value("cause", "") == "dependency_failed");
  CHECK(eb.value("reason", "") ==
        "dependency_failed: job " + a + " ended failed; this job needed it to succeed");
  auto ec = last_event(f, c, "canceled");
  CHECK(ec.value("cause", "") == "dependency_failed");
  CHECK(ec.value("reason", "").find("job " + b + " ended canceled") != std::string::npos);
  CHECK(f.out->position(event_of(b, "canceled")) < f.out->position(event_of(c, "canceled")));
  // The others wanted exactly this.
  f.launched("n1", on_fail);
  f.launched("n1", any_end);
  CHECK(f.out->position(launch_of("n1", b)) == -1);
  // A dependency on a job that already ended the wrong way ends at once.
  auto late = f.submit(after(a));
  CHECK(last_event(f, late, "canceled").value("cause", "") == "dependency_failed");
}

TEST_CASE("depends_on naming an unknown job or another team's is refused alike at submit",
          "[actors][deps][input]") {
  Fixture f;
  auto unknown = submit_reply(f, "t", after("j-nosuchjob"));
  CHECK(unknown.value("code", "") == "invalid_spec");
  CHECK(unknown.value("error", "").find("no job j-nosuchjob in team t") != std::string::npos);
  auto theirs = submit_reply(f, "u", R"({"command":["true"],"resources":{"gpus":1}})");
  REQUIRE(theirs.contains("job_id"));
  std::string other = theirs["job_id"];
  auto refused = submit_reply(f, "t", after(other));
  CHECK(refused.value("code", "") == "invalid_spec");
  CHECK(refused.value("error", "").find("no job " + other + " in team t") != std::string::npos);
  // A bad `on` is the spec's own error.
  auto bad_on = submit_reply(f, "t", after(other, "sometimes"));
  CHECK(bad_on.value("error", "").find("unknown on 'sometimes'") != std::string::npos);
}

TEST_CASE("a blocked job canceled by request ends, and its own dependents with it",
          "[actors][deps]") {
  Fixture f;  // no node: the upstream stays queued
  auto a = f.submit(kJob);
  auto b = f.submit(after(a));
  auto c = f.submit(after(b, "finished"));  // any end of B will do
  auto d = f.submit(after(b));
  auto r = ask(f, subjects::team_cancel("t"), b);
  CHECK(r.value("state", "") == "canceled");
  CHECK(last_event(f, b, "canceled").value("cause", "") == "canceled");
  CHECK(f.event(c, "queued"));
  CHECK(last_event(f, d, "canceled").value("cause", "") == "dependency_failed");
  CHECK(f.event(a, "queued"));
  CHECK_FALSE(f.event(a, "canceled"));
}

// --- pipelines ------------------------------------------------------------------

namespace {
json pipeline_reply(Fixture& f, const json& body) {
  std::string reply = "_INBOX.pipeline." + std::to_string(++f.replies);
  std::string text = body.dump();
  f.inbound(subjects::team_pipeline("t"), std::vector<uint8_t>(text.begin(), text.end()), reply);
  auto* r = f.out->find(reply_to(reply));
  REQUIRE(r);
  return json::parse(r->text());
}
json member(const std::string& name, std::vector<std::string> after = {}) {
  json m{{"name", name}, {"command", {"true"}}, {"resources", {{"gpus", 1}}}};
  for (const auto& a : after) m["depends_on"].push_back({{"name", a}});
  return m;
}
// A fan-in: prep -> (a, b) -> eval; eval listed first in the file.
json fan_in() {
  return json{
      {"name", "nightly"},
      {"jobs",
       {member("eval", {"a", "b"}), member("a", {"prep"}), member("b", {"prep"}), member("prep")}}};
}
size_t job_events_published(Fixture& f) {
  return f.out->count(
      [](const Published& p) { return p.subject.rfind("troupe.t.events.", 0) == 0; });
}
}  // namespace

TEST_CASE("a pipeline is accepted whole: ids upstream first, names resolved, one label, in order",
          "[actors][pipeline]") {
  Fixture f;
  f.register_node("n1", 4);
  auto r = pipeline_reply(f, fan_in());
  INFO(r.dump());
  REQUIRE(r.contains("pipeline_id"));
  const std::string pid = r["pipeline_id"];
  REQUIRE(r["jobs"].size() == 4);
  std::vector<std::string> names, ids;
  for (const auto& j : r["jobs"]) {
    names.push_back(j["name"]);
    ids.push_back(j["job_id"]);
  }
  CHECK(names == std::vector<std::string>{"prep", "a", "b", "eval"});
  CHECK(pid == "p-" + ids[0].substr(2));
  // eval waits on a and b by their ids; prep runs first.
  auto view = ask(f, subjects::team_status("t"), ids[3]);
  CHECK(view.value("state", "") == "blocked");
  REQUIRE(view["depends_on"].size() == 2);
  CHECK(view["depends_on"][0].value("job", "") == ids[1]);
  CHECK(view["depends_on"][1].value("job", "") == ids[2]);
  CHECK(view["labels"].value("troupe.pipeline", "") == pid);
  f.agent_reports("n1", f.launched("n1", ids[0]), 0);
  f.agent_reports("n1", f.launched("n1", ids[1]), 0);
  CHECK_FALSE(f.event(ids[3], "queued"));  // b has not run yet
  f.agent_reports("n1", f.launched("n1", ids[2]), 0);
  f.agent_reports("n1", f.launched("n1", ids[3]), 0);
  CHECK(f.event(ids[3], "succeeded"));
  // troupe jobs --pipeline: its jobs, upstream first.
  std::string reply = "_INBOX.list";
  std::string body = json{{"pipeline", pid}}.dump();
  f.submit(kJob);  // another job of the team: not listed
  f.inbound(subjects::team_verb("t", subjects::kJobs),
            std::vector<uint8_t>(body.begin(), body.end()), reply);
  auto list = json::parse(f.out->find(reply_to(reply))->text());
  REQUIRE(list["jobs"].size() == 4);
  for (size_t i = 0; i < 4; ++i) CHECK(list["jobs"][i].value("job_id", "") == ids[i]);
}

namespace {
// What a restore reads from the intake records `intake` holds (no snapshot,
// no event), as the job supervisor gets it.
recovery::State read_intake(const InstantIntake& intake) {
  recovery::State s;
  for (const auto& [subject, bytes] : intake.appended) recovery::add_intake(s, bytes, subject);
  return s;
}
// A fixture with node n1 (4 GPUs) whose job supervisor restored `s`.
void restore(Fixture& f, const recovery::State& s) {
  std::vector<std::string> records;
  for (const auto& [id, rec] : s.jobs) records.push_back(rec.SerializeAsString());
  f.register_node("n1", 4);
  caf::anon_send(f.w.jobs, restore_atom_v, std::move(records));
  f.settle();
}
}  // namespace

TEST_CASE(
    "a pipeline known from its intake record alone is restored blocked: each job waits for "
    "its upstream jobs' ends",
    "[actors][pipeline][recovery]") {
  // The first scheduler accepts it and dies before any event is stored.
  auto intake = std::make_shared<InstantIntake>();
  std::vector<std::string> ids;
  {
    Fixture first(SchedulerOptions{}, intake);
    auto r = pipeline_reply(first, fan_in());
    INFO(r.dump());
    REQUIRE(r["jobs"].size() == 4);
    for (const auto& j : r["jobs"]) ids.push_back(j["job_id"]);
  }
  auto s = read_intake(*intake);
  REQUIRE(s.jobs.size() == 4);
  // eval's blocked event was stored; the others' were not.
  s.jobs.at(ids[3]).set_state("blocked");
  s.jobs.at(ids[3]).set_attempt(0);
  Fixture f;
  restore(f, s);
  for (size_t i = 1; i < 3; ++i) CHECK(f.event(ids[i], "blocked"));
  CHECK(f.out->position(launch_of("n1", ids[1])) == -1);
  CHECK(f.out->position(launch_of("n1", ids[3])) == -1);
  f.agent_reports("n1", f.launched("n1", ids[0]), 0);     // prep
  f.agent_reports("n1", f.launched("n1", ids[1]), 0);     // a
  CHECK(f.out->position(launch_of("n1", ids[3])) == -1);  // b has not run yet
  f.agent_reports("n1", f.launched("n1", ids[2]), 0);
  f.agent_reports("n1", f.launched("n1", ids[3]), 0);
  CHECK(f.event(ids[3], "succeeded"));
  CHECK(f.out->position(event_of(ids[2], "succeeded")) < f.out->position(launch_of("n1", ids[3])));
}

TEST_CASE(
    "restore of an array and its dependent from their intake records alone: the array queued "
    "and announced, the dependent blocked until every task succeeded",
    "[actors][array][deps][recovery]") {
  auto intake = std::make_shared<InstantIntake>();
  std::string arr, dep;
  {
    Fixture first(SchedulerOptions{}, intake);  // no node; dies before any event is stored
    arr = first.submit(
        R"({"command":["true"],"resources":{"gpus":1},"array":{"count":2,"parallelism":2}})");
    dep = first.submit(after(arr));
  }
  auto s = read_intake(*intake);
  REQUIRE(s.jobs.size() == 2);
  Fixture f;
  restore(f, s);
  CHECK(f.event(arr, "queued"));
  CHECK(f.event(dep, "blocked"));
  CHECK_FALSE(f.event(dep, "canceled"));
  CHECK(ask(f, subjects::team_status("t"), arr).value("state", "") == "queued");
  f.agent_reports("n1", f.launched("n1", arr + "-0"), 0);
  CHECK(f.out->position(launch_of("n1", dep)) == -1);
  f.agent_reports("n1", f.launched("n1", arr + "-1"), 0);
  REQUIRE(f.event(arr, "succeeded"));
  f.agent_reports("n1", f.launched("n1", dep), 0);
  CHECK(f.event(dep, "succeeded"));
}

TEST_CASE("a pipeline with one bad member, a cycle or an unknown name creates no job",
          "[actors][pipeline][input]") {
  Fixture f;
  auto bad = fan_in();
  bad["jobs"][2]["resources"]["gpus"] = -1;
  auto r = pipeline_reply(f, bad);
  CHECK(r.value("code", "") == "invalid_spec");
  CHECK(r.value("error", "").find("jobs[2] (b)") != std::string::npos);
  auto cyc = json{{"jobs", {member("x", {"y"}), member("y", {"x"})}}};
  r = pipeline_reply(f, cyc);
  CHECK(r.value("error", "").find("cycle") != std::string::npos);
  r = pipeline_reply(f, json{{"jobs", {member("x", {"ghost"})}}});
  CHECK(r.value("error", "").find("ghost is no job of the pipeline") != std::string::npos);
  r = pipeline_reply(f, json{{"jobs", {member("x"), member("x")}}});
  CHECK(r.value("error", "").find("a second job named x") != std::string::npos);
  auto reserved = json{{"jobs", {member("x")}}};
  reserved["jobs"][0]["labels"] = {{"troupe.pipeline", "p-forged"}};
  r = pipeline_reply(f, reserved);
  CHECK(r.value("error", "").find("the scheduler's") != std::string::npos);
  CHECK(job_events_published(f) == 0);
  // A job alone may not name an upstream by name.
  auto alone = submit_reply(f, "t", R"({"command":["true"],"depends_on":[{"name":"prep"}]})");
  CHECK(alone.value("code", "") == "invalid_spec");
  CHECK(job_events_published(f) == 0);
}

TEST_CASE("a pipeline's idempotency key gives a retry the same pipeline and jobs",
          "[actors][pipeline][idempotency]") {
  Fixture f;
  auto p = fan_in();
  p["idempotency_key"] = "nightly-2026-12-03";
  auto first = pipeline_reply(f, p);
  REQUIRE(first.contains("pipeline_id"));
  auto events = job_events_published(f);
  auto again = pipeline_reply(f, p);
  CHECK(again == first);
  CHECK(job_events_published(f) == events);
  // The same key with other jobs is a conflict.
  auto other =
      json{{"idempotency_key", "nightly-2026-12-03"}, {"jobs", {member("prep"), member("extra")}}};
  CHECK(pipeline_reply(f, other).value("code", "") == "idempotency_conflict");
}

// --- cancel with if_queued ------------------------------------------------------

namespace {
// The reply to troupe.t.cancel of `id`; with `if_queued` set, the field
// "if_queued" carries it.
json cancel_reply(Fixture& f, const std::string& id, std::optional<bool> if_queued = {}) {
  std::string reply = "_INBOX.cancel." + std::to_string(++f.replies);
  json req{{"job_id", id}};
  if (if_queued) req["if_queued"] = *if_queued;
  std::string body = req.dump();
  f.inbound(subjects::team_cancel("t"), std::vector<uint8_t>(body.begin(), body.end()), reply);
  auto* r = f.out->find(reply_to(reply));
  REQUIRE(r);
  return json::parse(r->text());
}
// The agent of `node` reports the worker of Launch `l` started: the job runs.
void report_started(Fixture& f, const std::string& node, const wire::Launch* l) {
  flatbuffers::FlatBufferBuilder b;
  auto started =
      wire::CreateStarted(b, b.CreateString(node), b.CreateString(wire::str(l->job_id())),
                          l->attempt(), l->rank(), 4242);
  f.inbound(subjects::agent_to_scheduler(node, subjects::kStarted), wire::seal(b, started));
}
// ... and that it exited with `exit_code`.
void report_exited(Fixture& f, const std::string& node, const wire::Launch* l, int exit_code) {
  flatbuffers::FlatBufferBuilder b;
  auto exited = wire::CreateExited(b, b.CreateString(node), b.CreateString(wire::str(l->job_id())),
                                   l->attempt(), l->rank(), exit_code, 0,
                                   b.CreateString("exited with code " + std::to_string(exit_code)));
  f.inbound(subjects::agent_to_scheduler(node, subjects::kExited), wire::seal(b, exited));
}
// A Stop of `job` sent to node `node`.
auto stop_of(const std::string& node, const std::string& job) {
  return [node, job](const Published& p) {
    if (p.subject != subjects::scheduler_to_agent(node, subjects::kStop)) return false;
    auto* e = wire::open(p.data);
    auto* s = e ? e->body_as_Stop() : nullptr;
    return s && wire::str(s->job_id()) == job;
  };
}
void check_not_queued(const json& r, const std::string& id, const std::string& state) {
  CHECK(r.value("code", "") == "not_queued");
  CHECK(r.value("job_id", "") == id);
  CHECK(r.value("state", "") == state);
  CHECK(r.value("error", "") == "job " + id + " is " + state + ": not canceled (if_queued)");
}
}  // namespace

TEST_CASE("cancel if_queued cancels a queued or blocked job, also one whose actor waits",
          "[actors][cancel]") {
  Fixture f;  // no node yet: jobs stay queued
  auto a = f.submit(kJob);
  auto b = f.submit(after(a));
  REQUIRE(f.event(b, "blocked"));
  auto rb = cancel_reply(f, b, true);
  CHECK(rb == json{{"job_id", b}, {"state", "canceled"}});
  CHECK(last_event(f, b, "canceled").value("cause", "") == "canceled");
  auto ra = cancel_reply(f, a, true);
  CHECK(ra == json{{"job_id", a}, {"state", "canceled"}});
  CHECK(f.event(a, "canceled"));
  // A job back in its queue waiting out a retry's back-off has an actor: it
  // decides there.
  f.register_node("n1", 1);
  auto c = f.submit(R"({"command":["false"],"resources":{"gpus":1},"max_retries":1})");
  report_exited(f, "n1", f.launched("n1", c), 1);
  REQUIRE(last_event(f, c, "queued").value("attempt", 0) >= 1);
  auto rc = cancel_reply(f, c, true);
  CHECK(rc.value("state", "") == "canceled");
  CHECK(f.event(c, "canceled"));
  f.pass(2000);
  CHECK_FALSE(f.out->find(launch_attempt("n1", 2)));
  // false is the plain cancel.
  auto d = f.submit(kJob);
  auto* l = f.launched("n1", d);
  report_started(f, "n1", l);
  CHECK(cancel_reply(f, d, false).value("state", "") == "canceling");
}

TEST_CASE("cancel if_queued leaves a started or ended job as it is and answers not_queued",
          "[actors][cancel]") {
  Fixture f;
  f.out->hold_events = true;  // the first job's Launch waits: it stays starting
  f.register_node("n1", 2);
  auto a = f.submit(kJob);
  REQUIRE(f.event(a, "starting"));
  check_not_queued(cancel_reply(f, a, true), a, "starting");
  f.out->store_events();
  f.settle();
  auto* la = f.launched("n1", a);
  report_started(f, "n1", la);
  REQUIRE(f.event(a, "running"));
  // Running: not_queued, and it runs on (no Stop, no cancel) to its end.
  auto r = cancel_reply(f, a, true);
  check_not_queued(r, a, "running");
  CHECK_FALSE(f.out->find(stop_of("n1", a)));
  CHECK_FALSE(f.event(a, "canceled"));
  auto view = ask(f, subjects::team_status("t"), a);
  CHECK(view.value("state", "") == "running");
  report_exited(f, "n1", la, 0);
  CHECK(f.event(a, "succeeded"));
  // Ended: not_queued with its end state.
  check_not_queued(cancel_reply(f, a, true), a, "succeeded");
  // Without the field, as before: the ended job's state, no error.
  CHECK(cancel_reply(f, a) == json{{"job_id", a}, {"state", "succeeded"}});
  // A field that is not a boolean is a bad request; nothing changes.
  auto b = f.submit(kJob);
  auto* lb = f.launched("n1", b);
  report_started(f, "n1", lb);
  std::string body = json{{"job_id", b}, {"if_queued", "yes"}}.dump();
  f.inbound(subjects::team_cancel("t"), std::vector<uint8_t>(body.begin(), body.end()),
            "_INBOX.cancel.bad");
  auto* bad = f.out->find(reply_to("_INBOX.cancel.bad"));
  REQUIRE(bad);
  CHECK(json::parse(bad->text()).value("code", "") == "bad_request");
  CHECK_FALSE(f.out->find(stop_of("n1", b)));
}

TEST_CASE("a plain cancel still stops a running job", "[actors][cancel]") {
  Fixture f;
  f.register_node("n1", 1);
  auto a = f.submit(kJob);
  auto* l = f.launched("n1", a);
  report_started(f, "n1", l);
  REQUIRE(f.event(a, "running"));
  CHECK(cancel_reply(f, a) == json{{"job_id", a}, {"state", "canceling"}});
  CHECK(f.out->find(stop_of("n1", a)));
  report_exited(f, "n1", l, 143);
  CHECK(last_event(f, a, "canceled").value("cause", "") == "canceled");
}

TEST_CASE("cancel if_queued of an array: only while none of its tasks has started",
          "[actors][cancel][array]") {
  const char* kArray =
      R"({"command":["true"],"resources":{"gpus":1},"array":{"count":3,"parallelism":2}})";
  Fixture f;
  f.out->hold_events = true;
  // No node: its first tasks wait queued, without an actor.
  auto a = f.submit(kArray);
  REQUIRE(f.event(a + "-0", "queued"));
  REQUIRE(f.event(a + "-1", "queued"));
  CHECK(cancel_reply(f, a, true) == json{{"job_id", a}, {"state", "canceled"}});
  CHECK(f.event(a + "-0", "canceled"));
  CHECK(f.event(a + "-1", "canceled"));
  CHECK(f.event(a, "canceled"));
  // A task placed (starting): the array is still queued, but has started.
  f.register_node("n1", 1);
  auto b = f.submit(kArray);
  REQUIRE(f.event(b + "-0", "starting"));
  REQUIRE(f.event(b + "-1", "queued"));
  check_not_queued(cancel_reply(f, b, true), b, "starting");
  CHECK_FALSE(f.event(b + "-1", "canceled"));
  CHECK_FALSE(f.event(b, "canceled"));
  // Running: not_queued with the array's state; its tasks go on.
  f.out->store_events();
  f.settle();
  auto* l = f.launched("n1", b + "-0");
  report_started(f, "n1", l);
  REQUIRE(f.event(b, "running"));
  check_not_queued(cancel_reply(f, b, true), b, "running");
  CHECK_FALSE(f.out->find(stop_of("n1", b + "-0")));
  CHECK_FALSE(f.event(b + "-1", "canceled"));
  // The plain cancel still cancels it all.
  CHECK(cancel_reply(f, b).value("state", "") == "running");
  CHECK(f.event(b + "-1", "canceled"));
  CHECK(f.out->find(stop_of("n1", b + "-0")));
}

namespace {

// A front door (actors/ports.hpp DispatchGate): keeps every claim until the
// test answers it; with `automatic` set, answers each at once with that.
class FakeGate : public DispatchGate {
 public:
  struct Asked {
    std::string team, job_id, dispatch;
    int64_t submitted_ms = 0;
    Done done;
  };
  std::vector<Asked> claims;  // every claim, in order
  std::optional<Verdict> automatic;

  void claim(const std::string& team, const std::string& job_id, const std::string& dispatch,
             int64_t submitted_ms, Done done) override {
    claims.push_back({team, job_id, dispatch, submitted_ms, std::move(done)});
    if (automatic) answer(*automatic);
  }
  // Answers every claim not answered yet (the verdicts are handled on the
  // next settle).
  void answer(const Verdict& v) {
    for (; answered_ < claims.size(); ++answered_) claims[answered_].done(v);
  }

 private:
  size_t answered_ = 0;
};

const DispatchGate::Verdict kGranted{true, false, {}};
const DispatchGate::Verdict kWithdrawn{false, true, "sent to cluster east"};
const DispatchGate::Verdict kNoAnswer{false, false, "request timed out"};

SchedulerOptions with_gate(const std::shared_ptr<FakeGate>& gate) {
  SchedulerOptions opts;
  opts.dispatch = gate;
  return opts;
}

const char* kDispatched = R"({"command":["true"],"resources":{"gpus":1},"dispatch":"front"})";

}  // namespace

TEST_CASE("a front door's job starts only once granted, and is not asked again on a retry",
          "[actors][dispatch-gate]") {
  auto gate = std::make_shared<FakeGate>();
  Fixture f(with_gate(gate));
  f.register_node("n1", 1);
  auto a = f.submit(
      R"({"command":["false"],"resources":{"gpus":1},"max_retries":1,"dispatch":"front"})");
  // Placed: it asks its front door, and stays queued until the answer.
  REQUIRE(gate->claims.size() == 1);
  CHECK(gate->claims[0].job_id == a);
  CHECK(gate->claims[0].team == "t");
  CHECK(gate->claims[0].dispatch == "front");
  CHECK(gate->claims[0].submitted_ms > 0);  // when this cluster took it (its record's submit_ms)
  CHECK(f.event(a, "queued"));
  CHECK_FALSE(f.event(a, "starting"));
  CHECK_FALSE(f.out->find(launch_of("n1", a)));
  gate->answer(kGranted);
  f.settle();
  auto* l1 = f.launched("n1", a);
  REQUIRE(l1->attempt() == 1);
  CHECK(f.out->position(event_of(a, "starting")) < f.out->position(launch_of("n1", a)));
  // It fails; its retry runs without asking again.
  f.agent_reports("n1", l1, 1);
  f.pass(1100);
  auto* second = f.out->find(launch_attempt("n1", 2));
  REQUIRE(second);
  f.agent_reports("n1", launch_in(*second, "n1"), 0);
  CHECK(f.event(a, "succeeded"));
  CHECK(gate->claims.size() == 1);
}

TEST_CASE("a front door's job withdrawn before its grant ends canceled, never launched",
          "[actors][dispatch-gate]") {
  auto gate = std::make_shared<FakeGate>();
  Fixture f(with_gate(gate));
  f.register_node("n1", 1);
  auto a = f.submit(kDispatched);
  REQUIRE(gate->claims.size() == 1);
  // A job without `dispatch` waits for n1's only GPU, held by a's placement.
  auto b = f.submit(kJob);
  REQUIRE(f.event(b, "queued"));
  CHECK_FALSE(f.out->find(launch_of("n1", b)));
  gate->answer(kWithdrawn);
  f.settle();
  auto end = last_event(f, a, "canceled");
  CHECK(end.value("reason", "").find("withdrawn by the front door front") != std::string::npos);
  CHECK_FALSE(f.event(a, "starting"));
  CHECK(f.out->count(launch_of("n1", a)) == 0);
  // Its hold went back: b runs on that GPU, and never asked the gate.
  auto* l = f.launched("n1", b);
  f.agent_reports("n1", l, 0);
  CHECK(f.event(b, "succeeded"));
  CHECK(gate->claims.size() == 1);
}

TEST_CASE("a front door's job without an answer stays queued and asks again until granted",
          "[actors][dispatch-gate]") {
  auto gate = std::make_shared<FakeGate>();
  Fixture f(with_gate(gate));
  f.register_node("n1", 1);
  auto a = f.submit(kDispatched);
  REQUIRE(gate->claims.size() == 1);
  // No answer yet: not started, whatever time passes (its hold is kept).
  f.pass(500);
  CHECK_FALSE(f.event(a, "starting"));
  CHECK_FALSE(f.out->find(launch_of("n1", a)));
  // Not granted (no front door answered): the placement goes back, and the
  // job is placed again 2 s later, and asks again.
  gate->answer(kNoAnswer);
  f.settle();
  CHECK(gate->claims.size() == 1);
  f.pass(1900);
  CHECK(gate->claims.size() == 1);
  f.pass(200);
  REQUIRE(gate->claims.size() == 2);
  CHECK_FALSE(f.event(a, "starting"));
  CHECK_FALSE(f.event(a, "failed"));
  // Granted now: it starts, as attempt 1 (no retry counted).
  gate->automatic = kGranted;
  gate->answer(kGranted);
  f.settle();
  auto* l = f.launched("n1", a);
  CHECK(l->attempt() == 1);
  f.agent_reports("n1", l, 0);
  CHECK(f.event(a, "succeeded"));
  CHECK(gate->claims.size() == 2);
}

TEST_CASE(
    "a front door's job whose actor crashed awaiting its grant is queued again and asks again",
    "[actors][dispatch-gate][supervision]") {
  // The placement it held is handed back by the node's hold check (3 s here:
  // the fake agents send no heartbeats, and a node silent for 10 s is lost).
  auto gate = std::make_shared<FakeGate>();
  auto opts = with_gate(gate);
  opts.hold_check_ms = 3000;
  Fixture f(opts);
  f.register_node("n1", 1);
  auto a = f.submit(kDispatched);
  REQUIRE(gate->claims.size() == 1);
  f.crash_job(a);
  CHECK(f.restarts(f.w.jobs) == 1);
  // The verdict of the lost actor's claim finds no placement: dropped.
  gate->answer(kGranted);
  f.settle();
  CHECK_FALSE(f.out->find(launch_of("n1", a)));
  gate->automatic = kGranted;
  f.pass(4100);
  REQUIRE(gate->claims.size() == 2);
  auto* l = f.launched("n1", a);
  CHECK(l->attempt() == 1);
  f.agent_reports("n1", l, 0);
  CHECK(f.event(a, "succeeded"));
}

TEST_CASE(
    "remove_node: two requests at once for a lost node, one removes it, the other is "
    "answered, and the node supervisor lives on",
    "[actors][nodes]") {
  Fixture f;
  f.register_node("n1", 2);
  f.pass(11000);  // the fake agent sends no heartbeats: n1 is lost
  f.register_node("n2", 2);
  // Both reach the node supervisor before n1's actor answers either.
  caf::anon_send(f.w.nodes, remove_atom_v, std::string("n1"), std::string("_INBOX.rm.1"));
  caf::anon_send(f.w.nodes, remove_atom_v, std::string("n1"), std::string("_INBOX.rm.2"));
  f.settle();
  auto* first = f.out->find(reply_to("_INBOX.rm.1"));
  auto* second = f.out->find(reply_to("_INBOX.rm.2"));
  REQUIRE(first);
  REQUIRE(second);
  INFO(first->text() << " / " << second->text());
  CHECK(json::parse(first->text()).value("state", "") == "removed");
  CHECK(json::parse(second->text()).value("code", "") == "unknown_node");
  // Still serving: another node's request is answered, n1 is unknown now.
  CHECK(f.running_on("n2") == 0);
  caf::anon_send(f.w.nodes, remove_atom_v, std::string("n1"), std::string("_INBOX.rm.3"));
  f.settle();
  auto* third = f.out->find(reply_to("_INBOX.rm.3"));
  REQUIRE(third);
  CHECK(json::parse(third->text()).value("code", "") == "unknown_node");
  // n2, alive, is refused.
  caf::anon_send(f.w.nodes, remove_atom_v, std::string("n2"), std::string("_INBOX.rm.4"));
  f.settle();
  auto* alive = f.out->find(reply_to("_INBOX.rm.4"));
  REQUIRE(alive);
  CHECK(json::parse(alive->text()).value("code", "") == "node_alive");
}

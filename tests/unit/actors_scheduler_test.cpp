// In-process tests of the scheduler's actors with fake ports: the whole job
// life through router, supervisors, queue, arbiter and node actor, and
// supervision (a crashed actor is restarted from its snapshot).
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "actors/policy/ledger.hpp"
#include "actors/scheduler.hpp"
#include "bus/subjects.hpp"
#include "messages/wire.hpp"

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

class FakeOutbox : public Outbox {
 public:
  void send(const std::string& subject, const void* data, size_t size,
            const std::string& reply) override {
    auto* p = static_cast<const uint8_t*>(data);
    std::lock_guard<std::mutex> lock(mu_);
    log_.push_back({subject, reply, std::vector<uint8_t>(p, p + size)});
    cv_.notify_all();
  }
  // Job events: taken as stored at once, or (hold_events) only on
  // store_events() — a JetStream that has not acknowledged them yet.
  void send_event(const std::string& subject, const std::string& data, Stored stored) override {
    send(subject, data.data(), data.size(), {});
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (hold_events && stored) {
        unstored_.push_back(std::move(stored));
        return;
      }
    }
    if (stored) stored();
  }
  size_t store_events() {
    std::vector<Stored> now;
    {
      std::lock_guard<std::mutex> lock(mu_);
      now.swap(unstored_);
      hold_events = false;
    }
    for (auto& f : now) f();
    return now.size();
  }
  bool hold_events = false;  // set before any job exists
  // Waits until some published message satisfies `pred`; returns it.
  template <class Pred>
  std::optional<Published> wait_for(Pred pred,
                                    std::chrono::milliseconds within = std::chrono::seconds(5)) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<Published> found;
    cv_.wait_for(lock, within, [&] {
      for (const auto& m : log_)
        if (pred(m)) {
          found = m;
          return true;
        }
      return false;
    });
    return found;
  }

  // Where the first published message satisfying `pred` is in the order of
  // publication (-1: none).
  template <class Pred>
  long position(Pred pred) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < log_.size(); ++i)
      if (pred(log_[i])) return static_cast<long>(i);
    return -1;
  }

  // Waits until at least `n` published messages satisfy `pred`.
  template <class Pred>
  bool wait_count(Pred pred, size_t n, std::chrono::milliseconds within = std::chrono::seconds(5)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, within, [&] {
      size_t k = 0;
      for (const auto& m : log_) k += pred(m) ? 1 : 0;
      return k >= n;
    });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Published> log_;
  std::vector<Stored> unstored_;
};

class InstantIntake : public Intake {
 public:
  void append(const std::string&, std::vector<uint8_t>, const std::string&, Done done) override {
    done(true, false, {});
  }
};

struct Fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<FakeOutbox> out = std::make_shared<FakeOutbox>();
  Wiring w;
  int replies = 0;

  explicit Fixture(SchedulerOptions opts = {}) {
    configure(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    w = start_scheduler(*sys, out, std::make_shared<InstantIntake>(), std::move(opts));
  }
  ~Fixture() {
    stop_scheduler(w);
    sys->await_all_actors_done();
  }

  void inbound(const std::string& subject, std::vector<uint8_t> data, std::string reply = {}) {
    caf::anon_send(w.router, Inbound{subject, std::move(reply), std::move(data)});
  }
  std::string submit(const std::string& spec_json) {
    std::string reply = "_INBOX.test." + std::to_string(++replies);
    inbound(subjects::team_submit("t"), std::vector<uint8_t>(spec_json.begin(), spec_json.end()),
            reply);
    auto r = out->wait_for([&](const Published& m) { return m.subject == reply; });
    REQUIRE(r);
    auto j = json::parse(r->text());
    REQUIRE(j.contains("job_id"));
    return j["job_id"];
  }
  // `runtime`: its agent's container runtime (troupe-node --runtime), "" for none.
  void register_node(const std::string& name, int gpus, const std::string& runtime = {}) {
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<flatbuffers::Offset<wire::Gpu>> g;
    for (int i = 0; i < gpus; ++i)
      g.push_back(wire::CreateGpu(fbb, i, fbb.CreateString("a100"), 80000));
    auto body = wire::CreateNodeRegister(fbb, fbb.CreateString(name), fbb.CreateString("127.0.0.1"),
                                         fbb.CreateString("a100"), fbb.CreateVector(g), 16, 64000,
                                         false, 0, 0, 0, 0, fbb.CreateString(runtime));
    inbound(subjects::agent_to_scheduler(name, subjects::kRegister), wire::seal(fbb, body));
  }
  // Waits for the launch of `job` on `node` and returns its rank.
  const wire::Launch* launched(const std::string& node, const std::string& job, Published& keep) {
    auto m = out->wait_for([&](const Published& p) {
      if (p.subject != subjects::scheduler_to_agent(node, subjects::kLaunch)) return false;
      auto* e = wire::open(p.data);
      return e && e->body_as_Launch() && wire::str(e->body_as_Launch()->job_id()) == job;
    });
    REQUIRE(m);
    keep = *m;
    return wire::open(keep.data)->body_as_Launch();
  }
  void agent_reports(const std::string& node, const wire::Launch* l, int exit_code) {
    flatbuffers::FlatBufferBuilder a;
    auto started =
        wire::CreateStarted(a, a.CreateString(node), a.CreateString(wire::str(l->job_id())),
                            l->attempt(), l->rank(), 4242);
    inbound(subjects::agent_to_scheduler(node, subjects::kStarted), wire::seal(a, started));
    flatbuffers::FlatBufferBuilder b;
    auto exited = wire::CreateExited(
        b, b.CreateString(node), b.CreateString(wire::str(l->job_id())), l->attempt(), l->rank(),
        exit_code, 0, b.CreateString("exited with code " + std::to_string(exit_code)));
    inbound(subjects::agent_to_scheduler(node, subjects::kExited), wire::seal(b, exited));
  }
  bool event(const std::string& job, const std::string& state) {
    return out
        ->wait_for([&](const Published& p) {
          if (p.subject != subjects::job_events("t", job)) return false;
          return json::parse(p.text())["state"] == state;
        })
        .has_value();
  }
  // Sends an Envelope to node `node`'s actor, as the other actors do.
  void to_node(const std::string& node, std::vector<uint8_t> bytes) {
    caf::anon_send(w.nodes, route_atom_v, node, caf::make_message(Envelope{std::move(bytes)}));
  }
  // How many workers node `node` counts as running (launched, not exited),
  // once every message sent to it before is handled (it answers in order).
  int running_on(const std::string& node) {
    std::string reply = "_INBOX.cordon." + std::to_string(++replies);
    caf::anon_send(w.nodes, cordon_atom_v, node, false, false, reply);
    auto r = out->wait_for([&](const Published& m) { return m.subject == reply; });
    REQUIRE(r);
    return json::parse(r->text())["running"].get<int>();
  }
  int64_t restarts(const caf::actor& sup) {
    caf::scoped_actor self{*sys};
    int64_t n = -1;
    self->request(sup, std::chrono::seconds(5), stats_atom_v)
        .receive([&](int64_t x) { n = x; }, [&](caf::error&) {});
    return n;
  }
};

const char* kJob = R"({"command":["true"],"resources":{"gpus":1}})";

// A node asks about a hold after 300 ms instead of 10 s.
SchedulerOptions quick_hold_check() {
  SchedulerOptions opts;
  opts.hold_check_ms = 300;
  return opts;
}

}  // namespace

TEST_CASE("a job runs through the actors: queued, starting, running, succeeded", "[actors]") {
  Fixture f;
  f.register_node("n1", 4);
  auto id = f.submit(kJob);
  CHECK(f.event(id, "queued"));
  Published keep;
  auto* l = f.launched("n1", id, keep);
  CHECK(l->gpus()->size() == 1);
  CHECK(f.event(id, "starting"));
  f.agent_reports("n1", l, 0);
  CHECK(f.event(id, "running"));
  CHECK(f.event(id, "succeeded"));
}

TEST_CASE("a failing job with max_retries runs again with the next attempt", "[actors]") {
  Fixture f;
  f.register_node("n1", 4);
  auto id = f.submit(R"({"command":["false"],"resources":{"gpus":1},"max_retries":1})");
  Published k1, k2;
  auto* l1 = f.launched("n1", id, k1);
  REQUIRE(l1->attempt() == 1);
  f.agent_reports("n1", l1, 1);
  auto second = f.out->wait_for([&](const Published& p) {
    auto* e = wire::open(p.data);
    return p.subject == subjects::scheduler_to_agent("n1", subjects::kLaunch) && e &&
           e->body_as_Launch() && e->body_as_Launch()->attempt() == 2;
  });
  REQUIRE(second);
  k2 = *second;
  f.agent_reports("n1", wire::open(k2.data)->body_as_Launch(), 1);
  CHECK(f.event(id, "failed"));
}

TEST_CASE("a crashed job actor is restarted from its snapshot and still runs",
          "[actors][supervision]") {
  Fixture f;
  auto id = f.submit(kJob);  // no node yet: stays queued
  REQUIRE(f.event(id, "queued"));
  caf::anon_send(f.w.jobs, crash_atom_v, id);
  // The restart is visible in the supervisor's count...
  int64_t n = 0;
  for (int i = 0; i < 200 && (n = f.restarts(f.w.jobs)) < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(n == 1);
  // ...and the restored job is placed once a node arrives.
  f.register_node("n1", 2);
  Published keep;
  auto* l = f.launched("n1", id, keep);
  f.agent_reports("n1", l, 0);
  CHECK(f.event(id, "succeeded"));
}

TEST_CASE("a crashed node actor is restarted and keeps placing", "[actors][supervision]") {
  Fixture f;
  f.register_node("n1", 2);
  auto a = f.submit(kJob);
  Published k1;
  f.agent_reports("n1", f.launched("n1", a, k1), 0);
  REQUIRE(f.event(a, "succeeded"));
  caf::anon_send(f.w.nodes, crash_atom_v, std::string("n1"));
  int64_t n = 0;
  for (int i = 0; i < 200 && (n = f.restarts(f.w.nodes)) < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(n == 1);
  // The restarted actor asks its agent to register again (as the agent does).
  REQUIRE(f.out->wait_count(
      [](const Published& p) {
        return p.subject == subjects::scheduler_to_agent("n1", subjects::kHello);
      },
      2));
  f.register_node("n1", 2);
  auto b = f.submit(kJob);
  Published k2;
  f.agent_reports("n1", f.launched("n1", b, k2), 0);
  CHECK(f.event(b, "succeeded"));
}

TEST_CASE("malformed agent messages are dropped and counted", "[actors][input]") {
  Fixture f;
  f.inbound("troupe.sys.agent.n1.heartbeat", {1, 2, 3, 4, 5, 6, 7, 8});
  f.inbound("troupe.t.status", {'{', 'x'}, "_INBOX.s");
  f.inbound("troupe.sys.stats", {}, "_INBOX.stats");
  auto r = f.out->wait_for([](const Published& p) { return p.subject == "_INBOX.stats"; });
  REQUIRE(r);
  CHECK(json::parse(r->text())["malformed"] == 2);
  auto s = f.out->wait_for([](const Published& p) { return p.subject == "_INBOX.s"; });
  REQUIRE(s);
  CHECK(json::parse(s->text()).contains("error"));
}

TEST_CASE("a give-up release never frees a launched hold; the job's own release does",
          "[actors][holds]") {
  // A second grant of a running attempt (its placement lost with a crashed
  // queue) ends in a gang or queue giving up: its release must not free the
  // GPUs the running worker uses.
  Fixture f;
  f.register_node("n1", 1);
  auto a = f.submit(kJob);
  Published k;
  auto* l = f.launched("n1", a, k);
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
  Fixture f(quick_hold_check());
  f.register_node("n1", 1);
  auto a = f.submit(kJob);
  Published k1;
  f.agent_reports("n1", f.launched("n1", a, k1), 0);
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
  // Job b needs that GPU: it is placed once the orphan is handed back.
  auto b = f.submit(kJob);
  Published k2;
  auto* l = f.launched("n1", b, k2);
  CHECK(l->gpus()->size() == 1);
  f.agent_reports("n1", l, 0);
  CHECK(f.event(b, "succeeded"));
}

TEST_CASE("a job actor crashed as its worker exits still ends with the real exit code",
          "[actors][holds]") {
  // The Exited may die with the crashed actor's mailbox: the restarted job
  // asks its node (sync), and the hold check tells it again.
  Fixture f(quick_hold_check());
  f.register_node("n1", 1);
  auto a = f.submit(R"({"command":["false"],"resources":{"gpus":1}})");
  Published k;
  auto* l = f.launched("n1", a, k);
  caf::anon_send(f.w.jobs, crash_atom_v, a);
  f.agent_reports("n1", l, 3);
  REQUIRE(f.event(a, "failed"));
  auto ev = f.out->wait_for([&](const Published& p) {
    return p.subject == subjects::job_events("t", a) && json::parse(p.text())["state"] == "failed";
  });
  REQUIRE(ev);
  CHECK(json::parse(ev->text())["exit_code"] == 3);
}

TEST_CASE("a restarted job whose rank its node does not hold has it stopped and runs again",
          "[actors][holds]") {
  Fixture f;
  f.register_node("n1", 1);
  auto a = f.submit(kJob);
  Published k1;
  auto* l1 = f.launched("n1", a, k1);
  REQUIRE(l1->attempt() == 1);
  f.to_node("n1", wire::release(troupe::policy::hold_id(a, 1, 0), "lost track"));
  REQUIRE(f.running_on("n1") == 0);
  caf::anon_send(f.w.jobs, crash_atom_v, a);
  // The node stops whatever runs of attempt 1 (SIGKILL) ...
  auto stop = f.out->wait_for([&](const Published& p) {
    if (p.subject != subjects::scheduler_to_agent("n1", subjects::kStop)) return false;
    auto* e = wire::open(p.data);
    auto* s = e ? e->body_as_Stop() : nullptr;
    return s && wire::str(s->job_id()) == a && s->attempt() == 1 && s->signal() == SIGKILL;
  });
  CHECK(stop);
  // ... and the job runs again as attempt 2 (an infrastructure failure).
  auto second = f.out->wait_for([&](const Published& p) {
    auto* e = wire::open(p.data);
    return p.subject == subjects::scheduler_to_agent("n1", subjects::kLaunch) && e &&
           e->body_as_Launch() && e->body_as_Launch()->attempt() == 2;
  });
  REQUIRE(second);
  f.agent_reports("n1", wire::open(second->data)->body_as_Launch(), 0);
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
  REQUIRE(f.out->wait_for([&](const Published& p) {
    return p.subject == subjects::job_events("t", id) &&
           json::parse(p.text()).value("state", "") == "starting";
  }));
  // ...but no Launch goes while the event is not kept (a scheduler killed now
  // must not leave a worker its restored state does not know of).
  CHECK_FALSE(f.out->wait_for(is_launch, std::chrono::milliseconds(500)));
  CHECK(f.out->store_events() == 1);  // the starting event (the others need no answer)
  Published keep;
  const auto* l = f.launched("n1", id, keep);
  CHECK(l->attempt() == 1);
  f.agent_reports("n1", l, 0);
  REQUIRE(f.out->wait_for([&](const Published& p) {
    return p.subject == subjects::job_events("t", id) &&
           json::parse(p.text()).value("state", "") == "succeeded";
  }));
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
  auto event_of = [&](const std::string& job, const std::string& state) {
    return [job, state](const Published& p) {
      return p.subject == subjects::job_events("t", job) &&
             json::parse(p.text()).value("state", "") == state;
    };
  };
  REQUIRE(f.out->wait_for(event_of(a, "starting")));
  auto b = f.submit(kJob);  // waits for n1's only GPU
  REQUIRE(f.out->wait_for(event_of(b, "queued")));
  std::string body = "{\"job_id\":\"" + a + "\"}";
  f.inbound(subjects::team_cancel("t"), std::vector<uint8_t>(body.begin(), body.end()),
            "_INBOX.cancel");
  REQUIRE(f.out->wait_for(event_of(a, "canceled")));
  REQUIRE(f.out->wait_for(event_of(b, "starting")));
  CHECK(f.out->position(event_of(a, "canceled")) < f.out->position(event_of(b, "starting")));
  // The starting event is kept only now: job a's Launch never goes.
  f.out->store_events();
  Published keep;
  auto* l = f.launched("n1", b, keep);
  f.agent_reports("n1", l, 0);
  REQUIRE(f.out->wait_for(event_of(b, "succeeded")));
  CHECK(f.out->position([&](const Published& p) {
    auto* e = wire::open(p.data);
    return p.subject == subjects::scheduler_to_agent("n1", subjects::kLaunch) && e &&
           e->body_as_Launch() && wire::str(e->body_as_Launch()->job_id()) == a;
  }) == -1);
}

TEST_CASE("a Launch carries the worker's isolation from the spec and the cluster config",
          "[actors][isolation]") {
  Fixture f;
  apply_config(f.w,
               "pools: [{name: a100, gpu_type: a100}]\n"
               "teams: [{name: t, run_as: 5001}]\n"
               "job_defaults: {memory_mb: 8192}\n");
  f.register_node("n1", 8, "podman");
  auto img = f.submit(
      R"({"command":["true"],"image":"localhost/troupe-busybox:latest","resources":{"gpus":1,"cpus":2}})");
  Published keep;
  auto* l = f.launched("n1", img, keep);
  CHECK(wire::str(l->image()) == "localhost/troupe-busybox:latest");
  CHECK(l->cpus() == 2);
  CHECK(l->memory_mb() == 8192);  // none in the spec: job_defaults
  CHECK(l->run_as_uid() == 5001);
  auto own = f.submit(R"({"command":["true"],"resources":{"gpus":1,"memory_mb":100}})");
  Published keep2;
  auto* l2 = f.launched("n1", own, keep2);
  CHECK(wire::str(l2->image()).empty());
  CHECK(l2->cpus() == 0);
  CHECK(l2->memory_mb() == 100);  // the spec's own
  CHECK(l2->run_as_uid() == 5001);
}

TEST_CASE("without run_as a Launch leaves the user to the agent (-1)", "[actors][isolation]") {
  Fixture f;
  f.register_node("n1", 8);
  auto id = f.submit(kJob);
  Published keep;
  auto* l = f.launched("n1", id, keep);
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
  Published keep;
  f.launched("plain", host, keep);
  // Why it waits: the runtime, by its code. Asked until a round has looked
  // at it (its enqueue may still be on its way to the queue: not_in_queue).
  std::string ask = json{{"job_id", img}}.dump();
  std::string code;
  for (int i = 0; i < 200 && code != "no_runtime"; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::string reply = "_INBOX.why." + std::to_string(i);
    f.inbound(subjects::team_why("t"), std::vector<uint8_t>(ask.begin(), ask.end()), reply);
    auto why = f.out->wait_for([&](const Published& m) { return m.subject == reply; });
    REQUIRE(why);
    code = json::parse(why->text()).value("code", "");
  }
  CHECK(code == "no_runtime");
  // A node with a runtime joins: the job runs there.
  f.register_node("podman", 8, "podman");
  Published keep2;
  f.launched("podman", img, keep2);
  CHECK(f.out->position([&](const Published& p) {
    if (p.subject != subjects::scheduler_to_agent("plain", subjects::kLaunch)) return false;
    auto* e = wire::open(p.data);
    return e && e->body_as_Launch() && wire::str(e->body_as_Launch()->job_id()) == img;
  }) == -1);
}

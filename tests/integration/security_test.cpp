// The trust boundary on real processes (docs/security.md): a nats-server in
// operator mode with the identities `troupe auth` makes, over TLS, and real
// agents. Each attack a hostile tenant, node or job could try is played with
// that party's own identity and must change nothing:
//   - NATS refuses what an identity may not publish or subscribe to (the
//     permissions `troupe auth` signs into each identity);
//   - the scheduler and agents refuse what reaches them anyway (defense in
//     depth, as under a looser NATS config: played here with the scheduler's
//     identity, which may publish anything);
//   - stored records that fail validation are quarantined after a restart.
#include <catch2/catch.hpp>
#include <set>
#include <thread>

#include "bus/nats.hpp"
#include "bus/subjects.hpp"
#include "gateway/auth/permissions.hpp"
#include "harness.hpp"
#include "messages/wire.hpp"
#include "records.pb.h"

using namespace troupe;
using namespace troupe::it;

namespace {

constexpr int kDeniedWaitMs = 3000;

// A job that runs until canceled.
Json sleeper(const std::string& team) {
  return job_spec(team, {"/bin/sh", "-c", "sleep 600"}, 1);
}

// Publishes on `subject` and waits for the server's permissions violation.
bool publish_denied(bus::Connection& c, const std::string& subject,
                    const std::string& body = "{}") {
  c.publish(subject, body);
  c.flush(2000);
  return c.wait_async_error("Permissions Violation for Publish to \"" + subject, kDeniedWaitMs);
}

// Subscribes to `subject` and waits for the server's permissions violation.
bool subscribe_denied(bus::Connection& c, const std::string& subject) {
  auto sub = c.subscribe(subject, [](Inbound&&) {});
  c.flush(2000);
  return c.wait_async_error("Permissions Violation for Subscription to \"" + subject,
                            kDeniedWaitMs);
}

std::string reply_text(const std::optional<std::vector<uint8_t>>& r) {
  return r ? std::string(r->begin(), r->end()) : std::string();
}

// A request as `c`; the reply as JSON (null when none came).
Json ask(bus::Connection& c, const std::string& subject, const Json& body, int timeout_ms = 5000) {
  std::string err;
  auto r = c.request(subject, body.dump(), timeout_ms, &err);
  if (!r) return Json();
  return Json::parse(reply_text(r), nullptr, false);
}

std::vector<uint8_t> exited(const std::string& node, const std::string& job, int code) {
  flatbuffers::FlatBufferBuilder fbb;
  auto body = wire::CreateExited(fbb, fbb.CreateString(node), fbb.CreateString(job), 0, 0, code, 0,
                                 fbb.CreateString("forged"));
  return wire::seal(fbb, body);
}

std::vector<uint8_t> node_register(const std::string& node, int gpus) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<wire::Gpu>> gs;
  for (int i = 0; i < gpus; ++i) gs.push_back(wire::CreateGpu(fbb, i, fbb.CreateString("a100")));
  auto body = wire::CreateNodeRegister(fbb, fbb.CreateString(node), fbb.CreateString("127.0.0.1"),
                                       fbb.CreateString("a100"), fbb.CreateVector(gs), 64, 65536);
  return wire::seal(fbb, body);
}

std::vector<uint8_t> launch(const std::string& job, const std::vector<std::string>& command) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<flatbuffers::String>> cmd;
  for (const auto& c : command) cmd.push_back(fbb.CreateString(c));
  auto job_s = fbb.CreateString(job);
  auto team_s = fbb.CreateString("t1");
  auto cmd_v = fbb.CreateVector(cmd);
  wire::LaunchBuilder b(fbb);
  b.add_job_id(job_s);
  b.add_team(team_s);
  b.add_world_size(1);
  b.add_command(cmd_v);
  b.add_epoch(0);  // older than any leader's
  auto body = b.Finish();
  return wire::seal(fbb, body);
}

Json stats(Cluster& c) {
  return c.request(subjects::kSysStats, Json::object());
}

int64_t distrusted(Cluster& c, const std::string& what) {
  Json s = stats(c);
  if (!s.contains("distrusted") || !s["distrusted"].contains(what)) return -1;
  return s["distrusted"][what].get<int64_t>();
}

int alive_gpus(Cluster& c, const std::string& node) {
  Json n = c.nodes();
  for (const auto& x : n.value("nodes", Json::array()))
    if (x.value("node", "") == node) return x.value("gpus_total", -1);
  return -1;
}

}  // namespace

TEST_CASE("a team identity reaches only its own subjects", "[integration][security]") {
  Cluster c(ClusterOptions{}.node("n1", 2));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  auto b_job = c.submit_ok("teamb", sleeper("teamb"));
  REQUIRE(c.events().wait_state(b_job, "running", 20s));

  auto a = c.connect_as("team-teama");
  REQUIRE(a);
  Json req{{"job_id", b_job}};

  SECTION("another team's request subjects are refused by NATS") {
    for (const char* verb : {"status", "cancel", "logs", "why", "history", "submit", "jobs"})
      CHECK(publish_denied(*a, subjects::team_verb("teamb", verb), req.dump()));
    // Nor submit to a pool as another team (troupe.<team>.submit.<pool>).
    CHECK(publish_denied(*a, subjects::team_submit_to("teamb", "default"), req.dump()));
    // A request there gets no answer at all (the publish never leaves).
    std::string err;
    CHECK_FALSE(a->request(subjects::team_status("teamb"), req.dump(), 1000, &err));
    CHECK(err.find("ermission") != std::string::npos);
  }

  SECTION("under its own name another team's job does not exist") {
    Json none = ask(*a, subjects::team_status("teama"), {{"job_id", "j-does-not-exist"}});
    for (const char* verb : {"status", "cancel", "logs", "why", "history"}) {
      Json r = ask(*a, subjects::team_verb("teama", verb), req);
      INFO(verb << ": " << r.dump());
      REQUIRE(r.is_object());
      CHECK(r.value("code", "") == "not_found");
      CHECK(r.dump().find("teamb") == std::string::npos);  // nothing about its owner leaks
    }
    CHECK(none.value("code", "") == "not_found");
    // Its list holds none of team b's jobs.
    Json list = ask(*a, subjects::team_jobs("teama"), Json::object());
    CHECK(list.dump().find(b_job) == std::string::npos);
    // The job still runs.
    CHECK(c.status("teamb", b_job).value("state", "") == "running");
  }

  SECTION("it cannot submit as another team") {
    Json spec = job_spec("teamb", {"true"});
    for (const auto& subject :
         {subjects::team_submit("teama"), subjects::team_submit_to("teama", "default")}) {
      Json r = ask(*a, subject, spec);
      INFO(subject << ": " << r.dump());
      REQUIRE(r.is_object());
      CHECK(r.value("code", "") == "wrong_team");
      CHECK_FALSE(r.contains("job_id"));
    }
    // Its own spec addressed to a pool is one like any other.
    Json own = ask(*a, subjects::team_submit_to("teama", "default"), job_spec("teama", {"true"}));
    INFO(own.dump());
    CHECK(own.contains("job_id"));
  }

  SECTION("it cannot listen beyond its inbox and its own events") {
    for (const char* s :
         {">", "_INBOX.>", "_INBOX_teamb.>", "troupe.teamb.events.>", "troupe.*.events.>", "$KV.>",
          "$JS.API.>", "troupe.sys.>", "troupe.teamb.submit"})
      CHECK(subscribe_denied(*a, s));
    // What it may: its own events.
    auto own = a->subscribe("troupe.teama.events.>", [](Inbound&&) {});
    REQUIRE(a->flush(2000));
    CHECK_FALSE(a->wait_async_error("Subscription to \"troupe.teama.events", 500));
  }

  SECTION("one connection of it holds a bounded number of subscriptions") {
    // Its own events only, subject by subject: all allowed, each one more
    // of the server's memory that every team shares.
    auto own_event = [](int i) { return "troupe.teama.events.limit-" + std::to_string(i); };
    std::vector<bus::SubscriptionPtr> held;
    std::atomic<int> heard{0};
    for (int i = 0; i < auth::kTeamMaxSubs - 10; ++i)
      held.push_back(a->subscribe(own_event(i), [&heard](Inbound&&) { ++heard; }));
    REQUIRE(a->flush(5000));
    CHECK_FALSE(a->wait_async_error("subscriptions exceeded", 200));
    // Those are live: a message to the first comes.
    c.conn().publish(own_event(0), "{}");
    c.conn().flush(2000);
    for (auto deadline = Clock::now() + 5s; heard.load() == 0 && Clock::now() < deadline;)
      std::this_thread::sleep_for(10ms);  // polls the handler's count, with a deadline
    CHECK(heard.load() == 1);
    // Past the bound the server refuses (the C client then closes the
    // connection, as it does on any -ERR but a permissions violation).
    for (int i = auth::kTeamMaxSubs - 10; i < auth::kTeamMaxSubs + 10; ++i)
      held.push_back(a->subscribe(own_event(i), [](Inbound&&) {}));
    a->flush(2000);
    bool refused = a->wait_async_error("subscriptions exceeded", kDeniedWaitMs);
    for (auto deadline = Clock::now() + 5s; !refused && Clock::now() < deadline;) {
      refused = !a->connected();
      std::this_thread::sleep_for(10ms);
    }
    INFO("last async error: " << a->last_async_error());
    CHECK(refused);
    // The cluster is as it was: the other team's job runs.
    CHECK(c.status("teamb", b_job).value("state", "") == "running");
  }

  SECTION("it cannot reach the agents, the scheduler's subjects or the stored state") {
    CHECK(publish_denied(*a, subjects::scheduler_to_agent("n1", subjects::kLaunch)));
    CHECK(publish_denied(*a, subjects::scheduler_to_agent("n1", subjects::kStop)));
    CHECK(publish_denied(*a, subjects::scheduler_to_agent("n1", subjects::kLogs)));
    CHECK(publish_denied(*a, subjects::kSysHello, "{\"epoch\":999999999}"));
    CHECK(publish_denied(*a, subjects::agent_to_scheduler("n1", subjects::kExited)));
    CHECK(publish_denied(*a, subjects::agent_to_scheduler("fake", subjects::kRegister)));
    CHECK(publish_denied(*a, "$KV.TROUPE_LEADER.leader"));
    CHECK(publish_denied(*a, "$KV.TROUPE_STATE.job.x"));
    CHECK(publish_denied(*a, "$JS.API.STREAM.DELETE.TROUPE_EVENTS"));
    CHECK(publish_denied(*a, "troupe.teama.events.j-1"));
    CHECK(publish_denied(*a, "troupe.sys.jobs"));
    CHECK(publish_denied(*a, "troupe.sys.intake.teama"));
    // Nothing happened: the job runs, the streams are there, one leader.
    CHECK(c.status("teamb", b_job).value("state", "") == "running");
    CHECK(c.wait_scheduler_serving(5s));
  }
}

TEST_CASE("an admin operates the cluster but cannot act as a node or the scheduler",
          "[integration][security]") {
  Cluster c(ClusterOptions{}.node("n1", 2));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  auto job = c.submit_ok("t1", sleeper("t1"));
  REQUIRE(c.events().wait_state(job, "running", 20s));
  auto admin = c.connect_as("admin-admin");
  REQUIRE(admin);
  // What it may: every team's jobs, the nodes, a team's verbs.
  Json all = ask(*admin, "troupe.sys.jobs", Json::object());
  CHECK(all.dump().find(job) != std::string::npos);
  CHECK(ask(*admin, subjects::kSysNodes, Json::object()).contains("nodes"));
  CHECK(ask(*admin, subjects::team_status("t1"), {{"job_id", job}}).value("state", "") ==
        "running");
  // What it may not.
  CHECK(publish_denied(*admin, subjects::scheduler_to_agent("n1", subjects::kLaunch)));
  CHECK(publish_denied(*admin, subjects::scheduler_to_agent("n1", subjects::kStop)));
  CHECK(publish_denied(*admin, subjects::scheduler_to_agent("n1", subjects::kLogs)));
  CHECK(publish_denied(*admin, subjects::kSysHello));
  CHECK(publish_denied(*admin, subjects::agent_to_scheduler("n1", subjects::kExited)));
  CHECK(publish_denied(*admin, subjects::agent_to_scheduler("n1", subjects::kHeartbeat)));
  CHECK(publish_denied(*admin, "$KV.TROUPE_LEADER.leader"));
  CHECK(publish_denied(*admin, "$JS.API.STREAM.DELETE.TROUPE_INTAKE"));
  CHECK(publish_denied(*admin, subjects::job_events("t1", job)));
  CHECK(subscribe_denied(*admin, "troupe.sys.node.>"));
  CHECK(subscribe_denied(*admin, "_INBOX.>"));
  CHECK(c.status("t1", job).value("state", "") == "running");
}

TEST_CASE("a node identity speaks only for its own node", "[integration][security]") {
  Cluster c(ClusterOptions{}.node("n1", 2).node("n2", 2));
  REQUIRE(c.wait_nodes_alive(2, 20s));
  auto job = c.submit_ok("t1", sleeper("t1"));
  auto running = c.events().wait_state(job, "running", 20s);
  REQUIRE(running);
  std::string on = running->json["workers"][0].value("node", "");
  std::string other = on == "n1" ? "n2" : "n1";

  auto n = c.connect_as("node-" + other);
  REQUIRE(n);
  SECTION("NATS refuses another node's subjects and the scheduler's") {
    CHECK(publish_denied(*n, subjects::agent_to_scheduler(on, subjects::kExited)));
    CHECK(publish_denied(*n, subjects::agent_to_scheduler(on, subjects::kRegister)));
    CHECK(publish_denied(*n, subjects::agent_to_scheduler("n999", subjects::kRegister)));
    CHECK(publish_denied(*n, subjects::scheduler_to_agent(on, subjects::kStop)));
    CHECK(publish_denied(*n, subjects::kSysHello));
    CHECK(publish_denied(*n, subjects::team_submit("t1")));
    CHECK(subscribe_denied(*n, subjects::scheduler_to_agent(on, ">")));
    CHECK(subscribe_denied(*n, "troupe.*.events.>"));
  }
  SECTION("on its own subject, it cannot end another node's worker") {
    // Its own subject, its own name in the message, but the worker is not its.
    auto fake = exited(other, job, 0);
    CHECK(n->publish(subjects::agent_to_scheduler(other, subjects::kExited), fake));
    REQUIRE(n->flush(2000));
    CHECK_FALSE(n->wait_async_error("Permissions", 500));
    // Another node's name in the message: refused and counted.
    auto lie = exited(on, job, 0);
    CHECK(n->publish(subjects::agent_to_scheduler(other, subjects::kExited), lie));
    REQUIRE(n->flush(2000));
    auto counted = [&] { return distrusted(c, "agent_message_not_from_node") >= 1; };
    auto deadline = Clock::now() + 10s;
    while (!counted() && Clock::now() < deadline) std::this_thread::sleep_for(100ms);
    CHECK(counted());
    CHECK(c.status("t1", job).value("state", "") == "running");
    CHECK_FALSE(c.events().wait_state(job, "succeeded", 1s));
  }
}

TEST_CASE("the scheduler refuses what a looser NATS config would let through",
          "[integration][security]") {
  // Played with the harness's connection (the scheduler's identity: it may
  // publish anything), as a deployment without our permissions would allow.
  Cluster c(ClusterOptions{}.node("n1", 2).node("n2", 2));
  REQUIRE(c.wait_nodes_alive(2, 20s));
  auto job = c.submit_ok("t1", sleeper("t1"));
  auto running = c.events().wait_state(job, "running", 20s);
  REQUIRE(running);
  std::string on = running->json["workers"][0].value("node", "");
  std::string other = on == "n1" ? "n2" : "n1";

  SECTION("a fake Exited{0} from the wrong node changes nothing") {
    REQUIRE(c.publish(subjects::agent_to_scheduler(other, subjects::kExited), exited(on, job, 0)));
    REQUIRE(
        c.publish(subjects::agent_to_scheduler(other, subjects::kExited), exited(other, job, 0)));
    CHECK_FALSE(c.events().wait_state(job, "succeeded", 2s));
    CHECK(c.status("t1", job).value("state", "") == "running");
  }
  SECTION("a register that shrinks a node with work on it is refused and counted") {
    REQUIRE(c.publish(subjects::agent_to_scheduler(on, subjects::kRegister), node_register(on, 0)));
    auto deadline = Clock::now() + 10s;
    while (distrusted(c, "register_capacity_change") < 1 && Clock::now() < deadline)
      std::this_thread::sleep_for(100ms);
    CHECK(distrusted(c, "register_capacity_change") >= 1);
    CHECK(alive_gpus(c, on) == 2);
    CHECK(c.status("t1", job).value("state", "") == "running");
  }
  SECTION("a register naming another node is refused") {
    REQUIRE(c.publish(subjects::agent_to_scheduler("ghost", subjects::kRegister),
                      node_register("n1", 1000)));
    auto deadline = Clock::now() + 10s;
    while (distrusted(c, "agent_message_not_from_node") < 1 && Clock::now() < deadline)
      std::this_thread::sleep_for(100ms);
    CHECK(distrusted(c, "agent_message_not_from_node") >= 1);
    CHECK(alive_gpus(c, "n1") == 2);
    CHECK(alive_gpus(c, "ghost") == -1);
  }
  SECTION("a Launch with an epoch older than the scheduler's is refused by the agent") {
    std::string marker = c.file("forged-launch-ran");
    REQUIRE(c.publish(subjects::scheduler_to_agent(other, subjects::kLaunch),
                      launch("j-forged", {"/bin/sh", "-c", "echo ran > " + marker})));
    // The agent logs the refusal (a deposed scheduler's epoch).
    auto deadline = Clock::now() + 10s;
    auto& agent = c.node(other == "n1" ? 0 : 1);
    while (read_file(agent.err_path()).find("refused a launch") == std::string::npos &&
           Clock::now() < deadline)
      std::this_thread::sleep_for(100ms);
    CHECK(read_file(agent.err_path()).find("refused a launch") != std::string::npos);
    CHECK(read_file(marker).empty());
  }
}

TEST_CASE("a node outside the roster is never used", "[integration][security]") {
  Cluster c(ClusterOptions{}
                .node("n1", 2)
                .node("rogue", 8)
                .with_config("pools: [{name: a100, gpu_type: a100}]\n"
                             "teams: [{name: t1}]\n"
                             "nodes: [n1, gpu-*]\n"));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  auto deadline = Clock::now() + 10s;
  while (distrusted(c, "node_not_in_roster") < 1 && Clock::now() < deadline)
    std::this_thread::sleep_for(100ms);
  CHECK(distrusted(c, "node_not_in_roster") >= 1);
  CHECK(alive_gpus(c, "rogue") == -1);
  auto job = c.submit_ok("t1", job_spec("t1", {"true"}, 1));
  auto r = c.events().wait_state(job, "running", 20s);
  REQUIRE(r);
  CHECK(r->json["workers"][0].value("node", "") == "n1");
}

TEST_CASE("forged stored records are quarantined after a restart, never run",
          "[integration][security]") {
  Cluster c(ClusterOptions{}.node("n1", 2));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  auto good = c.submit_ok("t1", job_spec("t1", {"true"}, 1));
  REQUIRE(c.wait_terminal(good, 20s));

  // What only the scheduler's identity may write (a tenant is refused: see
  // above), forged as if a looser config had let someone in: a job record
  // with an impossible spec under the KV bucket, and an event of team t1's
  // job published on team t2's subject.
  std::string marker = c.file("forged-ran");
  Json forged_event = {{"job_id", good}, {"team", "t1"}, {"state", "queued"},
                       {"seq", 999},     {"attempt", 1}, {"ts_ms", 1}};
  REQUIRE(c.publish("troupe.t2.events." + good, [&] {
    auto s = forged_event.dump();
    return std::vector<uint8_t>(s.begin(), s.end());
  }()));
  c.kill_scheduler();
  {
    std::string err;
    auto js = bus::JetStream::open(c.conn(), &err);
    REQUIRE(js);
    auto kv = bus::KeyValue::open(*js, subjects::kStateBucket, &err);
    REQUIRE(kv);
    // A job record whose spec asks for 10,000 GPUs per worker and runs the marker.
    std::string rec_json;
    troupe::pb::JobRecord rec;
    rec.set_job_id("j-forged");
    rec.mutable_spec()->set_team("t1");
    rec.mutable_spec()->set_kind("training");
    rec.mutable_spec()->add_command("/bin/sh");
    rec.mutable_spec()->add_command("-c");
    rec.mutable_spec()->add_command("echo ran > " + marker);
    rec.mutable_spec()->mutable_resources()->set_gpus(10000);
    std::string bytes;
    rec.SerializeToString(&bytes);
    bool conflict = false;
    REQUIRE(kv->update("job.j-forged", bytes, 0, &conflict, &err) > 0);
  }
  c.restart_scheduler();
  REQUIRE(c.wait_scheduler_serving(20s));
  Json s = stats(c);
  INFO(s.dump(2));
  CHECK(s.value("quarantined", 0) >= 2);
  CHECK(s["quarantine"].contains("job.j-forged"));
  CHECK(c.status("t1", good).value("state", "") == "succeeded");
  Json forged = c.request(subjects::team_status("t1"), {{"job_id", "j-forged"}});
  CHECK(forged.value("code", "") == "not_found");
  CHECK(read_file(marker).empty());
}

TEST_CASE("a job's environment holds none of the agent's identity", "[integration][security]") {
  Cluster c(ClusterOptions{}.node("n1", 1));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  auto id = c.submit_ok("t1", job_spec("t1", {"/bin/sh", "-c", "env"}, 1));
  REQUIRE(c.wait_terminal(id, 20s));
  auto log = c.logs("t1", id);
  REQUIRE(log.ok);
  CHECK(log.data.find("TROUPE_JOB_ID=" + id) != std::string::npos);
  CHECK(log.data.find("TROUPE_NATS_CREDS") == std::string::npos);
  CHECK(log.data.find(".creds") == std::string::npos);
}

TEST_CASE("an open cluster (troupe up --insecure) still works, and a secured one wants an identity",
          "[integration][security]") {
  SECTION("insecure") {
    Cluster c(ClusterOptions{}.insecure().node("n1", 1));
    REQUIRE(c.wait_nodes_alive(1, 20s));
    auto id = c.submit_ok("t1", job_spec("t1", {"true"}, 1));
    auto end = c.wait_terminal(id, 20s);
    REQUIRE(end);
    CHECK(end->state == "succeeded");
    auto r = c.run_cli({"status", id});
    CHECK(r.exit_code == 0);
  }
  SECTION("secured: no identity, or no TLS, is refused with a reason") {
    Cluster c(ClusterOptions{});
    std::string err;
    CHECK_FALSE(c.connect_as("", &err));
    INFO(err);
    CHECK(err.find("cannot connect") != std::string::npos);
    bus::ConnectOptions o;
    o.url = c.url();
    o.creds_file = c.creds("admin-admin");  // right identity, but plain TCP
    o.max_reconnect = 0;
    CHECK_FALSE(bus::Connection::open(o, &err));
    INFO(err);
    CHECK(err.find("TLS") != std::string::npos);
    // The URL's secret is never printed.
    o.url = "nats://someone:hunter2@127.0.0.1:1";
    o.tls_ca = c.tls_ca();
    CHECK_FALSE(bus::Connection::open(o, &err));
    CHECK(err.find("hunter2") == std::string::npos);
  }
}

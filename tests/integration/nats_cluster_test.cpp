// A NATS cluster of three servers (issue 19, part 1): every stream and KV
// bucket replicated three times (--replicas 3), the scheduler and agents
// given every server's URL. One server lost (kill -9), even the one leading
// a stream, loses nothing acknowledged and stops nothing for more than the
// moment its streams elect another leader; `troupe up --nats-cluster 3`
// runs such a cluster and its demo. The fault-injection suite's NATS-cluster
// mode (tests/fault, ctest fault_injection_nats_cluster) audits the same
// under load with a rolling restart.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "bus/nats.hpp"
#include "bus/subjects.hpp"
#include "harness.hpp"
#include "messages/names.hpp"

using namespace troupe;
using namespace troupe::it;

namespace {

// $JS.API.STREAM.INFO of `stream` (null JSON when no answer came).
Json stream_info(Cluster& c, const std::string& stream) {
  std::string err;
  auto r = c.conn().request("$JS.API.STREAM.INFO." + stream, std::string(), 3000, &err);
  return r ? Json::parse(r->begin(), r->end(), nullptr, false) : Json();
}

// The index of the server (s<i>) leading `stream`, or -1.
int leader_of(Cluster& c, const std::string& stream) {
  Json j = stream_info(c, stream);
  if (!j.is_object() || !j.contains("cluster")) return -1;
  std::string name = j["cluster"].value("leader", "");
  if (name.size() < 2 || name[0] != 's') return -1;
  return std::atoi(name.c_str() + 1);
}

// What bring_streams_current did, one step a line.
std::string steps_of(const Cluster::CatchUp& caught) {
  std::string all = "streams current: " + std::string(caught.current ? "yes" : "no");
  for (const auto& step : caught.steps) all += "\n" + step;
  return all;
}

// `nodes` agents alive, and every stream's copies current (the remedy
// applied where one stays behind).
void require_ready(Cluster& c, size_t nodes) {
  if (nodes > 0) REQUIRE(c.wait_nodes_alive(nodes, 30s));
  auto caught = c.bring_streams_current(30s);
  INFO(steps_of(caught));
  REQUIRE(caught.current);
}

// Submits as a careful client does (troupe submit, gateway/client.hpp):
// with an idempotency key, sent again while no answer comes (the request
// or its reply was lost with the server it went through) or the answer says
// "retry". The reply with a job id, or the last one.
Json submit_keyed(Cluster& c, const std::string& team, Json spec, const std::string& key) {
  spec["idempotency_key"] = key;
  const std::string body = spec.dump();
  const std::vector<uint8_t> data(body.begin(), body.end());
  Json r;
  for (auto until = Clock::now() + 30s; Clock::now() < until;) {
    std::string err;
    auto raw = c.request_raw(subjects::team_submit(team), data, 5s, &err);
    r = raw ? Json::parse(raw->begin(), raw->end(), nullptr, false) : Json{{"error", err}};
    if (r.is_object() && r.contains("job_id")) break;
    if (raw && r.dump().find("retry") == std::string::npos) break;  // a refusal
    std::this_thread::sleep_for(100ms);                             // back-off between tries
  }
  return r;
}

std::set<std::string> terminal_states(Cluster& c, const std::string& id) {
  std::set<std::string> out;
  for (const auto& e : c.events().of_job(id))
    if (names::is_terminal(e.state)) out.insert(e.state);
  return out;
}

}  // namespace

TEST_CASE(
    "a 3-server NATS cluster: every stream and bucket has 3 replicas, and a kill -9 of the "
    "server leading the intake stream loses no submission, runs nothing twice",
    "[integration][nats-cluster][alone]") {
  Cluster c(ClusterOptions{}.nats_cluster(3).node("n1", 4, true).node("n2", 4, true));
  REQUIRE(c.nats_servers() == 3);
  REQUIRE(c.wait_nodes_alive(2, 30s));
  // The first job makes its team's logs stream too.
  auto first = c.submit_ok("t1", job_spec("t1", {"true"}));
  REQUIRE(c.wait_terminal(first, 30s));

  for (const std::string& stream :
       {std::string(subjects::kIntakeStream), std::string(subjects::kEventsStream),
        std::string("KV_") + subjects::kStateBucket, std::string("KV_") + subjects::kLeaderBucket,
        std::string("KV_") + subjects::kTokenBucket, subjects::logs_stream("t1")}) {
    Json j = stream_info(c, stream);
    INFO(stream << ": " << j.dump());
    REQUIRE(j.is_object());
    CHECK(j["config"].value("num_replicas", 0) == 3);
  }
  require_ready(c, 2);

  // The server leading the intake stream dies under a stream of submissions:
  // each is acknowledged once its new leader stores it (the publish is sent
  // again while there is none), none is refused or lost, and none is two
  // jobs (a submission sent again keeps its key).
  const int victim = leader_of(c, subjects::kIntakeStream);
  REQUIRE(victim >= 0);
  std::vector<std::string> ids;
  std::vector<std::string> refused;
  for (int i = 0; i < 60; ++i) {
    if (i == 10) c.nats_server_process(static_cast<size_t>(victim)).kill_now();
    Json r = submit_keyed(c, "t1", job_spec("t1", {"sleep", "0.2"}), "kill-" + std::to_string(i));
    if (r.contains("job_id"))
      ids.push_back(r["job_id"].get<std::string>());
    else
      refused.push_back(r.dump());
  }
  INFO("refused: " << (refused.empty() ? std::string() : refused.front()));
  CHECK(refused.empty());
  CHECK(std::set<std::string>(ids.begin(), ids.end()).size() == ids.size());
  c.restart_nats_server(static_cast<size_t>(victim), true);
  for (const auto& id : ids) {
    auto done = c.wait_terminal(id, 60s);
    INFO(id << "\n" << c.events().describe(id));
    REQUIRE(done);
    CHECK(done->state == "succeeded");
    CHECK(terminal_states(c, id).size() == 1);
  }
  CHECK(replay_gpus(c.events().all()).clashes.empty());
  // The restarted server catches up: every stream has its three copies again.
  auto caught = c.bring_streams_current(60s);
  INFO(steps_of(caught));
  CHECK(caught.current);
}

TEST_CASE(
    "a 3-server NATS cluster: a JetStream publish while its stream elects a new leader is sent "
    "again and stored, not refused",
    "[integration][nats-cluster][alone]") {
  ClusterOptions o;
  o.nats_servers = 3;
  o.scheduler = false;  // bus::JetStream alone
  Cluster c(o);
  std::string err;
  auto js = bus::JetStream::open(c.conn(), &err);
  REQUIRE(js);
  bus::StreamConfig cfg{"TEST_ELECTION", {"test.election.>"}};
  cfg.replicas = 3;
  // (No scheduler waited for the cluster's JetStream: its servers may still
  // be electing their metadata leader, and a stream is refused until then.)
  bool made = false;
  for (auto until = Clock::now() + 30s; !made && Clock::now() < until;) {
    made = js->ensure_stream(cfg, &err);
    if (!made) std::this_thread::sleep_for(250ms);
  }
  INFO("stream not made: " << err);
  REQUIRE(made);
  require_ready(c, 0);
  const int victim = leader_of(c, "TEST_ELECTION");
  REQUIRE(victim >= 0);
  // The publisher's own server stays up (one whose connection breaks fails
  // its write at once: that is not what this test is about).
  bus::ConnectOptions co;
  co.url = c.nats_url(static_cast<size_t>((victim + 1) % 3));
  co.creds_file = c.creds(std::string(subjects::kSchedulerIdentity));
  co.tls_ca = c.tls_ca();
  auto conn = bus::Connection::open(co, &err);
  INFO(err);
  REQUIRE(conn);
  js = bus::JetStream::open(*conn, &err);
  REQUIRE(js);
  c.nats_server_process(static_cast<size_t>(victim)).kill_now();
  // At once, while the two copies left elect a leader: each publish is
  // answered "no responders" until then (seen without the resend: every
  // one of these failed), and must be stored.
  std::mutex mu;
  std::condition_variable cv;
  size_t answered = 0;
  std::vector<std::string> errors;
  const size_t n = 20;
  for (size_t i = 0; i < n; ++i) {
    const std::string data = "m" + std::to_string(i);
    js->publish_async("test.election.x", data.data(), data.size(), "id-" + std::to_string(i),
                      [&](bool ok, bool, const std::string& e) {
                        std::lock_guard<std::mutex> lock(mu);
                        if (!ok) errors.push_back(e);
                        ++answered;
                        cv.notify_all();
                      });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, 30s, [&] { return answered == n; }));
  }
  INFO("first error: " << (errors.empty() ? std::string() : errors.front()));
  CHECK(errors.empty());
  Json j = stream_info(c, "TEST_ELECTION");
  CHECK(j["state"].value("messages", 0) == static_cast<int>(n));
}

TEST_CASE(
    "a 3-server NATS cluster: losing the server that leads the leader lease's bucket does not "
    "depose the scheduler, and a running job is not run twice",
    "[integration][nats-cluster][alone]") {
  Cluster c(ClusterOptions{}.nats_cluster(3).node("n1", 2, true));
  require_ready(c, 1);
  auto id = c.submit_ok("t1", job_spec("t1", {"sleep", "4"}));
  REQUIRE(c.events().wait_state(id, std::string(names::kRunning), 30s));
  const int victim = leader_of(c, std::string("KV_") + subjects::kLeaderBucket);
  REQUIRE(victim >= 0);
  c.nats_server_process(static_cast<size_t>(victim)).kill_now();
  // Work goes on through the other two.
  Json r = submit_keyed(c, "t1", job_spec("t1", {"true"}), "after-the-kill");
  INFO(r.dump());
  REQUIRE(r.contains("job_id"));
  const std::string next = r["job_id"].get<std::string>();
  auto done = c.wait_terminal(id, 60s);
  REQUIRE(done);
  CHECK(done->state == "succeeded");
  REQUIRE(c.wait_terminal(next, 60s));
  c.restart_nats_server(static_cast<size_t>(victim), true);
  CHECK(terminal_states(c, id).size() == 1);
  size_t runs = 0;
  for (const auto& e : c.events().of_job(id)) runs += e.state == names::kRunning ? 1 : 0;
  CHECK(runs == 1);
  // One leader throughout: the scheduler was not deposed (its lease renewed
  // through the bucket's new leader).
  CHECK(c.scheduler().running());
  CHECK(read_file(c.scheduler().err_path()).find("deposed") == std::string::npos);
}

TEST_CASE(
    "a 3-server NATS cluster: a server whose copies stay behind is restarted by the operator's "
    "remedy, and every stream is current again",
    "[integration][nats-cluster][alone]") {
  // The remedy docs/deploy.md gives (and the fault suite applies during its
  // rolling restart): a step-down, then a restart of the server whose copy
  // is behind. A server that is down stays behind through the step-down.
  Cluster c(ClusterOptions{}.nats_cluster(3).node("n1", 2, true));
  require_ready(c, 1);
  c.nats_server_process(1).kill_now();
  // Its copies count as behind once the leaders have missed it a while.
  bool behind = false;
  for (auto until = Clock::now() + 30s; !behind && Clock::now() < until;) {
    behind = !c.lagging_streams().empty();
    if (!behind) std::this_thread::sleep_for(200ms);  // polled: no event says "behind"
  }
  REQUIRE(behind);
  auto caught = c.bring_streams_current(1s, 1s);
  INFO(steps_of(caught));
  CHECK(caught.current);
  // (Another server's copy may be behind for a moment after the step-down:
  // it is restarted too.)
  REQUIRE(caught.steps.size() >= 5);
  CHECK(caught.steps[1].rfind("their leaders asked to step down: ", 0) == 0);
  CHECK(std::count(caught.steps.begin(), caught.steps.end(),
                   "restart nats-server s1 (SIGTERM), whose copy is behind") == 1);
  CHECK(caught.steps.back() == "current again");
  // The cluster works on: a job runs (a submission in the moment the
  // scheduler's lease bucket elects a leader is answered "retry").
  Json r = submit_keyed(c, "t1", job_spec("t1", {"true"}), "after-the-remedy");
  INFO(r.dump());
  REQUIRE(r.contains("job_id"));
  const std::string id = r["job_id"].get<std::string>();
  auto done = c.wait_terminal(id, 60s);
  REQUIRE(done);
  CHECK(done->state == "succeeded");
}

TEST_CASE("troupe up --nats-cluster 3 runs three nats-servers as one cluster, and its demo",
          "[integration][nats-cluster][alone]") {
  TmpDir tmp("troupe-up-cluster");
  const std::string troupe = bin_dir() + "/troupe";
  REQUIRE(::access(troupe.c_str(), X_OK) == 0);
  const std::string home = tmp.file("home");
  // A base port whose next two and routes (+2000..+2002) are free too.
  int port = 0;
  for (int tries = 0; tries < 50 && port == 0; ++tries) {
    int p = free_port();
    bool ok = p > 0 && p + 2002 < 65536;
    for (int d : {1, 2, 2000, 2001, 2002}) ok = ok && bindable(p + d);
    if (ok) port = p;
  }
  REQUIRE(port > 0);
  RunResult r = run_program({troupe, "up", "--exit-after-demo", "--home", home, "--port",
                             std::to_string(port), "--nats-cluster", "3", "--http-port", "0"},
                            tmp.path(), "troupe-up", 180s, nullptr);
  const std::string out = read_file(tmp.file("troupe-up.out"));
  INFO("troupe up: rc=" << r.exit_code << " timed out=" << r.timed_out << "\nstdout:\n"
                        << tail_file(tmp.file("troupe-up.out"), 80) << "\nstderr:\n"
                        << tail_file(tmp.file("troupe-up.err"), 80));
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 0);
  CHECK(out.find("(3 servers, JetStream R3)") != std::string::npos);
  for (int i = 0; i < 3; ++i) {
    CHECK(out.find("started nats-s" + std::to_string(i)) != std::string::npos);
    // Each server's store under $TROUPE_HOME, with the replicated streams.
    CHECK(std::filesystem::is_regular_file(home + "/nats-s" + std::to_string(i) + ".conf"));
    CHECK(std::filesystem::is_directory(home + "/nats/s" + std::to_string(i) + "/jetstream"));
  }
  const std::string log = read_file(home + "/logs/nats-s1.log");
  CHECK(log.find("JetStream cluster") != std::string::npos);
}

TEST_CASE("a scheduler asked for 3 replicas on one nats-server stops at once and says why",
          "[integration][nats-cluster]") {
  ClusterOptions o;
  o.scheduler_args = {"--replicas", "3"};
  Cluster c(o);
  // A refusal, not a cluster still forming: no 30 s wait for JetStream.
  REQUIRE(c.scheduler().wait_exit(Clock::now() + 15s));
  CHECK(c.scheduler().exit_status().value_or(0) != 0);
  const std::string err = read_file(c.scheduler().err_path());
  INFO(err);
  CHECK(err.find("3 replicas need a NATS cluster of that many JetStream servers") !=
        std::string::npos);
  CHECK(err.find("JetStream is required") == std::string::npos);
}

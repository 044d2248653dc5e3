// Acceptance tests of the foundation against real processes: nats-server,
// troupe-scheduler, troupe-node agents and the troupe CLI (docs/contract.md).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bus/subjects.hpp"
#include "harness.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"
#include "messages/wire.hpp"

using namespace troupe;
using namespace troupe::it;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// Value of the first "KEY=value" line of `text`; nullopt when none.
std::optional<std::string> line_value(const std::string& text, const std::string& key) {
  for (const auto& l : lines_of(text))
    if (l.rfind(key + "=", 0) == 0) return l.substr(key.size() + 1);
  return std::nullopt;
}

std::vector<int> split_ints(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, ',');) out.push_back(std::stoi(part));
  return out;
}

// Workers of an event ([] when absent).
Json workers_of(const Event& e) {
  if (e.json.contains("workers") && e.json["workers"].is_array()) return e.json["workers"];
  return Json::array();
}

bool is_error_reply(const Json& j, std::string* text = nullptr) {
  if (!j.is_object() || !j.contains("error")) return false;
  const Json& e = j["error"];
  std::string s = e.is_string() ? e.get<std::string>() : e.dump();
  if (text != nullptr) *text = s;
  return !s.empty();
}

// A submit reply to a malformed request: {"error"} JSON, or a FlatBuffers
// SubmitReply carrying an error.
bool is_submit_error(const std::vector<uint8_t>& reply, std::string* text) {
  Json j = Json::parse(reply.begin(), reply.end(), nullptr, false);
  if (!j.is_discarded()) return is_error_reply(j, text);
  if (const wire::Envelope* env = wire::open(reply)) {
    if (const auto* r = env->body_as_SubmitReply()) {
      *text = wire::str(r->error());
      return !text->empty();
    }
  }
  *text = "neither JSON nor a SubmitReply: " + std::string(reply.begin(), reply.end());
  return false;
}

std::vector<uint8_t> bytes_of(const std::string& s) {
  return {s.begin(), s.end()};
}

}  // namespace

TEST_CASE("one-GPU job on real agents succeeds and logs its output and one GPU", "[integration]") {
  Cluster c(ClusterOptions{}.node("n1").node("n2"));
  REQUIRE(c.wait_nodes_alive(2, 20s));

  auto id = c.submit_ok("t1", job_spec("t1", {"sh", "-c",
                                              "echo hello-$TROUPE_JOB_ID; "
                                              "echo CVD=$CUDA_VISIBLE_DEVICES"}));
  auto done = c.wait_terminal(id, 30s);
  INFO("events of " << id << ":\n" << c.events().describe(id));
  REQUIRE(done);
  CHECK(done->state == names::kSucceeded);

  auto running = c.events().wait_state(id, std::string(names::kRunning), 0s);
  REQUIRE(running);
  Json workers = workers_of(*running);
  REQUIRE(workers.size() == 1);
  REQUIRE(workers[0].contains("gpus"));
  REQUIRE(workers[0]["gpus"].size() == 1);
  int placed_gpu = workers[0]["gpus"][0].get<int>();

  // Through troupe.<team>.logs.
  LogRead log = c.logs("t1", id, 0);
  INFO("log: ok=" << log.ok << " error=" << log.error << " data:\n" << log.data);
  REQUIRE(log.ok);
  CHECK_THAT(log.data, Catch::Contains("hello-" + id));
  auto cvd = line_value(log.data, "CVD");
  REQUIRE(cvd);
  CHECK(std::regex_match("CVD=" + *cvd, std::regex("CVD=[0-9]+")));
  if (std::regex_match(*cvd, std::regex("[0-9]+"))) CHECK(std::stoi(*cvd) == placed_gpu);

  // Through the CLI (the team is looked up).
  RunResult cli = c.run_cli({"logs", id});
  INFO("troupe logs: rc=" << cli.exit_code << "\nstdout:\n" << cli.out << "\nstderr:\n" << cli.err);
  CHECK_FALSE(cli.timed_out);
  CHECK(cli.exit_code == 0);
  CHECK_THAT(cli.out, Catch::Contains("hello-" + id));
  CHECK_THAT(cli.out, Catch::Contains("CVD=" + std::to_string(placed_gpu)));
}

TEST_CASE("command that exits 3 ends failed with exit code 3", "[integration]") {
  Cluster c(ClusterOptions{}.node("n1"));
  REQUIRE(c.wait_nodes_alive(1, 20s));

  auto id = c.submit_ok("t1", job_spec("t1", {"sh", "-c", "exit 3"}));
  auto done = c.wait_terminal(id, 30s);
  INFO("events of " << id << ":\n" << c.events().describe(id));
  REQUIRE(done);
  CHECK(done->state == names::kFailed);
  REQUIRE(done->json.contains("exit_code"));
  CHECK(done->json["exit_code"] == 3);
  REQUIRE(done->json.contains("reason"));
  CHECK_THAT(done->json["reason"].get<std::string>(), Catch::Contains("3"));
}

TEST_CASE("cancel of a running job ends its process and the job is canceled", "[integration]") {
  Cluster c(ClusterOptions{}.node("n1"));
  REQUIRE(c.wait_nodes_alive(1, 20s));

  const std::string pid_file = c.file("job.pid");
  auto id =
      c.submit_ok("t1", job_spec("t1", {"sh", "-c", "echo $$ > " + pid_file + "; exec sleep 60"}));
  auto running = c.events().wait_state(id, std::string(names::kRunning), 30s);
  INFO("events of " << id << ":\n" << c.events().describe(id));
  REQUIRE(running);

  // The shell writes its pid right after it starts; there is no event for
  // that, so poll the file (bounded).
  pid_t pid = 0;
  for (auto deadline = Clock::now() + 10s; Clock::now() < deadline && pid <= 0;) {
    std::string text = read_file(pid_file);
    if (!text.empty() && text.back() == '\n') pid = static_cast<pid_t>(std::atol(text.c_str()));
    if (pid <= 0) std::this_thread::sleep_for(20ms);
  }
  REQUIRE(pid > 0);
  REQUIRE(::kill(pid, 0) == 0);  // the job process is there before the cancel

  Json reply = c.cancel("t1", id);
  INFO("cancel reply: " << reply.dump());
  CHECK_FALSE(reply.contains("error"));
  CHECK(reply.value("job_id", "") == id);

  auto done = c.wait_terminal(id, 30s);
  REQUIRE(done);
  CHECK(done->state == names::kCanceled);
  // Once the job is canceled its process is gone (not even a zombie).
  errno = 0;
  int rc = ::kill(pid, 0);
  int err = errno;
  INFO("kill(" << pid << ", 0) = " << rc << " errno " << err << " after the canceled event");
  CHECK(rc == -1);
  CHECK(err == ESRCH);

  Json st = c.status("t1", id);
  INFO("status: " << st.dump());
  CHECK(st.value("state", "") == names::kCanceled);
}

TEST_CASE("gang of 2 workers x 4 GPUs on 2 agents starts both ranks together", "[integration]") {
  Cluster c(ClusterOptions{}.node("n1").node("n2"));
  REQUIRE(c.wait_nodes_alive(2, 20s));

  auto id =
      c.submit_ok("t1", job_spec("t1",
                                 {"sh", "-c",
                                  "echo RANK=$TROUPE_RANK; echo WORLD=$TROUPE_WORLD_SIZE; "
                                  "echo COORD=$TROUPE_COORDINATOR; echo CVD=$CUDA_VISIBLE_DEVICES"},
                                 4, 2));
  auto done = c.wait_terminal(id, 30s);
  INFO("events of " << id << ":\n" << c.events().describe(id));
  REQUIRE(done);
  CHECK(done->state == names::kSucceeded);

  auto running = c.events().wait_state(id, std::string(names::kRunning), 0s);
  REQUIRE(running);
  Json workers = workers_of(*running);
  REQUIRE(workers.size() == 2);
  std::set<int> ranks;
  std::set<std::string> nodes;
  std::map<int, std::vector<int>> gpus_of_rank;
  for (const auto& w : workers) {
    for (const auto& g : w.value("gpus", Json::array()))
      gpus_of_rank[w.value("rank", 0)].push_back(g.get<int>());
    ranks.insert(w.value("rank", 0));  // rank 0 is omitted in protobuf JSON
    nodes.insert(w.value("node", ""));
    REQUIRE(w.contains("gpus"));
    CHECK(w["gpus"].size() == 4);
  }
  CHECK(ranks == std::set<int>{0, 1});
  CHECK(nodes.size() == 2);

  std::string coordinator[2];
  for (int rank = 0; rank < 2; ++rank) {
    LogRead log = c.logs("t1", id, rank);
    INFO("rank " << rank << " log: ok=" << log.ok << " error=" << log.error << " data:\n"
                 << log.data);
    REQUIRE(log.ok);
    CHECK(line_value(log.data, "RANK").value_or("<none>") == std::to_string(rank));
    CHECK(line_value(log.data, "WORLD").value_or("<none>") == "2");
    auto coord = line_value(log.data, "COORD");
    REQUIRE(coord);
    CHECK(std::regex_match(*coord, std::regex(".+:[0-9]+")));
    coordinator[rank] = *coord;
    auto cvd = line_value(log.data, "CVD");
    REQUIRE(cvd);
    REQUIRE(std::regex_match(*cvd, std::regex("[0-9]+(,[0-9]+){3}")));
    auto visible = split_ints(*cvd);
    auto placed = gpus_of_rank[rank];
    std::sort(visible.begin(), visible.end());
    std::sort(placed.begin(), placed.end());
    CHECK(visible == placed);
  }
  CHECK(coordinator[0] == coordinator[1]);
}

TEST_CASE("gang of 2 workers x 4 GPUs stays queued with one agent", "[integration]") {
  Cluster c(ClusterOptions{}.node("n1"));
  REQUIRE(c.wait_nodes_alive(1, 20s));

  auto id = c.submit_ok("t1", job_spec("t1", {"sh", "-c", "echo started"}, 4, 2));
  // The one place where waiting for an absence is the test: no start within 5 s.
  bool started = c.events().wait_for(
      [&](const std::vector<Event>& events) {
        for (const auto& e : events)
          if (e.job_id == id && (e.state == names::kStarting || e.state == names::kRunning ||
                                 names::is_terminal(e.state)))
            return true;
        return false;
      },
      5s);
  INFO("events of " << id << ":\n" << c.events().describe(id));
  CHECK_FALSE(started);

  Json st = c.status("t1", id);
  INFO("status: " << st.dump());
  REQUIRE_FALSE(st.contains("error"));
  std::string state = st.value("state", "");
  CHECK((state == names::kQueued || state == names::kPlacing));

  // No worker ever started: neither rank has a log.
  for (int rank = 0; rank < 2; ++rank) {
    LogRead log = c.logs("t1", id, rank);
    INFO("rank " << rank << " log: ok=" << log.ok << " data=" << log.data);
    CHECK_FALSE(log.ok);
    CHECK_FALSE(log.error.empty());
  }
}

TEST_CASE("200 one-GPU jobs on 2 simulated agents all succeed and never share a GPU",
          "[integration]") {
  Cluster c(ClusterOptions{}.node("s1", 4, true).node("s2", 4, true));
  REQUIRE(c.wait_nodes_alive(2, 20s));

  const int kJobs = 200;
  Json spec = job_spec("t1", {"sim-job"});
  spec["env"] = {{"TROUPE_SIM_DURATION_S", "0.05"}};
  std::vector<std::string> ids;
  std::set<std::string> id_set;
  for (int i = 0; i < kJobs; ++i) {
    spec["name"] = "sim-" + std::to_string(i);
    ids.push_back(c.submit_ok("t1", spec));
    id_set.insert(ids.back());
  }
  REQUIRE(id_set.size() == static_cast<size_t>(kJobs));

  auto terminal_count = [&](const std::vector<Event>& events) {
    std::set<std::string> done;
    for (const auto& e : events)
      if (id_set.count(e.job_id) && names::is_terminal(e.state)) done.insert(e.job_id);
    return done.size();
  };
  bool all_done = c.events().wait_for(
      [&](const std::vector<Event>& events) { return terminal_count(events) == id_set.size(); },
      120s);
  auto events = c.events().all();
  INFO(terminal_count(events) << " of " << kJobs << " jobs reached a terminal state");
  REQUIRE(all_done);
  CHECK(c.events().malformed().empty());

  // Every job: exactly one terminal event, succeeded; a running event that
  // names one worker with one GPU (else the replay below proves nothing).
  std::map<std::string, int> terminals, runnings;
  std::map<std::string, std::string> final_state;
  for (const auto& e : events) {
    if (!id_set.count(e.job_id)) continue;
    if (names::is_terminal(e.state)) {
      ++terminals[e.job_id];
      final_state[e.job_id] = e.state;
    }
    if (e.state == names::kRunning) {
      ++runnings[e.job_id];
      Json w = workers_of(e);
      INFO("running event without one worker on one GPU: " << e.json.dump());
      REQUIRE(w.size() == 1);
      REQUIRE(w[0].contains("gpus"));
      REQUIRE(w[0]["gpus"].size() == 1);
      REQUIRE_FALSE(w[0].value("node", "").empty());
    }
  }
  int not_succeeded = 0, not_once = 0, never_ran = 0;
  for (const auto& id : ids) {
    if (final_state[id] != names::kSucceeded) ++not_succeeded;
    if (terminals[id] != 1) ++not_once;
    if (runnings[id] < 1) ++never_ran;
  }
  CHECK(not_succeeded == 0);
  CHECK(not_once == 0);
  CHECK(never_ran == 0);

  // Replay in publish order: running takes (node, gpu) for the job; any other
  // state of that job gives its GPUs back. Two holders at once is a clash.
  GpuReplay replay = replay_gpus(events);
  std::string first_clashes;
  for (size_t i = 0; i < replay.clashes.size() && i < 10; ++i)
    first_clashes += replay.clashes[i] + "\n";
  INFO(replay.clashes.size() << " GPU clashes:\n" << first_clashes);
  CHECK(replay.clashes.empty());
  if (replay.max_held < 2) WARN("jobs never overlapped: the GPU check was not exercised");
}

TEST_CASE("malformed input gets errors and the scheduler keeps serving", "[integration]") {
  Cluster c(ClusterOptions{}.node("n1"));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  const std::string submit = subjects::team_submit("t");

  // Random bytes (not starting like JSON).
  std::mt19937 rng(4242);
  std::vector<uint8_t> junk(256);
  for (auto& b : junk) b = static_cast<uint8_t>(rng());
  junk[0] = 0x07;
  {
    std::string err, text;
    auto reply = c.request_raw(submit, junk, 10s, &err);
    INFO("random bytes: " << err);
    REQUIRE(reply);
    bool is_error = is_submit_error(*reply, &text);
    INFO("reply: " << text);
    CHECK(is_error);
  }

  // A truncated FlatBuffers submit.
  {
    pb::JobSpec s;
    s.set_team("t");
    s.set_kind("training");
    s.add_command("true");
    s.mutable_resources()->set_gpus(1);
    flatbuffers::FlatBufferBuilder fbb;
    auto full = wire::seal(fbb, wire::CreateSubmitRequest(fbb, spec::to_wire(fbb, s)));
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<long>(full.size() / 2));
    REQUIRE(wire::open(full) != nullptr);
    REQUIRE(wire::open(cut) == nullptr);
    std::string err, text;
    auto reply = c.request_raw(submit, cut, 10s, &err);
    INFO("truncated FlatBuffer: " << err);
    REQUIRE(reply);
    bool is_error = is_submit_error(*reply, &text);
    INFO("reply: " << text);
    CHECK(is_error);
  }

  // Invalid JSON.
  {
    Json r = c.request_text(submit, R"({"team":)");
    INFO("invalid JSON reply: " << r.dump());
    CHECK(is_error_reply(r));
    CHECK_FALSE(r.contains("job_id"));
  }

  // Impossible specs: each error names the field.
  struct Bad {
    const char* what;
    Json spec;
    const char* field;
  };
  Json gpus_neg = job_spec("t", {"true"}, -1);
  Json bogus_kind = job_spec("t", {"true"});
  bogus_kind["kind"] = "bogus";
  Json too_many = job_spec("t", {"true"}, 1000);
  for (const Bad& b : {Bad{"gpus -1", gpus_neg, "gpus"}, Bad{"kind bogus", bogus_kind, "kind"},
                       Bad{"1000 GPUs per worker", too_many, "gpus"}}) {
    Json r = c.submit_json("t", b.spec);
    std::string text;
    bool is_error = is_error_reply(r, &text);
    INFO(b.what << ": reply " << r.dump());
    CHECK(is_error);
    CHECK_FALSE(r.contains("job_id"));
    CHECK_THAT(text, Catch::Contains(b.field));
  }

  // Garbage from a would-be agent is dropped: no node "x" appears.
  std::vector<uint8_t> garbage(64);
  for (auto& b : garbage) b = static_cast<uint8_t>(rng());
  REQUIRE(c.publish(subjects::agent_to_scheduler("x", subjects::kHeartbeat), garbage));
  REQUIRE(c.publish(subjects::agent_to_scheduler("x", subjects::kHeartbeat),
                    bytes_of(R"({"node":"x","seq":1})")));
  REQUIRE(c.publish(subjects::agent_to_scheduler("x", subjects::kHeartbeat), {}));

  // JSON nested 100,000 deep (200 KB) to every team verb: a value that deep
  // ends a process on its stack once copied or printed, so it is refused as
  // malformed where it is read (messages/json_text.hpp).
  {
    const std::string deep = R"({"team":"t","command":["true"],"x":)" + std::string(100000, '[') +
                             std::string(100000, ']') + "}";
    for (auto verb : {subjects::kSubmit, subjects::kPipeline, subjects::kStatus, subjects::kCancel,
                      subjects::kLogs, subjects::kJobs, subjects::kWhy, subjects::kHistory,
                      subjects::kUsage, subjects::kSchedule}) {
      std::string err;
      auto reply = c.request_raw(subjects::team_verb("t", verb), bytes_of(deep), 10s, &err);
      INFO("deep JSON to " << verb << ": " << err);
      REQUIRE(reply);
      std::string text;
      bool is_error = is_submit_error(*reply, &text);
      INFO("reply: " << text.substr(0, 300));
      CHECK(is_error);
      CHECK(c.scheduler().running());
    }
  }

  // ... and the scheduler keeps serving: a normal job still succeeds.
  auto id = c.submit_ok("t", job_spec("t", {"sh", "-c", "echo still-fine"}));
  auto done = c.wait_terminal(id, 30s);
  INFO("events of " << id << ":\n" << c.events().describe(id));
  REQUIRE(done);
  CHECK(done->state == names::kSucceeded);

  Json nodes = c.nodes();
  INFO("nodes: " << nodes.dump());
  REQUIRE(nodes.contains("nodes"));
  for (const auto& n : nodes["nodes"]) CHECK(n.value("node", "") != "x");
  CHECK(c.wait_nodes_alive(1, 5s));
  CHECK(c.scheduler().running());
  CHECK(c.node(0).running());
}

TEST_CASE("resubmission with the same idempotency key returns the same id and runs once",
          "[integration]") {
  Cluster c(ClusterOptions{}.node("n1"));
  REQUIRE(c.wait_nodes_alive(1, 20s));

  Json spec = job_spec("t1", {"sh", "-c", "echo once"});
  spec["idempotency_key"] = "idem-" + std::to_string(std::random_device{}());
  std::string first = c.submit_ok("t1", spec);
  std::string second = c.submit_ok("t1", spec);
  CHECK(second == first);

  auto done = c.wait_terminal(first, 30s);
  INFO("events of " << first << ":\n" << c.events().describe(first));
  REQUIRE(done);
  CHECK(done->state == names::kSucceeded);

  // Again after it finished: still the same job, not run again.
  std::string third = c.submit_ok("t1", spec);
  CHECK(third == first);
  Json st = c.status("t1", first);
  INFO("status after the third submit: " << st.dump());
  CHECK(st.value("state", "") == names::kSucceeded);

  // A later job runs to its end: the scheduler has handled the resubmissions
  // before it (requests are answered in order) and published what followed.
  auto later = c.submit_ok("t1", job_spec("t1", {"sh", "-c", "echo later"}));
  REQUIRE(c.wait_terminal(later, 30s));

  int running = 0, terminal = 0;
  for (const auto& e : c.events().of_job(first)) {
    if (e.state == names::kRunning) ++running;
    if (names::is_terminal(e.state)) ++terminal;
  }
  CHECK(running == 1);
  CHECK(terminal == 1);
}

TEST_CASE("troupe up with exit-after-demo exits 0", "[integration]") {
  TmpDir tmp("troupe-up");
  const std::string troupe = bin_dir() + "/troupe";
  INFO("missing binary " << troupe);
  REQUIRE(::access(troupe.c_str(), X_OK) == 0);

  const std::string home = tmp.file("home");
  int port = free_port();
  REQUIRE(port > 0);
  RunResult r = run_program(
      {troupe, "up", "--exit-after-demo", "--home", home, "--port", std::to_string(port)},
      tmp.path(), "troupe-up", 120s, nullptr);
  INFO("troupe up: rc=" << r.exit_code << " timed out=" << r.timed_out << "\nstdout:\n"
                        << tail_file(tmp.file("troupe-up.out"), 80) << "\nstderr:\n"
                        << tail_file(tmp.file("troupe-up.err"), 80));
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 0);
}

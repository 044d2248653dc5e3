// Unit tests of the node agent's part of preemption and node failure
// (docs/checkpointing.md): the checkpoint contract (TROUPE_CHECKPOINT_DIR,
// the `latest` watch, Checkpointed before Exited), Stop's signal / grace_s /
// kill_after_s escalation, a fencing SIGKILL overriding a gentler stop, the
// shutdown reason, and workers dying with their agent (PR_SET_PDEATHSIG from
// the spawner thread). No NATS: publishes are captured in memory.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <thread>

#include "bus/subjects.hpp"
#include "node/agent.hpp"
#include "node/checkpoint.hpp"
#include "node/spawner.hpp"
#include "node/test_support.hpp"

using namespace troupe;
using namespace troupe::node;
using namespace std::chrono_literals;
using test::Capture;
using test::Published;
using test::TempDir;

namespace {

const std::string kNode = "ck-node";

Inbound launch(const std::string& job, int attempt, int rank, std::vector<std::string> command,
               const std::string& checkpoint_dir,
               std::vector<std::pair<std::string, std::string>> env = {}) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<flatbuffers::String>> cmd;
  for (const auto& c : command) cmd.push_back(fbb.CreateString(c));
  std::vector<flatbuffers::Offset<wire::KeyValue>> kv;
  for (const auto& [k, v] : env)
    kv.push_back(wire::CreateKeyValue(fbb, fbb.CreateString(k), fbb.CreateString(v)));
  auto body = wire::CreateLaunch(
      fbb, fbb.CreateString(job), fbb.CreateString("team"), attempt, rank, 1,
      fbb.CreateString("host:1"), fbb.CreateVector(std::vector<int>{}), fbb.CreateVector(cmd),
      fbb.CreateVectorOfSortedTables(&kv), 0, 10, fbb.CreateString(checkpoint_dir), 1);
  return Inbound{subjects::scheduler_to_agent(kNode, subjects::kLaunch), "", wire::seal(fbb, body)};
}

Inbound stop(const std::string& job, int attempt, int signal, int grace_s, int kill_after_s) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.ForceDefaults(true);
  auto body = wire::CreateStop(fbb, fbb.CreateString(job), attempt, -1, grace_s,
                               fbb.CreateString("test"), signal, kill_after_s, 1);
  return Inbound{subjects::scheduler_to_agent(kNode, subjects::kStop), "", wire::seal(fbb, body)};
}

struct Fixture {
  TempDir tmp;
  Capture cap;
  std::unique_ptr<Agent> agent;
  std::string exited = subjects::agent_to_scheduler(kNode, subjects::kExited);
  std::string started = subjects::agent_to_scheduler(kNode, subjects::kStarted);
  std::string checkpointed = subjects::agent_to_scheduler(kNode, subjects::kCheckpointed);

  explicit Fixture(bool simulate = false) {
    AgentConfig cfg;
    cfg.name = kNode;
    cfg.state_dir = tmp.path();
    cfg.simulate = simulate;
    cfg.grace_s = 10;
    cfg.heartbeat_ms = 60000;
    cfg.base_env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
    agent = std::make_unique<Agent>(
        cfg, [this](const std::string& s, const void* d, size_t n) { cap(s, d, n); });
    agent->start();
  }
  std::string log(const std::string& job, int attempt = 1, int rank = 0) {
    return test::read_file(log_path(tmp.path(), WorkerKey{job, attempt, rank}));
  }
  bool wait_log(const std::string& job, const std::string& needle,
                std::chrono::milliseconds t = 10s, int attempt = 1) {
    auto deadline = std::chrono::steady_clock::now() + t;
    while (std::chrono::steady_clock::now() < deadline) {
      if (log(job, attempt).find(needle) != std::string::npos) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  const wire::Exited* exited_at(std::vector<Published>& keep, size_t i) {
    keep = cap.on(exited);
    REQUIRE(keep.size() > i);
    const auto* x = keep[i].envelope()->body_as_Exited();
    REQUIRE(x);
    return x;
  }
};

// Alive and not a zombie (an orphan waits for whoever reaps it; it no longer runs).
bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::string stat = test::read_file("/proc/" + std::to_string(pid) + "/stat");
  auto paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return false;
  char state = stat[paren + 2];
  return state != 'Z' && state != 'X';
}

}  // namespace

TEST_CASE("checkpoint: parse_latest accepts relative paths inside the folder only",
          "[node][checkpoint]") {
  CHECK(parse_latest("ckpt-3\n") == std::optional<std::string>("ckpt-3"));
  CHECK(parse_latest("  global_step120 \r\n") == std::optional<std::string>("global_step120"));
  CHECK(parse_latest("a/b/c.pt") == std::optional<std::string>("a/b/c.pt"));
  CHECK(parse_latest("a..b") == std::optional<std::string>("a..b"));  // not a ".." component
  CHECK_FALSE(parse_latest(""));
  CHECK_FALSE(parse_latest(" \n"));
  CHECK_FALSE(parse_latest("/etc/passwd"));
  CHECK_FALSE(parse_latest(".."));
  CHECK_FALSE(parse_latest("../other-job/ckpt"));
  CHECK_FALSE(parse_latest("a/../../x"));
  CHECK_FALSE(parse_latest("a/.."));
  CHECK_FALSE(parse_latest("two\nlines"));
  CHECK_FALSE(parse_latest(std::string("nul\0byte", 8)));
  CHECK_FALSE(parse_latest(std::string(5000, 'x')));
  CHECK(resolve_checkpoint_dir("/state", "") == "");
  CHECK(resolve_checkpoint_dir("/state", "/abs/j-1") == "/abs/j-1");
  CHECK(resolve_checkpoint_dir("/state", "rel/j-1") == "/state/rel/j-1");
}

TEST_CASE("checkpoint: a Forget may name only its own job's checkpoint dir, a normal path",
          "[node][checkpoint]") {
  CHECK(forget_refusal("j-1", "/ckpt/j-1").empty());
  CHECK(forget_refusal("j-1", "/var/lib/troupe/checkpoints/j-1").empty());
  CHECK(forget_refusal("j-1", "/ckpt/j-2") == "the checkpoint dir does not end in /j-1");
  CHECK(forget_refusal("j-1", "/ckpt/xj-1") == "the checkpoint dir does not end in /j-1");
  CHECK(forget_refusal("j-1", "/j-1") ==
        "the checkpoint dir does not end in /j-1");  // not "/"'s child
  CHECK(forget_refusal("j-1", "/ckpt/j-1/") == "the checkpoint dir does not end in /j-1");
  CHECK(forget_refusal("j-1", "ckpt/j-1") == "the checkpoint dir is not an absolute path");
  CHECK(forget_refusal("j-1", "") == "the checkpoint dir is not an absolute path");
  CHECK(forget_refusal("j-1", "/ckpt/../etc/j-1") == "the checkpoint dir is not a normal path");
  CHECK(forget_refusal("j-1", "/ckpt/./j-1") == "the checkpoint dir is not a normal path");
  CHECK(forget_refusal("j-1", "/ckpt//j-1") == "the checkpoint dir is not a normal path");
  // Found by the launch fuzz target: what a C string reads is "/ckpt/V".
  CHECK(forget_refusal("j-1", std::string("/ckpt/V\0x/j-1", 13)) ==
        "the checkpoint dir holds a NUL byte");
  // The id is a subject token: no "..", "/", "*", ">" or empty one.
  CHECK_FALSE(forget_refusal("..", "/ckpt/..").empty());
  CHECK_FALSE(forget_refusal("", "/ckpt/").empty());
  CHECK_FALSE(forget_refusal("a.b", "/ckpt/a.b").empty());
  CHECK_FALSE(forget_refusal(">", "/ckpt/>").empty());
}

TEST_CASE("checkpoint: the watch reports each change of latest once, not the baseline",
          "[node][checkpoint]") {
  TempDir tmp;
  const std::string dir = tmp.path();
  test::write_file(dir + "/latest", "old\n");  // left by an earlier attempt
  CheckpointWatch w(dir);
  CHECK_FALSE(w.poll());
  auto mark = [&](const std::string& content) {
    test::write_file(dir + "/latest.tmp", content);
    std::filesystem::rename(dir + "/latest.tmp", dir + "/latest");
  };
  mark("ckpt-1\n");
  auto a = w.poll();
  REQUIRE(a);
  CHECK(a->path == "ckpt-1");
  auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  CHECK(std::llabs(a->ts_ms - now_ms) < 60000);
  CHECK_FALSE(w.poll());  // unchanged
  mark("ckpt-1\n");       // the same path marked again is a new checkpoint
  CHECK(w.poll());
  mark("../escape\n");  // ignored
  CHECK_FALSE(w.poll());
  mark("/abs\n");
  CHECK_FALSE(w.poll());
  mark("ckpt-2");
  auto b = w.poll();
  REQUIRE(b);
  CHECK(b->path == "ckpt-2");
  std::filesystem::remove(dir + "/latest");
  CHECK_FALSE(w.poll());
  CHECK_FALSE(CheckpointWatch().poll());
}

TEST_CASE(
    "checkpoint: the agent creates TROUPE_CHECKPOINT_DIR and reports checkpoints before the exit",
    "[node][checkpoint][agent]") {
  Fixture f;
  const std::string dir = f.tmp.path() + "/ckroot/j-1";  // does not exist yet
  f.agent->on_message(
      launch("j-1", 1, 0,
             {"/bin/sh", "-c",
              "echo dir=$TROUPE_CHECKPOINT_DIR resume=${TROUPE_RESUME_FROM-unset}; "
              "sleep 0.6; echo 5 > \"$TROUPE_CHECKPOINT_DIR/ckpt-5\"; "
              "echo ckpt-5 > \"$TROUPE_CHECKPOINT_DIR/l.tmp\"; mv \"$TROUPE_CHECKPOINT_DIR/l.tmp\" "
              "\"$TROUPE_CHECKPOINT_DIR/latest\"; sleep 0.6; "
              // The last checkpoint is marked right before the exit: it must still be
              // reported, and before the Exited.
              "echo ckpt-9 > \"$TROUPE_CHECKPOINT_DIR/l.tmp\"; mv \"$TROUPE_CHECKPOINT_DIR/l.tmp\" "
              "\"$TROUPE_CHECKPOINT_DIR/latest\"; exit 0"},
             dir, {{"TROUPE_RESUME_FROM", dir + "/ckpt-0"}}));
  REQUIRE(f.cap.wait_count(f.exited, 1));
  CHECK(std::filesystem::is_directory(dir));
  CHECK(f.log("j-1").find("dir=" + dir + " resume=" + dir + "/ckpt-0\n") != std::string::npos);
  auto all = f.cap.all();
  std::vector<std::string> seq;
  for (const auto& p : all) {
    if (p.subject == f.checkpointed) {
      const auto* c = p.envelope()->body_as_Checkpointed();
      REQUIRE(c);
      CHECK(wire::str(c->node()) == kNode);
      CHECK(wire::str(c->job_id()) == "j-1");
      CHECK(c->attempt() == 1);
      CHECK(c->rank() == 0);
      CHECK(c->ts_ms() > 0);
      seq.push_back("ckpt " + wire::str(c->path()));
    } else if (p.subject == f.exited) {
      seq.push_back("exited");
    }
  }
  CHECK(seq == std::vector<std::string>{"ckpt ckpt-5", "ckpt ckpt-9", "exited"});
  CHECK(f.agent->counters().checkpoints == 2);
}

TEST_CASE("checkpoint: no checkpoint dir, no variable, --simulate ignores checkpoints",
          "[node][checkpoint][agent]") {
  {
    Fixture f;
    f.agent->on_message(
        launch("j-2", 1, 0, {"/bin/sh", "-c", "echo [${TROUPE_CHECKPOINT_DIR-unset}]"}, ""));
    REQUIRE(f.cap.wait_count(f.exited, 1));
    CHECK(f.log("j-2", 1) == "[unset]\n");
  }
  {
    Fixture f(/*simulate=*/true);
    const std::string dir = f.tmp.path() + "/sim-ck";
    f.agent->on_message(launch("j-3", 1, 0, {"x"}, dir, {{"TROUPE_SIM_DURATION_S", "0.1"}}));
    REQUIRE(f.cap.wait_count(f.exited, 1));
    CHECK_FALSE(std::filesystem::exists(dir));
    CHECK(f.cap.on(f.checkpointed).empty());
  }
}

TEST_CASE("stop: the checkpoint signal first, SIGTERM after grace_s, SIGKILL kill_after_s later",
          "[node][stop][agent]") {
  Fixture f;
  // Ignores USR1 and TERM: only SIGKILL ends it; it logs what it got.
  f.agent->on_message(launch("j-4", 1, 0,
                             {"/bin/sh", "-c",
                              "trap 'echo got-usr1' USR1; trap 'echo got-term' TERM; echo ready; "
                              "while :; do sleep 0.05; done"},
                             ""));
  REQUIRE(f.wait_log("j-4", "ready"));
  auto t0 = std::chrono::steady_clock::now();
  f.agent->on_message(stop("j-4", 1, SIGUSR1, 1, 1));
  REQUIRE(f.wait_log("j-4", "got-usr1", 2s));
  CHECK(f.log("j-4").find("got-term") == std::string::npos);
  REQUIRE(f.wait_log("j-4", "got-term", 3s));
  CHECK(std::chrono::steady_clock::now() - t0 >= 900ms);
  REQUIRE(f.cap.wait_count(f.exited, 1, 5s));
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took >= 1900ms);
  CHECK(took < 4s);
  std::vector<Published> keep;
  const auto* x = f.exited_at(keep, 0);
  CHECK(x->signal() == SIGKILL);
  CHECK(wire::str(x->reason()) == "stopped");
}

TEST_CASE("stop: a worker that exits on the checkpoint signal gets nothing more",
          "[node][stop][agent]") {
  Fixture f;
  f.agent->on_message(launch(
      "j-5", 1, 0,
      {"/bin/sh", "-c", "trap 'exit 0' USR1; echo ready; while :; do sleep 0.05; done"}, ""));
  REQUIRE(f.wait_log("j-5", "ready"));
  f.agent->on_message(stop("j-5", 1, SIGUSR1, 30, 5));
  REQUIRE(f.cap.wait_count(f.exited, 1, 3s));
  std::vector<Published> keep;
  const auto* x = f.exited_at(keep, 0);
  CHECK(x->exit_code() == 0);
  CHECK(x->signal() == 0);
  CHECK(wire::str(x->reason()) == "stopped");
}

TEST_CASE("stop: a fencing SIGKILL overrides a stop already under way", "[node][stop][agent]") {
  Fixture f;
  f.agent->on_message(
      launch("j-6", 1, 0,
             {"/bin/sh", "-c", "trap '' USR1 TERM; echo ready; while :; do sleep 0.05; done"}, ""));
  REQUIRE(f.wait_log("j-6", "ready"));
  f.agent->on_message(stop("j-6", 1, SIGUSR1, 30, 5));  // a preemption with a long grace
  std::this_thread::sleep_for(200ms);
  CHECK(f.cap.on(f.exited).empty());
  auto t0 = std::chrono::steady_clock::now();
  f.agent->on_message(stop("j-6", 1, SIGKILL, 5, 1));  // the fence
  REQUIRE(f.cap.wait_count(f.exited, 1, 3s));
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  std::vector<Published> keep;
  CHECK(f.exited_at(keep, 0)->signal() == SIGKILL);
  CHECK(f.agent->running().empty());
}

TEST_CASE("stop: a cancel's SIGTERM after a preemption's SIGUSR1 brings the end forward",
          "[node][stop][agent]") {
  Fixture f;
  f.agent->on_message(
      launch("j-7", 1, 0,
             {"/bin/sh", "-c", "trap '' USR1; echo ready; while :; do sleep 0.05; done"}, ""));
  REQUIRE(f.wait_log("j-7", "ready"));
  f.agent->on_message(stop("j-7", 1, SIGUSR1, 30, 5));
  std::this_thread::sleep_for(200ms);
  f.agent->on_message(stop("j-7", 1, SIGTERM, 10, 5));  // sh dies of SIGTERM at once
  REQUIRE(f.cap.wait_count(f.exited, 1, 3s));
  std::vector<Published> keep;
  CHECK(f.exited_at(keep, 0)->signal() == SIGTERM);
}

TEST_CASE("stop: heartbeats list every live worker, stopping ones included", "[node][agent]") {
  Fixture f;
  // Rank 0 says "ready" once its trap is set (SIG_IGN is inherited by sleep),
  // so the SIGTERM below cannot arrive before the shell ignores it.
  f.agent->on_message(
      launch("j-8", 2, 0, {"/bin/sh", "-c", "trap '' TERM; echo ready; sleep 30"}, ""));
  f.agent->on_message(launch("j-8", 2, 1, {"sleep", "30"}, ""));
  REQUIRE(f.cap.wait_count(f.started, 2));
  REQUIRE(f.wait_log("j-8", "ready", 10s, 2));
  f.agent->on_message(stop("j-8", 2, SIGTERM, 30, 5));
  REQUIRE(f.cap.wait_count(f.exited, 1, 3s));  // rank 1 ends; rank 0 ignores SIGTERM
  auto running = f.agent->running();
  REQUIRE(running.size() == 1);
  CHECK(running[0] == WorkerKey{"j-8", 2, 0});
  f.agent->on_message(stop("j-8", 2, SIGKILL, 0, 0));
  REQUIRE(f.cap.wait_count(f.exited, 2, 3s));
  CHECK(f.agent->running().empty());
}

TEST_CASE("spawner: a worker dies with the process that forked it", "[node][spawner]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t helper = ::fork();
  REQUIRE(helper >= 0);
  if (helper == 0) {
    // The helper plays the agent: it spawns a worker from its spawner thread,
    // reports the worker's pid, and dies without stopping it.
    ::close(fds[0]);
    Spawner sp;
    ProcessSpec spec;
    spec.argv = {"/bin/sleep", "30"};
    spec.env = {"PATH=/usr/bin:/bin"};
    char tmpl[] = "/tmp/troupe-spawner-XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    spec.cwd = d ? d : "/tmp";
    spec.log_file = spec.cwd + "/w.log";
    SpawnResult r = sp.spawn(spec);
    pid_t pid = r.pid;
    [[maybe_unused]] auto n = ::write(fds[1], &pid, sizeof pid);
    ::_exit(0);  // no destructors: the spawner thread dies with the process
  }
  ::close(fds[1]);
  pid_t worker = -1;
  REQUIRE(::read(fds[0], &worker, sizeof worker) == static_cast<ssize_t>(sizeof worker));
  ::close(fds[0]);
  REQUIRE(worker > 0);
  int st = 0;
  REQUIRE(::waitpid(helper, &st, 0) == helper);
  // The worker was reparented; it gets SIGKILL from the kernel right away.
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (alive(worker) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  CHECK_FALSE(alive(worker));
  if (alive(worker)) ::kill(worker, SIGKILL);
}

TEST_CASE("spawner: workers outlive the thread that handled their launch", "[node][spawner]") {
  Fixture f;
  // Launch from a short-lived thread, as a NATS delivery thread would.
  std::thread t([&] { f.agent->on_message(launch("j-9", 1, 0, {"sleep", "30"}, "")); });
  t.join();
  REQUIRE(f.cap.wait_count(f.started, 1));
  std::this_thread::sleep_for(300ms);
  CHECK(f.cap.on(f.exited).empty());
  CHECK(f.agent->running().size() == 1);
  f.agent->on_message(stop("j-9", 1, SIGKILL, 0, 0));
  REQUIRE(f.cap.wait_count(f.exited, 1, 3s));
}

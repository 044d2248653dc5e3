// Unit tests of the node agent's core without NATS: real workers (fork/exec,
// environment, log file, exit classification, exec failure, Stop escalation,
// max_runtime_s), --simulate workers, duplicates, malformed messages, logs
// requests and shutdown. Publishes are captured in memory.
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "bus/subjects.hpp"
#include "node/agent.hpp"
#include "node/job_dirs.hpp"
#include "node/process.hpp"
#include "node/test_support.hpp"

using namespace troupe;
using namespace troupe::node;
using namespace std::chrono_literals;
using test::Capture;
using test::Published;
using test::TempDir;

namespace {

const std::string kNode = "test-node";

struct LaunchArgs {
  std::string job_id = "j-1";
  int attempt = 0;
  int rank = 0;
  int world_size = 1;
  std::vector<int> gpus;
  std::vector<std::string> command;
  std::vector<std::pair<std::string, std::string>> env;
  long long max_runtime_s = 0;
  int grace_s = 10;
  std::string image;
  std::string checkpoint_dir;
};

Inbound launch_msg(const LaunchArgs& a) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<flatbuffers::String>> cmd;
  for (const auto& c : a.command) cmd.push_back(fbb.CreateString(c));
  std::vector<flatbuffers::Offset<wire::KeyValue>> env;
  for (const auto& [k, v] : a.env)
    env.push_back(wire::CreateKeyValue(fbb, fbb.CreateString(k), fbb.CreateString(v)));
  auto body = wire::CreateLaunch(fbb, fbb.CreateString(a.job_id), fbb.CreateString("team"),
                                 a.attempt, a.rank, a.world_size, fbb.CreateString("host:1234"),
                                 fbb.CreateVector(a.gpus), fbb.CreateVector(cmd),
                                 fbb.CreateVector(env), a.max_runtime_s, a.grace_s,
                                 a.checkpoint_dir.empty() ? 0 : fbb.CreateString(a.checkpoint_dir),
                                 1, a.image.empty() ? 0 : fbb.CreateString(a.image));
  return Inbound{subjects::scheduler_to_agent(kNode, subjects::kLaunch), "", wire::seal(fbb, body)};
}

Inbound stop_msg(const std::string& job_id, int attempt, int rank, std::optional<int> grace) {
  flatbuffers::FlatBufferBuilder fbb;
  auto id = fbb.CreateString(job_id);
  auto reason = fbb.CreateString("test");
  wire::StopBuilder b(fbb);
  b.add_job_id(id);
  b.add_attempt(attempt);
  b.add_rank(rank);
  b.add_reason(reason);
  b.add_epoch(1);
  if (grace) {
    fbb.ForceDefaults(true);
    b.add_grace_s(*grace);
  }
  auto body = b.Finish();
  return Inbound{subjects::scheduler_to_agent(kNode, subjects::kStop), "", wire::seal(fbb, body)};
}

struct Fixture {
  TempDir tmp;
  Capture cap;
  std::unique_ptr<Agent> agent;
  std::string exited = subjects::agent_to_scheduler(kNode, subjects::kExited);
  std::string started = subjects::agent_to_scheduler(kNode, subjects::kStarted);

  explicit Fixture(bool simulate = false, int grace_s = 10, int heartbeat_ms = 60000,
                   const std::function<void(AgentConfig&)>& tweak = {}) {
    AgentConfig cfg;
    cfg.name = kNode;
    cfg.state_dir = tmp.path();
    cfg.simulate = simulate;
    cfg.grace_s = grace_s;
    cfg.heartbeat_ms = heartbeat_ms;
    cfg.base_env = {"PATH=/usr/local/bin:/usr/bin:/bin", "AGENT_VAR=from-agent"};
    if (tweak) tweak(cfg);
    agent = std::make_unique<Agent>(
        cfg, [this](const std::string& s, const void* d, size_t n) { cap(s, d, n); });
  }

  const wire::Exited* exited_at(std::vector<Published>& keep, size_t i) {
    keep = cap.on(exited);
    REQUIRE(keep.size() > i);
    const auto* e = keep[i].envelope();
    REQUIRE(e);
    const auto* x = e->body_as_Exited();
    REQUIRE(x);
    return x;
  }

  // Waits until the log of `k` contains `needle`.
  bool wait_log(const WorkerKey& k, const std::string& needle, std::chrono::milliseconds t = 10s) {
    auto deadline = std::chrono::steady_clock::now() + t;
    while (std::chrono::steady_clock::now() < deadline) {
      if (test::read_file(log_path(tmp.path(), k)).find(needle) != std::string::npos) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
};

}  // namespace

TEST_CASE("node agent: runs a command with the job environment and logs it", "[node][agent]") {
  Fixture f;
  LaunchArgs a;
  a.gpus = {1, 3};
  a.rank = 1;
  a.world_size = 2;
  a.env = {{"JOB_VAR", "from-job"}};
  a.command = {"/bin/sh", "-c",
               "echo cvd=$CUDA_VISIBLE_DEVICES; echo job=$TROUPE_JOB_ID att=$TROUPE_ATTEMPT "
               "rank=$TROUPE_RANK ws=$TROUPE_WORLD_SIZE coord=$TROUPE_COORDINATOR; "
               "echo $JOB_VAR $AGENT_VAR; echo cwd=$(pwd); echo err >&2; exit 3"};
  f.agent->on_message(launch_msg(a));
  REQUIRE(f.cap.wait_count(f.exited, 1));

  auto st = f.cap.on(f.started);
  REQUIRE(st.size() == 1);
  const auto* s = st[0].envelope()->body_as_Started();
  REQUIRE(s);
  CHECK(s->pid() > 0);
  CHECK(wire::str(s->node()) == kNode);
  CHECK(s->rank() == 1);

  std::vector<Published> keep;
  const auto* x = f.exited_at(keep, 0);
  CHECK(x->exit_code() == 3);
  CHECK(x->signal() == 0);
  CHECK(wire::str(x->reason()) == "exited with code 3");
  CHECK(wire::str(x->job_id()) == "j-1");
  CHECK(x->rank() == 1);

  std::string log = test::read_file(log_path(f.tmp.path(), WorkerKey{"j-1", 0, 1}));
  CHECK(log.find("cvd=1,3\n") != std::string::npos);
  CHECK(log.find("job=j-1 att=0 rank=1 ws=2 coord=host:1234\n") != std::string::npos);
  CHECK(log.find("from-job from-agent\n") != std::string::npos);
  CHECK(log.find("cwd=" + work_dir(f.tmp.path(), "j-1") + "\n") != std::string::npos);
  CHECK(log.find("err\n") != std::string::npos);
  // Started is always published before its Exited.
  auto all = f.cap.all();
  CHECK(all.front().subject == f.started);
  CHECK(f.agent->running().empty());
}

TEST_CASE("node agent: CUDA_VISIBLE_DEVICES is empty with no GPUs", "[node][agent]") {
  Fixture f;
  LaunchArgs a;
  a.command = {"sh", "-c", "echo \"[${CUDA_VISIBLE_DEVICES-unset}]\""};  // found via PATH
  f.agent->on_message(launch_msg(a));
  REQUIRE(f.cap.wait_count(f.exited, 1));
  std::vector<Published> keep;
  CHECK(f.exited_at(keep, 0)->exit_code() == 0);
  CHECK(test::read_file(log_path(f.tmp.path(), WorkerKey{"j-1", 0, 0})) == "[]\n");
}

TEST_CASE("node agent: an unknown command exits 127 with the error in the log", "[node][agent]") {
  Fixture f;
  LaunchArgs a;
  a.command = {"troupe-no-such-command-xyz", "arg"};
  f.agent->on_message(launch_msg(a));
  REQUIRE(f.cap.wait_count(f.exited, 1));
  CHECK(f.cap.on(f.started).size() == 1);
  std::vector<Published> keep;
  const auto* x = f.exited_at(keep, 0);
  CHECK(x->exit_code() == 127);
  CHECK(wire::str(x->reason()) == "exited with code 127");
  std::string log = test::read_file(log_path(f.tmp.path(), WorkerKey{"j-1", 0, 0}));
  CHECK(log.find("cannot execute 'troupe-no-such-command-xyz'") != std::string::npos);
  CHECK(log.find("No such file or directory") != std::string::npos);
}

TEST_CASE("node agent: an invalid launch is answered with launch failed", "[node][agent]") {
  Fixture f;
  LaunchArgs a;
  a.command = {};
  f.agent->on_message(launch_msg(a));
  REQUIRE(f.cap.wait_count(f.exited, 1));
  CHECK(f.cap.on(f.started).empty());
  std::vector<Published> keep;
  const auto* x = f.exited_at(keep, 0);
  CHECK(x->exit_code() == -1);
  CHECK(wire::str(x->reason()) == "launch failed: empty command");
  CHECK(f.agent->counters().launch_failures == 1);
}

TEST_CASE(
    "node agent: without a container runtime, a launch with an image is refused, never "
    "run on the host",
    "[node][agent][isolation]") {
  Fixture f;
  LaunchArgs a;
  a.command = {"/bin/sh", "-c", "echo ran-on-the-host"};
  a.image = "localhost/trainer:1";
  f.agent->on_message(launch_msg(a));
  REQUIRE(f.cap.wait_count(f.exited, 1));
  CHECK(f.cap.on(f.started).empty());
  std::vector<Published> keep;
  const auto* x = f.exited_at(keep, 0);
  CHECK(x->exit_code() == -1);
  CHECK_THAT(wire::str(x->reason()), Catch::StartsWith("launch failed: the job names image "
                                                       "localhost/trainer:1") &&
                                         Catch::Contains("--runtime podman"));
  CHECK(f.agent->counters().launch_failures == 1);
  CHECK(test::read_file(log_path(f.tmp.path(), WorkerKey{a.job_id, a.attempt, a.rank})).empty());
}

TEST_CASE("node agent: Stop escalates to SIGKILL after grace_s", "[node][agent]") {
  Fixture f;
  LaunchArgs a;
  a.command = {"/bin/sh", "-c", "trap '' TERM; echo ready; sleep 30; echo survived"};
  f.agent->on_message(launch_msg(a));
  REQUIRE(f.wait_log(WorkerKey{"j-1", 0, 0}, "ready"));
  auto t0 = std::chrono::steady_clock::now();
  f.agent->on_message(stop_msg("j-1", 0, -1, 1));
  REQUIRE(f.cap.wait_count(f.exited, 1));
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took >= 900ms);
  CHECK(took < 5s);
  std::vector<Published> keep;
  const auto* x = f.exited_at(keep, 0);
  CHECK(x->exit_code() == -1);
  CHECK(x->signal() == SIGKILL);
  CHECK(wire::str(x->reason()) == "stopped");
  CHECK(test::read_file(log_path(f.tmp.path(), WorkerKey{"j-1", 0, 0})).find("survived") ==
        std::string::npos);
}

TEST_CASE("node agent: Stop of a cooperative worker, by rank", "[node][agent]") {
  Fixture f(false, /*grace_s=*/30);
  for (int rank = 0; rank < 2; ++rank) {
    LaunchArgs a;
    a.rank = rank;
    a.command = {"/bin/sh", "-c", "exec sleep 30"};
    f.agent->on_message(launch_msg(a));
  }
  REQUIRE(f.cap.wait_count(f.started, 2));
  f.agent->on_message(stop_msg("j-1", 0, 1, std::nullopt));  // no grace_s: --grace-s
  REQUIRE(f.cap.wait_count(f.exited, 1, 3s));
  std::vector<Published> keep;
  const auto* x = f.exited_at(keep, 0);
  CHECK(x->rank() == 1);
  CHECK(x->signal() == SIGTERM);
  CHECK(wire::str(x->reason()) == "stopped");
  CHECK(f.agent->running().size() == 1);
  f.agent->on_message(stop_msg("j-other", 0, -1, 0));  // nothing to stop
  f.agent->on_message(stop_msg("j-1", 0, -1, 0));
  REQUIRE(f.cap.wait_count(f.exited, 2, 3s));
  CHECK(f.agent->running().empty());
}

TEST_CASE("node agent: max_runtime_s kills the worker", "[node][agent]") {
  Fixture f;
  LaunchArgs a;
  a.max_runtime_s = 1;
  a.grace_s = 0;
  a.command = {"/bin/sh", "-c", "trap '' TERM; sleep 30"};
  f.agent->on_message(launch_msg(a));
  REQUIRE(f.cap.wait_count(f.exited, 1, 5s));
  std::vector<Published> keep;
  const auto* x = f.exited_at(keep, 0);
  CHECK(x->exit_code() == -1);
  CHECK(x->signal() == SIGKILL);
  CHECK(wire::str(x->reason()) == "exceeded max_runtime_s");
}

namespace {

// Waits until `pred` holds; false at the deadline.
bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds t = 10s) {
  auto deadline = std::chrono::steady_clock::now() + t;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return pred();
}

// A worker of job `id` that runs `script` with /bin/sh.
LaunchArgs shell_job(const std::string& id, const std::string& script) {
  LaunchArgs a;
  a.job_id = id;
  a.command = {"/bin/sh", "-c", script};
  return a;
}

bool exists(const std::string& p) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::symlink_status(p, ec));
}

// Of the jobs that ended, `killed` was killed for a folder's size (SIGKILL,
// the reason starting with `reason`), and every other one ran to its end.
void check_killed_for_size(Fixture& f, const std::string& killed, const std::string& reason) {
  bool saw_killed = false, saw_other = false;
  for (const auto& p : f.cap.on(f.exited)) {
    const auto* x = p.envelope()->body_as_Exited();
    REQUIRE(x);
    INFO(wire::str(x->job_id()) << ": " << wire::str(x->reason()));
    if (wire::str(x->job_id()) == killed) {
      saw_killed = true;
      CHECK(x->signal() == SIGKILL);
      CHECK_THAT(wire::str(x->reason()), Catch::StartsWith(reason));
    } else {
      saw_other = true;  // under the limit: it ran to its end
      CHECK(x->exit_code() == 0);
    }
  }
  CHECK(saw_killed);
  CHECK(saw_other);
}

}  // namespace

TEST_CASE(
    "node agent: a job whose work dir passes the disk limit is killed disk_limit, and its "
    "next attempt starts with an empty work dir",
    "[node][agent][disk]") {
  Fixture f(false, 10, 60000, [](AgentConfig& c) {
    c.disk_max_bytes = 2 << 20;
    c.dir_check_ms = 50;
  });
  f.agent->start();
  LaunchArgs big = shell_job("j-big", "echo writing; head -c 4194304 /dev/zero > big; sleep 30");
  f.agent->on_message(launch_msg(shell_job("j-small", "head -c 100000 /dev/zero > f; sleep 1")));
  f.agent->on_message(launch_msg(big));
  REQUIRE(f.cap.wait_count(f.exited, 2, 15s));
  check_killed_for_size(f, "j-big",
                        "disk_limit: its work dir passed 2 MiB, the node's "
                        "--job-disk-max-mb (it held ");
  CHECK(f.agent->counters().disk_limit_kills == 1);
  // Its log stays (the user reads why); the next attempt's work dir is empty.
  CHECK(test::read_file(log_path(f.tmp.path(), WorkerKey{"j-big", 0, 0})) == "writing\n");
  big.attempt = 1;
  big.command = {"/bin/sh", "-c", "if test -e big; then echo full; else echo empty; fi"};
  f.agent->on_message(launch_msg(big));
  REQUIRE(f.cap.wait_count(f.exited, 3, 10s));
  CHECK(test::read_file(log_path(f.tmp.path(), WorkerKey{"j-big", 1, 0})) == "empty\n");
  // What was moved away is removed.
  CHECK(eventually([&] { return folder_names(f.tmp.path() + "/trash").empty(); }));
}

TEST_CASE("node agent: a job whose work dir holds more files than the limit is killed disk_limit",
          "[node][agent][disk]") {
  Fixture f(false, 10, 60000, [](AgentConfig& c) {
    c.disk_max_files = 100;
    c.dir_check_ms = 50;
  });
  f.agent->start();
  f.agent->on_message(launch_msg(
      shell_job("j-files", "i=0; while [ $i -lt 300 ]; do : > f$i; i=$((i+1)); done; sleep 30")));
  f.agent->on_message(launch_msg(shell_job("j-few", ": > a; : > b; sleep 1")));
  REQUIRE(f.cap.wait_count(f.exited, 2, 15s));
  check_killed_for_size(f, "j-files",
                        "disk_limit: its work dir passed 100 files, the node's "
                        "--job-disk-max-files (it held ");
}

TEST_CASE(
    "node agent: a job whose checkpoint dir passes its limit is killed disk_limit, and the dir "
    "and its work dir are kept for the next attempt",
    "[node][agent][disk]") {
  Fixture f(false, 10, 60000, [](AgentConfig& c) {
    c.checkpoint_max_bytes = 2 << 20;
    c.checkpoint_max_files = 0;  // no limit on its files: 300 below pass
    c.dir_check_ms = 50;
  });
  f.agent->start();
  const std::string root = f.tmp.path() + "/ckpt";
  LaunchArgs big = shell_job("j-big",
                             "echo state > mine; head -c 4194304 /dev/zero > "
                             "\"$TROUPE_CHECKPOINT_DIR/step-1\"; sleep 30");
  big.checkpoint_dir = root + "/j-big";
  LaunchArgs small = shell_job("j-small",
                               "i=0; while [ $i -lt 300 ]; do : > \"$TROUPE_CHECKPOINT_DIR/f$i\"; "
                               "i=$((i+1)); done; head -c 100000 /dev/zero > "
                               "\"$TROUPE_CHECKPOINT_DIR/step-1\"; sleep 1");
  small.checkpoint_dir = root + "/j-small";
  f.agent->on_message(launch_msg(small));
  f.agent->on_message(launch_msg(big));
  REQUIRE(f.cap.wait_count(f.exited, 2, 15s));
  check_killed_for_size(f, "j-big",
                        "disk_limit: its checkpoint dir passed 2 MiB, the node's "
                        "--job-checkpoint-max-mb (it held ");
  CHECK(f.agent->counters().disk_limit_kills == 1);
  // The checkpoint stays (the user's to trim), and so does the work dir.
  // The next attempt is killed again while the dir is over; once trimmed,
  // one runs and finds its work dir as the first left it.
  CHECK(exists(root + "/j-big/step-1"));
  big.attempt = 1;
  big.command = {"/bin/sh", "-c", "sleep 30"};
  f.agent->on_message(launch_msg(big));
  REQUIRE(f.cap.wait_count(f.exited, 3, 10s));
  CHECK(f.agent->counters().disk_limit_kills == 2);
  std::filesystem::remove(root + "/j-big/step-1");
  big.attempt = 2;
  big.command = {"/bin/sh", "-c", "cat mine"};
  f.agent->on_message(launch_msg(big));
  REQUIRE(f.cap.wait_count(f.exited, 4, 10s));
  CHECK(test::read_file(log_path(f.tmp.path(), WorkerKey{"j-big", 2, 0})) == "state\n");
  CHECK(f.agent->counters().disk_limit_kills == 2);
}

TEST_CASE("node agent: a folder's limit, and a quarter of its file system", "[node][disk]") {
  TempDir tmp;
  test::write_file(tmp.path() + "/a", std::string(3 << 19, 'x'));
  test::write_file(tmp.path() + "/b", "b");
  FolderLimit bytes{1 << 20, 0, "checkpoint dir", "X", "Y"};
  auto why = over_limit(tmp.path(), bytes);
  REQUIRE(why);
  CHECK_THAT(*why, Catch::StartsWith("disk_limit: its checkpoint dir passed 1 MiB, X (it held "));
  bytes.max_bytes = 100 << 20;
  CHECK_FALSE(over_limit(tmp.path(), bytes));
  FolderLimit files{0, 2, "work dir", "X", "Y"};
  CHECK(over_limit(tmp.path(), files) == "disk_limit: its work dir passed 2 files, Y (it held 3)");
  files.max_files = 3;
  CHECK_FALSE(over_limit(tmp.path(), files));
  CHECK_FALSE(over_limit(tmp.path() + "/none", FolderLimit{1, 1, "work dir", "X", "Y"}));
  const auto [quarter_bytes, quarter_files] = quarter_of_file_system(tmp.path());
  CHECK(quarter_bytes > 0);
  CHECK(quarter_files > 0);
  CHECK(quarter_of_file_system(tmp.path() + "/none") == std::pair<int64_t, int64_t>{0, 0});
}

TEST_CASE(
    "node agent: an ended job's folders are removed once kept long enough, a running "
    "job's never",
    "[node][agent][disk]") {
  // A folder an earlier agent left, last changed an hour ago.
  Fixture f(false, 10, 60000, [](AgentConfig& c) {
    c.dir_keep_ms = 1000;
    c.dir_check_ms = 50;
  });
  const std::string old_work = work_dir(f.tmp.path(), "j-old");
  std::filesystem::create_directories(old_work + "/sub");
  test::write_file(old_work + "/sub/data", "x");
  for (const auto& p : {old_work + "/sub/data", old_work + "/sub", old_work}) {
    std::error_code ec;
    std::filesystem::last_write_time(
        p, std::filesystem::file_time_type::clock::now() - std::chrono::hours(1), ec);
    REQUIRE_FALSE(ec);
  }
  f.agent->start();
  f.agent->on_message(launch_msg(shell_job("j-runs", "echo hi > f; echo up; sleep 30")));
  f.agent->on_message(launch_msg(shell_job("j-done", "echo hi > f; echo done")));
  REQUIRE(f.cap.wait_count(f.exited, 1, 10s));
  // Kept for now (it ended just now, dir_keep_ms is a second).
  CHECK(exists(work_dir(f.tmp.path(), "j-done") + "/f"));
  REQUIRE(f.wait_log(WorkerKey{"j-runs", 0, 0}, "up"));
  CHECK(eventually([&] { return !exists(old_work); }));
  CHECK(eventually([&] {
    return !exists(work_dir(f.tmp.path(), "j-done")) && !exists(log_dir(f.tmp.path(), "j-done"));
  }));
  // The running job's folders stay, well after that.
  CHECK(exists(work_dir(f.tmp.path(), "j-runs") + "/f"));
  CHECK(exists(log_path(f.tmp.path(), WorkerKey{"j-runs", 0, 0})));
  CHECK(eventually([&] { return folder_names(f.tmp.path() + "/trash").empty(); }));
  // Counted once each removal returned (after the trash looks empty).
  CHECK(eventually([&] { return f.agent->counters().folders_removed >= 3; }));
  CHECK(f.agent->counters().folder_removal_failures == 0);
}

TEST_CASE(
    "node agent: on a full disk an ended job's folders go before their keep time, a running "
    "job's stay",
    "[node][agent][disk]") {
  // "Full": anything on the file system the test's folder is on (half of
  // what is used now, or, on an empty one, the first block).
  Fixture f(false, 10, 60000, [](AgentConfig& c) {
    auto used = used_percent(c.state_dir);
    REQUIRE(used);
    c.dir_keep_ms = 86400 * 1000LL;
    c.dir_gc_percent = std::max(*used / 2, 1e-9);
    c.dir_check_ms = 50;
  });
  f.agent->start();
  f.agent->on_message(launch_msg(shell_job("j-runs", "echo hi > f; echo up; sleep 30")));
  f.agent->on_message(launch_msg(shell_job("j-done", "echo hi > f")));
  REQUIRE(f.cap.wait_count(f.exited, 1, 10s));
  REQUIRE(f.wait_log(WorkerKey{"j-runs", 0, 0}, "up"));
  CHECK(eventually([&] {
    return !exists(work_dir(f.tmp.path(), "j-done")) && !exists(log_dir(f.tmp.path(), "j-done"));
  }));
  CHECK(f.agent->counters().folders_removed_for_space >= 1);
  CHECK(exists(work_dir(f.tmp.path(), "j-runs") + "/f"));
  CHECK(exists(log_path(f.tmp.path(), WorkerKey{"j-runs", 0, 0})));
}

TEST_CASE(
    "node agent: a folder rm cannot remove stays in the trash, warned about and counted once, "
    "and goes once it can",
    "[node][agent][disk]") {
  Fixture f(false, 10, 60000, [](AgentConfig& c) {
    c.dir_keep_ms = 86400 * 1000LL;  // the guard on
    c.dir_check_ms = 20;
  });
  // A file system mounted in it: rm --one-file-system leaves it (the node
  // runs as root, as its job users need; so does this test).
  const std::string stuck = f.tmp.path() + "/trash/1-1/mnt";
  std::filesystem::create_directories(stuck);
  REQUIRE(::mount("troupe-test", stuck.c_str(), "tmpfs", 0, nullptr) == 0);
  struct Unmount {
    std::string path;
    bool done = false;
    void now() {
      if (!done) done = ::umount2(path.c_str(), MNT_DETACH) == 0;
    }
    ~Unmount() { now(); }
  } unmount{stuck};
  test::write_file(stuck + "/x", "x");
  f.agent->start();
  // Many rounds: one failure counted (and warned about), not one a round.
  CHECK(eventually([&] { return f.agent->counters().guard_checks >= 10; }));
  CHECK(f.agent->counters().folder_removal_failures == 1);
  CHECK(f.agent->counters().folders_removed == 0);
  CHECK(exists(stuck + "/x"));
  unmount.now();
  REQUIRE(unmount.done);
  CHECK(eventually([&] { return folder_names(f.tmp.path() + "/trash").empty(); }));
  CHECK(eventually([&] { return f.agent->counters().folders_removed == 1; }));
  CHECK(f.agent->counters().folder_removal_failures == 1);
}

TEST_CASE(
    "node agent: Forget removes a forgotten job's checkpoint dir, never a running job's, a "
    "symbolic link's target or a path that is not the job's",
    "[node][agent][disk]") {
  Fixture f;  // no folder limits: the guard's thread runs for Forget anyway
  f.agent->start();
  const std::string root = f.tmp.path() + "/ckpt";
  for (const auto& d : {"j-done/step-1", "j-rel", "j-run", "other"})
    std::filesystem::create_directories(root + "/" + d);
  test::write_file(root + "/j-done/step-1/model.pt", "weights");
  test::write_file(root + "/j-done/latest", "step-1");
  test::write_file(root + "/j-rel/x", "x");
  test::write_file(root + "/j-run/x", "x");
  test::write_file(root + "/other/keep", "keep");
  std::filesystem::create_directory_symlink(root + "/other", root + "/j-link");
  f.agent->on_message(launch_msg(shell_job("j-run", "echo up; sleep 30")));
  REQUIRE(f.wait_log(WorkerKey{"j-run", 0, 0}, "up"));
  auto forget = [&](const std::string& job, const std::string& dir, uint64_t epoch = 1) {
    f.agent->on_message(Inbound{subjects::scheduler_to_agent(kNode, subjects::kForget), "",
                                wire::forget(job, dir, epoch)});
  };
  // Refused at once: paths not the job's, a bad id, no epoch.
  forget("j-x", root + "/other");
  forget("j-x", "/");
  forget("j-x", root + "/../ckpt/j-x");
  forget("a.b", root + "/a.b");
  CHECK(f.agent->counters().bad_messages == 4);
  forget("j-done", root + "/j-done", 0);
  CHECK(f.agent->counters().fenced == 1);
  // Taken: one never made here (nothing to do), a running job's (left), a
  // symbolic link (left, and what it points to too), two removed (one named
  // relative to the state folder, as a Launch may).
  forget("j-never", root + "/j-never");
  forget("j-run", root + "/j-run");
  forget("j-link", root + "/j-link");
  forget("j-done", root + "/j-done");
  forget("j-rel", "ckpt/j-rel");
  CHECK(eventually([&] { return f.agent->counters().checkpoint_dirs_removed == 2; }));
  CHECK(eventually([&] { return f.agent->counters().checkpoint_dir_removal_failures == 2; }));
  CHECK_FALSE(exists(root + "/j-done"));
  CHECK_FALSE(exists(root + "/j-rel"));
  CHECK(exists(root + "/j-run/x"));
  CHECK(std::filesystem::is_symlink(root + "/j-link"));
  CHECK(exists(root + "/other/keep"));
  CHECK(f.agent->counters().bad_messages == 4);
  // Its counters are the operator's too.
  bool named_it = false;
  for (const auto& [name, n] : named(f.agent->counters()))
    if (name == "checkpoint_dirs_removed") named_it = n == 2;
  CHECK(named_it);
}

TEST_CASE("node agent: duplicate launches start nothing, a finished worker's exit is told again",
          "[node][agent]") {
  Fixture f;
  LaunchArgs a;
  a.command = {"/bin/sh", "-c", "exec sleep 30"};
  f.agent->on_message(launch_msg(a));
  REQUIRE(f.cap.wait_count(f.started, 1));
  f.agent->on_message(launch_msg(a));  // while it runs: ignored
  f.agent->on_message(stop_msg("j-1", 0, -1, 0));
  REQUIRE(f.cap.wait_count(f.exited, 1));
  // After it finished (the scheduler lost track of it): told how it ended, again.
  f.agent->on_message(launch_msg(a));
  REQUIRE(f.cap.wait_count(f.exited, 2));
  LaunchArgs retry = a;
  retry.attempt = 1;
  retry.command = {"/bin/sh", "-c", "true"};
  f.agent->on_message(launch_msg(retry));  // a new attempt is not a duplicate
  REQUIRE(f.cap.wait_count(f.exited, 3));
  CHECK(f.cap.on(f.started).size() == 2);
  std::vector<Published> k0, k1;
  const auto* first = f.exited_at(k0, 0);
  const auto* again = f.exited_at(k1, 1);
  CHECK(again->attempt() == first->attempt());
  CHECK(again->signal() == first->signal());
  CHECK(wire::str(again->reason()) == wire::str(first->reason()));
  CHECK(f.agent->counters().duplicates == 2);  // and nothing started twice (above)
}

TEST_CASE("node agent: malformed and misdirected messages are dropped and counted",
          "[node][agent]") {
  Fixture f;
  auto launch_subject = subjects::scheduler_to_agent(kNode, subjects::kLaunch);
  f.agent->on_message(Inbound{launch_subject, "", {1, 2, 3}});
  f.agent->on_message(Inbound{launch_subject, "", {}});
  std::vector<uint8_t> junk(200, 0xAB);
  f.agent->on_message(Inbound{launch_subject, "", junk});
  // A Stop on the launch subject, a Launch on the stop subject.
  auto stop = stop_msg("j-1", 0, -1, 1);
  f.agent->on_message(Inbound{launch_subject, "", stop.data});
  LaunchArgs a;
  a.command = {"true"};
  auto launch = launch_msg(a);
  f.agent->on_message(
      Inbound{subjects::scheduler_to_agent(kNode, subjects::kStop), "", launch.data});
  f.agent->on_message(Inbound{subjects::scheduler_to_agent(kNode, "bogus"), "", launch.data});
  f.agent->on_message(Inbound{subjects::scheduler_to_agent(kNode, "logs"), "", {}});  // no reply
  // Truncated copies of a valid Launch (cut well into its data: trailing
  // alignment padding may legitimately be missing from a valid buffer).
  for (size_t n = 1; n < launch.data.size() / 2; n += 3)
    f.agent->on_message(Inbound{
        launch_subject, "", std::vector<uint8_t>(launch.data.begin(), launch.data.begin() + n)});
  auto c = f.agent->counters();
  CHECK(c.bad_messages >= 7);
  CHECK(c.launches == 0);
  CHECK(f.cap.all().empty());
}

TEST_CASE("node agent: hello and start publish NodeRegister, heartbeats carry running",
          "[node][agent]") {
  Fixture f(true, 10, /*heartbeat_ms=*/50);
  f.agent->start();
  auto reg = subjects::agent_to_scheduler(kNode, subjects::kRegister);
  auto hb = subjects::agent_to_scheduler(kNode, subjects::kHeartbeat);
  REQUIRE(f.cap.wait_count(reg, 1));
  f.agent->on_message(Inbound{subjects::kSysHello, "", {}});
  f.agent->on_message(Inbound{subjects::scheduler_to_agent(kNode, subjects::kHello), "", {}});
  REQUIRE(f.cap.wait_count(reg, 3));
  auto regs = f.cap.on(reg);  // keeps the bytes alive while `r` points into them
  const auto* r = regs[0].envelope()->body_as_NodeRegister();
  REQUIRE(r);
  CHECK(wire::str(r->node()) == kNode);
  CHECK(r->simulate());

  LaunchArgs a;
  a.command = {"train"};
  a.env = {{"TROUPE_SIM_DURATION_S", "30"}};
  f.agent->on_message(launch_msg(a));
  REQUIRE(f.cap.wait([&](const std::vector<Published>& log) {
    for (const auto& p : log)
      if (p.subject == hb) {
        const auto* h = p.envelope()->body_as_Heartbeat();
        if (h != nullptr && h->running() != nullptr && h->running()->size() == 1) return true;
      }
    return false;
  }));
  auto hbs = f.cap.on(hb);
  uint64_t prev = 0;
  for (const auto& p : hbs) {
    auto seq = p.envelope()->body_as_Heartbeat()->seq();
    CHECK(seq == prev + 1);
    prev = seq;
  }
}

TEST_CASE("node agent: simulated workers run, exit and stop", "[node][agent][simulate]") {
  Fixture f(/*simulate=*/true);
  LaunchArgs a;
  a.command = {"python", "train.py"};
  a.env = {{"TROUPE_SIM_DURATION_S", "0.1"}, {"TROUPE_SIM_EXIT", "4"}};
  f.agent->on_message(launch_msg(a));
  LaunchArgs b;
  b.job_id = "j-long";
  b.command = {"sleep"};
  b.env = {{"TROUPE_SIM_DURATION_S", "60"}};
  f.agent->on_message(launch_msg(b));
  REQUIRE(f.cap.wait_count(f.exited, 1, 3s));
  std::vector<Published> keep;
  const auto* x = f.exited_at(keep, 0);
  CHECK(wire::str(x->job_id()) == "j-1");
  CHECK(x->exit_code() == 4);
  CHECK(wire::str(x->reason()) == "exited with code 4");
  for (const auto& p : f.cap.on(f.started)) CHECK(p.envelope()->body_as_Started()->pid() == 0);
  CHECK(test::read_file(log_path(f.tmp.path(), WorkerKey{"j-1", 0, 0})) ==
        "simulated run of python train.py\n");

  f.agent->on_message(stop_msg("j-long", 0, -1, 10));
  REQUIRE(f.cap.wait_count(f.exited, 2, 1s));
  x = f.exited_at(keep, 1);
  CHECK(wire::str(x->job_id()) == "j-long");
  CHECK(x->exit_code() == -1);
  CHECK(x->signal() == 15);
  CHECK(wire::str(x->reason()) == "stopped");
}

TEST_CASE("node agent: simulated workers obey max_runtime_s", "[node][agent][simulate]") {
  Fixture f(true);
  LaunchArgs a;
  a.command = {"x"};
  a.max_runtime_s = 1;
  a.env = {{"TROUPE_SIM_DURATION_S", "60"}};
  f.agent->on_message(launch_msg(a));
  REQUIRE(f.cap.wait_count(f.exited, 1, 3s));
  std::vector<Published> keep;
  const auto* x = f.exited_at(keep, 0);
  CHECK(x->exit_code() == -1);
  CHECK(x->signal() == 15);
  CHECK(wire::str(x->reason()) == "exceeded max_runtime_s");
}

TEST_CASE("node agent: many simulated workers share one timer thread", "[node][agent][simulate]") {
  Fixture f(true);
  const int n = 2000;
  for (int i = 0; i < n; ++i) {
    LaunchArgs a;
    a.job_id = "j-" + std::to_string(i % 100);
    a.rank = i / 100;
    a.command = {"x"};
    a.env = {{"TROUPE_SIM_DURATION_S", "0.2"}};
    f.agent->on_message(launch_msg(a));
  }
  REQUIRE(f.cap.wait_count(f.exited, n, 20s));
  CHECK(f.agent->counters().launches == n);
  CHECK(f.agent->running().empty());
}

TEST_CASE("node agent: logs requests are answered on the reply subject", "[node][agent]") {
  Fixture f(true);
  LaunchArgs a;
  a.command = {"hello"};
  a.env = {{"TROUPE_SIM_DURATION_S", "0"}};
  f.agent->on_message(launch_msg(a));
  REQUIRE(f.cap.wait_count(f.exited, 1));
  auto logs = subjects::scheduler_to_agent(kNode, "logs");
  std::string req = R"({"job_id":"j-1","attempt":0,"rank":0,"offset":0,"max_bytes":100})";
  f.agent->on_message(Inbound{logs, "_INBOX.x", std::vector<uint8_t>(req.begin(), req.end())});
  std::string unknown = R"({"job_id":"j-404"})";
  f.agent->on_message(
      Inbound{logs, "_INBOX.y", std::vector<uint8_t>(unknown.begin(), unknown.end())});
  auto r = f.cap.on("_INBOX.x");
  REQUIRE(r.size() == 1);
  auto j = nlohmann::json::parse(r[0].text());
  CHECK(j["data"] == "simulated run of hello\n");
  CHECK(j["eof"] == true);
  auto e = f.cap.on("_INBOX.y");
  REQUIRE(e.size() == 1);
  CHECK(nlohmann::json::parse(e[0].text())["error"].get<std::string>().rfind("no log for job", 0) ==
        0);
}

TEST_CASE("node agent: shutdown stops every worker and refuses new launches", "[node][agent]") {
  Fixture f(false, /*grace_s=*/1);
  LaunchArgs a;
  a.command = {"/bin/sh", "-c", "trap '' TERM; echo ready; sleep 30"};
  f.agent->on_message(launch_msg(a));
  LaunchArgs b;
  b.job_id = "j-2";
  b.command = {"sleep", "30"};
  f.agent->on_message(launch_msg(b));
  REQUIRE(f.wait_log(WorkerKey{"j-1", 0, 0}, "ready"));
  auto t0 = std::chrono::steady_clock::now();
  f.agent->shutdown();
  CHECK(std::chrono::steady_clock::now() - t0 < 4s);
  auto ex = f.cap.on(f.exited);
  REQUIRE(ex.size() == 2);
  // The agent's own end, not a Stop: the scheduler counts it as an
  // infrastructure failure (its classifier looks for "shutting down").
  for (const auto& p : ex)
    CHECK(wire::str(p.envelope()->body_as_Exited()->reason()) ==
          "stopped: the node agent is shutting down");
  f.agent->on_message(launch_msg(LaunchArgs{"j-3", 0, 0, 1, {}, {"true"}, {}, 0, 10, {}, {}}));
  auto after = f.cap.on(f.exited);
  REQUIRE(after.size() == 3);
  CHECK(wire::str(after[2].envelope()->body_as_Exited()->reason()) ==
        "launch failed: the node agent is shutting down");
}

TEST_CASE("node process: spawn reports exec failure and signals the group", "[node][process]") {
  TempDir tmp;
  ProcessSpec spec;
  spec.argv = {"/nonexistent/binary"};
  spec.cwd = tmp.path() + "/cwd";
  spec.log_file = tmp.path() + "/logs/x.log";
  auto r = spawn_process(spec);
  REQUIRE(r.pid > 0);
  CHECK(r.exec_error.find("cannot execute") != std::string::npos);
  int st = 0;
  REQUIRE(waitpid(r.pid, &st, 0) == r.pid);
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 127);

  // The child leads its own process group: signal_group reaches grandchildren.
  spec.argv = {"/bin/sh", "-c", "sleep 30 & sleep 30; wait"};
  spec.env = {"PATH=/usr/bin:/bin"};
  r = spawn_process(spec);
  REQUIRE(r.pid > 0);
  CHECK(r.exec_error.empty());
  CHECK(getpgid(r.pid) == r.pid);
  CHECK(signal_group(r.pid, SIGKILL));
  REQUIRE(waitpid(r.pid, &st, 0) == r.pid);
  CHECK(WIFSIGNALED(st));
  CHECK(exec_candidates("ls", {"PATH=/a::/b"}) ==
        std::vector<std::string>{"/a/ls", "./ls", "/b/ls"});
  CHECK(exec_candidates("./x", {}) == std::vector<std::string>{"./x"});
}

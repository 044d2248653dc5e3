// Acceptance tests of job isolation (docs/security.md, "The isolation
// boundary of a job") against real processes, run as root as CI runs: jobs
// as their team's user, a cgroup per job (memory, CPU, pids, devices),
// nothing outliving its job, an agent its jobs cannot kill, bubblewrap and
// podman. Each job reports what it saw in its log; the test reads the log
// and the host (/proc, the cgroup files) and decides.
#include "node/isolation.hpp"

#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "messages/names.hpp"
#include "node/cgroup.hpp"
#include "node/job_user.hpp"

using namespace troupe;
using namespace troupe::it;

namespace {

// The cgroup folder of attempt 1, rank 0 of `job` on node `node` under
// `controller` (node_cgroup_path: troupe/<node>.<hash of its state dir>), or
// "" when there is none.
std::string job_group(const std::string& controller, const std::string& node,
                      const std::string& job) {
  std::error_code ec;
  std::filesystem::path parent = "/sys/fs/cgroup/" + controller + "/troupe";
  for (const auto& e : std::filesystem::directory_iterator(parent, ec)) {
    auto name = e.path().filename().string();
    if (name.rfind(node + ".", 0) != 0) continue;
    auto group = e.path() / (job + "-a1-r0");
    if (std::filesystem::is_directory(group, ec)) return group.string();
  }
  return {};
}

// "KEY=value" lines of a log, first wins.
std::optional<std::string> log_value(const std::string& log, const std::string& key) {
  std::istringstream in(log);
  for (std::string l; std::getline(in, l);)
    if (l.rfind(key + "=", 0) == 0) return l.substr(key.size() + 1);
  return std::nullopt;
}

// Waits (bounded) until the job's log holds a KEY= line; its value.
std::optional<std::string> wait_log_value(Cluster& c, const std::string& team,
                                          const std::string& id, const std::string& key,
                                          Clock::duration timeout = 30s) {
  for (auto deadline = Clock::now() + timeout; Clock::now() < deadline;) {
    LogRead l = c.logs(team, id);
    if (l.ok)
      if (auto v = log_value(l.data, key)) return v;
    std::this_thread::sleep_for(100ms);
  }
  return std::nullopt;
}

std::string log_of(Cluster& c, const std::string& team, const std::string& id) {
  LogRead l = c.logs(team, id);
  return l.ok ? l.data : "(no log: " + l.error + ")";
}

// The uid the agent gives team `team`'s jobs (as the node made it).
uid_t uid_of_team(const std::string& team) {
  struct passwd* pw = ::getpwnam(node::team_user_name(team).c_str());
  return pw == nullptr ? static_cast<uid_t>(-1) : pw->pw_uid;
}

// The cause of the job's last attempt, from its status.
std::string last_cause(Cluster& c, const std::string& team, const std::string& id) {
  Json st = c.status(team, id);
  if (!st.contains("attempts") || !st["attempts"].is_array() || st["attempts"].empty()) return {};
  return st["attempts"].back().value("cause", "");
}

bool process_gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  if (!std::getline(stat, s)) return true;
  auto close = s.rfind(')');
  return close != std::string::npos && close + 2 < s.size() && s[close + 2] == 'Z';
}

// Stand-in GPU device nodes (NVIDIA's major 195) in `dir`: nvidia0..n-1.
// Opening one fails with ENXIO (no driver) where the job may, and EPERM
// where its cgroup denies it.
void make_standin_gpus(const std::string& dir, int n) {
  ::mkdir(dir.c_str(), 0755);
  for (int i = 0; i < n; ++i) {
    std::string p = dir + "/nvidia" + std::to_string(i);
    ::unlink(p.c_str());
    REQUIRE(::mknod(p.c_str(), S_IFCHR | 0666, makedev(195, i)) == 0);
    ::chmod(p.c_str(), 0666);
  }
}

}  // namespace

TEST_CASE(
    "isolation: a job runs as its team's user, cannot read or signal another team's job, "
    "and holds none of the agent's environment",
    "[integration][isolation]") {
  Cluster c(ClusterOptions{}.node("n1"));
  REQUIRE(c.wait_nodes_alive(1, 20s));

  // vision: writes a secret into its checkpoint folder, says where, waits.
  auto a =
      c.submit_ok("vision", job_spec("vision", {"sh", "-c",
                                                "echo weights > $TROUPE_CHECKPOINT_DIR/model.bin; "
                                                "echo CKPT=$TROUPE_CHECKPOINT_DIR; echo PID=$$; "
                                                "echo UID=$(id -u); exec sleep 60"}));
  auto ckpt = wait_log_value(c, "vision", a, "CKPT");
  auto pid_a = wait_log_value(c, "vision", a, "PID");
  auto uid_a = wait_log_value(c, "vision", a, "UID");
  INFO("vision's log:\n" << log_of(c, "vision", a));
  REQUIRE(ckpt);
  REQUIRE(pid_a);
  REQUIRE(uid_a);
  CHECK(*uid_a == std::to_string(uid_of_team("vision")));
  CHECK(*uid_a != "0");
  // Its log folder: <state>/logs/<job>.
  std::string log_dir = c.file("node-n1-state/logs/" + a);

  // nlp: tries to read vision's checkpoint and log, and to signal its job.
  auto b = c.submit_ok(
      "nlp",
      job_spec("nlp", {"sh", "-c",
                       "echo UID=$(id -u); "
                       "if cat " +
                           *ckpt +
                           "/model.bin; then echo CKPT_READ=yes; else echo CKPT_READ=no; fi; "
                           "if ls " +
                           log_dir +
                           "; then echo LOG_READ=yes; else echo LOG_READ=no; fi; "
                           "if kill -TERM " +
                           *pid_a +
                           "; then echo SIGNALED=yes; else echo SIGNALED=no; fi; "
                           "if echo poison > " +
                           *ckpt +
                           "/model.bin; then echo CKPT_WRITTEN=yes; else echo CKPT_WRITTEN=no; fi; "
                           "env | sed 's/^/ENV /'"}));
  auto done_b = c.wait_terminal(b, 30s);
  REQUIRE(done_b);
  std::string log_b = log_of(c, "nlp", b);
  INFO("nlp's log:\n" << log_b);
  CHECK(log_value(log_b, "UID") == std::to_string(uid_of_team("nlp")));
  CHECK(log_value(log_b, "UID") != std::optional<std::string>("0"));
  CHECK(log_value(log_b, "CKPT_READ") == std::optional<std::string>("no"));
  CHECK(log_value(log_b, "LOG_READ") == std::optional<std::string>("no"));
  CHECK(log_value(log_b, "SIGNALED") == std::optional<std::string>("no"));
  CHECK(log_value(log_b, "CKPT_WRITTEN") == std::optional<std::string>("no"));

  // Its environment: Troupe's variables and the shell's own, nothing of the
  // agent's (the harness starts agents with its whole environment).
  std::set<std::string> allowed = {"PATH", "HOME",  "USER", "LOGNAME", "CUDA_VISIBLE_DEVICES",
                                   "PWD",  "SHLVL", "_",    "OLDPWD"};
  std::istringstream in(log_b);
  int vars = 0;
  for (std::string l; std::getline(in, l);) {
    if (l.rfind("ENV ", 0) != 0) continue;
    ++vars;
    std::string key = l.substr(4, l.find('=') - 4);
    INFO("variable " << key);
    CHECK((allowed.count(key) == 1 || key.rfind("TROUPE_", 0) == 0));
    if (key == "PATH") CHECK(l.find(bin_dir()) == std::string::npos);
  }
  CHECK(vars >= 5);

  // vision's job still runs, its checkpoint untouched.
  CHECK(c.status("vision", a).value("state", "") == names::kRunning);
  std::ifstream model(*ckpt + "/model.bin");
  std::string content;
  std::getline(model, content);
  CHECK(content == "weights");
  c.cancel("vision", a);
  REQUIRE(c.wait_terminal(a, 30s));
}

TEST_CASE("isolation: a job over memory_mb ends failed/oom_killed with the limit in the text",
          "[integration][isolation]") {
  Cluster c(ClusterOptions{}.node("n1"));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  Json spec = job_spec("t1", {"sh", "-c", "exec dd if=/dev/zero of=/dev/null bs=200M count=1"});
  spec["resources"]["memory_mb"] = 64;
  auto id = c.submit_ok("t1", spec);
  auto done = c.wait_terminal(id, 60s);
  INFO("events:\n" << c.events().describe(id) << "\nlog:\n" << log_of(c, "t1", id));
  REQUIRE(done);
  CHECK(done->state == names::kFailed);
  CHECK(last_cause(c, "t1", id) == "oom_killed");
  CHECK_THAT(done->json.value("reason", ""), Catch::Contains("64 MiB"));
  CHECK(c.status("t1", id).value("attempt", 0) == 1);  // a user failure: no free retry
}

TEST_CASE("isolation: a CPU hog with cpus 1 stays within one core (measured from /proc)",
          "[integration][isolation]") {
  Cluster c(ClusterOptions{}.node("n1"));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  // Two busy loops for 3 s of wall time; then their CPU time from /proc
  // (utime + stime, in clock ticks). Unlimited, two cores give up to 6 s.
  Json spec = job_spec(
      "t1", {"sh", "-c",
             "while :; do :; done & p1=$!; while :; do :; done & p2=$!; sleep 3; "
             "t=0; for p in $p1 $p2; do set -- $(cut -d' ' -f14,15 /proc/$p/stat); "
             "t=$((t + $1 + $2)); done; kill $p1 $p2; echo TICKS=$t; echo HZ=$(getconf CLK_TCK)"});
  spec["resources"]["cpus"] = 1;
  auto id = c.submit_ok("t1", spec);
  auto done = c.wait_terminal(id, 60s);
  std::string log = log_of(c, "t1", id);
  INFO("log:\n" << log);
  REQUIRE(done);
  auto ticks = log_value(log, "TICKS");
  auto hz = log_value(log, "HZ");
  REQUIRE(ticks);
  REQUIRE(hz);
  double cpu_s = std::stod(*ticks) / std::stod(*hz);
  INFO("CPU seconds in 3 s of wall time: " << cpu_s);
  CHECK(cpu_s > 0.3);
  CHECK(cpu_s <= 3.0 * 1.15);  // one core's quota, with the sampling's slack
}

TEST_CASE(
    "isolation: a job's disk bandwidth stays within the node's --job-io-max-mbps (timed by "
    "the job), and other jobs' is not charged",
    "[integration][isolation]") {
  Cluster c(ClusterOptions{}.node_args("n1", 4, false, "a100", {"--job-io-max-mbps", "2"}));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  // 4 MiB written and read again with direct I/O (v1 throttles no buffered
  // writeback), each timed by the job: at 2 MiB/s about 2 s each way, where
  // this VM's disk alone takes well under 0.5 s.
  const std::string io =
      "echo START=1; s=$(date +%s%N); dd if=/dev/zero of=f bs=1M count=4 oflag=direct "
      "2>/dev/null; w=$(date +%s%N); dd if=f of=/dev/null bs=1M iflag=direct 2>/dev/null; "
      "r=$(date +%s%N); echo WRITE_MS=$(((w-s)/1000000)); echo READ_MS=$(((r-w)/1000000))";
  auto id = c.submit_ok("t1", job_spec("t1", {"sh", "-c", io}));
  REQUIRE(wait_log_value(c, "t1", id, "START"));
  // Its group says so, on the state folder's disk.
  std::string why;
  auto disk = node::disk_of(c.file("node-n1-state"), &why);
  INFO(why);
  REQUIRE(disk);
  const std::string dev = std::to_string(disk->major) + ":" + std::to_string(disk->minor);
  const std::string group = job_group("blkio", "n1", id);
  REQUIRE_FALSE(group.empty());
  CHECK(read_file(group + "/blkio.throttle.write_bps_device") == dev + " 2097152\n");
  CHECK(read_file(group + "/blkio.throttle.read_bps_device") == dev + " 2097152\n");
  auto done = c.wait_terminal(id, 60s);
  std::string log = log_of(c, "t1", id);
  INFO("log:\n" << log);
  REQUIRE(done);
  CHECK(done->state == names::kSucceeded);
  auto write_ms = log_value(log, "WRITE_MS"), read_ms = log_value(log, "READ_MS");
  REQUIRE(write_ms);
  REQUIRE(read_ms);
  // 4 MiB at 2 MiB/s: 2 s, less a first slice the throttle lets through.
  CHECK(std::stoll(*write_ms) >= 1500);
  CHECK(std::stoll(*read_ms) >= 1500);
  CHECK(std::stoll(*write_ms) < 20000);
  // Its group is gone with it.
  struct stat st {};
  CHECK(::stat(group.c_str(), &st) != 0);
}

TEST_CASE("isolation: a fork bomb stops at the pids limit and the agent keeps serving",
          "[integration][isolation]") {
  Cluster c(ClusterOptions{}.node_args("n1", 4, false, "a100", {"--job-pids-max", "64"}));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  Json spec = job_spec("t1", {"sh", "-c", "echo START=1; b() { b | b & }; b; exec sleep 30"});
  spec["max_runtime_s"] = 4;
  auto bomb = c.submit_ok("t1", spec);
  REQUIRE(wait_log_value(c, "t1", bomb, "START"));
  // While it runs, its group never holds more than the limit.
  std::string group = job_group("pids", "n1", bomb);
  int64_t peak = 0;
  for (int i = 0; i < 20; ++i) {
    std::ifstream f(group + "/pids.current");
    int64_t n = 0;
    if (f >> n) peak = std::max(peak, n);
    std::this_thread::sleep_for(50ms);
  }
  INFO("peak pids.current " << peak);
  CHECK(peak > 0);
  CHECK(peak <= 64);
  // The agent serves another job meanwhile.
  auto ok = c.submit_ok("t1", job_spec("t1", {"sh", "-c", "echo fine"}));
  auto done_ok = c.wait_terminal(ok, 30s);
  REQUIRE(done_ok);
  CHECK(done_ok->state == names::kSucceeded);
  auto done = c.wait_terminal(bomb, 60s);
  REQUIRE(done);
  CHECK(done->state == names::kFailed);
  CHECK(c.node(0).running());
  // Nothing of the bomb is left.
  struct stat st {};
  CHECK(::stat(group.c_str(), &st) != 0);
}

TEST_CASE("isolation: a job on GPU 1 cannot open GPU 0's device node", "[integration][isolation]") {
  TmpDir devices("troupe-dev");
  std::string dev = devices.path();
  make_standin_gpus(dev, 2);
  Cluster c(
      ClusterOptions{}.node_args("n1", 2, false, "a100", {"--gpu-device", dev + "/nvidia%d"}));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  // The first job takes GPU 0; the second gets GPU 1.
  auto first = c.submit_ok(
      "t1", job_spec("t1", {"sh", "-c", "echo CVD=$CUDA_VISIBLE_DEVICES; exec sleep 60"}));
  auto cvd0 = wait_log_value(c, "t1", first, "CVD");
  REQUIRE(cvd0);
  auto second = c.submit_ok("t1", job_spec("t1", {"sh", "-c",
                                                  "echo CVD=$CUDA_VISIBLE_DEVICES; "
                                                  "cat " +
                                                      dev +
                                                      "/nvidia0 2>&1 | sed 's/^/OPEN0 /'; "
                                                      "cat " +
                                                      dev + "/nvidia1 2>&1 | sed 's/^/OPEN1 /'"}));
  auto done = c.wait_terminal(second, 30s);
  REQUIRE(done);
  std::string log = log_of(c, "t1", second);
  INFO("first job on GPU " << *cvd0 << "; second's log:\n" << log);
  REQUIRE(*cvd0 == "0");
  CHECK(log_value(log, "CVD") == std::optional<std::string>("1"));
  // Its own GPU: allowed (no driver here: "No such device or address").
  CHECK_THAT(log, Catch::Contains("OPEN1") &&
                      !Catch::Contains("OPEN1 cat: " + dev + "/nvidia1: Operation not permitted"));
  // The other GPU: the cgroup refuses it.
  CHECK_THAT(log, Catch::Contains("OPEN0 cat: " + dev + "/nvidia0: Operation not permitted"));
  c.cancel("t1", first);
}

TEST_CASE(
    "isolation: setsid sleep 1000 & is gone when its job ends, kill -9 $PPID leaves the "
    "agent running and fails the job without a free retry",
    "[integration][isolation]") {
  Cluster c(ClusterOptions{}.node("n1"));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  std::string pid_file = c.file("escaped.pid");
  auto id = c.submit_ok("t1", job_spec("t1", {"sh", "-c",
                                              "setsid sh -c 'echo $$ > " + pid_file +
                                                  "; exec sleep 1000' & "
                                                  "while [ ! -s " +
                                                  pid_file + " ]; do sleep 0.05; done; exit 0"}));
  auto done = c.wait_terminal(id, 30s);
  REQUIRE(done);
  CHECK(done->state == names::kSucceeded);
  pid_t escaped = static_cast<pid_t>(std::atol(read_file(pid_file).c_str()));
  REQUIRE(escaped > 0);
  bool gone = false;
  for (auto deadline = Clock::now() + 5s; Clock::now() < deadline && !gone;) {
    gone = process_gone(escaped);
    if (!gone) std::this_thread::sleep_for(20ms);
  }
  CHECK(gone);

  auto killer = c.submit_ok("t1", job_spec("t1", {"sh", "-c", "kill -9 $PPID"}));
  auto kdone = c.wait_terminal(killer, 30s);
  INFO("events:\n" << c.events().describe(killer));
  REQUIRE(kdone);
  CHECK(kdone->state == names::kFailed);
  CHECK(c.node(0).running());
  Json st = c.status("t1", killer);
  INFO("status: " << st.dump());
  CHECK(st.value("attempt", 0) == 1);
  CHECK(last_cause(c, "t1", killer) == "exit_code");
  // And the agent still runs jobs.
  auto after = c.submit_ok("t1", job_spec("t1", {"true"}));
  auto adone = c.wait_terminal(after, 30s);
  REQUIRE(adone);
  CHECK(adone->state == names::kSucceeded);
}

TEST_CASE(
    "isolation: --sandbox bwrap gives a job its own PID namespace, a private /tmp, a "
    "read-only /usr and its GPUs only",
    "[integration][isolation]") {
  TmpDir devices("troupe-dev");
  std::string dev = devices.path();
  make_standin_gpus(dev, 2);
  Cluster c(ClusterOptions{}.node_args("n1", 2, false, "a100",
                                       {"--sandbox", "bwrap", "--gpu-device", dev + "/nvidia%d"}));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  std::string host_mark = c.file("host-tmp-mark");
  auto id = c.submit_ok(
      "t1",
      job_spec("t1",
               {"sh", "-c",
                "echo UID=$(id -u); "
                "echo PROCS=$(ls /proc | grep -c '^[0-9]'); "
                "if touch /usr/mark 2>/dev/null; then echo USR_RO=no; else echo USR_RO=yes; fi; "
                // Entries of /tmp other than the mount points of its own
                // folders (the test's are under /tmp).
                "n=0; for e in $(ls -A /tmp); do case \"$PWD:$TROUPE_CHECKPOINT_DIR\" in "
                "/tmp/$e/*|*:/tmp/$e/*) ;; *) n=$((n+1)) ;; esac; done; echo TMP=$n; "
                "touch /tmp/mine && echo TMP_RW=yes; "
                "if [ -e " +
                    host_mark +
                    " ]; then echo HOST_TMP=yes; else echo HOST_TMP=no; fi; "
                    "echo DEVS=$(ls /dev | grep nvidia | tr '\\n' ,); "
                    "echo CVD=$CUDA_VISIBLE_DEVICES; exit 4"}));
  auto done = c.wait_terminal(id, 30s);
  REQUIRE(done);
  std::string log = log_of(c, "t1", id);
  INFO("log:\n" << log);
  CHECK(done->state == names::kFailed);
  CHECK(done->json.value("exit_code", -1) == 4);
  CHECK(log_value(log, "UID") == std::to_string(uid_of_team("t1")));
  auto procs = log_value(log, "PROCS");
  REQUIRE(procs);
  CHECK(std::stoi(*procs) <= 6);  // bwrap, the shell, its pipeline: not the host's processes
  CHECK(log_value(log, "USR_RO") == std::optional<std::string>("yes"));
  CHECK(log_value(log, "TMP") == std::optional<std::string>("0"));
  CHECK(log_value(log, "TMP_RW") == std::optional<std::string>("yes"));
  CHECK(log_value(log, "HOST_TMP") == std::optional<std::string>("no"));
  CHECK(log_value(log, "DEVS") == std::optional<std::string>("nvidia0,"));
}

namespace {

// A local image built from busybox-static (no registry): the tag, once built.
std::string busybox_image(FailureDump* dump) {
  const std::string tag = "localhost/troupe-busybox:it";
  TmpDir work("troupe-img");
  std::string script = "set -e; cd " + work.path() +
                       "; mkdir -p rootfs/bin; cp /bin/busybox rootfs/bin/; "
                       "chroot rootfs /bin/busybox --install -s /bin; tar -C rootfs -cf img.tar .; "
                       "podman import --change 'CMD [\"/bin/sh\"]' img.tar " +
                       tag;
  RunResult r = run_program({"/bin/sh", "-c", script}, work.path(), "podman-import", 120s, dump);
  INFO("podman import: rc " << r.exit_code << "\n" << r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return tag;
}

}  // namespace

TEST_CASE(
    "isolation: a job with an image waits while no node runs a container runtime, then "
    "runs in it under podman with its GPUs only",
    "[integration][isolation]") {
  TmpDir devices("troupe-dev");
  std::string dev = devices.path();
  make_standin_gpus(dev, 2);
  Cluster c(
      ClusterOptions{}.node_args("plain", 2, false, "a100", {"--gpu-device", dev + "/nvidia%d"}));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  std::string image = busybox_image(&c.dump());

  Json spec =
      job_spec("t1", {"sh", "-c",
                      "echo UID=$(id -u); echo DEVS=$(ls /dev | grep nvidia | tr '\\n' ,); "
                      "if [ -e /bin/bash ]; then echo HOST=yes; else echo HOST=no; fi; "
                      "echo FOO=$FOO; echo PWD=$(pwd); echo data > $TROUPE_CHECKPOINT_DIR/out; "
                      "echo CKPT=$TROUPE_CHECKPOINT_DIR; exit 3"});
  spec["image"] = image;
  spec["env"] = {{"FOO", "bar"}};
  auto id = c.submit_ok("t1", spec);
  // Never placed on the node without a runtime: why says so.
  std::string why;
  for (auto deadline = Clock::now() + 20s; Clock::now() < deadline;) {
    why = c.why("t1", id).dump();
    if (why.find("container runtime") != std::string::npos) break;
    std::this_thread::sleep_for(100ms);
  }
  INFO("why: " << why);
  CHECK_THAT(why, Catch::Contains("container runtime"));
  CHECK(c.status("t1", id).value("state", "") == names::kQueued);

  c.add_node(NodeOptions{
      "boxed", 2, "a100", false, {"--runtime", "podman", "--gpu-device", dev + "/nvidia%d"}});
  auto done = c.wait_terminal(id, 60s);
  REQUIRE(done);
  std::string log = log_of(c, "t1", id);
  INFO("events:\n" << c.events().describe(id) << "\nlog:\n" << log);
  CHECK(done->state == names::kFailed);
  CHECK(done->json.value("exit_code", -1) == 3);
  CHECK(log_value(log, "UID") == std::to_string(uid_of_team("t1")));
  CHECK(log_value(log, "DEVS") == std::optional<std::string>("nvidia0,"));
  CHECK(log_value(log, "HOST") == std::optional<std::string>("no"));
  CHECK(log_value(log, "FOO") == std::optional<std::string>("bar"));
  CHECK(log_value(log, "PWD") == c.file("node-boxed-state/jobs/" + id));
  auto ckpt = log_value(log, "CKPT");
  REQUIRE(ckpt);
  CHECK(read_file(*ckpt + "/out") == "data\n");
}

TEST_CASE(
    "isolation: a canceled job in a container gets SIGTERM inside it, and neither its "
    "processes nor its container outlive it",
    "[integration][isolation]") {
  Cluster c(ClusterOptions{}.node_args("boxed", 2, false, "a100", {"--runtime", "podman"}));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  std::string image = busybox_image(&c.dump());
  Json spec = job_spec(
      "t1",
      {"sh", "-c", "trap 'echo TERM=1; exit 0' TERM; echo UP=1; sleep 1000 & wait; sleep 1000"});
  spec["image"] = image;
  auto id = c.submit_ok("t1", spec);
  REQUIRE(wait_log_value(c, "t1", id, "UP", 60s));
  c.cancel("t1", id);
  auto done = c.wait_terminal(id, 60s);
  REQUIRE(done);
  std::string log = log_of(c, "t1", id);
  INFO("log:\n" << log);
  CHECK(done->state == names::kCanceled);
  CHECK(log_value(log, "TERM") == std::optional<std::string>("1"));
  // Its cgroup is gone (every process in it ended), and so is the container.
  CHECK(job_group("freezer", "boxed", id).empty());
  std::string name = node::container_name("boxed", node::WorkerKey{id, 1, 0});
  bool gone = false;
  for (auto deadline = Clock::now() + 20s; Clock::now() < deadline && !gone;) {
    RunResult ps = run_program({"/usr/bin/podman", "ps", "--all", "--format", "{{.Names}}"},
                               c.dir(), "podman-ps", 30s, &c.dump());
    gone = ps.exit_code == 0 && ps.out.find(name) == std::string::npos;
    if (!gone) std::this_thread::sleep_for(200ms);
  }
  CHECK(gone);
}

TEST_CASE("isolation: run_as in the cluster config maps a team to an existing uid",
          "[integration][isolation]") {
  Cluster c(ClusterOptions{}.node("n1").with_config(
      "pools:\n  - {name: a100, gpu_type: a100}\n"
      "teams:\n  - {name: mapped, run_as: 4242}\n  - {name: plain}\n"));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  auto a = c.submit_ok("mapped", job_spec("mapped", {"sh", "-c", "echo UID=$(id -u)"}));
  auto b = c.submit_ok("plain", job_spec("plain", {"sh", "-c", "echo UID=$(id -u)"}));
  REQUIRE(c.wait_terminal(a, 30s));
  REQUIRE(c.wait_terminal(b, 30s));
  CHECK(log_value(log_of(c, "mapped", a), "UID") == std::optional<std::string>("4242"));
  CHECK(log_value(log_of(c, "plain", b), "UID") == std::to_string(uid_of_team("plain")));
}

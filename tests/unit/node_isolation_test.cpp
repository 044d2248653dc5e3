// Unit tests of the pure side of job isolation (node/isolation.hpp,
// node/job_user.hpp, node/cgroup.hpp's device rules) and of the isolation
// options of troupe-node. The system side (users, cgroups, bwrap, podman) is
// tested with real agents in tests/integration/isolation_test.cpp.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "node/cgroup.hpp"
#include "node/isolation.hpp"
#include "node/job_user.hpp"
#include "node/options.hpp"
#include "node/test_support.hpp"

using namespace troupe::node;

namespace {

ParseResult parse(std::vector<const char*> args) {
  args.insert(args.begin(), "troupe-node");
  auto none = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  return parse_options(static_cast<int>(args.size()), args.data(), none, "box", "/w");
}

LaunchInfo launch() {
  LaunchInfo l;
  l.key = {"j-7", 2, 1};
  l.team = "vision";
  l.gpus = {1, 3};
  l.command = {"python", "train.py", "--lr", "0.1"};
  l.image = "localhost/trainer:1";
  return l;
}

size_t index_of(const std::vector<std::string>& v, const std::string& s) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] == s) return i;
  return v.size();
}

bool exists_none(const std::string&) {
  return false;
}
bool exists_all(const std::string&) {
  return true;
}

}  // namespace

TEST_CASE("team users: the same name and uid for the same team, in the reserved range",
          "[node][isolation]") {
  CHECK(team_user_name("vision") == "troupe-vision");
  CHECK(team_uid("vision") == team_uid("vision"));
  CHECK(team_uid("vision") != team_uid("nlp"));
  CHECK(team_uid("vision") >= kTeamUidBase);
  CHECK(team_uid("vision") < kTeamUidBase + kTeamUidSpan);
  // Names useradd would refuse (upper case, too long) get a stable hashed name.
  CHECK(team_user_name("Vision") != team_user_name("vision"));
  CHECK(team_user_name("Vision").rfind("troupe-t", 0) == 0);
  CHECK(team_user_name("Vision").size() <= 32);
  CHECK(team_user_name(std::string(40, 'a')).size() <= 32);
}

TEST_CASE("run_as: root and the agent's own uid are refused", "[node][isolation]") {
  JobUsers users;
  users.set_agent_uid(1234);
  std::string err;
  CHECK_FALSE(users.resolve("vision", 0, &err));
  CHECK_THAT(err, Catch::Contains("root"));
  CHECK_FALSE(users.resolve("vision", 1234, &err));
  CHECK_THAT(err, Catch::Contains("agent"));
  auto u = users.resolve("vision", 4242424, &err);  // no passwd entry: its own group id
  REQUIRE(u);
  CHECK(u->uid == 4242424u);
  CHECK(u->gid == 4242424u);
}

TEST_CASE("a job's base environment is Troupe's, never the agent's", "[node][isolation]") {
  IsolationOptions o;
  auto env = job_base_env(o, "troupe-vision", "/state/jobs/j-1");
  CHECK(env == std::vector<std::string>{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/state/jobs/j-1",
                                        "USER=troupe-vision", "LOGNAME=troupe-vision"});
  o.job_path = "/opt/conda/bin:/usr/bin";
  CHECK(job_base_env(o, "", "/w").front() == "PATH=/opt/conda/bin:/usr/bin");
  CHECK(job_base_env(o, "", "/w").size() == 2);
}

TEST_CASE("a job's devices: its GPUs at /dev/nvidiaN, the control devices that exist",
          "[node][isolation]") {
  IsolationOptions o;
  o.gpu_device = "/stand/in/gpu%d";
  CHECK(gpu_device_path(o.gpu_device, 12) == "/stand/in/gpu12");
  auto all = job_devices(o, {1, 3}, &exists_all);
  REQUIRE(all.size() == 2 + o.control_devices.size());
  CHECK(all[0].host == "/stand/in/gpu1");
  CHECK(all[0].inside == "/dev/nvidia1");
  CHECK(all[1].inside == "/dev/nvidia3");
  CHECK(all[2].host == o.control_devices.front());
  CHECK(job_devices(o, {1, 3}, &exists_none).empty());  // no device nodes: nothing to pass
  CHECK(job_devices(o, {}, &exists_all).empty());       // no GPU: no control device either
}

TEST_CASE("bwrap: namespaces, read-only /usr, private /tmp, the job's folders and devices",
          "[node][isolation]") {
  IsolationOptions o;
  LaunchInfo l = launch();
  WorkerPaths p{"/s/jobs/j-7", "/s/checkpoints/j-7"};
  auto a = bwrap_command(o, l, p, {{"/dev/nvidia1", "/dev/nvidia1"}});
  CHECK(a.front() == "bwrap");
  for (const char* flag : {"--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session"})
    CHECK(index_of(a, flag) < a.size());
  CHECK(index_of(a, "--unshare-net") == a.size());  // the host's network unless asked
  size_t usr = index_of(a, "/usr");
  REQUIRE(usr < a.size());
  CHECK(a[usr - 1] == "--ro-bind");
  CHECK(a[index_of(a, "/tmp") - 1] == "--tmpfs");
  CHECK(a[index_of(a, "/s/jobs/j-7") - 1] == "--bind");
  CHECK(a[index_of(a, "/s/checkpoints/j-7") - 1] == "--bind");
  CHECK(a[index_of(a, "/dev/nvidia1") - 1] == "--dev-bind");
  // The command comes last, after "--", word for word.
  size_t dash = index_of(a, "--");
  REQUIRE(dash < a.size());
  CHECK(std::vector<std::string>(a.begin() + static_cast<long>(dash) + 1, a.end()) == l.command);
  o.sandbox_unshare_net = true;
  CHECK(index_of(bwrap_command(o, l, p, {}), "--unshare-net") < a.size());
}

TEST_CASE("podman: the job's uid, env by name only, its devices, its cgroup, no pull",
          "[node][isolation]") {
  IsolationOptions o;
  LaunchInfo l = launch();
  WorkerPaths p{"/s/jobs/j-7", ""};
  auto a = podman_command(o, l, p, {{"/stand/gpu1", "/dev/nvidia1"}},
                          {"PATH=/usr/bin", "SECRET=hunter2"}, 534806, 534806,
                          container_name("n1", l.key), "/troupe/n1/j-7-a2-r1");
  CHECK(a[0] == "podman");
  CHECK(a[1] == "run");
  CHECK(a[index_of(a, "--user") + 1] == "534806:534806");
  CHECK(a[index_of(a, "--pull") + 1] == "never");
  CHECK(a[index_of(a, "--cgroup-parent") + 1] == "/troupe/n1/j-7-a2-r1");
  CHECK(a[index_of(a, "--name") + 1] == "troupe-n1-j-7-a2-r1");
  CHECK(a[index_of(a, "--device") + 1] == "/stand/gpu1:/dev/nvidia1");
  CHECK(a[index_of(a, "--workdir") + 1] == "/s/jobs/j-7");
  // Values never appear on the command line (other users can read it).
  CHECK(index_of(a, "SECRET") < a.size());
  for (const auto& w : a) CHECK(w.find("hunter2") == std::string::npos);
  // The image, then the command.
  size_t img = index_of(a, "localhost/trainer:1");
  REQUIRE(img < a.size());
  CHECK(std::vector<std::string>(a.begin() + static_cast<long>(img) + 1, a.end()) == l.command);
}

TEST_CASE("troupe-node isolation options", "[node][isolation]") {
  auto r = parse({"--sandbox", "bwrap", "--runtime", "podman", "--job-pids-max", "64",
                  "--gpu-device", "/x/g%d", "--sandbox-bind", "/opt", "--isolation", "on"});
  REQUIRE(r.options);
  CHECK(r.options->isolation.sandbox == "bwrap");
  CHECK(r.options->isolation.runtime == "podman");
  CHECK(r.options->isolation.pids_max == 64);
  CHECK(r.options->isolation.gpu_device == "/x/g%d");
  CHECK(r.options->isolation.sandbox_binds == std::vector<std::string>{"/opt"});
  CHECK(r.options->isolation_mode == "on");
  auto d = parse({});
  REQUIRE(d.options);
  CHECK(d.options->isolation.sandbox.empty());
  CHECK(d.options->isolation.runtime.empty());
  CHECK(d.options->isolation_mode == "auto");
  CHECK(d.options->job_log_max_mb == 4096);  // a worker's output: 4 GiB by default
  auto logs = parse({"--job-log-max-mb", "0"});
  REQUIRE(logs.options);
  CHECK(logs.options->job_log_max_mb == 0);  // no limit
  CHECK_FALSE(parse({"--job-log-max-mb", "-1"}).options);
  CHECK_FALSE(parse({"--job-log-max-mb", "9000000000000000"}).options);  // overflows in bytes
  // A job's work dir: a quarter of the file system unless told; its folders
  // kept a day after it ended.
  CHECK(d.options->job_disk_max_mb == -1);
  CHECK(d.options->job_dir_keep_s == 86400);
  CHECK(d.options->job_dir_gc_percent == 90);
  CHECK(d.options->job_disk_max_files == -1);
  CHECK_FALSE(parse({"--job-disk-max-files", "-2"}).options);
  CHECK_FALSE(parse({"--job-dir-gc-percent", "101"}).options);
  auto disk = parse({"--job-disk-max-mb", "2", "--job-dir-keep-s", "0"});
  REQUIRE(disk.options);
  CHECK(disk.options->job_disk_max_mb == 2);
  CHECK(disk.options->job_dir_keep_s == 0);
  CHECK_FALSE(parse({"--job-disk-max-mb", "-2"}).options);
  CHECK_FALSE(parse({"--job-disk-max-mb", "9000000000000000"}).options);
  CHECK_FALSE(parse({"--job-dir-keep-s", "-1"}).options);
  // A job's checkpoint dir: the same, on the file system it is on.
  CHECK(d.options->job_checkpoint_max_mb == -1);
  CHECK(d.options->job_checkpoint_max_files == -1);
  auto ckpt = parse({"--job-checkpoint-max-mb", "0", "--job-checkpoint-max-files", "1000"});
  REQUIRE(ckpt.options);
  CHECK(ckpt.options->job_checkpoint_max_mb == 0);
  CHECK(ckpt.options->job_checkpoint_max_files == 1000);
  CHECK_FALSE(parse({"--job-checkpoint-max-mb", "-2"}).options);
  CHECK_FALSE(parse({"--job-checkpoint-max-mb", "9000000000000000"}).options);
  CHECK_FALSE(parse({"--job-checkpoint-max-files", "-2"}).options);
  CHECK(d.options->isolation.io_max_mbps == 0);  // no disk bandwidth limit unless told
  auto io = parse({"--job-io-max-mbps", "200"});
  REQUIRE(io.options);
  CHECK(io.options->isolation.io_max_mbps == 200);
  CHECK_FALSE(parse({"--job-io-max-mbps", "-1"}).options);
  CHECK_FALSE(parse({"--sandbox", "docker"}).options);
  CHECK_FALSE(parse({"--runtime", "crun"}).options);

  IsolationOptions o;
  o.enabled = true;
  CHECK(check_isolation(o).empty());
  o.gpu_device = "/dev/nvidia";
  CHECK_THAT(check_isolation(o), Catch::Contains("%d"));
  o.gpu_device = "/dev/nvidia%d";
  o.enabled = false;
  o.sandbox = "bwrap";
  CHECK_THAT(check_isolation(o), Catch::Contains("--isolation on"));
}

TEST_CASE("cgroup device rules", "[node][isolation]") {
  CHECK(to_string(DeviceRule{'c', 195, 1, "rw"}) == "c 195:1 rw");
  CHECK(to_string(DeviceRule{'c', 136, -1, "rwm"}) == "c 136:* rwm");
  auto null = device_rule_of("/dev/null");
  REQUIRE(null);
  CHECK(*null == DeviceRule{'c', 1, 3, "rw"});
  CHECK_FALSE(device_rule_of("/etc/hostname"));
  CHECK_FALSE(device_rule_of("/no/such/device"));
  auto std_devices = standard_devices();
  CHECK(std::find(std_devices.begin(), std_devices.end(), DeviceRule{'c', 1, 3, "rwm"}) !=
        std_devices.end());
}

TEST_CASE("cgroup disk bandwidth: the lines each version takes, and the disk of a folder",
          "[node][isolation]") {
  IoLimit l{254, 0, 2 << 20, 0};
  using Lines = std::vector<std::pair<std::string, std::string>>;
  CHECK(io_controls(CgroupHost::Version::v1, l) ==
        Lines{{"blkio.throttle.read_bps_device", "254:0 2097152"}});
  CHECK(io_controls(CgroupHost::Version::v2, l) == Lines{{"io.max", "254:0 rbps=2097152"}});
  l.write_bps = 1000;
  CHECK(io_controls(CgroupHost::Version::v1, l) ==
        Lines{{"blkio.throttle.read_bps_device", "254:0 2097152"},
              {"blkio.throttle.write_bps_device", "254:0 1000"}});
  CHECK(io_controls(CgroupHost::Version::v2, l) ==
        Lines{{"io.max", "254:0 rbps=2097152 wbps=1000"}});
  CHECK(io_controls(CgroupHost::Version::v2, IoLimit{8, 0, 0, 0}).empty());  // nothing to limit
  // A folder on a disk: that disk, whole (a partition's parent), which
  // /sys/dev/block knows as a disk.
  std::string why;
  auto disk = disk_of(TROUPE_SOURCE_DIR, &why);
  INFO(why);
  REQUIRE(disk);
  const std::string sys =
      "/sys/dev/block/" + std::to_string(disk->major) + ":" + std::to_string(disk->minor);
  CHECK(std::filesystem::exists(sys + "/dev"));
  CHECK_FALSE(std::filesystem::exists(sys + "/partition"));
  // On none: /proc, a missing path.
  CHECK_FALSE(disk_of("/proc", &why));
  CHECK_THAT(why, Catch::Contains("no block device"));
  CHECK_FALSE(disk_of("/no/such/path", &why));
  CHECK_THAT(why, Catch::Contains("cannot stat"));
  // Whether a host can throttle: v1 with a blkio folder, v2 with io.
  test::TempDir v1;
  CgroupHost h;
  h.version = CgroupHost::Version::v1;
  h.root = v1.path();
  CHECK_THAT(io_unsupported(h), Catch::Contains("no v1 blkio controller"));
  std::filesystem::create_directory(v1.path() + "/blkio");
  CHECK(io_unsupported(h).empty());
  h.version = CgroupHost::Version::v2;
  test::write_file(v1.path() + "/cgroup.controllers", "cpuset cpu memory pids\n");
  CHECK_THAT(io_unsupported(h), Catch::Contains("no io controller"));
  test::write_file(v1.path() + "/cgroup.controllers", "cpuset cpu io memory pids\n");
  CHECK(io_unsupported(h).empty());
}

TEST_CASE("cgroup disk bandwidth: a group's controls as each version writes them",
          "[node][isolation]") {
  // A stand-in cgroup root (plain folders and files): what create() writes.
  CgroupLimits limits;
  limits.io.push_back(IoLimit{254, 0, 3 << 20, 3 << 20});
  const std::string path = node_cgroup_path("n1", "/var/lib/troupe-node");
  {
    test::TempDir root;
    CgroupHost v2;
    v2.version = CgroupHost::Version::v2;
    v2.root = root.path();
    std::string err;
    auto g = JobCgroup::create(v2, path, "j-1-a1-r0", limits, &err);
    INFO(err);
    REQUIRE(g);
    CHECK(test::read_file(root.path() + "/" + path + "/j-1-a1-r0/io.max") ==
          "254:0 rbps=3145728 wbps=3145728");
    // io is handed down to the group's parent (the last of the controllers).
    CHECK(test::read_file(root.path() + "/" + path + "/cgroup.subtree_control") == "+io");
  }
  {
    test::TempDir root;
    for (const char* c : CgroupHost::kV1Controllers)
      std::filesystem::create_directories(root.path() + "/" + c);
    CgroupHost v1;
    v1.version = CgroupHost::Version::v1;
    v1.root = root.path();
    std::string err;
    CgroupLimits none;  // no disk limit: no blkio group, none needed
    auto plain = JobCgroup::create(v1, path, "j-0-a1-r0", none, &err);
    REQUIRE(plain);
    CHECK(plain->procs_files().size() == std::size(CgroupHost::kV1Controllers));
    CHECK_FALSE(JobCgroup::create(v1, path, "j-1-a1-r0", limits, &err));
    CHECK_THAT(err, Catch::Contains("no v1 blkio controller"));
    std::filesystem::create_directories(root.path() + "/blkio");
    auto g = JobCgroup::create(v1, path, "j-1-a1-r0", limits, &err);
    INFO(err);
    REQUIRE(g);
    const std::string dir = root.path() + "/blkio/" + path + "/j-1-a1-r0";
    CHECK(test::read_file(dir + "/blkio.throttle.read_bps_device") == "254:0 3145728");
    CHECK(test::read_file(dir + "/blkio.throttle.write_bps_device") == "254:0 3145728");
    // The worker joins it too.
    const auto& procs = g->procs_files();
    CHECK(std::find(procs.begin(), procs.end(), dir + "/cgroup.procs") != procs.end());
  }
}

TEST_CASE("a launch's isolation fields are bounded: hostile values are refused",
          "[node][isolation]") {
  LaunchInfo l = launch();
  CHECK(validate_launch(l, true).empty());
  l.memory_mb = (1LL << 62);  // bytes would overflow
  CHECK_THAT(validate_launch(l, true), Catch::Contains("memory_mb"));
  l.memory_mb = -1;
  CHECK_THAT(validate_launch(l, true), Catch::Contains("memory_mb"));
  l = launch();
  l.cpus = 1 << 30;
  CHECK_THAT(validate_launch(l, true), Catch::Contains("cpus"));
  l = launch();
  l.image = "--privileged";  // an option, not an image
  CHECK_THAT(validate_launch(l, true), Catch::Contains("image"));
}

TEST_CASE("an agent's cgroup folder is keyed by its name and state dir", "[node][isolation]") {
  using troupe::node::node_cgroup_path;
  auto a = node_cgroup_path("n1", "/var/lib/troupe/nodes/n1");
  CHECK(a.rfind("troupe/n1.", 0) == 0);
  CHECK(a.size() == std::string("troupe/n1.").size() + 8);
  // The same agent, restarted: the same folder (it reaps what was left there).
  CHECK(node_cgroup_path("n1", "/var/lib/troupe/nodes/n1") == a);
  // Another agent of the same name with its own state: never the same folder.
  CHECK(node_cgroup_path("n1", "/tmp/cluster-b/node-n1-state") != a);
  CHECK(node_cgroup_path("n2", "/var/lib/troupe/nodes/n1") != a);
}

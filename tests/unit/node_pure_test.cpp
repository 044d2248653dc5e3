// Unit tests of troupe-node's pure parts: options, inventory parsing, the
// launch model (env, paths, sim params), exit classification, wire builders.
#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "messages/wire.hpp"
#include "node/agent_messages.hpp"
#include "node/exit_status.hpp"
#include "node/inventory.hpp"
#include "node/job_dirs.hpp"
#include "node/launch_spec.hpp"
#include "node/options.hpp"
#include "node/recent.hpp"

using namespace troupe;
using namespace troupe::node;

namespace {

ParseResult parse(std::vector<const char*> args, std::map<std::string, std::string> env = {},
                  const std::string& host = "gpu-box.example.com") {
  args.insert(args.begin(), "troupe-node");
  auto lookup = [env](const std::string& k) -> std::optional<std::string> {
    auto it = env.find(k);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  return parse_options(static_cast<int>(args.size()), args.data(), lookup, host, "/work/dir");
}

}  // namespace

TEST_CASE("node options: defaults", "[node][options]") {
  auto r = parse({});
  REQUIRE(r.options);
  const Options& o = *r.options;
  CHECK(o.nats_url == "nats://127.0.0.1:4222");
  CHECK(o.name == "gpu-box");
  CHECK_FALSE(o.gpus);
  CHECK_FALSE(o.gpu_type);
  CHECK_FALSE(o.simulate);
  CHECK(o.host == "127.0.0.1");
  CHECK(o.heartbeat_ms == 1000);
  CHECK(o.grace_s == 10);
  CHECK_FALSE(o.cpus);
  CHECK_FALSE(o.memory_mb);
  CHECK(o.state_dir == "/work/dir/.troupe/nodes/gpu-box");
}

TEST_CASE("node options: flags and environment", "[node][options]") {
  auto r = parse(
      {"--name", "n1", "--gpus", "4", "--gpu-type", "h100", "--simulate", "--host", "10.0.0.5",
       "--heartbeat-ms", "250", "--cpus", "8", "--memory-mb", "1024", "--grace-s", "3"},
      {{"TROUPE_NATS", "nats://x:1"}, {"TROUPE_HOME", "/srv/troupe"}});
  REQUIRE(r.options);
  const Options& o = *r.options;
  CHECK(o.nats_url == "nats://x:1");
  CHECK(o.name == "n1");
  CHECK(o.gpus == 4);
  CHECK(o.gpu_type == std::string("h100"));
  CHECK(o.simulate);
  CHECK(o.host == "10.0.0.5");
  CHECK(o.heartbeat_ms == 250);
  CHECK(o.cpus == 8);
  CHECK(o.memory_mb == 1024);
  CHECK(o.grace_s == 3);
  CHECK(o.state_dir == "/srv/troupe/nodes/n1");

  auto r2 = parse({"--nats", "nats://y:2", "--state-dir", "rel/dir/", "--gpus", "0"},
                  {{"TROUPE_NATS", "nats://x:1"}});
  REQUIRE(r2.options);
  CHECK(r2.options->nats_url == "nats://y:2");
  CHECK(r2.options->state_dir == "/work/dir/rel/dir");
  CHECK(r2.options->gpus == 0);  // explicit 0 still wins over nvidia-smi
}

TEST_CASE("node options: errors and help", "[node][options]") {
  auto bad_name = parse({"--name", "a.b"});
  CHECK_FALSE(bad_name.options);
  CHECK(bad_name.exit_code == 2);
  CHECK(bad_name.message.find("--name") != std::string::npos);

  auto bad_flag = parse({"--no-such-flag"});
  CHECK_FALSE(bad_flag.options);
  CHECK(bad_flag.exit_code != 0);

  auto neg = parse({"--gpus", "-1"});
  CHECK_FALSE(neg.options);

  auto help = parse({"--help"});
  CHECK_FALSE(help.options);
  CHECK(help.exit_code == 0);
  CHECK(help.message.find("--simulate") != std::string::npos);
}

TEST_CASE("node options: hostname sanitising", "[node][options]") {
  CHECK(sanitize_node_name("gpu-01.cluster.local") == "gpu-01");
  CHECK(sanitize_node_name("we ird*host") == "we-ird-host");
  CHECK(sanitize_node_name("") == "node");
  CHECK(sanitize_node_name(".hidden") == "node");
}

TEST_CASE("node inventory: nvidia-smi CSV", "[node][inventory]") {
  const std::string text =
      "0, NVIDIA H200, 143771 MiB\n"
      "1, NVIDIA H200, 143771 MiB\r\n"
      "\n"
      "garbage line\n"
      "x, NVIDIA H200, 1 MiB\n"
      "2, Weird, Name, With Commas, [N/A]\n";
  auto gpus = parse_nvidia_smi_csv(text);
  REQUIRE(gpus);
  REQUIRE(gpus->size() == 3);
  CHECK((*gpus)[0].index == 0);
  CHECK((*gpus)[0].name == "NVIDIA H200");
  CHECK((*gpus)[0].memory_mb == 143771);
  CHECK((*gpus)[1].index == 1);
  CHECK((*gpus)[2].index == 2);
  CHECK((*gpus)[2].name == "Weird, Name, With Commas");
  CHECK((*gpus)[2].memory_mb == 0);

  CHECK_FALSE(parse_nvidia_smi_csv(""));
  CHECK_FALSE(parse_nvidia_smi_csv("NVIDIA-SMI has failed because it couldn't communicate\n"));
}

TEST_CASE("node inventory: meminfo and gpu type", "[node][inventory]") {
  CHECK(parse_meminfo_total_mb("MemTotal:       131072000 kB\nMemFree: 1 kB\n") == 128000);
  CHECK(parse_meminfo_total_mb("MemFree:  1 kB\nMemTotal: 2048 kB\n") == 2);
  CHECK_FALSE(parse_meminfo_total_mb("MemFree: 1 kB\n"));
  CHECK_FALSE(parse_meminfo_total_mb("MemTotal: lots\n"));

  CHECK(gpu_type_from_name("NVIDIA H200") == "h200");
  CHECK(gpu_type_from_name("NVIDIA A100-SXM4-80GB") == "a100-sxm4-80gb");
  CHECK(gpu_type_from_name("Tesla V100-SXM2-16GB") == "tesla-v100-sxm2-16gb");
  CHECK(gpu_type_from_name("  ") == "generic");
}

TEST_CASE("node inventory: flags win over the probe", "[node][inventory]") {
  Probe probe;
  probe.smi_gpus = std::vector<GpuInfo>{{0, "NVIDIA H200", 143771}, {1, "NVIDIA H200", 143771}};
  probe.online_cpus = 16;
  probe.meminfo_mb = 128000;

  Options o;
  auto inv = build_inventory(o, probe);
  CHECK(inv.gpus.size() == 2);
  CHECK(inv.gpu_type == "h200");
  CHECK(inv.cpus == 16);
  CHECK(inv.memory_mb == 128000);

  o.gpu_type = "H200-custom";
  CHECK(build_inventory(o, probe).gpu_type == "H200-custom");

  o.gpus = 3;
  o.gpu_type = "a10";
  o.cpus = 4;
  o.memory_mb = 512;
  inv = build_inventory(o, probe);
  REQUIRE(inv.gpus.size() == 3);
  CHECK(inv.gpus[2].index == 2);
  CHECK(inv.gpu_type == "a10");
  CHECK(inv.cpus == 4);
  CHECK(inv.memory_mb == 512);

  Options none;
  inv = build_inventory(none, Probe{});
  CHECK(inv.gpus.empty());
  CHECK(inv.gpu_type == "generic");

  // --gpu-memory-mb: every GPU's memory, over nvidia-smi's.
  o.gpu_memory_mb = 24000;
  inv = build_inventory(o, probe);
  for (const auto& g : inv.gpus) CHECK(g.memory_mb == 24000);
  auto flags = parse({"--gpus", "2", "--gpu-memory-mb", "16000", "--mps"});
  REQUIRE(flags.options);
  CHECK(flags.options->gpu_memory_mb == 16000LL);
  CHECK(flags.options->mps);
  CHECK_FALSE(parse({"--gpu-memory-mb", "0"}).options);
  CHECK_FALSE(parse({"--gpu-memory-mb", "-5"}).options);
}

TEST_CASE("node launch: decode and validate", "[node][launch]") {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<wire::KeyValue>> env{
      wire::CreateKeyValue(fbb, fbb.CreateString("A"), fbb.CreateString("1"))};
  auto body = wire::CreateLaunch(
      fbb, fbb.CreateString("j-abc"), fbb.CreateString("team"), 2, 1, 4,
      fbb.CreateString("10.0.0.1:29500"), fbb.CreateVector(std::vector<int>{3, 5}),
      fbb.CreateVector(std::vector<flatbuffers::Offset<flatbuffers::String>>{
          fbb.CreateString("python"), fbb.CreateString("train.py")}),
      fbb.CreateVector(env), 60, 7);
  auto bytes = wire::seal(fbb, body);
  const auto* e = wire::open(bytes);
  REQUIRE(e);
  LaunchInfo l = decode_launch(*e->body_as_Launch());
  CHECK(l.key == WorkerKey{"j-abc", 2, 1});
  CHECK(l.team == "team");
  CHECK(l.world_size == 4);
  CHECK(l.coordinator == "10.0.0.1:29500");
  CHECK(l.gpus == std::vector<int>{3, 5});
  CHECK(l.command == std::vector<std::string>{"python", "train.py"});
  CHECK(l.env.size() == 1);
  CHECK(l.max_runtime_s == 60);
  CHECK(l.grace_s == 7);
  CHECK(validate_launch(l, true).empty());

  LaunchInfo bad = l;
  bad.key.job_id = "../etc";
  CHECK_FALSE(validate_launch(bad, true).empty());
  bad = l;
  bad.command.clear();
  CHECK(validate_launch(bad, true) == "empty command");
  CHECK(validate_launch(bad, false).empty());  // --simulate needs no command
  bad = l;
  bad.key.rank = -1;
  CHECK_FALSE(validate_launch(bad, true).empty());
}

TEST_CASE("node launch: paths and child environment", "[node][launch]") {
  WorkerKey k{"j-1", 0, 2};
  CHECK(log_path("/s", k) == "/s/logs/j-1/attempt-0-rank-2.log");
  CHECK(work_dir("/s", "j-1") == "/s/jobs/j-1");
  CHECK(cuda_visible_devices({}) == "");
  CHECK(cuda_visible_devices({0, 2, 7}) == "0,2,7");

  LaunchInfo l;
  l.key = WorkerKey{"j-1", 3, 1};
  l.world_size = 2;
  l.coordinator = "h:1";
  l.gpus = {1};
  l.env = {{"FOO", "job"},
           {"NEW", "x=y"},
           {"", "skipped"},
           {"BAD=KEY", "skipped"},
           {"CUDA_VISIBLE_DEVICES", "9"}};
  auto env = build_child_env({"PATH=/bin", "FOO=agent", "junk", "HOME=/root"}, l);
  std::map<std::string, std::string> m;
  for (const auto& kv : env) {
    auto eq = kv.find('=');
    REQUIRE(eq != std::string::npos);
    CHECK(m.count(kv.substr(0, eq)) == 0);  // every key once
    m[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  CHECK(m["PATH"] == "/bin");
  CHECK(m["HOME"] == "/root");
  CHECK(m["FOO"] == "job");
  CHECK(m["NEW"] == "x=y");
  CHECK(m["CUDA_VISIBLE_DEVICES"] == "1");  // Troupe's assignment wins
  CHECK(m["TROUPE_JOB_ID"] == "j-1");
  CHECK(m["TROUPE_ATTEMPT"] == "3");
  CHECK(m["TROUPE_RANK"] == "1");
  CHECK(m["TROUPE_WORLD_SIZE"] == "2");
  CHECK(m["TROUPE_COORDINATOR"] == "h:1");
  CHECK(m.count("BAD") == 0);
  CHECK(m.size() == 10);

  l.gpus.clear();
  auto env2 = build_child_env({}, l);
  CHECK(std::find(env2.begin(), env2.end(), "CUDA_VISIBLE_DEVICES=") != env2.end());
  CHECK(std::find(env2.begin(), env2.end(), "TROUPE_GPU_MEMORY_MB=4000") == env2.end());
}

TEST_CASE("node launch: a shared worker gets its GPU and its memory (and the MPS limit)",
          "[node][launch][shared]") {
  LaunchInfo l;
  l.key = {"j-1", 1, 0};
  l.gpus = {3};
  l.gpu_memory_mb = 4000;
  CHECK(validate_launch(l, false).empty());
  auto env = build_child_env({}, l);
  auto has = [&](const std::string& kv) {
    return std::find(env.begin(), env.end(), kv) != env.end();
  };
  CHECK(has("CUDA_VISIBLE_DEVICES=3"));
  CHECK(has("TROUPE_GPU_MEMORY_MB=4000"));
  CHECK_FALSE(has("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4000M"));
  l.mps = true;
  env = build_child_env({}, l);
  CHECK(has("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4000M"));
  // Hostile Launches: part of two GPUs, or of a GPU larger than any.
  l.gpus = {0, 1};
  CHECK_FALSE(validate_launch(l, false).empty());
  l.gpus = {0};
  l.gpu_memory_mb = 1LL << 40;
  CHECK_FALSE(validate_launch(l, false).empty());
}

TEST_CASE("node launch: simulate parameters", "[node][launch]") {
  LaunchInfo l;
  CHECK(sim_params(l).duration_s == 1.0);
  CHECK(sim_params(l).exit_code == 0);
  l.env = {{"TROUPE_SIM_DURATION_S", "0.25"}, {"TROUPE_SIM_EXIT", "3"}};
  CHECK(sim_params(l).duration_s == 0.25);
  CHECK(sim_params(l).exit_code == 3);
  l.env = {{"TROUPE_SIM_DURATION_S", "-1"}, {"TROUPE_SIM_EXIT", "x"}};
  CHECK(sim_params(l).duration_s == 1.0);
  CHECK(sim_params(l).exit_code == 0);
  l.env = {{"TROUPE_SIM_DURATION_S", "nan"}, {"TROUPE_SIM_DURATION_S", "0"}};
  CHECK(sim_params(l).duration_s == 0.0);
  CHECK(command_line({"a", "b c"}) == "a b c");
}

TEST_CASE("node exit classification", "[node][exit]") {
  CHECK(classify_wait_status(W_EXITCODE(0, 0), EndCause::natural) ==
        ExitInfo{0, 0, "exited with code 0"});
  CHECK(classify_wait_status(W_EXITCODE(3, 0), EndCause::natural) ==
        ExitInfo{3, 0, "exited with code 3"});
  CHECK(classify_wait_status(W_EXITCODE(0, 9), EndCause::natural) ==
        ExitInfo{-1, 9, "killed by signal 9"});
  CHECK(classify_wait_status(W_EXITCODE(0, 15), EndCause::stopped) == ExitInfo{-1, 15, "stopped"});
  CHECK(classify_wait_status(W_EXITCODE(0, 0), EndCause::stopped) == ExitInfo{0, 0, "stopped"});
  CHECK(classify_wait_status(W_EXITCODE(0, 9), EndCause::max_runtime) ==
        ExitInfo{-1, 9, "exceeded max_runtime_s"});
  CHECK(classify(-1, 15, EndCause::stopped) == ExitInfo{-1, 15, "stopped"});
  CHECK(launch_failed("fork: x") == ExitInfo{-1, 0, "launch failed: fork: x"});
}

TEST_CASE("node wire messages round-trip", "[node][wire]") {
  Inventory inv;
  inv.gpus = {{0, "NVIDIA H200", 143771}};
  inv.gpu_type = "h200";
  inv.cpus = 16;
  inv.memory_mb = 1000;
  std::vector<WorkerKey> running{{"j-1", 0, 0}, {"j-2", 1, 3}};

  auto reg = make_register("n1", "10.0.0.2", inv, true, running);
  const auto* e = wire::open(reg);
  REQUIRE(e);
  const auto* r = e->body_as_NodeRegister();
  REQUIRE(r);
  CHECK(wire::str(r->node()) == "n1");
  CHECK(wire::str(r->host()) == "10.0.0.2");
  CHECK(wire::str(r->gpu_type()) == "h200");
  REQUIRE(r->gpus()->size() == 1);
  CHECK(r->gpus()->Get(0)->memory_mb() == 143771);
  CHECK(r->cpus() == 16);
  CHECK(r->memory_mb() == 1000);
  CHECK(r->simulate());
  REQUIRE(r->running()->size() == 2);
  CHECK(r->running()->Get(1)->rank() == 3);

  auto hb = make_heartbeat("n1", 42, running);
  const auto* h = wire::open(hb)->body_as_Heartbeat();
  REQUIRE(h);
  CHECK(h->seq() == 42);
  CHECK(h->running()->size() == 2);

  auto st = make_started("n1", WorkerKey{"j-1", 2, 1}, 1234);
  const auto* s = wire::open(st)->body_as_Started();
  REQUIRE(s);
  CHECK(s->pid() == 1234);
  CHECK(s->attempt() == 2);

  auto ex = make_exited("n1", WorkerKey{"j-1", 2, 1}, ExitInfo{-1, 9, "killed by signal 9"});
  const auto* x = wire::open(ex)->body_as_Exited();
  REQUIRE(x);
  CHECK(x->exit_code() == -1);
  CHECK(x->signal() == 9);
  CHECK(wire::str(x->reason()) == "killed by signal 9");
}

TEST_CASE("Recent remembers its last N keys and forgets the oldest first", "[node][pure]") {
  troupe::node::Recent<int, std::string> r(2);
  CHECK(r.remember(1, "a"));
  CHECK_FALSE(r.remember(1, "b"));  // known: unchanged
  CHECK(*r.find(1) == "a");
  CHECK(r.remember(2, "c"));
  CHECK(r.remember(3, "d"));  // 1 is forgotten
  CHECK_FALSE(r.contains(1));
  CHECK(r.find(1) == nullptr);
  CHECK(r.contains(2));
  CHECK(r.contains(3));
  CHECK(r.items().size() == 2);
  CHECK(r.remember(1, "e"));  // new again
  CHECK_FALSE(r.contains(2));
}

TEST_CASE("node job folders: what goes of an ended job's folders, and when", "[node][disk]") {
  const int64_t keep = 60000, now = 1000000;
  JobFolder f;
  f.ended_ms = now - keep;
  CHECK(removal_of(f, now, keep) == Removal::all);
  f.ended_ms = now - keep + 1;
  CHECK(removal_of(f, now, keep) == Removal::keep);
  f.disk_limited = true;  // its size ended it: the work dir goes at once, the log stays
  CHECK(removal_of(f, now, keep) == Removal::work_dir);
  CHECK(removal_of(f, now + 1, keep) == Removal::all);
  f.running = true;  // never while a worker of it runs here
  CHECK(removal_of(f, now + keep * 10, keep) == Removal::keep);
  // End not known (an earlier agent's): the folder's own last change.
  JobFolder old;
  old.mtime_ms = now - 2 * keep;
  CHECK(removal_of(old, now, keep) == Removal::all);
  old.mtime_ms = now;
  CHECK(removal_of(old, now, keep) == Removal::keep);
  // keep 0: kept for ever, except a work dir that ended its job.
  old.mtime_ms = 0;
  CHECK(removal_of(old, now, 0) == Removal::keep);
  old.disk_limited = true;
  CHECK(removal_of(old, now, 0) == Removal::work_dir);

  // A full disk: the longest ended first (the folder's change time where the
  // end is not known), never a running job's.
  JobFolder a, b, c, d;
  a.ended_ms = 300;
  b.ended_ms = 100;
  c.mtime_ms = 200;
  d.running = true;
  CHECK(pressure_order({{"a", a}, {"b", b}, {"c", c}, {"d", d}}) ==
        std::vector<std::string>{"b", "c", "a"});
}

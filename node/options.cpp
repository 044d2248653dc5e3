// Owns parsing of troupe-node's command line (CLI11) into Options.
#include "node/options.hpp"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <sstream>

#include "bus/subjects.hpp"

namespace troupe::node {

namespace {
// A size in MiB that stays far from overflow in bytes.
constexpr long long kMaxMiB = 1LL << 30;
}  // namespace

std::string sanitize_node_name(const std::string& hostname) {
  std::string out;
  for (char c : hostname) {
    if (c == '.') break;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_';
    out += ok ? c : '-';
  }
  if (out.size() > 128) out.resize(128);
  if (out.empty()) out = "node";
  return out;
}

std::string fleet_node_name(const std::string& prefix, int i, int count) {
  int width = 5;
  for (long long c = 100000; c <= count; c *= 10) ++width;
  std::string digits = std::to_string(i);
  if (static_cast<int>(digits.size()) < width)
    digits.insert(0, static_cast<size_t>(width) - digits.size(), '0');
  return prefix + "-" + digits;
}

ParseResult parse_options(int argc, const char* const* argv, const EnvLookup& env,
                          const std::string& hostname, const std::string& cwd) {
  Options o;
  CLI::App app{"troupe-node: the Troupe node agent (launches and watches job workers)",
               "troupe-node"};
  int gpus = 0;
  std::string gpu_type;
  int cpus = 0;
  long long memory_mb = 0;
  std::string nats;
  std::string name_prefix;
  auto* nats_opt = app.add_option(
      "--nats", nats,
      "NATS URL, or several comma-separated (default $TROUPE_NATS or " + o.nats_url + ")");
  app.add_option("--name", o.name, "node name (default: the hostname)");
  std::string creds, tls_ca;
  auto* creds_opt =
      app.add_option("--creds", creds, "NATS credentials file (default $TROUPE_NATS_CREDS)");
  auto* ca_opt = app.add_option("--tls-ca", tls_ca,
                                "CA of the NATS server's certificate (default $TROUPE_NATS_CA)");
  auto* gpus_opt = app.add_option("--gpus", gpus, "number of GPUs (wins over nvidia-smi)")
                       ->check(CLI::NonNegativeNumber);
  auto* type_opt = app.add_option("--gpu-type", gpu_type, "GPU type (default generic)");
  long long gpu_memory_mb = 0;
  auto* gmem_opt = app.add_option("--gpu-memory-mb", gpu_memory_mb,
                                  "each GPU's memory in MB, for shared jobs (wins over nvidia-smi)")
                       ->check(CLI::Range(1LL, 1024LL * 1024));
  app.add_flag("--mps", o.mps,
               "workers run under CUDA MPS: a shared job's memory limit is enforced with "
               "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
  app.add_flag("--simulate", o.simulate, "do not run commands; simulate workers");
  app.add_option("--host", o.host, "address other nodes reach this one at")->capture_default_str();
  app.add_option("--heartbeat-ms", o.heartbeat_ms, "heartbeat period")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--state-dir", o.state_dir,
                 "state folder (default $TROUPE_HOME/nodes/<name>, TROUPE_HOME=./.troupe)");
  auto* cpus_opt = app.add_option("--cpus", cpus, "CPUs offered (default: online CPUs)")
                       ->check(CLI::NonNegativeNumber);
  auto* mem_opt = app.add_option("--memory-mb", memory_mb, "memory offered (default: MemTotal)")
                      ->check(CLI::NonNegativeNumber);
  app.add_option("--job-log-max-mb", o.job_log_max_mb,
                 "a worker whose output passes this many MiB on the node is killed (its "
                 "attempt fails with cause log_limit) and its log cut there; 0: no limit")
      ->capture_default_str()
      ->check(CLI::Range(0LL, kMaxMiB));
  app.add_option("--job-disk-max-mb", o.job_disk_max_mb,
                 "a job whose work dir on the node holds more than this many MiB has its "
                 "workers there killed (the attempt fails with cause disk_limit) and the dir "
                 "emptied; 0: no limit; -1 (default): a quarter of the state folder's file system")
      ->capture_default_str()
      ->check(CLI::Range(-1LL, kMaxMiB));
  app.add_option("--job-disk-max-files", o.job_disk_max_files,
                 "the same for the files and folders in it (inodes every job on the node "
                 "shares); 0: no limit; -1 (default): a quarter of the file system's inodes")
      ->capture_default_str()
      ->check(CLI::Range(-1LL, 1LL << 40));
  app.add_option("--job-checkpoint-max-mb", o.job_checkpoint_max_mb,
                 "a job whose checkpoint dir (TROUPE_CHECKPOINT_DIR) holds more than this many "
                 "MiB has its workers on the node killed (the attempt fails with cause "
                 "disk_limit); the dir is kept; 0: no limit; -1 (default): a quarter of the "
                 "file system the dir is on")
      ->capture_default_str()
      ->check(CLI::Range(-1LL, kMaxMiB));
  app.add_option("--job-checkpoint-max-files", o.job_checkpoint_max_files,
                 "the same for the files and folders in it; 0: no limit; -1 (default): a "
                 "quarter of its file system's inodes")
      ->capture_default_str()
      ->check(CLI::Range(-1LL, 1LL << 40));
  app.add_option("--job-dir-keep-s", o.job_dir_keep_s,
                 "seconds an ended job's work dir and log folder stay on the node after its "
                 "last worker there ended (its log stays in its team's stream); 0: for ever")
      ->capture_default_str()
      ->check(CLI::Range(0LL, 10LL * 365 * 86400));
  app.add_option("--job-dir-gc-percent", o.job_dir_gc_percent,
                 "when the state folder's file system is fuller than this (percent), ended "
                 "jobs' folders are removed at once, the longest ended first, until it is "
                 "not; 0: never")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  app.add_option("--job-dir-check-ms", o.job_dir_check_ms,
                 "how often work dirs are measured and ended jobs' folders removed")
      ->capture_default_str()
      ->check(CLI::Range(10, 3600 * 1000));
  app.add_option("--grace-s", o.grace_s, "seconds between SIGTERM and SIGKILL")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--count", o.count,
                 "run this many simulated agents in one process (needs --simulate)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  auto* prefix_opt = app.add_option(
      "--name-prefix", name_prefix,
      "with --count: nodes are named <prefix>-00001... (default: --name, else the hostname)");
  app.add_option("--pool", o.pool,
                 "pool of the cluster config to join (default: the pool of the GPU type)");
  app.add_option("--rack", o.rack, "topology label, e.g. the rack (gangs prefer one)");
  app.add_option("--metrics", o.metrics,
                 "serve Prometheus metrics on HOST:PORT (port 0: any free one)");
  app.add_option("--log-level", o.log_level, "trace|debug|info|warn|error")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  IsolationOptions& iso = o.isolation;
  app.add_option("--isolation", o.isolation_mode,
                 "jobs as their team's user in a cgroup each: on (needs root), off, or auto "
                 "(on when root and not --simulate)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  std::string sandbox = "none", runtime = "none";
  app.add_option("--sandbox", sandbox,
                 "none, or bwrap: each job in its own PID namespace, "
                 "private /tmp and /dev, read-only /usr and /etc")
      ->check(CLI::IsMember({"none", "bwrap"}))
      ->capture_default_str();
  app.add_flag("--sandbox-unshare-net", iso.sandbox_unshare_net,
               "no network for jobs in the sandbox or container (default: the host's)");
  app.add_option("--sandbox-bind", iso.sandbox_binds,
                 "another host path the sandbox shows read-only (repeatable), e.g. /opt");
  app.add_option("--runtime", runtime, "none, or podman: jobs with an image run in it")
      ->check(CLI::IsMember({"none", "podman"}))
      ->capture_default_str();
  app.add_option("--podman", iso.podman, "the podman binary")->capture_default_str();
  app.add_option("--gpu-device", iso.gpu_device,
                 "device node of GPU %d (a job may open only its own)")
      ->capture_default_str();
  app.add_option("--job-memory-mb", iso.default_memory_mb,
                 "memory limit of a job whose spec names none (default: the node's memory)");
  app.add_option("--job-pids-max", iso.pids_max, "processes per job")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--job-io-max-mbps", iso.io_max_mbps,
                 "each worker's disk bandwidth on the state folder's disk (its work dir), MiB/s "
                 "read and the same written (direct and synchronous I/O under cgroup v1); 0: no "
                 "limit")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  app.add_option("--job-path", iso.job_path, "a job's PATH unless its env names one")
      ->capture_default_str();
  app.add_option("--cgroup-root", iso.cgroup_root, "where the cgroup file systems are mounted")
      ->capture_default_str();

  ParseResult r;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    r.exit_code = app.exit(e, out, err);
    r.message = out.str() + err.str();
    return r;
  }

  if (!nats_opt->empty())
    o.nats_url = nats;
  else if (auto v = env("TROUPE_NATS"); v && !v->empty())
    o.nats_url = *v;
  if (!creds_opt->empty())
    o.creds_file = creds;
  else if (auto v = env("TROUPE_NATS_CREDS"); v && !v->empty())
    o.creds_file = *v;
  if (!ca_opt->empty())
    o.tls_ca = tls_ca;
  else if (auto v = env("TROUPE_NATS_CA"); v && !v->empty())
    o.tls_ca = *v;
  iso.sandbox = sandbox == "none" ? "" : sandbox;
  iso.runtime = runtime == "none" ? "" : runtime;
  if (!gpus_opt->empty()) o.gpus = gpus;
  if (!type_opt->empty()) o.gpu_type = gpu_type;
  if (!gmem_opt->empty()) o.gpu_memory_mb = gpu_memory_mb;
  if (!cpus_opt->empty()) o.cpus = cpus;
  if (!mem_opt->empty()) o.memory_mb = memory_mb;

  if (o.name.empty()) {
    o.name = sanitize_node_name(hostname);
  } else if (auto why = subjects::check_token(o.name); !why.empty()) {
    r.exit_code = 2;
    r.message = "--name: " + why + "\n";
    return r;
  }
  if (o.count > 1 && !o.simulate) {
    r.exit_code = 2;
    r.message = "--count > 1 needs --simulate (one real agent per machine)\n";
    return r;
  }
  if (!prefix_opt->empty()) {
    if (auto why = subjects::check_token(name_prefix); !why.empty()) {
      r.exit_code = 2;
      r.message = "--name-prefix: " + why + "\n";
      return r;
    }
  }
  if (o.count > 1) {
    o.name_prefix = prefix_opt->empty() ? o.name : name_prefix;
    if (auto why = subjects::check_token(fleet_node_name(o.name_prefix, o.count, o.count));
        !why.empty()) {
      r.exit_code = 2;
      r.message = "--name-prefix is too long: " + why + "\n";
      return r;
    }
  }
  if (!o.pool.empty()) {
    if (auto why = subjects::check_token(o.pool); !why.empty()) {
      r.exit_code = 2;
      r.message = "--pool: " + why + "\n";
      return r;
    }
  }
  if (!o.rack.empty()) {
    if (auto why = subjects::check_token(o.rack); !why.empty()) {
      r.exit_code = 2;
      r.message = "--rack: " + why + "\n";
      return r;
    }
  }
  if (o.gpu_type && o.gpu_type->empty()) {
    r.exit_code = 2;
    r.message = "--gpu-type must not be empty\n";
    return r;
  }

  namespace fs = std::filesystem;
  fs::path dir;
  if (!o.state_dir.empty()) {
    dir = o.state_dir;
  } else {
    auto home = env("TROUPE_HOME");
    dir = fs::path(home && !home->empty() ? *home : std::string("./.troupe")) / "nodes" / o.name;
  }
  if (dir.is_relative()) dir = fs::path(cwd) / dir;
  o.state_dir = dir.lexically_normal().string();
  while (o.state_dir.size() > 1 && o.state_dir.back() == '/') o.state_dir.pop_back();
  r.options = std::move(o);
  return r;
}

}  // namespace troupe::node

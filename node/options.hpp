// Command-line options of troupe-node: the Options struct and the pure parser
// (CLI11) that fills it from argv plus an injected environment lookup, so that
// tests need neither the real environment nor the real hostname.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "node/isolation.hpp"

namespace troupe::node {

struct Options {
  std::string nats_url = "nats://127.0.0.1:4222";
  // Its identity (node-<name>.creds, or fleet-<prefix>.creds for --count N)
  // and the CA of the server's TLS certificate; "" for none
  // (--creds / $TROUPE_NATS_CREDS, --tls-ca / $TROUPE_NATS_CA).
  std::string creds_file;
  std::string tls_ca;
  std::string name;                     // node name: one subject token
  std::optional<int> gpus;              // set only when --gpus was given
  std::optional<std::string> gpu_type;  // set only when --gpu-type was given
  // --gpu-memory-mb: each GPU's memory (wins over nvidia-smi); what shared
  // jobs (resources.gpu_memory_mb) are placed against. Unknown: no sharing.
  std::optional<long long> gpu_memory_mb;
  // --mps: workers run under CUDA MPS; a shared worker also gets
  // CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, so its memory is enforced.
  bool mps = false;
  bool simulate = false;
  std::string host = "127.0.0.1";
  int heartbeat_ms = 1000;
  std::string state_dir;  // absolute after parse_options
  std::optional<int> cpus;
  std::optional<long long> memory_mb;
  int grace_s = 10;
  // --job-log-max-mb: a worker whose output (its log file on this node)
  // passes this many MiB is killed, its attempt failed "log_limit", and its
  // log cut there; 0: no limit.
  long long job_log_max_mb = 4096;
  // --job-disk-max-mb: a job whose work dir on this node holds more than this
  // many MiB has its workers here killed (attempt failed "disk_limit") and the
  // dir emptied; 0: no limit; -1 (default): a quarter of the file system the
  // state folder is on.
  long long job_disk_max_mb = -1;
  // --job-disk-max-files: the same for the files in it; -1 (default): a
  // quarter of the file system's inodes.
  long long job_disk_max_files = -1;
  // The same for a running job's checkpoint dir (TROUPE_CHECKPOINT_DIR),
  // which outlives its attempts; -1: a quarter of the file system it is on.
  long long job_checkpoint_max_mb = -1;
  long long job_checkpoint_max_files = -1;
  // --job-dir-keep-s: an ended job's work dir and log folder stay this long
  // after its last worker here ended; 0: for ever. --job-dir-check-ms: how
  // often the agent measures work dirs and removes ended jobs' folders.
  long long job_dir_keep_s = 86400;
  int job_dir_check_ms = 5000;
  // --job-dir-gc-percent: the state folder's file system fuller than this:
  // ended jobs' folders go at once, the oldest first; 0: never.
  int job_dir_gc_percent = 90;
  std::string log_level = "info";
  std::string metrics;  // HOST:PORT of its own /metrics ("" = none)
  // --count N (N > 1 needs --simulate): N simulated agents in one process,
  // named <name_prefix>-00001 ... (see node/fleet.hpp). 1: one agent, as before.
  int count = 1;
  std::string name_prefix;  // set (to --name-prefix, else --name) only when count > 1
  // --pool P: the pool of the cluster config this node joins ("": the pool of
  // its GPU type); --rack R: its topology label ("": none). Both go into the
  // NodeRegister (every member of a fleet gets the same).
  std::string pool;
  std::string rack;
  // --isolation auto|on|off (auto: on when the agent runs as root and does
  // not simulate), --sandbox, --runtime and the job limits: see
  // node/isolation.hpp. `isolation.enabled` is decided by main() from
  // isolation_mode and the agent's uid.
  std::string isolation_mode = "auto";
  IsolationOptions isolation;
};

// Name of fleet member `i` (1-based) of `count`: "<prefix>-00001"; at least
// five digits, more when `count` needs them.
std::string fleet_node_name(const std::string& prefix, int i, int count);

// Looks up an environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

struct ParseResult {
  std::optional<Options> options;  // set when the agent should run
  int exit_code = 0;               // otherwise: exit with this (0 for --help)
  std::string message;             // what to print (help text or error)
};

// Parses argv. `hostname` is the default --name (sanitised into a subject
// token); TROUPE_NATS and TROUPE_HOME come from `env`; a relative state dir is
// made absolute against `cwd`.
ParseResult parse_options(int argc, const char* const* argv, const EnvLookup& env,
                          const std::string& hostname, const std::string& cwd);

// Turns a hostname into a valid subject token: the part before the first '.',
// other invalid characters replaced by '-'; "node" when nothing is left.
std::string sanitize_node_name(const std::string& hostname);

}  // namespace troupe::node

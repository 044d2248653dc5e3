// What a Launch asks for, in plain C++: decoding the FlatBuffers Launch,
// validating it, the worker's key, its log and work paths, the child
// environment and the --simulate parameters. Everything here is pure.
#pragma once

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "messages/wire.hpp"

namespace troupe::node {

// One worker: one rank of one attempt of one job.
struct WorkerKey {
  std::string job_id;
  int attempt = 0;
  int rank = 0;
  bool operator<(const WorkerKey& o) const {
    return std::tie(job_id, attempt, rank) < std::tie(o.job_id, o.attempt, o.rank);
  }
  bool operator==(const WorkerKey& o) const {
    return job_id == o.job_id && attempt == o.attempt && rank == o.rank;
  }
};
std::string to_string(const WorkerKey& k);  // "j-1/attempt-0/rank-2"

struct LaunchInfo {
  WorkerKey key;
  std::string team;
  int world_size = 1;
  std::string coordinator;
  std::vector<int> gpus;
  std::vector<std::string> command;
  std::vector<std::pair<std::string, std::string>> env;
  long long max_runtime_s = 0;
  int grace_s = 10;
  // TROUPE_CHECKPOINT_DIR: shared by every attempt of the job ("" : none).
  // Made absolute against the agent's state dir before the worker starts.
  std::string checkpoint_dir;
  // Isolation (node/isolation.hpp):
  std::string image;          // "": on the host (or in the sandbox)
  int cpus = 0;               // CPU quota in cores (0: none)
  long long memory_mb = 0;    // memory limit (0: the agent's default)
  long long run_as_uid = -1;  // the cluster config's run_as for the team; -1: troupe-<team>
  // A shared worker: its part of its one GPU (TROUPE_GPU_MEMORY_MB); with
  // `mps` (the agent's --mps) also CUDA_MPS_PINNED_DEVICE_MEM_LIMIT.
  long long gpu_memory_mb = 0;
  bool mps = false;
};

LaunchInfo decode_launch(const wire::Launch& l);

// Empty when the launch can run, else why not. `need_command`: real mode.
std::string validate_launch(const LaunchInfo& l, bool need_command);

// "0,1,3"; "" for no GPUs.
std::string cuda_visible_devices(const std::vector<int>& gpus);

// <state_dir>/logs/<job_id>/attempt-<a>-rank-<r>.log
std::string log_path(const std::string& state_dir, const WorkerKey& k);
// <state_dir>/logs/<job_id>
std::string log_dir(const std::string& state_dir, const std::string& job_id);
// <state_dir>/jobs/<job_id>: the worker's working directory.
std::string work_dir(const std::string& state_dir, const std::string& job_id);

// The child's environment as "KEY=VALUE" strings: `base` (the agent's own),
// then the job's env, then CUDA_VISIBLE_DEVICES and the TROUPE_* variables
// (TROUPE_CHECKPOINT_DIR only when the launch names a checkpoint dir); a
// later definition of a key replaces an earlier one in place. Job env entries
// with an empty key or a '=' in the key are skipped.
std::vector<std::string> build_child_env(const std::vector<std::string>& base, const LaunchInfo& l);

// --simulate: how long the worker "runs" and how it "exits", from the job's
// TROUPE_SIM_DURATION_S (seconds, default 1; negative or unparsable -> default)
// and TROUPE_SIM_EXIT (default 0).
struct SimParams {
  double duration_s = 1.0;
  int exit_code = 0;
};
SimParams sim_params(const LaunchInfo& l);

// The command as one line, for logs: words joined by spaces.
std::string command_line(const std::vector<std::string>& command);

}  // namespace troupe::node

// How a worker is isolated, in plain values: the agent's isolation options
// (troupe-node --isolation/--sandbox/--runtime ...), the job's base
// environment, the GPU device nodes it may use, and the command lines that
// wrap its command in bubblewrap or podman. Pure: the agent (node/agent.cpp)
// does the system calls, node/cgroup.hpp and node/job_user.hpp the rest.
// docs/security.md, "The isolation boundary of a job", says what each gives.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "node/launch_spec.hpp"

namespace troupe::node {

struct IsolationOptions {
  // Jobs run as their team's user, in a cgroup of their own (needs root).
  // Off: they run as the agent's user, in its cgroup (--isolation off, for a
  // laptop without root; docs/security.md says what is then lost).
  bool enabled = false;
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string sandbox;  // "" or "bwrap"
  bool sandbox_unshare_net = false;
  std::vector<std::string> sandbox_binds;  // more read-only paths inside the sandbox
  std::string runtime;                     // "" or "podman"
  std::string podman = "podman";
  // The device node of GPU i ("%d" is the index) and the control devices a
  // GPU job needs besides (those that exist are passed).
  std::string gpu_device = "/dev/nvidia%d";
  std::vector<std::string> control_devices = {"/dev/nvidiactl", "/dev/nvidia-uvm",
                                              "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"};
  int64_t default_memory_mb = 0;  // a job's memory limit when the Launch names none (0: none)
  int64_t pids_max = 4096;        // processes and threads per job
  // Each worker's read and write bandwidth on the disk of the state folder
  // (its work dir's), MiB/s each way; 0: no limit. `io_disk` is that disk,
  // found at start (troupe-node refuses to start when there is none).
  int64_t io_max_mbps = 0;
  int io_disk_major = -1;
  int io_disk_minor = -1;
  std::string job_path = "/usr/local/bin:/usr/bin:/bin";  // the job's PATH unless its env sets one
};

// "" when the options hang together, else why not (e.g. --sandbox bwrap
// without --isolation, an unknown runtime).
std::string check_isolation(const IsolationOptions& o);

// FNV-1a, 32 bits: a hash that is the same on every host and every run
// (team uids, the agent's cgroup folder).
uint32_t stable_hash(const std::string& s);

// The folder of an agent's job cgroups under each controller:
// "troupe/<node>.<hash of its state dir>". Keyed by the state dir, so a
// restarted agent finds (and reaps) what its predecessor left, and two agents
// that share a name but not a state dir (two test clusters on one host)
// never touch each other's jobs.
std::string node_cgroup_path(const std::string& node, const std::string& state_dir);

// The device node of GPU `index` under `pattern` ("/dev/nvidia%d" -> /dev/nvidia3).
std::string gpu_device_path(const std::string& pattern, int index);

// What Troupe itself puts into a job's environment before the spec's env:
// PATH, HOME (the work dir), USER and LOGNAME. Never the agent's variables.
std::vector<std::string> job_base_env(const IsolationOptions& o, const std::string& user,
                                      const std::string& work_dir);

// Where a worker's files are, as the worker sees them.
struct WorkerPaths {
  std::string work_dir;
  std::string checkpoint_dir;  // "" : none
};

// A device passed into a sandbox or container: host path -> path inside.
struct DeviceMap {
  std::string host;
  std::string inside;
};
// The job's GPUs (at /dev/nvidiaN inside) and the control devices, those
// that exist (as `exists` says).
std::vector<DeviceMap> job_devices(const IsolationOptions& o, const std::vector<int>& gpus,
                                   bool (*exists)(const std::string&));

// bwrap ... -- <command>: its own PID, IPC and UTS namespaces (and network,
// when asked), a private /tmp and /dev, read-only /usr and /etc, the work and
// checkpoint dirs read-write at the same paths, its devices only.
std::vector<std::string> bwrap_command(const IsolationOptions& o, const LaunchInfo& l,
                                       const WorkerPaths& p, const std::vector<DeviceMap>& devices);

// The container's name for a worker: troupe-<node>-<job>-a<attempt>-r<rank>.
std::string container_name(const std::string& node, const WorkerKey& k);

// podman run ... <image> <command>: runc, the job's cgroup as the parent of
// the container's (its limits hold for it), the host network, the job's uid,
// its env by name only (values come from podman's environment, never the
// command line, where other users could read them), the work and checkpoint
// dirs at the same paths, its devices only, no pull (a local image or none).
std::vector<std::string> podman_command(const IsolationOptions& o, const LaunchInfo& l,
                                        const WorkerPaths& p, const std::vector<DeviceMap>& devices,
                                        const std::vector<std::string>& env, uid_t uid, gid_t gid,
                                        const std::string& name, const std::string& cgroup_parent);

}  // namespace troupe::node

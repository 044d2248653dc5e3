// A cgroup per worker: owns the group's folders under every controller this
// agent uses, its limits (memory, CPU quota, pids, devices), the kill of
// everything in it (escaped grandchildren included), the OOM count and its
// removal, and its disk bandwidth when asked (blkio in v1, io in v2).
// cgroup v1 (one folder per controller, as on our machines) and v2
// (one unified folder, where the host has resource controllers there).
//
// Layout: <root>/<controller>/troupe/<node>.<hash>/<worker> (v1) or
// <root>/troupe/<node>.<hash>/<worker> (v2; node_cgroup_path in isolation.hpp). The agent itself
// stays where it was started: its jobs live apart from it, so a job's limits and its kill never
// touch the agent.
//
// The child joins the group itself, between fork and exec, by writing "0" to
// every file of procs_files() (node/process.cpp): nothing it runs ever starts
// outside its group.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace troupe::node {

// A character device the worker may open ("c MAJOR:MINOR rwm" in v1 terms).
struct DeviceRule {
  char type = 'c';  // 'c' or 'b'
  int major = 0;
  int minor = -1;  // -1: every minor
  std::string access = "rwm";
  bool operator==(const DeviceRule& o) const {
    return type == o.type && major == o.major && minor == o.minor && access == o.access;
  }
};
std::string to_string(const DeviceRule& d);  // "c 195:1 rwm", "c 136:* rwm"

// A block device's bandwidth for the group (bytes per second, 0: no limit).
// The device is a whole disk: the kernel throttles disks, not partitions.
struct IoLimit {
  int major = 0;
  int minor = 0;
  int64_t read_bps = 0;
  int64_t write_bps = 0;
};

// The whole disk the file system holding `path` is on (its partition's
// parent); nullopt and `why` when it is on none (tmpfs, overlay, NFS).
std::optional<IoLimit> disk_of(const std::string& path, std::string* why);

struct CgroupLimits {
  int64_t memory_bytes = 0;  // 0: no limit
  int cpus = 0;              // CPU quota in whole cores (0: none)
  int64_t pids_max = 0;      // 0: no limit
  // Devices: when restrict_devices, only the standard ones (null, zero, full,
  // random, urandom, tty, ptmx, pts) and `devices` may be opened.
  bool restrict_devices = false;
  std::vector<DeviceRule> devices;
  // Disk bandwidth: v1 blkio.throttle.{read,write}_bps_device (direct and
  // synchronous I/O: v1 charges buffered writeback to no group), v2 io.max.
  std::vector<IoLimit> io;
};

// The standard devices every job may use.
std::vector<DeviceRule> standard_devices();

// The rule for the device node at `path` (its type and numbers, from stat);
// nullopt when it is not a device node.
std::optional<DeviceRule> device_rule_of(const std::string& path, const std::string& access = "rw");

// What the host offers: which version, and where.
struct CgroupHost {
  enum class Version { none, v1, v2 };
  Version version = Version::none;
  std::string root = "/sys/fs/cgroup";
  std::string why_none;  // when none: why
  // v1: the controllers we use, each with its own folder under root.
  static constexpr const char* kV1Controllers[] = {"memory", "cpu", "pids", "freezer", "devices"};
};

// Looks at `root`: v2 when <root>/cgroup.controllers lists memory, cpu and
// pids; v1 when <root>/memory, cpu, pids and freezer are folders; else none.
CgroupHost detect_cgroups(const std::string& root = "/sys/fs/cgroup");

class JobCgroup {
 public:
  JobCgroup() = default;
  // Creates <node_path>/<name> under every controller and applies `limits`.
  // `node_path` is node_cgroup_path(). On failure returns nullopt and says why
  // (what was created is removed again).
  static std::optional<JobCgroup> create(const CgroupHost& host, const std::string& node_path,
                                         const std::string& name, const CgroupLimits& limits,
                                         std::string* error);
  JobCgroup(JobCgroup&&) = default;
  JobCgroup& operator=(JobCgroup&&) = default;

  // The files a process writes "0" to, to join the group (every controller).
  const std::vector<std::string>& procs_files() const { return procs_; }
  const std::string& name() const { return name_; }
  bool valid() const { return !dirs_.empty(); }

  // SIGKILLs everything in the group and waits (up to `timeout_ms`) until it
  // is empty. v1: freeze, kill each pid, thaw, again until empty (nothing can
  // fork away meanwhile); v2: cgroup.kill. True when the group is empty.
  bool kill_all(int timeout_ms = 5000) const;
  // Processes in the group now.
  std::vector<int> pids() const;
  // How many times the kernel's OOM killer killed something in the group.
  uint64_t oom_kills() const;
  // The memory limit applied (0: none).
  int64_t memory_limit() const { return memory_bytes_; }
  // Removes the group's folders (after kill_all). True when all went.
  bool remove();

 private:
  friend int reap_stale_groups(const CgroupHost& host, const std::string& node_path);
  CgroupHost::Version version_ = CgroupHost::Version::none;
  std::string name_;
  std::vector<std::string> dirs_;   // one per controller (v1) or one (v2)
  std::vector<std::string> procs_;  // <dir>/cgroup.procs
  std::string memory_dir_, freezer_dir_, pids_dir_;
  int64_t memory_bytes_ = 0;
};

// "" when `host` can throttle a group's disk bandwidth (v1: a blkio folder;
// v2: io among the root's controllers), else why not.
std::string io_unsupported(const CgroupHost& host);

// The lines that throttle `l` (v1: "M:m bps" per file; v2: io.max's "M:m
// rbps=R wbps=W"), without the zero ones.
std::vector<std::pair<std::string, std::string>> io_controls(CgroupHost::Version v,
                                                             const IoLimit& l);

// Kills and removes every worker group left under <node_path> by an agent of
// the same node that died (nothing outlives its job, even its agent's
// crash). Returns how many groups it found.
int reap_stale_groups(const CgroupHost& host, const std::string& node_path);

}  // namespace troupe::node

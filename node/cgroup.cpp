// Owns a worker's cgroup folders: creation with limits, joining files, kill of
// every process in it, OOM count, removal; and the clean-up of groups a dead
// agent left behind.
#include "node/cgroup.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace troupe::node {

namespace fs = std::filesystem;

namespace {

constexpr const char* kV1Io = "blkio";  // v1: a job's disk bandwidth (only when limited)

// Writes `value` to a cgroup control file; "" on success, else why not.
std::string write_control(const std::string& path, const std::string& value) {
  std::ofstream f(path);
  if (!f) return "cannot open " + path + ": " + std::strerror(errno);
  f << value;
  f.flush();
  if (!f) return "cannot write '" + value + "' to " + path + ": " + std::strerror(errno);
  return {};
}

std::string read_control(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The number after `key` in a "key value" per line file (memory.events,
// memory.oom_control); 0 when absent.
uint64_t keyed_value(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return 0;
}

// The processes of the group at `dir` and of every group below it (a
// container runtime makes its own group under the job's).
std::vector<int> read_pids(const std::string& dir) {
  std::vector<int> out;
  std::ifstream f(dir + "/cgroup.procs");
  int pid = 0;
  while (f >> pid) out.push_back(pid);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory(ec)) {
      auto more = read_pids(e.path().string());
      out.insert(out.end(), more.begin(), more.end());
    }
  return out;
}

// rmdir of `dir` and the groups below it, deepest first.
bool remove_tree(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory(ec)) remove_tree(e.path().string());
  for (int i = 0; i < 50; ++i) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

bool is_dir(const std::string& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

}  // namespace

std::string to_string(const DeviceRule& d) {
  return std::string(1, d.type) + " " + std::to_string(d.major) + ":" +
         (d.minor < 0 ? std::string("*") : std::to_string(d.minor)) + " " + d.access;
}

std::vector<DeviceRule> standard_devices() {
  return {
      {'c', 1, 3, "rwm"},     // null
      {'c', 1, 5, "rwm"},     // zero
      {'c', 1, 7, "rwm"},     // full
      {'c', 1, 8, "rwm"},     // random
      {'c', 1, 9, "rwm"},     // urandom
      {'c', 5, 0, "rwm"},     // tty
      {'c', 5, 2, "rwm"},     // ptmx
      {'c', 136, -1, "rwm"},  // pts
  };
}

std::optional<DeviceRule> device_rule_of(const std::string& path, const std::string& access) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode)) return std::nullopt;
  DeviceRule d;
  d.type = S_ISCHR(st.st_mode) ? 'c' : 'b';
  d.major = static_cast<int>(major(st.st_rdev));
  d.minor = static_cast<int>(minor(st.st_rdev));
  d.access = access;
  return d;
}

CgroupHost detect_cgroups(const std::string& root) {
  CgroupHost h;
  h.root = root;
  std::string controllers = read_control(root + "/cgroup.controllers");
  auto has = [&](const char* c) {
    std::istringstream in(controllers);
    std::string w;
    while (in >> w)
      if (w == c) return true;
    return false;
  };
  if (!controllers.empty() && has("memory") && has("cpu") && has("pids")) {
    h.version = CgroupHost::Version::v2;
    return h;
  }
  for (const char* c : CgroupHost::kV1Controllers) {
    if (!is_dir(root + "/" + c)) {
      h.why_none = "no cgroup v2 with memory, cpu and pids, and no v1 controller " +
                   std::string(c) + " under " + root;
      return h;
    }
  }
  h.version = CgroupHost::Version::v1;
  return h;
}

std::optional<IoLimit> disk_of(const std::string& path, std::string* why) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (why != nullptr) *why = "cannot stat " + path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  std::string sys =
      "/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  std::error_code ec;
  if (major(st.st_dev) == 0 || !fs::exists(sys, ec)) {
    if (why != nullptr)
      *why = path + " is on no block device (" + std::to_string(major(st.st_dev)) + ":" +
             std::to_string(minor(st.st_dev)) + ": tmpfs, overlay or a network file system)";
    return std::nullopt;
  }
  // A partition's folder lies in its disk's: the disk's "dev" is "M:m".
  std::string dev = fs::exists(sys + "/partition", ec)
                        ? read_control(fs::canonical(sys, ec).parent_path().string() + "/dev")
                        : read_control(sys + "/dev");
  IoLimit l;
  if (std::sscanf(dev.c_str(), "%d:%d", &l.major, &l.minor) != 2) {
    if (why != nullptr) *why = "cannot read the disk of " + sys;
    return std::nullopt;
  }
  return l;
}

std::string io_unsupported(const CgroupHost& host) {
  switch (host.version) {
    case CgroupHost::Version::none:
      return host.why_none;
    case CgroupHost::Version::v1:
      return is_dir(host.root + "/" + kV1Io) ? "" : "no v1 blkio controller under " + host.root;
    case CgroupHost::Version::v2: {
      std::istringstream in(read_control(host.root + "/cgroup.controllers"));
      for (std::string w; in >> w;)
        if (w == "io") return {};
      return "no io controller in " + host.root + "/cgroup.controllers";
    }
  }
  return {};
}

std::vector<std::pair<std::string, std::string>> io_controls(CgroupHost::Version v,
                                                             const IoLimit& l) {
  const std::string dev = std::to_string(l.major) + ":" + std::to_string(l.minor);
  std::vector<std::pair<std::string, std::string>> out;
  if (v == CgroupHost::Version::v2) {
    std::string line = dev;
    if (l.read_bps > 0) line += " rbps=" + std::to_string(l.read_bps);
    if (l.write_bps > 0) line += " wbps=" + std::to_string(l.write_bps);
    if (line != dev) out.emplace_back("io.max", line);
    return out;
  }
  if (l.read_bps > 0)
    out.emplace_back("blkio.throttle.read_bps_device", dev + " " + std::to_string(l.read_bps));
  if (l.write_bps > 0)
    out.emplace_back("blkio.throttle.write_bps_device", dev + " " + std::to_string(l.write_bps));
  return out;
}

std::optional<JobCgroup> JobCgroup::create(const CgroupHost& host, const std::string& node_path,
                                           const std::string& name, const CgroupLimits& limits,
                                           std::string* error) {
  JobCgroup g;
  g.version_ = host.version;
  g.name_ = name;
  g.memory_bytes_ = limits.memory_bytes;
  auto fail = [&](const std::string& why) -> std::optional<JobCgroup> {
    if (error != nullptr) *error = why;
    g.remove();
    return std::nullopt;
  };
  auto make = [&](const std::string& dir) -> std::string {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return "cannot create " + dir + ": " + ec.message();
    g.dirs_.push_back(dir);
    g.procs_.push_back(dir + "/cgroup.procs");
    return {};
  };
  if (host.version == CgroupHost::Version::none) return fail(host.why_none);

  if (host.version == CgroupHost::Version::v2) {
    // Each level must hand the controllers down to its children.
    std::string level = host.root;
    std::vector<std::string> handed = {"+memory", "+cpu", "+pids"};
    if (!limits.io.empty()) handed.push_back("+io");
    for (const auto& part : {std::string("troupe"), node_path.substr(node_path.find('/') + 1)}) {
      for (const auto& c : handed)
        (void)write_control(level + "/cgroup.subtree_control", c);  // already on: fine
      level += "/" + part;
      std::error_code ec;
      fs::create_directories(level, ec);
    }
    for (const auto& c : handed) (void)write_control(level + "/cgroup.subtree_control", c);
    std::string dir = host.root + "/" + node_path + "/" + name;
    if (auto e = make(dir); !e.empty()) return fail(e);
    g.memory_dir_ = g.freezer_dir_ = g.pids_dir_ = dir;
    std::string e;
    if (limits.memory_bytes > 0)
      e = write_control(dir + "/memory.max", std::to_string(limits.memory_bytes));
    if (e.empty() && limits.cpus > 0)
      e = write_control(dir + "/cpu.max",
                        std::to_string(int64_t{limits.cpus} * 100000) + " 100000");
    if (e.empty() && limits.pids_max > 0)
      e = write_control(dir + "/pids.max", std::to_string(limits.pids_max));
    for (const auto& l : limits.io)
      for (const auto& [file, line] : io_controls(host.version, l))
        if (e.empty()) e = write_control(dir + "/" + file, line);
    // Devices under v2 need an eBPF program (BPF_CGROUP_DEVICE): not built;
    // docs/security.md says so. Sandboxes and containers still pass only the
    // job's GPUs.
    if (!e.empty()) return fail(e);
    return g;
  }

  for (const char* c : CgroupHost::kV1Controllers) {
    std::string dir = host.root + "/" + c + "/" + node_path + "/" + name;
    if (auto e = make(dir); !e.empty()) return fail(e);
    std::string ctl = c;
    if (ctl == "memory") g.memory_dir_ = dir;
    if (ctl == "freezer") g.freezer_dir_ = dir;
    if (ctl == "pids") g.pids_dir_ = dir;
    std::string e;
    if (ctl == "memory" && limits.memory_bytes > 0) {
      e = write_control(dir + "/memory.limit_in_bytes", std::to_string(limits.memory_bytes));
      // With swap, memory+swap gets the same limit: the job may not swap past it.
      if (e.empty() && fs::exists(dir + "/memory.memsw.limit_in_bytes"))
        (void)write_control(dir + "/memory.memsw.limit_in_bytes",
                            std::to_string(limits.memory_bytes));
    }
    if (ctl == "cpu" && limits.cpus > 0) {
      e = write_control(dir + "/cpu.cfs_period_us", "100000");
      if (e.empty())
        e = write_control(dir + "/cpu.cfs_quota_us", std::to_string(int64_t{limits.cpus} * 100000));
    }
    if (ctl == "pids" && limits.pids_max > 0)
      e = write_control(dir + "/pids.max", std::to_string(limits.pids_max));
    if (ctl == "devices" && limits.restrict_devices) {
      e = write_control(dir + "/devices.deny", "a");
      for (const auto& d : standard_devices())
        if (e.empty()) e = write_control(dir + "/devices.allow", to_string(d));
      for (const auto& d : limits.devices)
        if (e.empty()) e = write_control(dir + "/devices.allow", to_string(d));
    }
    if (!e.empty()) return fail(e);
  }
  if (!limits.io.empty()) {
    // blkio is not among the controllers every group needs: only here.
    std::string dir = host.root + "/" + kV1Io + "/" + node_path + "/" + name;
    if (!is_dir(host.root + "/" + kV1Io)) return fail("no v1 blkio controller under " + host.root);
    if (auto e = make(dir); !e.empty()) return fail(e);
    std::string e;
    for (const auto& l : limits.io)
      for (const auto& [file, line] : io_controls(host.version, l))
        if (e.empty()) e = write_control(dir + "/" + file, line);
    if (!e.empty()) return fail(e);
  }
  return g;
}

std::vector<int> JobCgroup::pids() const {
  if (freezer_dir_.empty()) return {};
  return read_pids(freezer_dir_);
}

uint64_t JobCgroup::oom_kills() const {
  if (memory_dir_.empty()) return 0;
  if (version_ == CgroupHost::Version::v2)
    return keyed_value(read_control(memory_dir_ + "/memory.events"), "oom_kill");
  return keyed_value(read_control(memory_dir_ + "/memory.oom_control"), "oom_kill");
}

bool JobCgroup::kill_all(int timeout_ms) const {
  if (freezer_dir_.empty()) return true;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  const bool v2 = version_ == CgroupHost::Version::v2;
  while (true) {
    auto list = pids();
    if (list.empty()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (v2 && write_control(freezer_dir_ + "/cgroup.kill", "1").empty()) {
      // The kernel kills every process, forks in flight included.
    } else if (!v2) {
      // Frozen, nothing in the group can fork a new process while we kill.
      (void)write_control(freezer_dir_ + "/freezer.state", "FROZEN");
      for (int i = 0; i < 100; ++i) {
        auto s = read_control(freezer_dir_ + "/freezer.state");
        if (s.rfind("FROZEN", 0) == 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      for (int pid : pids()) ::kill(pid, SIGKILL);
      (void)write_control(freezer_dir_ + "/freezer.state", "THAWED");
    } else {
      for (int pid : list) ::kill(pid, SIGKILL);  // v2 without cgroup.kill (before Linux 5.14)
    }
    // Killed processes leave the group as they exit: look again shortly.
    for (int i = 0; i < 50 && !pids().empty(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

bool JobCgroup::remove() {
  bool all = true;
  // A busy group (a process still leaving it) is retried briefly.
  for (const auto& d : dirs_) all = remove_tree(d) && all;
  if (all) {
    dirs_.clear();
    procs_.clear();
  }
  return all;
}

int reap_stale_groups(const CgroupHost& host, const std::string& node_path) {
  if (host.version == CgroupHost::Version::none) return 0;
  const bool v2 = host.version == CgroupHost::Version::v2;
  std::string base = v2 ? host.root + "/" + node_path : host.root + "/freezer/" + node_path;
  std::error_code ec;
  if (!is_dir(base)) return 0;
  int found = 0;
  for (const auto& e : fs::directory_iterator(base, ec)) {
    if (!e.is_directory()) continue;
    ++found;
    // Attach to the group as it is (its limits stay as they were) and end it.
    JobCgroup g;
    g.version_ = host.version;
    g.name_ = e.path().filename().string();
    if (v2) {
      g.dirs_.push_back(e.path().string());
      g.memory_dir_ = g.freezer_dir_ = g.pids_dir_ = e.path().string();
    } else {
      for (const char* c : CgroupHost::kV1Controllers) {
        std::string dir = host.root + "/" + c + "/" + node_path + "/" + g.name_;
        if (is_dir(dir)) g.dirs_.push_back(dir);
      }
      if (std::string io = host.root + "/" + kV1Io + "/" + node_path + "/" + g.name_; is_dir(io))
        g.dirs_.push_back(io);
      g.freezer_dir_ = e.path().string();
    }
    g.kill_all();
    g.remove();
  }
  return found;
}

}  // namespace troupe::node

// Owns the pure side of job isolation: option checks, the job's base
// environment, device lists and the bwrap / podman command lines.
#include "node/isolation.hpp"

#include <cstdio>

namespace troupe::node {

uint32_t stable_hash(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

std::string node_cgroup_path(const std::string& node, const std::string& state_dir) {
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", stable_hash(state_dir));
  return "troupe/" + node + "." + hex;
}

std::string check_isolation(const IsolationOptions& o) {
  if (!o.sandbox.empty() && o.sandbox != "bwrap")
    return "unknown --sandbox '" + o.sandbox + "' (none or bwrap)";
  if (!o.runtime.empty() && o.runtime != "podman")
    return "unknown --runtime '" + o.runtime + "' (none or podman)";
  if (!o.enabled && (!o.sandbox.empty() || !o.runtime.empty()))
    return "--sandbox and --runtime need --isolation on (jobs as their team's user, in a cgroup)";
  if (o.pids_max < 0 || o.default_memory_mb < 0) return "limits must be >= 0";
  if (o.gpu_device.find("%d") == std::string::npos)
    return "--gpu-device needs %d where the GPU index goes";
  return {};
}

std::string gpu_device_path(const std::string& pattern, int index) {
  std::string out = pattern;
  auto at = out.find("%d");
  if (at != std::string::npos) out.replace(at, 2, std::to_string(index));
  return out;
}

std::vector<std::string> job_base_env(const IsolationOptions& o, const std::string& user,
                                      const std::string& work_dir) {
  std::vector<std::string> env = {"PATH=" + o.job_path, "HOME=" + work_dir};
  if (!user.empty()) {
    env.push_back("USER=" + user);
    env.push_back("LOGNAME=" + user);
  }
  return env;
}

std::vector<DeviceMap> job_devices(const IsolationOptions& o, const std::vector<int>& gpus,
                                   bool (*exists)(const std::string&)) {
  std::vector<DeviceMap> out;
  // A GPU without a device node (a host with no driver, GPUs only counted
  // with --gpus) passes nothing: there is nothing to open.
  for (int g : gpus) {
    std::string host = gpu_device_path(o.gpu_device, g);
    if (exists(host)) out.push_back({host, "/dev/nvidia" + std::to_string(g)});
  }
  if (!gpus.empty())
    for (const auto& c : o.control_devices)
      if (exists(c)) out.push_back({c, c});
  return out;
}

std::vector<std::string> bwrap_command(const IsolationOptions& o, const LaunchInfo& l,
                                       const WorkerPaths& p,
                                       const std::vector<DeviceMap>& devices) {
  std::vector<std::string> a = {"bwrap",
                                "--ro-bind",
                                "/usr",
                                "/usr",
                                "--symlink",
                                "usr/bin",
                                "/bin",
                                "--symlink",
                                "usr/sbin",
                                "/sbin",
                                "--symlink",
                                "usr/lib",
                                "/lib",
                                "--symlink",
                                "usr/lib64",
                                "/lib64",
                                "--ro-bind",
                                "/etc",
                                "/etc",
                                "--proc",
                                "/proc",
                                "--dev",
                                "/dev",
                                "--tmpfs",
                                "/tmp",
                                "--unshare-pid",
                                "--unshare-ipc",
                                "--unshare-uts",
                                "--die-with-parent",
                                "--new-session"};
  if (o.sandbox_unshare_net) a.push_back("--unshare-net");
  for (const auto& b : o.sandbox_binds) {
    a.insert(a.end(), {"--ro-bind-try", b, b});
  }
  a.insert(a.end(), {"--bind", p.work_dir, p.work_dir});
  if (!p.checkpoint_dir.empty()) a.insert(a.end(), {"--bind", p.checkpoint_dir, p.checkpoint_dir});
  for (const auto& d : devices) a.insert(a.end(), {"--dev-bind", d.host, d.inside});
  a.insert(a.end(), {"--chdir", p.work_dir, "--"});
  a.insert(a.end(), l.command.begin(), l.command.end());
  return a;
}

std::string container_name(const std::string& node, const WorkerKey& k) {
  return "troupe-" + node + "-" + k.job_id + "-a" + std::to_string(k.attempt) + "-r" +
         std::to_string(k.rank);
}

std::vector<std::string> podman_command(const IsolationOptions& o, const LaunchInfo& l,
                                        const WorkerPaths& p, const std::vector<DeviceMap>& devices,
                                        const std::vector<std::string>& env, uid_t uid, gid_t gid,
                                        const std::string& name, const std::string& cgroup_parent) {
  std::vector<std::string> a = {o.podman, "run", "--rm", "--replace", "--name", name, "--pull",
                                "never", "--runtime", "runc", "--cgroup-manager", "cgroupfs",
                                "--cgroup-parent", cgroup_parent, "--network",
                                o.sandbox_unshare_net ? "none" : "host", "--user",
                                std::to_string(uid) + ":" + std::to_string(gid), "--cap-drop",
                                "all", "--security-opt", "no-new-privileges",
                                // Root here may not raise hard limits (no CAP_SYS_RESOURCE):
                                // podman's defaults would; name ones within them.
                                "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096",
                                "--workdir", p.work_dir, "--volume", p.work_dir + ":" + p.work_dir};
  if (!p.checkpoint_dir.empty())
    a.insert(a.end(), {"--volume", p.checkpoint_dir + ":" + p.checkpoint_dir});
  for (const auto& d : devices) a.insert(a.end(), {"--device", d.host + ":" + d.inside});
  for (const auto& kv : env) {
    auto eq = kv.find('=');
    if (eq != std::string::npos && eq > 0) a.insert(a.end(), {"--env", kv.substr(0, eq)});
  }
  a.push_back(l.image);
  a.insert(a.end(), l.command.begin(), l.command.end());
  return a;
}

}  // namespace troupe::node

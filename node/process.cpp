// Owns fork/exec of workers (process groups, log redirection, exec-failure
// reporting) and process-group signalling.
#include "node/process.hpp"

#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

extern char** environ;

namespace troupe::node {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::vector<std::string> exec_candidates(const std::string& file,
                                         const std::vector<std::string>& env) {
  if (file.find('/') != std::string::npos) return {file};
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& kv : env)
    if (kv.rfind("PATH=", 0) == 0) path = kv.substr(5);
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    auto colon = path.find(':', start);
    std::string dir =
        path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (dir.empty()) dir = ".";
    out.push_back(dir + "/" + file);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return out;
}

namespace {

// Async-signal-safe helpers for the child between fork and exec.
void write_all(int fd, const char* s, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, s, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    s += w;
    n -= static_cast<size_t>(w);
  }
}
void write_str(int fd, const char* s) {
  write_all(fd, s, std::strlen(s));
}

[[noreturn]] void child_fail(int report_fd, const char* prefix, int err) {
  write_str(2, prefix);
  const char* desc = strerrordesc_np(err);
  write_str(2, desc != nullptr ? desc : "unknown error");
  write_str(2, "\n");
  write_all(report_fd, reinterpret_cast<const char*>(&err), sizeof err);
  _exit(127);
}

}  // namespace

SpawnResult spawn_process(const ProcessSpec& spec) {
  SpawnResult r;
  if (spec.argv.empty() || spec.argv.front().empty()) {
    r.error = "empty command";
    return r;
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(spec.cwd, ec);
  if (ec) {
    r.error = "cannot create " + spec.cwd + ": " + ec.message();
    return r;
  }
  fs::create_directories(fs::path(spec.log_file).parent_path(), ec);
  if (ec) {
    r.error = "cannot create the log folder of " + spec.log_file + ": " + ec.message();
    return r;
  }
  UniqueFd log(::open(spec.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!log) {
    r.error = "cannot open " + spec.log_file + ": " + std::strerror(errno);
    return r;
  }

  // Everything the child needs is prepared here: it may only make
  // async-signal-safe calls after fork.
  std::vector<std::string> candidates = exec_candidates(spec.argv.front(), spec.env);
  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const std::string exec_prefix = "troupe-node: cannot execute '" + spec.argv.front() + "': ";
  const std::string cwd_prefix = "troupe-node: cannot enter " + spec.cwd + ": ";
  const std::string cgroup_prefix = "troupe-node: cannot join the job's cgroup: ";
  const std::string user_prefix = "troupe-node: cannot become the job's user: ";
  const std::string oom_adj = std::to_string(spec.oom_score_adj);

  const pid_t parent = ::getpid();
  const bool die_with_parent = spec.die_with_parent;

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    r.error = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  UniqueFd report_r(fds[0]), report_w(fds[1]);

  pid_t pid = ::fork();
  if (pid < 0) {
    r.error = std::string("fork: ") + std::strerror(errno);
    return r;
  }
  if (pid == 0) {
    // --- child ---
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; ++s) ::sigaction(s, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // Into the job's cgroups first: everything it ever starts is counted there.
    for (const auto& f : spec.cgroup_procs) {
      int fd = ::open(f.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ::write(fd, "0", 1) != 1)
        child_fail(report_w.get(), cgroup_prefix.c_str(), errno);
      ::close(fd);
    }
    if (spec.oom_score_adj > 0) {
      int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
      if (fd >= 0) {
        write_str(fd, oom_adj.c_str());
        ::close(fd);
      }
    }
    ::setsid();
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
      ::dup2(devnull, 0);
      if (devnull > 2) ::close(devnull);
    }
    ::dup2(log.get(), 1);
    ::dup2(log.get(), 2);
    // Descriptors the agent holds (sockets, pipes) must not leak into jobs.
    ::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
    if (::chdir(spec.cwd.c_str()) != 0) child_fail(report_w.get(), cwd_prefix.c_str(), errno);
    if (spec.uid) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(spec.gid) != 0 || ::setuid(*spec.uid) != 0)
        child_fail(report_w.get(), user_prefix.c_str(), errno);
      ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    }
    if (die_with_parent) {
      // A worker must not outlive its agent (set after setuid, which clears
      // it). The parent may have died between fork() and here: then we were
      // reparented already and no signal will come.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::raise(SIGKILL);
    }
    int err = ENOENT;
    bool saw_eacces = false;
    for (const auto& c : candidates) {
      ::execve(c.c_str(), argv.data(), envp.data());
      err = errno;
      if (err == EACCES) {
        saw_eacces = true;
        continue;
      }
      if (err == ENOENT || err == ENOTDIR || err == ESTALE || err == ENODEV || err == ETIMEDOUT)
        continue;
      break;
    }
    if (saw_eacces && (err == ENOENT || err == ENOTDIR)) err = EACCES;
    child_fail(report_w.get(), exec_prefix.c_str(), err);
  }
  // --- parent ---
  r.pid = pid;
  report_w.reset();
  log.reset();
  int child_errno = 0;
  size_t got = 0;
  auto* p = reinterpret_cast<char*>(&child_errno);
  while (got < sizeof child_errno) {
    ssize_t n = ::read(report_r.get(), p + got, sizeof child_errno - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (got == sizeof child_errno)
    r.exec_error = "cannot execute '" + spec.argv.front() + "': " + std::strerror(child_errno);
  return r;
}

bool signal_group(pid_t pid, int sig) {
  if (pid <= 0) return false;
  if (::kill(-pid, sig) == 0) return true;
  return ::kill(pid, sig) == 0;
}

int run_tool(const std::vector<std::string>& args, std::string* out) {
  if (args.empty()) return -1;
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int fds[2] = {-1, -1};
  if (out != nullptr && ::pipe2(fds, O_CLOEXEC) != 0) return -1;
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (out != nullptr)
    posix_spawn_file_actions_adddup2(&fa, write_end.get(), 1);
  else
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  write_end.reset();
  if (rc != 0) return -1;
  if (out != nullptr) {
    out->clear();
    char buf[4096];
    for (;;) {
      ssize_t n = ::read(read_end.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      if (out->size() < (64u << 10)) out->append(buf, static_cast<size_t>(n));
    }
  }
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace troupe::node

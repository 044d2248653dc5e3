// Owns spawning, watching and stopping troupe-load's child processes, and
// its temporary folders.
#include "load/child.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

extern char** environ;

namespace troupe::load {

Child::Child(const std::vector<std::string>& argv, const std::string& log_path) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // A clean signal mask and its own process group (a Ctrl-C to troupe-load
  // does not reach it twice; troupe-load stops it).
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, args[0], &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    error_ = "cannot start " + argv[0] + ": " + std::strerror(rc);
    return;
  }
  pid_ = pid;
}

Child::~Child() { stop(); }

bool Child::running() {
  if (pid_ <= 0 || reaped_) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_ || (r < 0 && errno == ECHILD)) {
    reaped_ = true;
    return false;
  }
  return true;
}

void Child::stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0 || reaped_) return;
  ::kill(pid_, SIGTERM);
  auto until = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < until) {
    if (!running()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  reaped_ = true;
}

std::string own_dir() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return p.parent_path().string();
}

std::string memory_temp_base() {
  const char* shm = "/dev/shm";
  struct statvfs v {};
  if (::access(shm, W_OK | X_OK) != 0 || ::statvfs(shm, &v) != 0) return {};
  unsigned long long free_bytes = static_cast<unsigned long long>(v.f_bavail) * v.f_frsize;
  return free_bytes >= (2ULL << 30) ? std::string(shm) : std::string();
}

TempDir::TempDir(const std::string& prefix, const std::string& base) {
  std::filesystem::path root = base.empty() ? std::filesystem::temp_directory_path()
                                            : std::filesystem::path(base);
  std::string tmpl = (root / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

}  // namespace troupe::load

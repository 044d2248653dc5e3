// A child process that troupe-load starts (the simulated fleet): spawned
// with its output in a file, stopped with SIGTERM (then SIGKILL) when the
// object goes away. RAII around posix_spawn and waitpid.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace troupe::load {

class Child {
 public:
  // Starts argv[0] (a path) with stdout and stderr appended to `log_path`.
  // pid() is 0 and error() says why when it could not start.
  Child(const std::vector<std::string>& argv, const std::string& log_path);
  ~Child();  // stop()
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& error() const { return error_; }
  // True while it has not exited.
  bool running();
  // SIGTERM, wait up to `grace`, then SIGKILL; reaps. Idempotent.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(10));

 private:
  pid_t pid_ = 0;
  bool reaped_ = false;
  std::string error_;
};

// The directory of the running executable (/proc/self/exe), "" if unknown.
std::string own_dir();

// A folder on a memory file system for short-lived bulk files (the
// simulated fleet's per-job state and logs, a self-hosted nats-server's
// store): /dev/shm when it is a writable directory with at least 2 GiB free,
// "" otherwise (then the system's temporary folder is used). Removing tens of
// thousands of small files from a busy disk took minutes on the 2-core VM.
std::string memory_temp_base();

// A fresh temporary directory under `base` (default: the system's temporary
// folder), removed (recursively) on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix, const std::string& base = {});
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace troupe::load

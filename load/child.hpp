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

// A fresh temporary directory, removed (recursively) on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace troupe::load

// Local processes for `troupe up`: a child process (RAII: stopped with
// SIGTERM, then SIGKILL after a deadline, when destroyed), signal delivery as
// a file descriptor (no global flag), port probing and binary lookup.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace troupe::gateway {

// Blocks SIGINT and SIGTERM in the calling thread (and every thread it starts
// later) and receives them through a signalfd. Create it before any other
// thread exists (before bus::Library and any Connection).
class SignalWatch {
 public:
  SignalWatch();
  ~SignalWatch();
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;
  // Waits up to `timeout` for a signal; its number, or 0 when none came.
  int wait(std::chrono::milliseconds timeout);
  // The last signal received (0 when none).
  int received() const { return received_; }

 private:
  int fd_ = -1;
  int received_ = 0;
};

class Child {
 public:
  // Starts `argv` (argv[0] is a path) with stdout and stderr appended to
  // `log_path` (truncated first), stdin from /dev/null, in its own process
  // group, and with SIGTERM sent to it if this process dies. nullopt and
  // `error` when it cannot start.
  static std::optional<Child> start(const std::string& name, const std::vector<std::string>& argv,
                                    const std::string& log_path, std::string* error);
  ~Child();
  Child(Child&& o) noexcept;
  Child& operator=(Child&& o) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  const std::string& name() const { return name_; }
  const std::string& log_path() const { return log_path_; }
  pid_t pid() const { return pid_; }
  // True while the process runs; once it exited, `exit_text()` says how.
  bool running();
  std::string exit_text() const { return exit_text_; }
  // SIGTERM, wait up to `grace`, then SIGKILL. Returns true when it ended on
  // SIGTERM. Idempotent.
  bool stop(std::chrono::milliseconds grace = std::chrono::seconds(5));

 private:
  Child() = default;
  void reap(int status);
  std::string name_;
  std::string log_path_;
  pid_t pid_ = -1;
  bool exited_ = false;
  std::string exit_text_;
};

// True when 127.0.0.1:`port` can be bound (nothing listens there).
bool port_free(int port, std::string* why = nullptr);
// Directory of the running executable (/proc/self/exe), "" when unknown.
std::string self_dir();
// Path of `name` next to this executable, in $PATH, or in `extra_dirs`; "".
std::string find_binary(const std::string& name, const std::vector<std::string>& extra_dirs = {});
// The last `lines` lines of a text file ("" when unreadable).
std::string tail_file(const std::string& path, int lines);

}  // namespace troupe::gateway

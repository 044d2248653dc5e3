// The reaper: one thread that waits for the agent's own children (by pidfd
// and epoll, so it never reaps a process it was not given) and reports each
// exit status once. Falls back to polling waitpid(pid, WNOHANG) every 20 ms
// where pidfd_open is unavailable.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "node/process.hpp"

namespace troupe::node {

class Reaper {
 public:
  // Called on the reaper thread with the waitpid status (nullopt when the
  // child could not be waited for, e.g. someone else reaped it).
  using OnExit = std::function<void(pid_t, std::optional<int> wait_status)>;

  explicit Reaper(OnExit on_exit);
  ~Reaper();  // stops the thread; children not yet reaped are left alone
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;

  // Starts watching `pid` (a child of this process). Thread-safe.
  void watch(pid_t pid);
  size_t watching() const;

 private:
  void run();
  void reap(pid_t pid);

  OnExit on_exit_;
  UniqueFd epoll_;
  UniqueFd wake_;  // eventfd
  mutable std::mutex mu_;
  std::map<pid_t, UniqueFd> watched_;  // pid -> pidfd (-1 when polling)
  bool polling_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace troupe::node

// Owns waiting for worker processes (pidfd + epoll reaper thread).
#include "node/reaper.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <vector>

namespace troupe::node {

Reaper::Reaper(OnExit on_exit)
    : on_exit_(std::move(on_exit)),
      epoll_(::epoll_create1(EPOLL_CLOEXEC)),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!epoll_ || !wake_) throw std::runtime_error("reaper: cannot create epoll/eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;  // 0: the wake-up eventfd (no pid is 0)
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev) != 0)
    throw std::runtime_error("reaper: epoll_ctl");
  thread_ = std::thread([this] { run(); });
}

Reaper::~Reaper() {
  stop_ = true;
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

size_t Reaper::watching() const {
  std::lock_guard<std::mutex> lock(mu_);
  return watched_.size();
}

void Reaper::watch(pid_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!polling_) {
    UniqueFd pfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    int err = errno;
    if (pfd) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = static_cast<uint64_t>(pid);
      if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, pfd.get(), &ev) == 0) {
        watched_[pid] = std::move(pfd);
        return;
      }
    } else if (err == ENOSYS || err == EPERM) {
      polling_ = true;  // no pidfd here: poll every watched pid from now on
    }
    // Otherwise (e.g. ESRCH: already gone) this one pid is polled.
  }
  // Polling: a UniqueFd of -1 marks the pid; the loop wakes every 20 ms.
  watched_[pid] = UniqueFd();
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_.get(), &one, sizeof one);
}

void Reaper::reap(pid_t pid) {
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return;  // still running (spurious wake-up)
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = watched_.find(pid);
    if (it == watched_.end()) return;
    if (it->second) ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second.get(), nullptr);
    watched_.erase(it);
  }
  if (r == pid)
    on_exit_(pid, status);
  else
    on_exit_(pid, std::nullopt);  // ECHILD: not ours to wait for any more
}

void Reaper::run() {
  std::vector<epoll_event> events(64);
  while (!stop_) {
    bool poll_all;
    {
      std::lock_guard<std::mutex> lock(mu_);
      poll_all = false;
      for (const auto& [pid, fd] : watched_)
        if (!fd) poll_all = true;
    }
    int n = ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()),
                         poll_all ? 20 : -1);
    if (stop_) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < n; ++i) {
      auto id = events[static_cast<size_t>(i)].data.u64;
      if (id == 0) {
        uint64_t v;
        [[maybe_unused]] auto r = ::read(wake_.get(), &v, sizeof v);
        continue;
      }
      reap(static_cast<pid_t>(id));
    }
    if (poll_all) {
      std::vector<pid_t> polled;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& [pid, fd] : watched_)
          if (!fd) polled.push_back(pid);
      }
      for (pid_t pid : polled) reap(pid);
    }
  }
}

}  // namespace troupe::node

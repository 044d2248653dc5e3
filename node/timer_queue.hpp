// One timer thread with a priority queue of deadlines: --simulate worker ends,
// SIGKILL escalation, max_runtime_s, heartbeats. Callbacks run on the timer
// thread with no lock of the queue held; cancelling is by the callback
// checking whether it still applies.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

namespace troupe::node {

class TimerQueue {
 public:
  using Clock = std::chrono::steady_clock;
  using Fn = std::function<void()>;

  TimerQueue();
  ~TimerQueue();  // stop()
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  void at(Clock::time_point when, Fn fn);
  void after(std::chrono::nanoseconds delay, Fn fn) { at(Clock::now() + delay, std::move(fn)); }
  // Drops pending timers and joins the thread. Must not be called from a callback.
  void stop();
  size_t pending() const;

 private:
  struct Item {
    Clock::time_point when;
    uint64_t seq;  // FIFO among equal deadlines
    Fn fn;
  };
  struct Later {
    bool operator()(const Item& a, const Item& b) const {
      return a.when != b.when ? a.when > b.when : a.seq > b.seq;
    }
  };
  void run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Item, std::vector<Item>, Later> queue_;
  uint64_t seq_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace troupe::node

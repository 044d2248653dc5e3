// Owns the timer thread and its deadline queue.
#include "node/timer_queue.hpp"

namespace troupe::node {

TimerQueue::TimerQueue() : thread_([this] { run(); }) {}

TimerQueue::~TimerQueue() { stop(); }

void TimerQueue::at(Clock::time_point when, Fn fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    queue_.push(Item{when, seq_++, std::move(fn)});
  }
  cv_.notify_one();
}

void TimerQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  while (!queue_.empty()) queue_.pop();
}

size_t TimerQueue::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void TimerQueue::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (queue_.empty()) {
      cv_.wait(lock);
      continue;
    }
    auto when = queue_.top().when;
    if (Clock::now() < when) {
      cv_.wait_until(lock, when);
      continue;
    }
    // top() is const; moving the function out is safe because ordering
    // only reads `when` and `seq`, and the item is popped right away.
    Fn fn = std::move(const_cast<Item&>(queue_.top()).fn);
    queue_.pop();
    lock.unlock();
    fn();
    lock.lock();
  }
}

}  // namespace troupe::node

// A queue with a thread of its own that handles its items one at a time, in
// order: for blocking reads that neither an actor nor a NATS callback thread
// may wait for. No NATS here.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace troupe::bus {

// The thread starts with the first item. At most `max_waiting` items wait:
// more are refused at once (a flood is not queued without end), as is every
// item after close().
template <class Item>
class SerialQueue {
 public:
  using Run = std::function<void(Item&)>;
  SerialQueue(size_t max_waiting, Run run) : max_(max_waiting), run_(std::move(run)) {}
  ~SerialQueue() { close(); }
  SerialQueue(const SerialQueue&) = delete;
  SerialQueue& operator=(const SerialQueue&) = delete;

  // False when refused: `item` is then left as it was, for its owner to answer.
  bool post(Item& item) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || waiting_.size() >= max_) return false;
    waiting_.push_back(std::move(item));
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    cv_.notify_one();
    return true;
  }

  // Stops the thread once the item in hand is done; returns the items still
  // waiting, unhandled.
  std::deque<Item> close() {
    std::deque<Item> left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      left.swap(waiting_);
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    return left;
  }

 private:
  void loop() {
    for (;;) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return closed_ || !waiting_.empty(); });
        if (closed_) return;
        item = std::move(waiting_.front());
        waiting_.pop_front();
      }
      run_(item);
    }
  }

  const size_t max_;
  const Run run_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> waiting_;
  bool closed_ = false;
  std::thread thread_;
};

}  // namespace troupe::bus

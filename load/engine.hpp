// troupe-load's NATS side: pipelined submissions and the job event watch.
//
// Three connections (publishing fast and subscribing on one connection gets
// a client dropped as a slow consumer): one publishes submissions, each with
// the reply subject <inbox>.<index>; one subscribes to <inbox>.* for every
// reply; one subscribes to troupe.*.events.> (before the first submission)
// and records, per job id, when the first starting/running, the first
// running and the first terminal event arrived. Times are nanoseconds on the
// steady clock since the Engine opened.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "bus/nats.hpp"

namespace troupe::load {

// What became of one submission.
struct JobResult {
  std::string team;
  int gpus = 0;  // total over workers
  std::string job_id;  // empty when not acknowledged
  std::string error;   // the {"error"} reply
  int64_t sent_ns = -1, acked_ns = -1, placed_ns = -1, running_ns = -1, ended_ns = -1;
  std::string final_state;  // succeeded | failed | canceled; empty while not terminal
};

struct Progress {
  size_t sent = 0, acked = 0, rejected = 0, placed = 0, terminal = 0;
};

class Engine {
 public:
  using Clock = std::chrono::steady_clock;
  // Connects and subscribes; nullptr and `error` when it cannot.
  static std::unique_ptr<Engine> open(const std::string& url, std::string* error);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Publishes one submission on troupe.<team>.submit (not waiting for the
  // reply); returns its index. False `ok` when the client refused.
  size_t submit(const std::string& team, const std::string& body, int gpus, bool* ok = nullptr);
  // Waits until fewer than `max` submissions await their reply, or `until`.
  bool wait_inflight_below(size_t max, Clock::time_point until);
  // Waits until every submission was answered and every acknowledged job
  // reached a terminal state, or `until`; false at the deadline.
  bool wait_done(Clock::time_point until);
  bool done() const;
  Progress progress() const;
  // Every submission, in submission order, joined with its events.
  std::vector<JobResult> results() const;

  int64_t now_ns() const;
  // A connection for other requests (troupe.sys.nodes samples).
  bus::Connection& requester() { return *req_; }
  int64_t dropped() const;

 private:
  struct EventTimes {
    int64_t placed_ns = -1, running_ns = -1, ended_ns = -1;
    std::string final_state;
  };
  Engine() = default;
  void on_reply(Inbound&& in);
  void on_event(Inbound&& in);
  bool done_locked() const;

  Clock::time_point origin_ = Clock::now();
  std::string inbox_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<JobResult> jobs_;
  std::unordered_map<std::string, size_t> by_id_;  // acknowledged job id -> index
  std::unordered_map<std::string, EventTimes> events_;
  size_t answered_ = 0, rejected_ = 0, placed_ = 0, terminal_ = 0;

  // Declared last: closed first, so no callback runs into freed state.
  std::unique_ptr<bus::Connection> pub_, reply_conn_, event_conn_, req_;
  bus::SubscriptionPtr reply_sub_, event_sub_;
};

}  // namespace troupe::load

// troupe-load's NATS side: pipelined submissions and the job event watch.
//
// One lane per identity, of three connections (publishing fast and
// subscribing on one connection gets a client dropped as a slow consumer):
// one publishes submissions, each with the reply subject <inbox>.<index>; one
// subscribes to <inbox>.* for every reply; one subscribes to the lane's
// events (before the first submission) and records, per job id, when the
// first starting/running, the first running and the first terminal event
// arrived. With one identity (or none) there is one lane for every team,
// watching troupe.*.events.>; with a creds dir, one lane per team as
// team-<t>.creds, with that team's inbox and troupe.<t>.events.> (a team may
// not subscribe to the other teams' events). Times are nanoseconds on the
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
#include "load/options.hpp"

namespace troupe::load {

// What became of one submission.
struct JobResult {
  std::string team;
  int gpus = 0;        // total over workers
  std::string job_id;  // empty when not acknowledged
  std::string error;   // the {"error"} reply
  int64_t sent_ns = -1, acked_ns = -1, placed_ns = -1, running_ns = -1, ended_ns = -1;
  std::string final_state;  // succeeded | failed | canceled; empty while not terminal
  std::string end_reason;   // the terminal event's reason (why it failed)
  // Replays only (set by the replay after the run): the job's arrival and
  // duration in trace seconds (-1: not from a trace) and whether the trace
  // marks it censored (still running when the trace ends).
  double trace_arrival_s = -1, trace_duration_s = -1;
  bool censored = false;
  // Each attempt that ended `preempted`: its running event and its
  // preempted event (ns, as the others), in order.
  std::vector<std::pair<int64_t, int64_t>> preempted_ns;
  // The running event of its last attempt (-1: none, or that attempt was
  // preempted and none ran since); a job never preempted: running_ns.
  int64_t last_running_ns = -1;
};

struct Progress {
  size_t sent = 0, acked = 0, rejected = 0, placed = 0, terminal = 0;
};

struct EngineOptions {
  std::string url = "nats://127.0.0.1:4222";
  // creds: the one identity (creds_dir empty), or the admin requests' (see
  // `admin_requests`); creds_dir: one identity per team in `teams`,
  // <creds_dir>/team-<t>.creds. tls_ca as given (effective_tls_ca applies).
  IdentityOptions identity;
  // The teams that will be submitted as; with a creds dir, the only ones.
  std::vector<std::string> teams;
  // Open a connection for troupe.sys.* requests (requester()): as
  // identity.creds, or without identity when there is no creds dir. With a
  // creds dir and no creds there is none (can_request() is false).
  bool admin_requests = false;
};

class Engine {
 public:
  using Clock = std::chrono::steady_clock;
  // Connects and subscribes; nullptr and `error` when it cannot (a team's
  // missing creds file is named).
  static std::unique_ptr<Engine> open(const EngineOptions& opts, std::string* error);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Publishes one submission on troupe.<team>.submit, or addressed to
  // `pool` (troupe.<team>.submit.<pool>), not waiting for the reply;
  // returns its index. False `ok` when the client refused.
  size_t submit(const std::string& team, const std::string& body, int gpus, bool* ok = nullptr,
                const std::string& pool = {});
  // Waits until fewer than `max` submissions await their reply, or `until`;
  // false at the deadline, or at once when the server refused (refused()).
  bool wait_inflight_below(size_t max, Clock::time_point until);
  // Waits until every submission was answered and every acknowledged job
  // reached a terminal state, or `until`; false at the deadline, or at once
  // when the server refused a publish or subscription (refused()).
  bool wait_done(Clock::time_point until);
  // The first permissions violation the server reported on a submit, reply
  // or event connection ("" when none): what it refused cannot be answered.
  std::string refused() const;
  // Says why a refusal happened; `one_identity`: one identity submitting
  // for every team and watching troupe.*.events.>.
  static std::string refusal_text(const std::string& why, bool one_identity);
  bool done() const;
  Progress progress() const;
  // Every submission, in submission order, joined with its events.
  std::vector<JobResult> results() const;

  int64_t now_ns() const;
  // A connection for other requests (troupe.sys.nodes samples); only when
  // can_request().
  bool can_request() const { return req_ != nullptr; }
  bus::Connection& requester() { return *req_; }
  // "none", "one identity" (`creds` or none) or "one per team".
  const char* identity_mode() const;
  int64_t dropped() const;
  // Submissions addressed to a pool (--pool) that no scheduler listened for
  // (no responders: no shard owns the pool, or one scheduler of an older
  // version) and were sent again on troupe.<team>.submit.
  int64_t rerouted() const;

 private:
  struct EventTimes {
    int64_t placed_ns = -1, running_ns = -1, ended_ns = -1;
    std::string final_state;
    std::string end_reason;
    int64_t attempt_running_ns = -1;                        // the current attempt's running event
    int64_t last_running_ns = -1;                           // ... kept after a terminal event
    std::vector<std::pair<int64_t, int64_t>> preempted_ns;  // (running, preempted)
  };
  // The connections of one identity.
  struct Lane {
    std::string inbox;
    // The subscriptions, declared after their connections, go first.
    std::unique_ptr<bus::Connection> pub, reply_conn, event_conn;
    bus::SubscriptionPtr reply_sub, event_sub;
    // The replies to submissions addressed to a pool come on the publishing
    // connection: nats-server says "no responders" (an empty reply) only to
    // a subscription of the connection that published.
    std::string pool_inbox;
    bus::SubscriptionPtr pool_sub;
  };
  Engine() = default;
  // Opens `lane` as base.creds_file ("" none), subscribes to its replies and
  // to `events`; false and `error` when it cannot.
  bool open_lane(Lane& lane, const bus::ConnectOptions& base, const std::string& label,
                 const std::string& events, std::string* error);
  void on_reply(Inbound&& in);
  // The lane that submits as `team` (nullptr: none).
  const Lane* lane_for(const std::string& team) const;
  void on_event(Inbound&& in);
  bool done_locked() const;

  Clock::time_point origin_ = Clock::now();
  bool per_team_ = false;
  bool anonymous_ = true;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<JobResult> jobs_;
  std::unordered_map<std::string, size_t> by_id_;  // acknowledged job id -> index
  std::unordered_map<std::string, EventTimes> events_;
  size_t answered_ = 0, rejected_ = 0, placed_ = 0, terminal_ = 0;
  // A pool-addressed submission's body until it is answered (sent again on
  // troupe.<team>.submit when nobody listened for the pool), by index.
  std::unordered_map<size_t, std::string> pool_bodies_;
  int64_t rerouted_ = 0;
  std::string refused_;

  // Declared last: closed first, so no callback runs into freed state.
  // lanes_[lane_of_.at(team)] submits as `team` (lanes_[0] for every team
  // with one identity); fixed once open() returns.
  std::unordered_map<std::string, size_t> lane_of_;
  std::vector<Lane> lanes_;
  std::unique_ptr<bus::Connection> req_;
};

}  // namespace troupe::load

// The actors' ports (actors/ports.hpp) bound to the scheduler's bus: the
// outbox (every publish through the lease gate, job events on their own
// path; what is for this process itself to the local view), the intake (submissions appended to
// TROUPE_INTAKE while the lease is known valid), the history reader (a job's stored events),
// the stored logs, the front doors' leave to start their jobs, and a
// shard's subscriptions to its own nodes' agents.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/ports.hpp"
#include "actors/shell/leadership.hpp"
#include "actors/shell/local_view.hpp"
#include "bus/nats.hpp"
#include "bus/serial_queue.hpp"

namespace troupe::shell {

// Answers to in-process requests and a copy of every job event go to the
// local view (the metrics collector's source) first. A Launch makes its
// team's logs stream first, the first time (LogStreams::before_send).
class BusOutbox : public Outbox {
 public:
  BusOutbox(LeaseGate& g, LocalView& local, LogStreams* logs = nullptr)
      : gate_(g), local_(local), logs_(logs) {}

 protected:
  void send(const std::string& subject, const void* data, size_t size,
            const std::string& reply) override {
    if (local_.answer(subject, data, size)) return;
    if (logs_ != nullptr) logs_->before_send(subject, data, size);
    gate_.publish(subject, data, size, reply);
  }
  void send_event(const std::string& subject, const std::string& data, Stored stored) override {
    local_.event(subject, data);
    gate_.publish_event(subject, data.data(), data.size(), std::move(stored));
  }

 private:
  LeaseGate& gate_;
  LocalView& local_;
  LogStreams* logs_;  // null: no logs streams (tests)
};

class StreamIntake : public Intake {
 public:
  StreamIntake(bus::JetStream& js, LeaseGate& g) : js_(js), gate_(g) {}
  void append(const std::string& subject, std::vector<uint8_t> bytes, const std::string& msg_id,
              Done done) override;
  void ack(uint64_t stream_seq) override {
    if (auto* c = consumer.load()) c->ack(stream_seq);
  }
  void retry(uint64_t stream_seq, int64_t delay_ms) override {
    if (auto* c = consumer.load()) c->nak(stream_seq, delay_ms);
  }
  // (Each consumer acknowledges only the messages it delivered.) One taken
  // before the consumers are set (they deliver as soon as they open) is
  // acknowledged when they are, not redelivered after the ack wait.
  void ack_handoff(uint64_t stream_seq) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (handoffs_.empty() && early_.size() < kMaxEarly) early_.push_back(stream_seq);
    for (auto* c : handoffs_) c->ack(stream_seq);
  }
  std::atomic<bus::Consumer*> consumer{nullptr};  // troupe.<team>.enqueue
  // troupe.sys.intake.<team>.handoff, or a shard's of each pool it holds
  // (troupe.sys.intake.<team>.handoff.<pool>); none (empty) before serving
  // and after.
  void set_handoffs(std::vector<bus::Consumer*> consumers) {
    std::lock_guard<std::mutex> lock(mu_);
    handoffs_ = std::move(consumers);
    for (auto* c : handoffs_)
      for (auto seq : early_) c->ack(seq);
    early_.clear();
  }

 private:
  static constexpr size_t kMaxEarly = 4096;
  bus::JetStream& js_;
  LeaseGate& gate_;
  std::mutex mu_;
  std::vector<bus::Consumer*> handoffs_;
  std::vector<uint64_t> early_;  // acknowledged while no consumer was set
};

// troupe.<team>.history: a job's events read from TROUPE_EVENTS (only the
// subject troupe.<team>.events.<job_id>) on a thread of its own, one read at
// a time, so no actor waits. At most kMaxWaiting reads wait; more are refused
// at once (a flood of requests is not queued without end).
class StreamHistory : public History {
 public:
  explicit StreamHistory(bus::JetStream& js) : js_(js) {}
  ~StreamHistory() override;
  void read(const std::string& team, const std::string& job_id, Done done) override;
  void scan(const std::string& filter, int64_t since_ms, Each each, Scanned done) override;

 private:
  static constexpr size_t kMaxWaiting = 64;
  struct Read {
    std::string team, job_id;
    Done done;
    // A scan (troupe usage) when `each` is set: `team` holds its filter.
    int64_t since_ms = 0;
    Each each;
    Scanned scanned;
  };
  void run(Read& r);
  bus::JetStream& js_;
  bus::SerialQueue<Read> reads_{kMaxWaiting, [this](Read& r) { run(r); }};
};

// Stored logs (actors/ports.hpp StoredLogs): one subject read from the
// stream of its team (subjects::logs_stream of the team the subject names,
// subjects::team_of_log_chunks) on a thread of its own, one read at a time;
// at most kMaxWaiting wait.
class StreamLogs : public StoredLogs {
 public:
  explicit StreamLogs(bus::JetStream& js) : js_(js) {}
  ~StreamLogs() override;
  void read(const std::string& subject, Done done) override;

 private:
  static constexpr size_t kMaxWaiting = 64;
  struct Read {
    std::string subject;
    Done done;
  };
  void run(Read& r);
  bus::JetStream& js_;
  bus::SerialQueue<Read> reads_{kMaxWaiting, [this](Read& r) { run(r); }};
};

// A front door's leave to start a job (actors/ports.hpp DispatchGate): a
// request on troupe.sys.dispatch.claim, kTimeoutMs at most, off the actors'
// threads: kLanes threads, a job's claims always on the same one, at most
// kMaxWaiting waiting on each (more: not granted at once, asked again later).
class BusDispatchGate : public DispatchGate {
 public:
  explicit BusDispatchGate(bus::Connection& conn);
  ~BusDispatchGate() override;
  void claim(const std::string& team, const std::string& job_id, const std::string& dispatch,
             int64_t submitted_ms, Done done) override;

 private:
  static constexpr int kTimeoutMs = 2000;
  static constexpr size_t kLanes = 4;
  static constexpr size_t kMaxWaiting = 256;
  struct Claim {
    std::string team, job_id, dispatch;
    int64_t submitted_ms = 0;
    Done done;
  };
  void run(Claim& c);
  bus::Connection& conn_;
  std::vector<std::unique_ptr<bus::SerialQueue<Claim>>> lanes_;
};

// A shard's ears (AgentWatch): troupe.sys.agent.<node>.> for each node of
// its pools, on a connection whose messages the client library's shared
// thread delivers (one thread, whatever the nodes: a shard's `in`), so
// another shard's agents cost this one nothing. Every agent's register
// comes on `registers` (troupe.sys.agent.*.register): passed on to the
// router unless the node is watched, whose own subscription delivers it in
// order with the rest of what its agent says.
class BusAgentWatch : public AgentWatch {
 public:
  explicit BusAgentWatch(bus::Connection& conn) : conn_(conn) {}
  // Where what it hears goes: set once, before the router's first message.
  void serve(InboundActor router) { router_ = std::move(router); }
  void watch(const std::string& node) override;
  void watch(const std::vector<std::string>& nodes);  // (one round trip for all)
  bus::SubscriptionPtr registers(bus::Connection& in);
  bool watching(const std::string& node) const;

 private:
  bus::Connection& conn_;
  InboundActor router_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, bus::SubscriptionPtr> subs_;
};

}  // namespace troupe::shell

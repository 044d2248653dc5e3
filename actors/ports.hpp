// What the actors need from the world, as interfaces: publishing on the bus,
// the durable intake log, snapshots, the stored job events, a front door's
// leave to start a job, and the time. The scheduler
// binds them to NATS (actors/main.cpp); tests bind fakes. Actors never include
// NATS headers.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/policy/baseline.hpp"
#include "actors/policy/shards.hpp"

namespace troupe {

class Outbox {
 public:
  virtual ~Outbox() = default;
  // Thread-safe; fire and forget.
  void publish(const std::string& subject, const void* data, size_t size,
               const std::string& reply) {
    published_.fetch_add(1, std::memory_order_relaxed);
    send(subject, data, size, reply);
  }
  void publish(const std::string& subject, const std::string& data, const std::string& reply = {}) {
    publish(subject, data.data(), data.size(), reply);
  }
  void publish(const std::string& subject, const std::vector<uint8_t>& data,
               const std::string& reply = {}) {
    publish(subject, data.data(), data.size(), reply);
  }
  // A job event, kept by the events stream: `stored` (may be empty) runs on
  // any thread once the stream holds it — what waits for it (a Launch) is
  // written ahead.
  using Stored = std::function<void()>;
  void publish_event(const std::string& subject, const std::string& data, Stored stored) {
    published_.fetch_add(1, std::memory_order_relaxed);
    send_event(subject, data, std::move(stored));
  }
  // Messages published so far (troupe.sys.stats: bus_messages_out).
  int64_t published() const { return published_.load(std::memory_order_relaxed); }

 protected:
  virtual void send(const std::string& subject, const void* data, size_t size,
                    const std::string& reply) = 0;
  // Without a durable stream (in-process tests): sent, and taken as stored.
  virtual void send_event(const std::string& subject, const std::string& data, Stored stored) {
    send(subject, data.data(), data.size(), {});
    if (stored) stored();
  }

 private:
  std::atomic<int64_t> published_{0};
};
using OutboxPtr = std::shared_ptr<Outbox>;

class Intake {
 public:
  virtual ~Intake() = default;
  // How an append ended. Not ok: not stored (`error`). Ok: stored; or, when
  // `duplicate`, dropped because the log already holds a record under the
  // same msg_id (within its de-duplication window), whose bytes `original`
  // holds. A duplicate whose original cannot be read is not ok.
  struct Appended {
    bool ok = false;
    bool duplicate = false;
    std::string error;
    std::string original;
  };
  using Done = std::function<void(Appended)>;
  // Appends an accepted submission durably; `done` runs (on any thread) once
  // it is stored. `msg_id` de-duplicates.
  virtual void append(const std::string& subject, std::vector<uint8_t> bytes,
                      const std::string& msg_id, Done done) = 0;
  // A submission that came from a JetStream consumer (Inbound::stream_seq) is
  // done with (recorded, or refused for good): it is not redelivered.
  virtual void ack(uint64_t /*stream_seq*/) {}
  // ... or has it delivered again (to any scheduler reading it) `delay_ms`
  // from now, rather than after the consumer's ack wait.
  virtual void retry(uint64_t /*stream_seq*/, int64_t /*delay_ms*/) {}
  // The same for a record a standby handed off (troupe.sys.intake.<team>.handoff),
  // once the job supervisor has its job.
  virtual void ack_handoff(uint64_t /*stream_seq*/) {}
};
using IntakePtr = std::shared_ptr<Intake>;

// The durable home of actor snapshots (the KV bucket TROUPE_STATE; docs/recovery.md).
// put() only records the latest bytes of a key; the store writes them in the
// background, coalesced, so an actor never waits for a write.
class SnapshotStore {
 public:
  virtual ~SnapshotStore() = default;
  virtual void put(const std::string& key, std::string bytes) = 0;
  // The key is forgotten for good (an ended job past its retention): its
  // values go, a marker without value stays (a restore reads it as "purged").
  virtual void purge(const std::string& key) = 0;
};
using SnapshotStorePtr = std::shared_ptr<SnapshotStore>;

// The stored events of one job (the events stream TROUPE_EVENTS), for
// troupe.<team>.history. read() returns at once; `done` runs later on another
// thread with the stored messages' texts in stream order, or an error text.
// Only the subject troupe.<team>.events.<job_id> is read.
class History {
 public:
  virtual ~History() = default;
  using Done = std::function<void(std::vector<std::string> events, std::string error)>;
  virtual void read(const std::string& team, const std::string& job_id, Done done) = 0;
  // Every stored event under `filter` (troupe.<team>.events.> or every
  // team's) stored since `since_ms`, oldest first, each handed to `each`;
  // then `done` with "" or an error (troupe usage). Both run on the reader's
  // thread, one scan at a time.
  using Each = std::function<void(std::string_view json)>;
  using Scanned = std::function<void(std::string error)>;
  virtual void scan(const std::string& filter, int64_t since_ms, Each each, Scanned done) = 0;
};
using HistoryPtr = std::shared_ptr<History>;

// A worker's output as its agent shipped it to TROUPE_LOGS_<team> (the subject
// subjects::log_chunks(node, team, job, attempt, rank): only that node's
// agent may publish there), for troupe.<team>.logs of a job that has ended,
// whose node may be gone. read() returns at once; `done` runs later on
// another thread: found (some chunk was stored) and the log put together
// (messages/log_chunks.hpp), or an error text.
class StoredLogs {
 public:
  virtual ~StoredLogs() = default;
  using Done = std::function<void(bool found, std::string log, std::string error)>;
  virtual void read(const std::string& subject, Done done) = 0;
};
using StoredLogsPtr = std::shared_ptr<StoredLogs>;

// The front door named in a job's spec (`dispatch`, docs/clusters.md) grants
// the job leave to start in this cluster, or says it sent the job elsewhere
// (withdrawn). claim() returns at once; `done` runs later on any thread. No
// answer (no front door, a timeout, an unreadable reply): neither granted nor
// withdrawn, asked again later.
class DispatchGate {
 public:
  virtual ~DispatchGate() = default;
  struct Verdict {
    bool granted = false;
    bool withdrawn = false;
    std::string reason;
  };
  using Done = std::function<void(Verdict)>;
  // `submitted_ms`: when this cluster took the job (its record's
  // submit_ms): a copy its front door no longer knows, older than the front
  // door's retention, is withdrawn (left behind long ago).
  virtual void claim(const std::string& team, const std::string& job_id,
                     const std::string& dispatch, int64_t submitted_ms, Done done) = 0;
};
using DispatchGatePtr = std::shared_ptr<DispatchGate>;

// A shard listens to the agents of its own nodes only (troupe.sys.agent.
// <node>.>), and to every agent's register: the node supervisor watches a
// node when it starts its actor. watch() returns once the bus listens, so
// what the agent says next reaches the router. Null: the scheduler hears
// every agent (troupe.sys.agent.>).
class AgentWatch {
 public:
  virtual ~AgentWatch() = default;
  virtual void watch(const std::string& node) = 0;
};
using AgentWatchPtr = std::shared_ptr<AgentWatch>;

// Snapshot keys: job.<id>, node.<name> (tokens are valid KV key characters).
inline std::string job_key(const std::string& id) {
  return "job." + id;
}
inline std::string node_key(const std::string& name) {
  return "node." + name;
}

// Wall-clock milliseconds since the epoch, from the system clock (the
// process shell; actors take time from their Clock).
inline int64_t system_now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// The time the actors go by (event stamps, leases, hold checks, heartbeat
// timeouts), in wall-clock milliseconds. The scheduler runs on the system
// clock; an actor test puts in a ManualClock and moves it along with CAF's
// test coordinator, so no test waits for real time to pass.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t now_ms() const = 0;
};
using ClockPtr = std::shared_ptr<const Clock>;

class SystemClock final : public Clock {
 public:
  int64_t now_ms() const override { return system_now_ms(); }
};

class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ms) : now_(start_ms) {}
  int64_t now_ms() const override { return now_.load(); }
  void advance(int64_t ms) { now_ += ms; }

 private:
  std::atomic<int64_t> now_;
};

// Settings of one scheduler process.
struct SchedulerOptions {
  std::string checkpoint_root;  // jobs get <root>/<job id> as TROUPE_CHECKPOINT_DIR ("" = none)
  // --policy fifo | fifo-backfill: a baseline for comparisons instead of Troupe's policy.
  policy::Baseline baseline = policy::Baseline::none;
  // The least time between two planning rounds of one pool, on CAF's clock:
  // under load a round plans for what came in meanwhile, not for each
  // message. 0: each round right after the messages already queued.
  int64_t round_gap_us = 1000;
  bool debug_crash = false;  // --debug-crash: troupe.sys.debug.crash crashes a chosen actor (tests)
  SnapshotStorePtr store;    // null: snapshots stay in memory only
  HistoryPtr history;        // null: troupe.<team>.history is answered "unavailable"
  StoredLogsPtr logs;        // null: logs are asked of the node agents only
  DispatchGatePtr dispatch;  // null: every front door's claim is granted
  uint64_t epoch = 0;        // leader lease revision (0: no lease)
  // How long a node actor lets a hold wait (committed, unlaunched; or exited,
  // unreleased) before asking its job (policy::hold_needs_check).
  int64_t hold_check_ms = 10000;
  // How long an ended job stays in memory, in `troupe jobs` and in the KV
  // bucket after its end (--job-retention-s); then it is purged, and its
  // status and history are read from its stored events. <= 0: kept forever.
  int64_t job_retention_ms = 3600 * 1000;
  // More troupe.sys.stats fields, as a JSON object's text (the process's
  // durability figures: snapshot writes, retried events, the epoch).
  std::function<std::string()> extra_stats;
  ClockPtr clock;  // null: the system clock
  // How many actors read submissions off the router (actors/intake_reader.hpp);
  // a team's are always read by the same one, so they keep their order.
  int intake_readers = 2;
  // The pools this scheduler owns (--pools; a shard: actors/policy/shards.hpp);
  // empty: every pool, one scheduler.
  policy::ShardScope shards;
  AgentWatchPtr agents;  // a shard: the agents it listens to (null: every agent)
  // A shard: where the owners of other pools answer the enqueued submissions
  // it handed them (subjects::shard_answers of this process; "" none).
  std::string shard_answers;
  // A shard: this process's name in what it reports on troupe.sys.shard.rate
  // (it skips its own reports); "" none.
  std::string shard_id;
};

}  // namespace troupe

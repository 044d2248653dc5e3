// What troupe-scheduler keeps durable in NATS JetStream, behind the actors'
// ports (actors/ports.hpp): the snapshot store (KV bucket TROUPE_STATE, CAS on
// revision, coalesced), the leader lease (KV bucket TROUPE_LEADER) and the
// restore pass at start. Uses bus/ classes only. docs/recovery.md.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "actors/ports.hpp"
#include "actors/recovery.hpp"
#include "bus/nats.hpp"

namespace troupe {

// put() records the newest bytes of a key. Mode coalesced: a writer thread
// writes every key that changed once per flush interval (only its newest
// bytes), all writes of a flush pipelined; sync: put() writes and waits (for
// comparison); off: nothing is written. Each write is a compare-and-set on
// the key's revision. A conflict means another scheduler wrote it — this one
// was deposed, and `on_fenced` runs (once) — unless `still_leader()` says the
// lease is still ours: then nats-server lost writes it had acknowledged (it
// was killed before its file store flushed them), the key's current revision
// is read and the write goes again with the next flush.
class KvSnapshotStore : public SnapshotStore {
 public:
  enum class Mode { coalesced, sync, off };
  struct Counters {
    std::atomic<int64_t> puts{0}, writes{0}, flushes{0}, errors{0}, conflicts{0};
  };
  KvSnapshotStore(
      bus::KeyValue& kv, Mode mode, int flush_ms, std::function<void()> on_fenced,
      std::function<bool()> still_leader = [] { return false; });
  ~KvSnapshotStore() override;  // writes what is pending, then stops
  // Revisions of the keys as restored (the CAS base of their next write).
  void seed(std::unordered_map<std::string, uint64_t> revisions);
  void start();
  void put(const std::string& key, std::string bytes) override;
  const Counters& counters() const { return n_; }

  static constexpr const char* kFlushedKey = "meta.flushed_ms";

 private:
  void run();
  void flush(std::unordered_map<std::string, std::string> batch, int64_t started_ms);
  bus::KeyValue& kv_;
  Mode mode_;
  int flush_ms_;
  std::function<void()> on_fenced_;
  std::function<bool()> still_leader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, std::string> dirty_;
  std::unordered_map<std::string, uint64_t> revs_;  // writer side (mu_ in sync mode)
  std::set<std::string> failed_;                    // keys whose last write failed (writer side)
  bool stop_ = false;
  bool fenced_ = false;
  Counters n_;
  std::thread thread_;
};

// The leader lease: key "leader" holding this process's id. Taken when
// absent, or when its revision has not moved for `ttl_ms` (its holder stopped
// renewing); renewed by compare-and-set on its revision. The revision at
// which it was taken is this leader's epoch.
class LeaderLease {
 public:
  LeaderLease(bus::KeyValue& kv, std::string holder, int ttl_ms)
      : kv_(kv), holder_(std::move(holder)), ttl_ms_(ttl_ms) {}
  // One attempt; true when this process now leads (epoch() is set).
  bool try_acquire();
  enum class Renewal { renewed, unreachable, lost };
  Renewal renew();
  // Gives the lease up (a clean stop): a standby takes it at once.
  void release();
  // The lease key names this process (thread-safe: reads the bucket).
  bool still_ours();
  uint64_t epoch() const { return epoch_; }
  const std::string& holder() const { return holder_; }

 private:
  bus::KeyValue& kv_;
  std::string holder_;
  int ttl_ms_;
  uint64_t epoch_ = 0;
  uint64_t revision_ = 0;
  uint64_t seen_revision_ = 0;  // another holder's revision, and since when it stood still
  int64_t seen_since_ms_ = 0;
};

// Self-fencing by time: the leader may speak only while its lease is known
// to be valid — until `ttl` after the start of its last successful renewal
// (a standby needs at least `ttl` of silence to take over). While it is not
// known valid (NATS away, or the process was paused), what it publishes is
// held back in order, and let out after the next renewal; a deposed leader
// exits with it unsent.
class LeaseGate {
 public:
  // `stored`: set for a job event (Outbox::publish_event), run once kept.
  using Send = std::function<void(const std::string& subject, const void* data, size_t size,
                                  const std::string& reply, std::function<void()> stored)>;
  explicit LeaseGate(Send send) : send_(std::move(send)) {}
  // Valid until `until_ms` (steady clock); lets out what was held.
  void extend(int64_t until_ms);
  bool open() const { return steady_ms() < valid_until_.load(); }
  void publish(const std::string& subject, const void* data, size_t size, const std::string& reply,
               std::function<void()> stored = {});
  static int64_t steady_ms();

 private:
  struct Held {
    std::string subject, data, reply;
    std::function<void()> stored;
  };
  Send send_;
  std::atomic<int64_t> valid_until_{0};
  mutable std::mutex mu_;
  std::vector<Held> held_;
};

// Job events (troupe.<team>.events.<id>) go to the TROUPE_EVENTS stream as
// JetStream publishes: one the stream did not take (nats-server stopping,
// an ack that never came) is published again every `retry_ms` until it is.
// Nats-Msg-Id = subject + "#" + the event's seq, so a copy the stream already
// holds is dropped. A retried event may land after later ones of other jobs:
// order by the event's own ts_ms and seq (docs/recovery.md).
class EventPublisher {
 public:
  EventPublisher(bus::JetStream& js, int retry_ms = 250);
  ~EventPublisher();
  // `stored` (may be empty) runs once the stream holds the event.
  void publish(const std::string& subject, const void* data, size_t size,
               std::function<void()> stored = {});
  int64_t retried() const { return retried_.load(); }
  static std::string msg_id(const std::string& subject, std::string_view json);

 private:
  void run();
  bus::JetStream& js_;
  int retry_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  struct Failed {
    std::string subject, payload;
    std::function<void()> stored;
  };
  std::vector<Failed> failed_;
  bool stop_ = false;
  std::atomic<int64_t> retried_{0};
  std::thread thread_;
};

// Reads the KV bucket and the streams into a recovery::State (jobs brought
// forward by intake and events newer than the last flush, node ledgers
// derived from jobs). `revisions` gets every key's revision.
struct Restored {
  recovery::State state;
  std::unordered_map<std::string, uint64_t> revisions;
  int64_t flushed_ms = 0;
  int64_t since_ms = 0;  // where the stream reads began
  size_t intake_read = 0, events_read = 0;
  bool complete = false;  // every read reached the newest message stored
  int tries = 0;          // passes made (a pass that stops short is made again)
};
Restored restore_state(bus::KeyValue& kv, bus::JetStream& js, int tries = 3);

}  // namespace troupe

// What troupe-scheduler writes durably to NATS JetStream behind the actors'
// ports (actors/ports.hpp): the snapshot store (KV bucket TROUPE_STATE, CAS on
// revision, coalesced) and the job events (stream TROUPE_EVENTS, retried
// until stored). Part of the process shell (actors/shell/); uses bus/ classes
// only. docs/recovery.md.
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
//
// After a flush that wrote every key, and every second while nothing
// changes and no job event awaits its storing (`events_settled`), it writes
// the flush marker (kFlushedKey: every change made before that time is
// stored), so a restore reads the streams only from 15 s before it
// (actors/shell/restore.cpp) — not from the last busy moment, however long
// ago that was.
class KvSnapshotStore : public SnapshotStore {
 public:
  enum class Mode { coalesced, sync, off };
  struct Counters {
    std::atomic<int64_t> puts{0}, writes{0}, flushes{0}, errors{0}, conflicts{0}, purges{0};
  };
  KvSnapshotStore(
      bus::KeyValue& kv, Mode mode, int flush_ms, std::function<void()> on_fenced,
      std::function<bool()> still_leader = [] { return false; },
      std::function<bool()> events_settled = [] { return true; });
  ~KvSnapshotStore() override;  // writes what is pending, then stops
  // Revisions of the keys as restored (the CAS base of their next write).
  void seed(std::unordered_map<std::string, uint64_t> revisions);
  void start();
  void put(const std::string& key, std::string bytes) override;
  void purge(const std::string& key) override;
  const Counters& counters() const { return n_; }

  static constexpr const char* kFlushedKey = "meta.flushed_ms";
  // A shard's marker, one per pool it owns (it writes each): a restore of a
  // pool reads the streams from that pool's owner's last complete flush.
  static std::string pool_flushed_key(const std::string& pool) {
    return std::string(kFlushedKey) + "." + pool;
  }
  // The markers written (before start(); default: kFlushedKey).
  void set_markers(std::vector<std::string> keys) { markers_ = std::move(keys); }
  static constexpr int64_t kIdleMarkMs = 1000;  // the marker's pace while nothing changes

 private:
  void run();
  void flush(std::unordered_map<std::string, std::string> batch, int64_t started_ms);
  void mark_flushed(int64_t started_ms);
  bus::KeyValue& kv_;
  Mode mode_;
  int flush_ms_;
  std::function<void()> on_fenced_;
  std::function<bool()> still_leader_;
  std::function<bool()> events_settled_;  // no job event awaits its storing (idle marker)
  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, std::string> dirty_;
  std::unordered_map<std::string, uint64_t> revs_;  // writer side (mu_ in sync mode)
  std::set<std::string> failed_;                    // keys whose last write failed (writer side)
  bool stop_ = false;
  bool fenced_ = false;
  int64_t marked_ms_ = 0;  // when the flush marker was last written (writer side)
  std::vector<std::string> markers_{kFlushedKey};
  Counters n_;
  std::thread thread_;
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
  // Events published whose storing the stream has not confirmed yet (in
  // flight, or failed and waiting to be sent again).
  int64_t awaiting() const { return awaiting_.load(); }
  static std::string msg_id(const std::string& subject, std::string_view json);

 private:
  void run();
  void send(std::string subject, std::string payload, std::function<void()> stored);
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
  std::atomic<int64_t> awaiting_{0};
  std::thread thread_;
};

}  // namespace troupe

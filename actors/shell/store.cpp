#include "actors/shell/store.hpp"

#include <cstdio>

#include "actors/shrink.hpp"

namespace troupe {

// --- snapshot store -------------------------------------------------------------

KvSnapshotStore::KvSnapshotStore(bus::KeyValue& kv, Mode mode, int flush_ms,
                                 std::function<void()> on_fenced,
                                 std::function<bool()> still_leader,
                                 std::function<bool()> events_settled)
    : kv_(kv),
      mode_(mode),
      flush_ms_(flush_ms),
      on_fenced_(std::move(on_fenced)),
      still_leader_(std::move(still_leader)),
      events_settled_(std::move(events_settled)) {}

void KvSnapshotStore::seed(std::unordered_map<std::string, uint64_t> revisions) {
  std::lock_guard<std::mutex> lock(mu_);
  revs_ = std::move(revisions);
}

void KvSnapshotStore::start() {
  if (mode_ == Mode::coalesced) thread_ = std::thread([this] { run(); });
}

KvSnapshotStore::~KvSnapshotStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void KvSnapshotStore::put(const std::string& key, std::string bytes) {
  if (mode_ == Mode::off) return;
  ++n_.puts;
  if (mode_ == Mode::sync) {
    std::lock_guard<std::mutex> lock(mu_);
    if (fenced_) return;
    bool purging = bytes.empty();
    auto r = kv_.write_all({{key, std::move(bytes), revs_[key]}}, 5000).front();
    ++n_.writes;
    if (r.revision != 0) {
      if (purging) {
        revs_.erase(key);
        shrink_if_sparse(revs_);
      } else
        revs_[key] = r.revision;
    } else if (r.conflict) {
      ++n_.conflicts;
      fenced_ = true;
      on_fenced_();
    } else {
      ++n_.errors;
    }
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  dirty_[key] = std::move(bytes);
}

// A purge is a write of no value (bus::KeyValue::Write): it goes with the
// other writes, in order with the key's last put, under the same CAS.
void KvSnapshotStore::purge(const std::string& key) {
  if (mode_ == Mode::off) return;
  ++n_.purges;
  put(key, std::string());
}

void KvSnapshotStore::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait_for(lock, std::chrono::milliseconds(flush_ms_), [this] { return stop_; });
    bool stopping = stop_;
    if (!dirty_.empty() && !fenced_) {
      auto batch = std::move(dirty_);
      dirty_.clear();
      int64_t started = system_now_ms();
      lock.unlock();
      flush(std::move(batch), started);
      lock.lock();
    } else if (!fenced_ && !stopping && failed_.empty()) {
      // Nothing waits and nothing failed: every change made before now is
      // stored. Said once a second at most, only while still the leader and
      // while no event awaits its storing (one whose publish keeps failing
      // must stay within a restore's reach, to be announced again).
      int64_t now = system_now_ms();
      if (now - marked_ms_ >= kIdleMarkMs && events_settled_()) {
        lock.unlock();
        if (still_leader_()) mark_flushed(now);
        lock.lock();
      }
    }
    if (stopping) return;
  }
}

void KvSnapshotStore::flush(std::unordered_map<std::string, std::string> batch,
                            int64_t started_ms) {
  std::vector<bus::KeyValue::Write> writes;
  writes.reserve(batch.size() + 1);
  for (auto& [key, bytes] : batch) writes.push_back({key, std::move(bytes), revs_[key]});
  auto results = kv_.write_all(writes, 10000);
  ++n_.flushes;
  n_.writes += static_cast<int64_t>(writes.size());
  std::vector<size_t> conflicts;
  for (size_t i = 0; i < writes.size(); ++i) {
    const auto& r = results[i];
    const auto& key = writes[i].key;
    if (r.revision != 0) {
      if (writes[i].value.empty()) {
        revs_.erase(key);  // purged: never written again (a job id is not reused)
        shrink_if_sparse(revs_);
      } else {
        revs_[key] = r.revision;
      }
      failed_.erase(key);
      continue;
    }
    if (r.conflict) {
      ++n_.conflicts;
      conflicts.push_back(i);
      continue;
    }
    // NATS away (restarting, say): written again with the next flush unless
    // a newer value is already waiting.
    ++n_.errors;
    failed_.insert(key);
    std::lock_guard<std::mutex> lock(mu_);
    dirty_.emplace(key, std::move(writes[i].value));
  }
  if (!conflicts.empty()) {
    if (!still_leader_()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        fenced_ = true;
      }
      on_fenced_();
      return;
    }
    // Still the leader: the server lost acknowledged writes. Write again on
    // top of what it holds now.
    for (size_t i : conflicts) {
      const auto& key = writes[i].key;
      auto now = kv_.get(key);
      revs_[key] = now ? now->revision : 0;
      failed_.insert(key);
      std::lock_guard<std::mutex> lock(mu_);
      dirty_.emplace(key, std::move(writes[i].value));
    }
  }
  // Every change made before `started_ms` is now stored: a restore reads the
  // streams only from there on.
  if (failed_.empty()) mark_flushed(started_ms);
}

void KvSnapshotStore::mark_flushed(int64_t started_ms) {
  std::vector<bus::KeyValue::Write> writes;
  for (const auto& key : markers_) writes.push_back({key, std::to_string(started_ms), revs_[key]});
  auto results = kv_.write_all(writes, 10000);
  bool all = true;
  for (size_t i = 0; i < writes.size() && i < results.size(); ++i) {
    if (results[i].revision == 0) {
      all = false;
      continue;
    }
    revs_[writes[i].key] = results[i].revision;
  }
  if (all) marked_ms_ = started_ms;
}

// --- events -----------------------------------------------------------------------

EventPublisher::EventPublisher(bus::JetStream& js, int retry_ms) : js_(js), retry_ms_(retry_ms) {
  thread_ = std::thread([this] { run(); });
}

EventPublisher::~EventPublisher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string EventPublisher::msg_id(const std::string& subject, std::string_view json) {
  // The protobuf JSON printer writes int64 as a string: "seq":"12".
  constexpr std::string_view key = "\"seq\":\"";
  auto at = json.find(key);
  if (at == std::string_view::npos) return {};
  auto from = at + key.size();
  auto to = json.find('"', from);
  if (to == std::string_view::npos) return {};
  return subject + "#" + std::string(json.substr(from, to - from));
}

void EventPublisher::publish(const std::string& subject, const void* data, size_t size,
                             std::function<void()> stored) {
  ++awaiting_;  // until the stream confirms it (a failed one is sent again: still awaited)
  send(subject, std::string(static_cast<const char*>(data), size), std::move(stored));
}

void EventPublisher::send(std::string subject, std::string payload, std::function<void()> stored) {
  auto id = msg_id(subject, payload);
  const auto* data = payload.data();
  const size_t size = payload.size();
  js_.publish_async(subject, data, size, id,
                    [this, subject, payload, stored = std::move(stored)](
                        bool ok, bool, const std::string&) mutable {
                      if (ok) {
                        --awaiting_;
                        if (stored) stored();
                        return;
                      }
                      std::lock_guard<std::mutex> lock(mu_);
                      failed_.push_back(Failed{subject, payload, std::move(stored)});
                    });
}

void EventPublisher::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(retry_ms_), [this] { return stop_; });
    if (stop_ || failed_.empty()) continue;
    auto again = std::move(failed_);
    failed_.clear();
    lock.unlock();
    for (auto& f : again) {
      ++retried_;
      send(std::move(f.subject), std::move(f.payload), std::move(f.stored));
    }
    lock.lock();
  }
}

}  // namespace troupe

#include "actors/shell/restore.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <deque>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "actors/job_record.hpp"
#include "actors/policy/admission.hpp"
#include "bus/subjects.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"

namespace troupe::shell {

// --- restore ----------------------------------------------------------------------

namespace {

// One pass over the bucket and the streams; false when a read stopped short
// of the newest message (then nothing of it may be used).
int64_t ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               t0)
      .count();
}

// The streams' messages, read (and the events parsed) on a thread of their
// own while the snapshots are read and applied: applied after them.
struct StreamRead {
  std::vector<std::pair<std::string, std::string>> intake;  // subject, record
  std::vector<std::pair<std::string, std::optional<pb::JobEvent>>> events;
  int64_t intake_ms = 0, events_ms = 0;
  bool whole = true;
};

StreamRead read_streams(bus::JetStream& js, int64_t since) {
  StreamRead r;
  auto t0 = std::chrono::steady_clock::now();
  r.whole = js.read_each(subjects::kIntakeStream, subjects::kIntakeSubjects, 2000, since,
                         [&](std::string_view subject, std::string_view data, uint64_t) {
                           r.intake.emplace_back(subject, data);
                         });
  r.intake_ms = ms_since(t0);
  t0 = std::chrono::steady_clock::now();
  r.whole = js.read_each(subjects::kEventsStream, subjects::kAllEvents, 2000, since,
                         [&](std::string_view subject, std::string_view data, uint64_t) {
                           r.events.emplace_back(subject, recovery::read_event(data));
                         }) &&
            r.whole;
  r.events_ms = ms_since(t0);
  return r;
}

// The bucket's entries, taken off the bus by one thread and parsed and
// applied by another, in the order read: a restore of a million jobs is
// bound by those two halves on two cores, not by one of them. Batches of
// kBatch; at most kAhead batches wait, so memory stays bounded.
class EntryPipe {
 public:
  struct Entry {
    std::string key, value;
    uint64_t revision = 0;
  };
  using Batch = std::vector<Entry>;
  static constexpr size_t kBatch = 512, kAhead = 16;

  void add(std::string_view key, std::string_view value, uint64_t revision) {
    filling_.push_back(Entry{std::string(key), std::string(value), revision});
    if (filling_.size() == kBatch) send();
  }
  // No more entries: what is left goes, then the taker sees the end.
  void close() {
    if (!filling_.empty()) send();
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }
  // The next batch; false after the last.
  bool take(Batch* out) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !ready_.empty() || closed_; });
    if (ready_.empty()) return false;
    *out = std::move(ready_.front());
    ready_.pop_front();
    cv_.notify_all();
    return true;
  }

 private:
  void send() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return ready_.size() < kAhead; });
    ready_.push_back(std::move(filling_));
    filling_ = Batch();
    filling_.reserve(kBatch);
    cv_.notify_all();
  }
  Batch filling_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> ready_;
  bool closed_ = false;
};

bool read_state(bus::KeyValue& kv, bus::JetStream& js, Restored& out,
                const std::vector<std::string>& markers) {
  // The streams from a while before the last complete flush: a clock margin
  // (the stream stamps messages with the server's clock), and events still
  // awaiting their acknowledgement (5 s at most, then retried) at the kill.
  // The flush marker is read first; the bucket's pass below may see a newer
  // one (a superset of what the streams must bring: harmless).
  // A shard's pools: the oldest of their owners' markers (a pool no shard
  // marked yet: the one scheduler's marker, from before the shards).
  bool failed = false;
  auto flushed = kv.get(KvSnapshotStore::kFlushedKey, &failed);
  if (failed) return false;
  const int64_t single = flushed ? std::atoll(flushed->value.c_str()) : 0;
  out.flushed_ms = markers.empty() ? single : INT64_MAX;
  for (const auto& key : markers) {
    auto m = kv.get(key, &failed);
    if (failed) return false;
    out.flushed_ms = std::min<int64_t>(out.flushed_ms, m ? std::atoll(m->value.c_str()) : single);
  }
  int64_t since = out.flushed_ms > 0 ? out.flushed_ms - 15000 : 0;
  if (since <= 0) since = 1;  // never flushed: everything (DeliverByStartTime from the epoch)
  out.since_ms = since;
  auto streams = std::async(std::launch::async, [&js, since] { return read_streams(js, since); });

  auto t0 = std::chrono::steady_clock::now();
  out.revisions.reserve(kv.stored_count());  // no rehash of a million keys as they come
  EntryPipe pipe;
  auto applied = std::async(std::launch::async, [&pipe, &out] {
    EntryPipe::Batch batch;
    while (pipe.take(&batch)) {
      for (const auto& e : batch) {
        // A purged key is never written again: its revision is not kept.
        if (!e.value.empty()) out.revisions[e.key] = e.revision;
        if (e.key != KvSnapshotStore::kFlushedKey)
          recovery::add_snapshot(out.state, e.key, e.value);
      }
    }
  });
  bool whole = kv.read_each(5000, [&pipe](std::string_view key, std::string_view value,
                                          uint64_t revision) { pipe.add(key, value, revision); });
  pipe.close();
  applied.get();
  out.kv_ms = ms_since(t0);
  auto read = streams.get();
  out.intake_ms = read.intake_ms;
  out.events_ms = read.events_ms;
  out.intake_read = read.intake.size();
  out.events_read = read.events.size();
  for (const auto& [subject, record] : read.intake)
    recovery::add_intake(out.state, record, subject);
  for (const auto& [subject, event] : read.events)
    recovery::add_read_event(out.state, event, subject);
  return whole && read.whole;
}

}  // namespace

Restored restore_state(bus::KeyValue& kv, bus::JetStream& js, int tries,
                       const std::vector<std::string>& markers) {
  Restored out;
  for (int i = 1; i <= tries; ++i) {
    out = Restored{};
    out.tries = i;
    out.complete = read_state(kv, js, out, markers);
    if (out.complete) break;
  }
  recovery::order_handoffs(out.state);
  recovery::derive_holds(out.state);
  return out;
}

// --- the start of a leader ----------------------------------------------------------

std::unique_ptr<Restore> restore(Bus& bus, Leadership& lead, const Options& o, std::string* err) {
  auto t0 = std::chrono::steady_clock::now();
  auto r = std::make_unique<Restore>();
  std::vector<std::string> markers;
  for (const auto& pool : lead.pools()) markers.push_back(KvSnapshotStore::pool_flushed_key(pool));
  r->read = restore_state(*bus.state_kv, *bus.js, 3, markers);
  if (!r->read.complete) {
    *err =
        "cannot restore: reading the KV bucket or the streams stopped short of their newest "
        "message " +
        std::to_string(r->read.tries) + " times";
    return nullptr;
  }
  if (lead.sharded()) {
    // A shard: its pools' jobs and nodes only (their owners' are the others').
    policy::ClusterConfig cfg;
    policy::load_config_or_open(o.config_text, cfg);
    r->shards.pools = lead.pools();
    recovery::keep_shard(r->read.state, r->shards, cfg);
  }
  const auto& rs = r->read.state;
  using Mode = KvSnapshotStore::Mode;
  r->store = std::make_shared<KvSnapshotStore>(
      *bus.state_kv,
      o.snapshots == "sync"  ? Mode::sync
      : o.snapshots == "off" ? Mode::off
                             : Mode::coalesced,
      o.flush_ms, [] { kill(getpid(), SIGUSR2); }, [&lead] { return lead.still_ours(); },
      [events = bus.events.get()] { return events->awaiting() == 0; });
  if (!markers.empty()) r->store->set_markers(markers);
  r->store->seed(std::move(r->read.revisions));  // not read again
  r->store->start();
  // Events the killed scheduler published but never saw stored (1 s of clock
  // margin past the start of the read): announced again, identical.
  auto unannounced = recovery::unannounced(rs, r->read.since_ms + 1000);
  for (const auto& e : unannounced) {
    auto json = spec::to_json(e);
    bus.events->publish(subjects::job_events(e.team(), e.job_id()), json.data(), json.size());
  }
  r->announced_again = unannounced.size();
  for (const auto& [id, rec] : rs.jobs) {
    std::string bytes;
    rec.SerializeToString(&bytes);
    if (rs.changed.count(id)) r->store->put(job_key(id), bytes);
    r->active += names::is_terminal(rec.state()) ? 0 : 1;
    r->job_records.push_back(std::move(bytes));
  }
  for (const auto& [name, rec] : rs.nodes) {
    std::string bytes;
    rec.SerializeToString(&bytes);
    r->store->put(node_key(name), bytes);
    r->node_records.push_back(std::move(bytes));
  }
  r->took_ms = ms_since(t0);
  return r;
}

void Restore::complete(Options& o, const Leadership& lead, const Bus& bus) const {
  auto& s = o.scheduler;
  const auto& rs = read.state;
  s.store = store;
  s.epoch = lead.epoch();
  s.shards = shards;
  // Stored records that failed validation at restore: never run, kept where
  // they are (the KV bucket, the streams), shown here (docs/security.md).
  nlohmann::json quarantine = nlohmann::json::object();
  for (const auto& [where, why] : rs.quarantined) {
    spdlog::warn("quarantined {}: {}", where, why);
    if (quarantine.size() < 100) quarantine[where] = why;
  }
  s.extra_stats = [store = store.get(), ev = bus.events.get(), epoch = s.epoch,
                   quarantined = rs.quarantined.size(), quarantine] {
    const auto& n = store->counters();
    return nlohmann::json{{"leader_epoch", epoch},
                          {"quarantined", quarantined},
                          {"quarantine", quarantine},
                          {"snapshots",
                           {{"puts", n.puts.load()},
                            {"writes", n.writes.load()},
                            {"flushes", n.flushes.load()},
                            {"errors", n.errors.load()},
                            {"conflicts", n.conflicts.load()},
                            {"purges", n.purges.load()}}},
                          {"events_retried", ev->retried()}}
        .dump();
  };
}

Restore::~Restore() = default;

void seed(const Wiring& w, Restore& r) {
  const auto& rs = r.read.state;
  // The router also learns each key's spec fingerprint (idempotency_conflict)
  // and, per restored job still awaiting its first start, its team
  // (max_queued_jobs); the job supervisor tracks the same jobs.
  std::vector<std::string> fingerprints, unstarted;
  for (const auto& [id, rec] : rs.jobs) {
    if (!rec.spec().idempotency_key().empty()) {
      fingerprints.push_back(rec.spec().team() + "/" + rec.spec().idempotency_key());
      fingerprints.push_back(spec::fingerprint(rec.spec()));
    }
    for (int n = queued_slots(rec); n > 0; --n) unstarted.push_back(rec.spec().team());
  }
  caf::anon_send(w.router, atoms::restore_atom_v, recovery::idempotency_keys(rs),
                 static_cast<uint64_t>(recovery::max_seq(rs)), std::move(fingerprints),
                 std::move(unstarted));
  // Moved, not copied: a million records are half a gigabyte.
  caf::anon_send(w.nodes, atoms::restore_atom_v, std::move(r.node_records));
  caf::anon_send(w.jobs, atoms::restore_atom_v, std::move(r.job_records));
  std::vector<std::string> schedules;
  for (const auto& [key, rec] : rs.schedules) schedules.push_back(rec.SerializeAsString());
  caf::anon_send(w.schedules, atoms::restore_atom_v, std::move(schedules));
}

void report(const Restore& r, uint64_t epoch) {
  const auto& rs = r.read.state;
  char line[512];
  std::snprintf(line, sizeof line,
                "leader (epoch %llu); restored %zu jobs (%zu not ended), %zu nodes in %lld ms "
                "(KV %lld ms; read since the last flush: %zu intake in %lld ms, %zu events in "
                "%lld ms; %zu moved on; %zu events announced again; %lld unreadable, %zu "
                "quarantined)",
                static_cast<unsigned long long>(epoch), rs.jobs.size(), r.active, rs.nodes.size(),
                static_cast<long long>(r.took_ms), static_cast<long long>(r.read.kv_ms),
                r.read.intake_read, static_cast<long long>(r.read.intake_ms), r.read.events_read,
                static_cast<long long>(r.read.events_ms), rs.changed.size(), r.announced_again,
                static_cast<long long>(rs.bad), rs.quarantined.size());
  spdlog::info("{}", line);
}

}  // namespace troupe::shell

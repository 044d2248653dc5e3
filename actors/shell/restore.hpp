// The process shell of troupe-scheduler: restore. A new leader reads the KV
// bucket and the streams (restore_state), sets up the snapshot store on top
// of what it read, announces again the events the killed leader never saw
// stored, and hands the records to the actors (seed). docs/recovery.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/protocol.hpp"
#include "actors/recovery.hpp"
#include "actors/shell/bootstrap.hpp"
#include "actors/shell/leadership.hpp"
#include "actors/shell/store.hpp"

namespace troupe::shell {

// Reads the KV bucket and the streams into a recovery::State (jobs brought
// forward by intake and events newer than the last flush, node ledgers
// derived from jobs). `revisions` gets every key's revision.
struct Restored {
  recovery::State state;
  std::unordered_map<std::string, uint64_t> revisions;
  int64_t flushed_ms = 0;
  int64_t since_ms = 0;  // where the stream reads began
  size_t intake_read = 0, events_read = 0;
  int64_t kv_ms = 0, intake_ms = 0, events_ms = 0;  // each read's time (the last pass)
  bool complete = false;                            // every read reached the newest message stored
  int tries = 0;  // passes made (a pass that stops short is made again)
};
// `markers`: a shard's pools' flush markers (KvSnapshotStore::pool_flushed_key;
// empty: the one scheduler's).
Restored restore_state(bus::KeyValue& kv, bus::JetStream& js, int tries = 3,
                       const std::vector<std::string>& markers = {});

// What a new leader starts from: its snapshot store (seeded with the
// revisions read, the records that moved on written again) and the records
// its actors are restored from.
struct Restore {
  Restored read;
  std::shared_ptr<KvSnapshotStore> store;
  std::vector<std::string> job_records, node_records;  // serialized JobRecord / NodeRecord
  size_t active = 0;                                   // jobs not ended
  size_t announced_again = 0;
  int64_t took_ms = 0;
  policy::ShardScope shards;  // a shard's pools (empty: every pool)
  // Completes `o.scheduler` (store, epoch, extra_stats) for the actors.
  void complete(Options& o, const Leadership& lead, const Bus& bus) const;
  ~Restore();
};
// Null (and `err`) when the read stopped short: acting on part of the past
// could place a job twice, so that is left to a restart (or the standby,
// once the lease runs out).
std::unique_ptr<Restore> restore(Bus& bus, Leadership& lead, const Options& o, std::string* err);

// Hands the restored records to the router, the node and the job supervisors.
void seed(const Wiring& w, Restore& r);  // hands over (moves) the records

// The leader's line on stderr after the restore.
void report(const Restore& r, uint64_t epoch);

}  // namespace troupe::shell

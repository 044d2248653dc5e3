// Recovery after a scheduler restart — pure functions over plain records
// (functional core; actors/main.cpp reads the KV bucket and the streams and
// hands the result to the supervisors). docs/recovery.md tells the story.
//
//   1. add_snapshot: the latest KV value of every job.<id> and node.<name>
//                    (an empty one: the job was purged, and stays so).
//   2. add_intake:   accepted submissions newer than the last snapshot flush
//                    that no snapshot knows yet (they become queued jobs).
//   3. add_event:    job events newer than a job's snapshot (JobEvent.seq >
//                    JobRecord.event_seq) bring its record forward.
//   4. unannounced:  events a record holds (the copies remember_announced made
//                    as each was announced) that are not in the stream (they were
//                    awaiting their acknowledgement at the kill) go out again.
//   5. derive_holds: node ledgers are rebuilt from the jobs — a committed,
//                    launched hold for every worker of a starting or running
//                    job; leases in flight are dropped (stale reservations
//                    expire), and every node is marked restored so that its
//                    agent's word (running, ended) decides what happened.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "actors/policy/shards.hpp"
#include "records.pb.h"

namespace troupe::recovery {

struct State {
  std::map<std::string, pb::JobRecord> jobs;            // by job id
  std::map<std::string, pb::NodeRecord> nodes;          // by node name
  std::map<std::string, pb::ScheduleRecord> schedules;  // by KV key sched.<team>.<name>
  std::set<std::string> changed;  // jobs whose record moved on past its stored snapshot
  std::map<std::string, std::set<int64_t>> stored_seqs;  // JobEvent.seq read, per job
  // Jobs whose key was purged (ended, past their retention): their intake
  // record is not a new job, their events bring nothing back.
  std::set<std::string> purged;
  // New jobs from a standby's records (troupe.sys.intake.<team>.handoff), in
  // stream order: order_handoffs gives them their place in the submit order.
  std::vector<std::string> handed_off;
  int64_t bad = 0;  // entries that could not be read (counted, skipped)
  // Entries that read but fail validation, as new input would (a forged or
  // corrupted record): never run, counted, shown by troupe.sys.stats. By
  // where they were ("job.<id>", "intake <subject>", "event <subject>"), why.
  std::map<std::string, std::string> quarantined;
};

// Why a stored job record may not be used ("" when it may): the checks new
// input gets (job id, team, spec) plus its own fields (state, placement).
std::string check_job(const pb::JobRecord& r);
// The same for a node record (name, holds).
std::string check_node(const pb::NodeRecord& n);

// KV key and value; false when the key is not a job, node or schedule snapshot.
bool add_snapshot(State& s, std::string_view key, std::string_view bytes);
// A serialized JobRecord from the intake stream; true when it was new.
// `subject` (troupe.sys.intake.<team>) must name the record's team. On
// troupe.sys.intake.<team>.pipeline, a PipelineRecord: each of its jobs.
bool add_intake(State& s, std::string_view bytes, std::string_view subject = {});
// Applies one event to a record when it is newer; true when applied.
bool apply_event(pb::JobRecord& rec, const pb::JobEvent& e);
// A JobEvent as JSON (the TROUPE_EVENTS payload); true when applied.
// `subject` (troupe.<team>.events.<job_id>) must name the event's job and
// team, and the team must be the record's.
bool add_event(State& s, std::string_view json, std::string_view subject = {});
// add_event in two halves, so that a restore reads (parses) the events while
// it still reads the snapshots: read_event needs no State (nothing when the
// JSON cannot be read), add_read_event applies what it read (and counts an
// unreadable one as add_event does).
std::optional<pb::JobEvent> read_event(std::string_view json);
bool add_read_event(State& s, const std::optional<pb::JobEvent>& e, std::string_view subject = {});
void derive_holds(State& s);
// A standby numbers its records from 1: the jobs it handed off take their
// place after every other job (seq), in the order the stream holds them.
void order_handoffs(State& s);
// Whether a restored node record says what the node could hold (false for
// one known only from a job's placement until its agent registers again):
// the router's admission check may use only such a shape, or it would
// refuse, for good, work that fits the real node.
bool shape_known(const pb::NodeRecord& n);

// What of a node's record (pb::NodeRecord bytes) goes to the store: all but
// its holds, which a restore derives from the jobs (derive_holds), so a
// reservation, commit or release writes nothing durable. "" when the bytes
// do not parse.
std::string durable_node_record(const std::string& bytes);
// Events a record says were announced but that the stream read (from
// `since_ms`, its start) does not hold: published by the killed scheduler but
// never stored (their acknowledgement was still awaited, as after a
// nats-server restart). Each is the copy the record kept when it was
// announced (remember_announced); a last one without a copy (a record written
// before copies were kept) is rebuilt from the record. To publish again (the
// stream drops what it already has by Nats-Msg-Id). Only events at or after
// `since_ms`, oldest first.
std::vector<pb::JobEvent> unannounced(const State& s, int64_t since_ms);

// How long a record keeps the events it announced. Longer than the stream
// read's reach before the last flush (actors/shell/restore.cpp, 15 s).
constexpr int64_t kEarlierEventsMs = 20000;
constexpr int kEarlierEventsMax = 16;
// Once a record's state changed (event_seq, event_ts_ms, state set): the
// event it announces joins `earlier` as it is now, so that one announced
// again after a kill is that event even when the record has moved on since
// (a retry's next attempt clears the placement before its own event); those
// older than kEarlierEventsMs (or past the kEarlierEventsMax newest) leave.
void remember_announced(pb::JobRecord& r, int64_t now_ms);

// Router state: idempotency keys as (team/key, job id) pairs, flattened.
// A shard's part (actors/policy/shards.hpp): the jobs its pools' ids name
// (the coordinator: also those of no pool), the nodes of its pools, and the
// schedules only when it is the coordinator.
void keep_shard(State& s, const policy::ShardScope& scope, const policy::ClusterConfig& cfg);

std::vector<std::string> idempotency_keys(const State& s);
uint64_t max_seq(const State& s);

}  // namespace troupe::recovery

// Text the CLI prints: ages and durations, tables (jobs, nodes), a job's
// status, one line per job event. Pure functions over protobuf views and a
// caller-given "now", so they are unit-tested without NATS or a clock.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "job_spec.pb.h"

namespace troupe::gateway {

// "5s", "3m", "2h", "4d" (floor; negative counts as 0).
std::string format_age(int64_t ms);
// "850ms", "2.3s", "3m05s", "1h02m".
std::string format_duration(int64_t ms);
// Local wall-clock time "HH:MM:SS" (with ".mmm" when `millis`).
std::string format_clock(int64_t epoch_ms, bool millis = false);
// Local date and time "YYYY-MM-DD HH:MM:SS" (with ".mmm" when `millis`).
std::string format_datetime(int64_t epoch_ms, bool millis = false);
// "512M", "16G", "1.5T" from mebibytes; "-" for 0.
std::string format_memory_mb(int64_t mb);
// "0,1,2,3".
std::string join_ints(const google::protobuf::RepeatedField<int32_t>& v);

// Columns padded to the widest cell, two spaces apart, no trailing blanks.
std::string render_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows);

// "node-1[0,1] node-2[0,1]" (ranks in order; "-" when there is no placement).
std::string placement_text(const google::protobuf::RepeatedPtrField<pb::WorkerPlacement>& p);
// Distinct node names in rank order, comma-separated ("-" when none).
std::string nodes_text(const google::protobuf::RepeatedPtrField<pb::WorkerPlacement>& p);
// "4x2" (GPUs per worker x workers; workers 0 counts as 1).
std::string gpus_text(const pb::JobView& j);

// `troupe jobs`: ID TEAM NAME KIND STATE GPUS NODE(S) AGE, oldest first.
// An empty `state` shows every job.
// `wide`: also POOL, PRIORITY, ATTEMPT and the placement per rank.
std::string jobs_table(const pb::JobList& jobs, int64_t now_ms, const std::string& state = {},
                       bool wide = false);
// `troupe nodes`: NODE GPU TYPE GPUS(free/total) RESERVED ALLOCATED CPUS MEMORY STATE LAST
// HEARTBEAT.
// `wide`: also POOL, RACK, RUNTIME and the shared GPUs' memory.
std::string nodes_table(const pb::NodeList& nodes, int64_t now_ms, bool wide = false);
// `troupe nodes --cluster NAME` (a front door's list): keeps the nodes of that
// cluster. "" or why not: a list whose nodes name no cluster (one cluster's
// own NATS), or a cluster none of them is in (unknown, or unreachable: the
// list's `unanswered` names it).
// What a --cluster filter says where there is no front door to filter.
inline constexpr const char* kNoFrontDoorFilter =
    "--cluster: this NATS serves one cluster (no front door)";
std::string keep_cluster_nodes(pb::NodeList& nodes, const std::string& cluster);
// `troupe clusters`: the troupe.sys.clusters reply of a front door
// (troupe-dispatch) as NAME GPU TYPES GPUS (free/total) QUEUED RUNNING STATE;
// "" and `error` when the reply does not read.
std::string clusters_table(const std::string& reply_json, std::string* error);
// `data` with `prefix` before each line (troupe logs --all-ranks); a last
// line without its newline waits in `carry` for the next chunk.
std::string prefix_lines(std::string& carry, const std::string& data, const std::string& prefix);

// The local time zone's offset at that time ("+0100"; "+0000" under --utc).
std::string format_zone(int64_t epoch_ms);

// `text` with every ISO 8601 UTC time in it (2026-12-03T13:20:39Z, as the
// scheduler writes them) shown as format_datetime does, in the local time
// zone (or UTC under --utc), with its offset.
std::string localize_times(const std::string& text);

// A node's STATE column: lost, alive, cordoned or draining.
std::string node_state(const pb::NodeView& n);
// `troupe status`: one "key  value" line per field that is known.
// An array's tasks counted by state: "20 tasks: 3 running, 10 queued, 7 succeeded".
std::string array_text(const pb::ArrayView& a);
std::string status_text(const pb::JobView& j, int64_t now_ms);
// One line per event: time, job, name, state, placement, exit code and reason.
std::string event_line(const pb::JobEvent& e);

// `troupe history ID`: the job's events as stored in TROUPE_EVENTS (raw JSON
// messages, stream order). parse_events reads them in order, leaving out any
// that is not a JobEvent (`skipped` counts those).
std::vector<pb::JobEvent> parse_events(const std::vector<std::string>& raw,
                                       size_t* skipped = nullptr);
// One row per event, in the given order: TIME STATE ATTEMPT NODES/GPUS EXIT
// REASON. The reason ends with the event's cause ("(cause exit_code)") when it
// has one that is not the state itself.
std::string history_table(const std::vector<pb::JobEvent>& events);
// `troupe history ID --json`: the raw events as one JSON array, an event per
// line, unchanged; a message that is not a JSON object is left out.
std::string history_json(const std::vector<std::string>& raw);

}  // namespace troupe::gateway

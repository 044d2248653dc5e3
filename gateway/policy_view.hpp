// The scheduling-policy replies the CLI reads and prints: `troupe queues`
// (troupe.sys.queues) and `troupe why ID` (troupe.<team>.why). The shapes are
// in docs/contract.md ("Scheduling policy"). These replies are plain JSON,
// not protobuf views, so they are read with nlohmann::json into the structs
// below. Pure: parsing and formatting take text and a caller-given "now".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::gateway {

// A pool's hold (backfill reservation) for a starving job.
struct HoldView {
  std::string job_id;
  std::vector<std::string> nodes;
  int64_t start_ms = -1;  // when the job is expected to fit; -1 unknown
  int idle_gpus = 0;      // free GPUs on the held nodes now
};

struct PoolView {
  std::string cluster;  // at a front door (troupe-dispatch): whose pool; else ""
  std::string pool;
  int gpus_total = 0;
  int gpus_free = 0;
  bool has_hold = false;
  HoldView hold;
};

// One team in one pool.
struct TeamPoolView {
  std::string team;
  std::string cluster;  // as PoolView::cluster
  std::string pool;
  double weight = 1.0;
  bool borrow = false;
  int guaranteed = 0;
  int limit = -1;  // -1: no hard limit
  int in_use = 0;
  int borrowed = 0;
  int pending_jobs = 0;
  int pending_gpus = 0;
  double dominant_share = 0;
  double weighted_share = 0;
};

struct QueuesView {
  std::vector<PoolView> pools;
  std::vector<TeamPoolView> teams;
  double reserved_idle_gpu_seconds = 0;
  int64_t grants = 0;
  std::string policy;                      // troupe | fifo
  int64_t preemptions = 0;                 // victim jobs asked to stop
  double gpu_seconds_lost = 0;             // their work since the last checkpoint x GPUs
  std::map<std::string, int64_t> retries;  // by "kind:cause" (user:exit_code, infra:node_lost, ...)
  std::vector<std::string> unanswered;     // at a front door: clusters not shown (unreachable)
  std::string cluster;  // at a front door asked for one cluster: it (its own counters, not a sum)
};

// Reads a troupe.sys.queues reply. Returns "" or what is wrong (including
// the scheduler's own {"error"} text). Unknown fields are ignored; missing
// ones keep their defaults.
std::string parse_queues(std::string_view body, QueuesView* out);
// `troupe queues --cluster NAME` (GET /v1/queues?cluster=): the request
// body ({} for every cluster), and the check of a reply read: a front door
// names the cluster it answered for; a cluster's own scheduler (no front
// door) does not, so its whole view is never shown as that cluster's.
std::string queues_request(const std::string& cluster);
std::string check_queues_cluster(const QueuesView& q, const std::string& cluster);

struct WhyView {
  std::string job_id;
  std::string state;
  bool pending = false;
  std::string code;
  std::string reason;
};

// Reads a troupe.<team>.why reply. Returns "" or what is wrong.
std::string parse_why(std::string_view body, WhyView* out);

// "1", "2", "0.5", "1.25" (up to 2 decimals, no trailing zeros).
std::string format_weight(double w);
// "25.0%" from 0.25.
std::string format_percent(double fraction);

// `troupe queues`: a table TEAM POOL WEIGHT GUARANTEED LIMIT IN USE BORROWED
// PENDING PENDING GPUS SHARE (sorted by pool, then team; LIMIT "-" for none;
// SHARE the weighted share in %), then one line per pool with its total and
// free GPUs and its hold (if any), then the reserved-idle GPU-seconds.
std::string queues_text(const QueuesView& q, int64_t now_ms);

// `troupe why`: "job", "state", "pending", "code", "reason" lines.
std::string why_text(const WhyView& w);

}  // namespace troupe::gateway

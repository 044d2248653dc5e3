// The scheduler's JSON views, built here once from plain values: what
// troupe.sys.queues and troupe.sys.stats answer, and the small replies about
// one job (why, cancel, find, submit) (docs/api.md). The actors
// gather the values (the pool arbiter the queues', the router its counters);
// nothing here knows CAF, NATS or an actor's state. Job records answer
// through spec::to_json (messages/spec.hpp), errors through errors.hpp.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::views {

// --- troupe.sys.queues ------------------------------------------------------------

struct Hold {  // a pool's backfill reservation
  std::string job_id;
  std::vector<std::string> nodes;
  int64_t start_ms = -1;  // -1: not known yet
  int idle_gpus = 0;
};

struct PoolRow {
  std::string pool;
  int gpus_total = 0, gpus_free = 0;
  bool has_hold = false;
  Hold hold;
};

struct Shape {  // a distinct request shape a team has pending
  int gpus = 0;
  std::string gpu_type, pool;
};

struct TeamRow {  // one team in one pool
  std::string team, pool;
  std::vector<Shape> pending_shapes;
  double weight = 1.0;
  bool borrow = false;
  int guaranteed = 0, limit = -1;
  int in_use = 0, borrowed = 0, pending_jobs = 0, pending_gpus = 0;
  double in_use_shared = 0;  // GPUs its shared jobs hold in parts (0.75: three quarters)
  // Of pending_jobs, any-type jobs: counted here, in their first candidate
  // pool, and in no other pool's row.
  int pending_flexible = 0;
  double dominant_share = 0, weighted_share = 0;
  // Seconds it took to get back to its guarantee (policy::RestoreWait):
  // observations per bound, then +Inf; their sum and count.
  std::vector<int64_t> restore_buckets;
  double restore_sum_s = 0;
  int64_t restore_count = 0;
};

struct Queues {
  std::string policy = "troupe";  // or the baseline that plans instead (policy::policy_name)
  std::vector<PoolRow> pools;
  std::vector<TeamRow> teams;
  double reserved_idle_gpu_seconds = 0;
  int64_t grants = 0, preemptions = 0;
  double gpu_seconds_lost = 0;
  std::map<std::string, int64_t> retries;  // by cause
  int64_t reclaims = 0;  // of the preemptions: borrowed work taken back by its lender
};

std::string queues_json(const Queues& q);
// One view from the pools' parts (each pool's arbiter gives its own rows and
// figures): rows in order of pool, and of team then pool; figures summed.
Queues merge(std::vector<Queues> parts);

// --- troupe.sys.stats ----------------------------------------------------------------

// The router's counters of what came in and how it was answered.
struct Counters {
  int64_t submitted = 0;
  int64_t accepted = 0;
  int64_t rejected = 0;    // valid message, impossible or wrong spec
  int64_t malformed = 0;   // not JSON / not a verifiable FlatBuffer
  int64_t duplicates = 0;  // answered from an idempotency key
  int64_t intake_errors = 0;
  int64_t handed_off = 0;  // jobs a standby recorded while no leader answered (taken here)
  int64_t bus_in = 0;      // every message the scheduler received
  // Shards (actors/policy/shards.hpp): submissions and requests left to the
  // shard that owns their pool or job.
  int64_t other_shard = 0;
  int64_t handed_over = 0;  // submissions of another shard's pool handed to it
  // ... of those, recorded here for it (nobody answered for the pool), and
  // how many of them because no answer came in time.
  int64_t recorded_for_owner = 0, hand_timeouts = 0;
  // Enqueued submissions handed over to nobody (no responders): asked again.
  int64_t enqueued_retried = 0;
  // Keyed any-type submissions asked about in the other candidates' shards
  // (troupe.sys.shard.key), and of them those not all answered in time.
  int64_t key_asks = 0, key_ask_timeouts = 0;
  // Agents' messages (not registers) of nodes in another shard's pool that
  // reached this shard: 0 while it listens to its own nodes only.
  int64_t other_pool_agent = 0;
  std::map<std::string, int64_t> restarts;  // by actor kind, as the supervisors report
  // Refused submissions by code (policy::Refusal), and by team and code for
  // at most kMaxCountedTeams teams (the rest under "(other)").
  std::map<std::string, int64_t> refused;
  std::map<std::string, std::map<std::string, int64_t>> refused_by_team;
  // A team's other requests (status, jobs, ...) refused for its request_rate,
  // in all and by team (at most kMaxCountedTeams, the rest under "(other)").
  int64_t requests_rate_limited = 0;
  std::map<std::string, int64_t> requests_rate_limited_by_team;
  // Messages refused because their sender may not say them (docs/security.md):
  // node_not_in_roster, register_capacity_change, ...
  std::map<std::string, int64_t> distrusted;
};

// `refusal_codes`: every refusal code (each shown, 0 when none); `extra`: a
// JSON object of the process's own figures (leader epoch, snapshots), merged
// in ("" for none).
std::string stats_json(const Counters& n, int64_t bus_out,
                       const std::vector<std::string>& refusal_codes, const std::string& extra);

// --- replies about one job ----------------------------------------------------------

// troupe.<team>.why: `code` is one of policy::why's reason codes.
std::string why_json(const std::string& job_id, std::string_view state, bool pending,
                     std::string_view code, const std::string& reason);
// A waiting job's band in its team's line, appended to a why's reason: ""
// under fifo (not las, band 0); "; order las: band B (G GPU-seconds had so
// far)" or "; order sjf: band B: declared work up to ..."; then when the
// starvation guard moves it to band 0 (`promote_at_ms` > 0), if it still waits.
std::string band_text(bool las, int band, double attained_gpu_s, int64_t promote_at_ms);
// {"job_id", "state"} (a cancel's answer), with "team" when it is not empty
// (troupe.sys.find).
std::string job_state_json(const std::string& job_id, std::string_view state,
                           const std::string& team = {});
// A submission's answer: its job id, or the refusal's error and code.
// A pipeline's acceptance: {"pipeline_id", "jobs": [{"name", "job_id"}...]},
// upstream first.
std::string pipeline_json(const std::string& pipeline_id,
                          const std::vector<std::pair<std::string, std::string>>& jobs);
std::string submit_json(const std::string& job_id, const std::string& error,
                        const std::string& code);

}  // namespace troupe::views

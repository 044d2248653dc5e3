// The CLI's side of the user API (docs/contract.md) over one NATS connection:
// one method per request subject, each returning a view or an error text.
// Subjects come from bus/subjects.hpp only.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bus/nats.hpp"
#include "gateway/pipeline_view.hpp"
#include "gateway/policy_view.hpp"
#include "gateway/replies.hpp"
#include "job_spec.pb.h"

namespace troupe::gateway {

inline constexpr const char* kDefaultNatsUrl = "nats://127.0.0.1:4222";
inline constexpr int kRequestTimeoutMs = 5000;
// Jobs asked for per page when every job is wanted (the scheduler's most;
// its replies stop earlier at about 512 KiB).
inline constexpr int64_t kJobsPageLimit = 5000;
// `troupe up --insecure` leaves this file in its home: the CLI then looks for
// no identity there.
inline constexpr const char* kInsecureMarker = "insecure";

// The NATS identity the CLI connects with: $TROUPE_NATS_CREDS and
// $TROUPE_NATS_CA (the --creds / --tls-ca flags set them), else a `troupe up`
// cluster's admin identity and CA from $TROUPE_HOME/auth/ (./.troupe/auth).
struct Identity {
  std::string creds_file;
  std::string tls_ca;
  bool discovered = false;  // creds found under $TROUPE_HOME/auth
};
using EnvFn = std::function<std::optional<std::string>(const char*)>;
Identity resolve_identity(const EnvFn& env);

// Past its team's request_rate a request is answered rate_limited: the CLI
// (Client::call) and the gateway's plain log read ask again this often, for
// this long.
inline constexpr auto kRateLimitedPause = std::chrono::milliseconds(250);
inline constexpr auto kRateLimitedPatience = std::chrono::seconds(30);

// Calls `refused` again after kRateLimitedPause while it returns true (it
// was answered rate_limited), until kRateLimitedPatience would pass or
// `stop` is set.
void while_rate_limited(const std::function<bool()>& refused,
                        const std::atomic<bool>* stop = nullptr);

class Client {
 public:
  // Connects once (no retries); nullptr and `error` when it cannot.
  static std::unique_ptr<Client> connect(const std::string& url, std::string* error,
                                         const std::string& name = "troupe-cli");
  // The same with the identity given (no lookup in the environment).
  static std::unique_ptr<Client> open(bus::ConnectOptions o, std::string* error);

  // Each returns "" on success or what went wrong (timeout, no responders,
  // the scheduler's {"error"}, an unreadable reply).
  // A spec without an idempotency key gets one made here, and a submission
  // whose answer did not come (timed out: lost with a NATS server) or said
  // "retry" is sent again with it, for up to 30 s:
  // it is one job however often it is sent (as sbatch retries).
  std::string submit(const pb::JobSpec& spec, std::string* job_id);
  std::string status(const std::string& team, const std::string& job_id, pb::JobView* out,
                     std::string* raw_json = nullptr);
  std::string cancel(const std::string& team, const std::string& job_id, CancelReply* out);
  std::string logs(const std::string& team, const std::string& job_id, int rank, int64_t offset,
                   int max_bytes, LogChunk* out);
  // Every team's jobs when `team` is empty (troupe.sys.jobs): one page of
  // at most `limit` (0: the scheduler's default) after the job `after`, only
  // those in `state` when given; `next` is the job to ask after for the next
  // page ("" on the last).
  std::string jobs_page(const std::string& team, int64_t limit, const std::string& after,
                        const std::string& state, pb::JobList* out, std::string* next);
  // The same with every filter (a state, a pipeline id, a label key=value).
  std::string jobs_page(const std::string& team, int64_t limit, const std::string& after,
                        const JobsFilter& filter, pb::JobList* out, std::string* next);
  // Pages appended to `out` until `max_jobs` (0: all of them); `next` as above.
  std::string jobs(const std::string& team, pb::JobList* out, const std::string& state = {},
                   int64_t max_jobs = 0, const std::string& after = {},
                   std::string* next = nullptr);
  std::string jobs(const std::string& team, pb::JobList* out, const JobsFilter& filter,
                   int64_t max_jobs = 0, const std::string& after = {},
                   std::string* next = nullptr);
  // troupe.<team>.pipeline (docs/api.md, "Pipelines"): `body` as
  // pipeline_request makes it; "" and the raw `reply` (which may be the
  // scheduler's {"error"}: parse_pipeline_reply), or the transport error.
  std::string pipeline(const std::string& team, const std::string& body, std::string* reply);
  // troupe.<team>.schedule: a schedule request (gateway/schedule_view.hpp).
  std::string schedule(const std::string& team, const std::string& body, std::string* reply);
  std::string nodes(pb::NodeList* out);
  // troupe.<team>.why and troupe.sys.queues (docs/contract.md, "Scheduling policy").
  std::string why(const std::string& team, const std::string& job_id, WhyView* out,
                  std::string* raw_json = nullptr);
  // `cluster`: at a front door, that cluster's alone (check_queues_cluster).
  std::string queues(QueuesView* out, std::string* raw_json = nullptr,
                     const std::string& cluster = {});
  // troupe.sys.clusters (a front door, troupe-dispatch): the raw reply.
  // Nobody answers on a cluster's own NATS (no front door): that error, and
  // *no_front_door set when given.
  std::string clusters(std::string* raw_json, bool* no_front_door = nullptr);
  // troupe.<team>.usage (troupe.sys.usage when `team` is empty): the report
  // JSON for `request` (gateway/usage_report.hpp).
  std::string usage(const std::string& team, const std::string& request, std::string* raw_json);
  // troupe.sys.cordon|uncordon|drain|remove_node: `op` is one of the verbs
  // cordon, uncordon, drain, remove-node; `state` is what the node is now
  // (cordoned, schedulable, draining, drained, removed: with the checkpoint
  // dirs it left, a line each).
  // `reason`: why (cordon, drain), shown by troupe nodes.
  // `cluster`: at a front door, the node's cluster ("": the one that has it).
  std::string node_op(const std::string& op, const std::string& node, std::string* state,
                      const std::string& reason = {}, const std::string& cluster = {});
  // The job's events as stored in the TROUPE_EVENTS stream (raw JSON, stream
  // order), through troupe.<team>.history (the scheduler reads the stream).
  // No events is not an error here (`raw` stays empty). `code` (optional)
  // gets the error reply's code (not_found: no such job in that team).
  std::string history(const std::string& team, const std::string& job_id,
                      std::vector<std::string>* raw, bool* truncated = nullptr,
                      std::string* code = nullptr);
  // The team of `job_id`, looked up with troupe.sys.find.
  std::string find_team(const std::string& job_id, std::string* team, std::string* code = nullptr);
  // `team` when given (checked), else find_team.
  std::string resolve_team(const std::string& given, const std::string& job_id, std::string* team,
                           std::string* code = nullptr);

  // Any request subject with a body as given; "" and the raw `reply`, or
  // the transport error (the HTTP gateway forwards replies as they are, a
  // rate_limited one too: its client sees 429).
  std::string forward(const std::string& subject, const std::string& body, std::string* reply) {
    return call_once(subject, body, reply);
  }
  // forward, asking `fallback` instead when nobody answers on `subject` (a
  // submission addressed to a pool that no scheduler shard holds); no
  // fallback when it is "". Replies as they are, rate_limited too.
  std::string forward_or(const std::string& subject, const std::string& fallback,
                         const std::string& body, std::string* reply);

  bus::Connection& connection() { return *conn_; }
  void set_timeout_ms(int ms) { timeout_ms_ = ms; }

 private:
  explicit Client(bus::ConnectionPtr c) : conn_(std::move(c)) {}
  // Sends `body` to `subject`; "" and `reply` or the transport error.
  std::string call_once(const std::string& subject, const std::string& body, std::string* reply);
  // call_once, asking again while the scheduler answers rate_limited (the
  // team's request_rate: `troupe jobs` of a long list, a script's loop), for
  // up to kRateLimitedPatience.
  std::string call(const std::string& subject, const std::string& body, std::string* reply);

  bus::ConnectionPtr conn_;
  int timeout_ms_ = kRequestTimeoutMs;
};
using ClientPtr = std::unique_ptr<Client>;

// Milliseconds since the epoch (wall clock), for ages.
int64_t now_ms();

}  // namespace troupe::gateway

// Every NATS subject, stream and bucket name of Troupe, defined once.
//
// User-facing subjects are troupe.<team>.<verb>[.<id>] so that NATS
// permissions and stream filters can be given per team (troupe.<team>.>).
// Scheduler-internal traffic lives under troupe.sys.; "sys" is therefore
// refused as a team name. Every token is validated where a subject is built.
//
// The table of them all, with what each carries, is in docs/architecture.md
// ("Subjects"; scripts/check-includes.sh fails when it and this file differ);
// the payloads in docs/api.md.
#pragma once

#include <string>
#include <string_view>

#include "messages/names.hpp"

namespace troupe::subjects {

inline constexpr std::string_view kRoot = "troupe";

// Token checks live with the names (messages/names.hpp): policy and spec
// validation use them without depending on the bus.
using names::check_token;
using names::valid_team;

// User-facing verbs under troupe.<team>.
inline constexpr std::string_view kSubmit = "submit";
inline constexpr std::string_view kStatus = "status";
inline constexpr std::string_view kCancel = "cancel";
inline constexpr std::string_view kLogs = "logs";
inline constexpr std::string_view kJobs = "jobs";
inline constexpr std::string_view kEvents = "events";
inline constexpr std::string_view kWhy = "why";
inline constexpr std::string_view kEnqueue = "enqueue";
inline constexpr std::string_view kHistory = "history";
// Several jobs in one request, all accepted or none (docs/api.md "Pipelines").
inline constexpr std::string_view kPipeline = "pipeline";
// GPU-hours, ends, waits over a window, from the events (docs/api.md "Usage").
inline constexpr std::string_view kUsage = "usage";
// Recurring schedules: create, list, show, delete, suspend, resume
// (docs/api.md "Schedules").
inline constexpr std::string_view kSchedule = "schedule";

// Every request verb a team identity may publish under troupe.<team>. (the
// NATS permissions of team-<team> are built from this list).
inline constexpr std::string_view kTeamVerbs[] = {kSubmit, kEnqueue,  kStatus,  kCancel,
                                                  kLogs,   kJobs,     kWhy,     kHistory,
                                                  kUsage,  kPipeline, kSchedule};

// Identities (docs/security.md): the NATS user names Troupe signs, one per
// party. The .creds file of identity I is <auth dir>/I.creds.
inline constexpr std::string_view kTeamIdentityPrefix = "team-";
inline constexpr std::string_view kNodeIdentityPrefix = "node-";
inline constexpr std::string_view kFleetIdentityPrefix = "fleet-";
inline constexpr std::string_view kAdminIdentityPrefix = "admin-";
inline constexpr std::string_view kSchedulerIdentity = "scheduler";
// troupe-gateway (the HTTP API): forwards requests for the team of the bearer
// token it was given; reads the token bucket.
inline constexpr std::string_view kGatewayIdentity = "gateway";
// A front door (troupe-dispatch) in a cluster: its leaf node link's identity
// there, and the name of its user in the front NATS's link account (the
// two inbox prefixes then agree; docs/clusters.md).
inline constexpr std::string_view kDispatchIdentity = "dispatch";

// The reply-inbox prefix of an identity: _INBOX_<team> for team-<team>,
// _INBOX_<identity> for every other one. Each identity may subscribe only to
// its own (a shared _INBOX.> would let one party read another's replies).
inline std::string inbox_prefix(std::string_view identity) {
  std::string_view rest = identity;
  if (rest.substr(0, kTeamIdentityPrefix.size()) == kTeamIdentityPrefix)
    rest.remove_prefix(kTeamIdentityPrefix.size());
  return "_INBOX_" + std::string(rest);
}

// Agent message kinds (last token of troupe.sys.agent.<node>.<kind> and
// troupe.sys.node.<node>.<kind>).
inline constexpr std::string_view kRegister = "register";
inline constexpr std::string_view kHeartbeat = "heartbeat";
inline constexpr std::string_view kStarted = "started";
inline constexpr std::string_view kExited = "exited";
inline constexpr std::string_view kCheckpointed = "checkpointed";
inline constexpr std::string_view kLaunch = "launch";
inline constexpr std::string_view kStop = "stop";
inline constexpr std::string_view kForget = "forget";
inline constexpr std::string_view kHello = "hello";

// Builders. The caller validates tokens that come from outside (valid_team,
// check_token); ids made by Troupe are valid by construction.
inline std::string team_verb(std::string_view team, std::string_view verb) {
  std::string s(kRoot);
  s += '.';
  s += team;
  s += '.';
  s += verb;
  return s;
}
inline std::string team_submit(std::string_view team) {
  return team_verb(team, kSubmit);
}
// A submission addressed to a pool (troupe.<team>.submit.<pool>): read by
// that pool's owner, so a shard need not hand it over. Only the address:
// the job goes to the pool its spec says (pool, else gpu_type), and one of
// another pool is handed to that pool's owner as from troupe.<team>.submit.
// Nobody listens for a pool no shard serves: clients send it again on
// troupe.<team>.submit (docs/api.md).
inline std::string team_submit_to(std::string_view team, std::string_view pool) {
  return team_submit(team) + "." + std::string(pool);
}
inline std::string team_pipeline(std::string_view team) {
  return team_verb(team, kPipeline);
}
inline std::string team_status(std::string_view team) {
  return team_verb(team, kStatus);
}
inline std::string team_cancel(std::string_view team) {
  return team_verb(team, kCancel);
}
inline std::string team_logs(std::string_view team) {
  return team_verb(team, kLogs);
}
inline std::string team_jobs(std::string_view team) {
  return team_verb(team, kJobs);
}
inline std::string team_why(std::string_view team) {
  return team_verb(team, kWhy);
}
inline std::string team_history(std::string_view team) {
  return team_verb(team, kHistory);
}
inline std::string job_events(std::string_view team, std::string_view job_id) {
  return team_verb(team, kEvents) + "." + std::string(job_id);
}
inline std::string agent_to_scheduler(std::string_view node, std::string_view kind) {
  return "troupe.sys.agent." + std::string(node) + "." + std::string(kind);
}
inline std::string scheduler_to_agent(std::string_view node, std::string_view kind) {
  return "troupe.sys.node." + std::string(node) + "." + std::string(kind);
}
inline std::string intake(std::string_view team) {
  return "troupe.sys.intake." + std::string(team);
}
// A record a standby wrote while no leader answered (actors/shell/standby.hpp):
// in the intake stream too, taken by the leader's handoff consumer.
inline constexpr std::string_view kHandoff = "handoff";
inline std::string handoff(std::string_view team) {
  return intake(team) + "." + std::string(kHandoff);
}
// A shard's record of a submission for another shard's pool whose owner did
// not answer (dead, or restoring): taken by the pool's owner, through its
// durable consumer of that pool's (pool_handoff_consumer).
inline std::string handoff(std::string_view team, std::string_view pool) {
  return handoff(team) + "." + std::string(pool);
}
// An accepted pipeline: one record (pb::PipelineRecord) for all its jobs.
inline std::string intake_pipeline(std::string_view team) {
  return intake(team) + "." + std::string(kPipeline);
}

// Fixed subjects and wildcards the scheduler subscribes to.
inline constexpr const char* kAllSubmit = "troupe.*.submit";
inline constexpr const char* kAllPoolSubmit = "troupe.*.submit.*";  // team_submit_to
inline constexpr const char* kAllPipeline = "troupe.*.pipeline";
inline constexpr const char* kAllUsage = "troupe.*.usage";  // troupe.sys.usage: every team
inline constexpr const char* kAllSchedule = "troupe.*.schedule";
inline constexpr const char* kAllStatus = "troupe.*.status";
inline constexpr const char* kAllCancel = "troupe.*.cancel";
inline constexpr const char* kAllLogs = "troupe.*.logs";
inline constexpr const char* kAllJobs = "troupe.*.jobs";  // troupe.sys.jobs lists every team
inline constexpr const char* kAllEvents = "troupe.*.events.>";
inline constexpr const char* kAllWhy = "troupe.*.why";
inline constexpr const char* kAllEnqueue = "troupe.*.enqueue";
inline constexpr const char* kAllHistory = "troupe.*.history";
inline constexpr const char* kSysQueues = "troupe.sys.queues";
inline constexpr const char* kSysCordon = "troupe.sys.cordon";
inline constexpr const char* kSysUncordon = "troupe.sys.uncordon";
inline constexpr const char* kSysDrain = "troupe.sys.drain";
// A lost node forgotten for good (its agent silent, nothing held there).
inline constexpr const char* kSysRemoveNode = "troupe.sys.remove_node";
inline constexpr const char* kSysNodes = "troupe.sys.nodes";
inline constexpr const char* kSysFind = "troupe.sys.find";  // {"job_id"} -> its team (admin)
inline constexpr const char* kSysHello = "troupe.sys.hello";
inline constexpr const char* kSysStats = "troupe.sys.stats";
// Shards: a part of a view (nodes, queues, jobs) asked of one pool's owner,
// {"subject","pool","request"}; the coordinator puts the parts together
// (actors/shell/shard_views.hpp).
inline constexpr const char* kSysShardPart = "troupe.sys.shard.part";
// Shards: one shard of the queue group kShardQueue reads each
// troupe.<team>.submit; a submission of another shard's pool is handed to
// that pool's owner on troupe.sys.shard.read.<pool>.<team> as it read it
// (pb::ShardSubmission: parsed once), the client's reply subject kept.
// troupe.sys.shard.submit.<pool>.<team> takes one as a client sent it.
inline constexpr const char* kShardQueue = "troupe-shards";
inline constexpr const char* kShardSubmitPrefix = "troupe.sys.shard.submit";
inline constexpr const char* kShardReadPrefix = "troupe.sys.shard.read";
inline std::string shard_submit(std::string_view pool, std::string_view team) {
  return std::string(kShardSubmitPrefix) + "." + std::string(pool) + "." + std::string(team);
}
inline std::string shard_read(std::string_view pool, std::string_view team) {
  return std::string(kShardReadPrefix) + "." + std::string(pool) + "." + std::string(team);
}
// Shards: an enqueued submission (troupe.<team>.enqueue, read off the
// durable consumer by one shard) of another shard's pool is handed over
// with the reply subject troupe.sys.shard.answer.<reader>.<stream seq>: the
// reader acknowledges it in the stream once its owner answered for good.
inline constexpr const char* kShardAnswerPrefix = "troupe.sys.shard.answer";
inline std::string shard_answers(std::string_view reader) {
  return std::string(kShardAnswerPrefix) + "." + std::string(reader);
}
// Shards: a keyed any-type submission one shard is about to record asks
// the owner of each of its other candidate pools whether it holds the key
// ({"idempotency_key"} -> {"pool", "job_id"?, "fingerprint"?}), on
// troupe.sys.shard.key.<pool>.<team>.
inline constexpr const char* kShardKeyPrefix = "troupe.sys.shard.key";
inline std::string shard_key(std::string_view pool, std::string_view team) {
  return std::string(kShardKeyPrefix) + "." + std::string(pool) + "." + std::string(team);
}
// Every shard reports here what it admitted per rate-limited team
// (pb::ShardRate); every shard listens and debits the others' tokens.
inline constexpr const char* kShardRate = "troupe.sys.shard.rate";
// The team of a <prefix>.<pool>.<team> subject ("" for any other).
inline std::string_view team_after(std::string_view prefix, std::string_view subject) {
  if (subject.size() <= prefix.size() + 1 || subject.substr(0, prefix.size()) != prefix ||
      subject[prefix.size()] != '.')
    return {};
  auto rest = subject.substr(prefix.size() + 1);
  auto dot = rest.find('.');
  if (dot == std::string_view::npos || rest.find('.', dot + 1) != std::string_view::npos) return {};
  return rest.substr(dot + 1);
}
// The team of a submission handed over by another shard, either way ("" for
// any other subject).
inline std::string_view shard_submit_team(std::string_view subject) {
  auto team = team_after(kShardSubmitPrefix, subject);
  return team.empty() ? team_after(kShardReadPrefix, subject) : team;
}
inline bool is_shard_read(std::string_view subject) {
  return !team_after(kShardReadPrefix, subject).empty();
}
// The pool of a <prefix>.<pool>.<team> subject ("" for any other).
inline std::string_view pool_after(std::string_view prefix, std::string_view subject) {
  if (team_after(prefix, subject).empty()) return {};
  auto rest = subject.substr(prefix.size() + 1);
  return rest.substr(0, rest.find('.'));
}
// The pool of a submission handed over by another shard, either way ("" for
// any other subject).
inline std::string_view shard_submit_pool(std::string_view subject) {
  auto pool = pool_after(kShardSubmitPrefix, subject);
  return pool.empty() ? pool_after(kShardReadPrefix, subject) : pool;
}
// The pool of a troupe.sys.shard.key.<pool>.<team> ask ("" for any other).
inline std::string_view shard_key_pool(std::string_view subject) {
  return pool_after(kShardKeyPrefix, subject);
}
inline constexpr const char* kSysDebugCrash = "troupe.sys.debug.crash";
// The front door (troupe-dispatch, docs/clusters.md): each cluster behind it,
// its GPUs by type, queue depth and state.
inline constexpr const char* kSysClusters = "troupe.sys.clusters";
// On a cluster's NATS: its scheduler asks the front door named in a job's
// spec (`dispatch`) for leave to start it, {"job_id","team","dispatch"} ->
// {"granted":true} | {"granted":false,"withdrawn":true|false,"reason"};
// answered by troupe-dispatch only.
inline constexpr const char* kSysDispatchClaim = "troupe.sys.dispatch.claim";
// Where a front door answers a claim: the claim's reply subject is
// troupe.sys.dispatch.answer.<unique>, so that the dispatch identity may
// publish its answers and into nobody's inbox.
inline constexpr const char* kSysDispatchAnswer = "troupe.sys.dispatch.answer";
// A standby asks whether a leader answers (its router replies "{}").
inline constexpr const char* kSysLeaderAlive = "troupe.sys.leader.alive";
inline constexpr const char* kAllHandoff = "troupe.sys.intake.*.handoff";
inline constexpr const char* kAllAgents = "troupe.sys.agent.>";
// A shard hears every agent's register (to learn the node's pool) and the
// rest only from the nodes of its pools (agent_to_scheduler(node, ">")).
inline constexpr const char* kAllAgentRegisters = "troupe.sys.agent.*.register";

// Token positions: troupe.<team>.<verb>...; troupe.sys.agent.<node>.<kind>.
inline constexpr int kTeamToken = 1;
inline constexpr int kAgentNodeToken = 3;

// Returns token `i` of `subject` (empty when there is none).
inline std::string_view token(std::string_view subject, int i) {
  size_t start = 0;
  for (int k = 0; k < i; ++k) {
    auto dot = subject.find('.', start);
    if (dot == std::string_view::npos) return {};
    start = dot + 1;
  }
  auto end = subject.find('.', start);
  return subject.substr(start,
                        end == std::string_view::npos ? std::string_view::npos : end - start);
}

// troupe.sys.intake.<team>.handoff[.<pool>] of `team`: a record a standby
// or a shard made for the job's owner.
inline bool is_handoff(std::string_view subject, std::string_view team) {
  const std::string one = handoff(team);
  if (subject.substr(0, one.size()) != one) return false;
  if (subject.size() == one.size()) return true;
  auto pool = subject.substr(one.size());
  return pool.size() > 1 && pool[0] == '.' && pool.find('.', 1) == std::string_view::npos;
}

// troupe.sys.logs.<node>.<team>.<job>.<attempt>.<rank>: one worker's output,
// shipped by the agent of <node> (only it may publish there).
inline std::string log_chunks(std::string_view node, std::string_view team, std::string_view job,
                              int attempt, int rank) {
  return "troupe.sys.logs." + std::string(node) + "." + std::string(team) + "." + std::string(job) +
         "." + std::to_string(attempt) + "." + std::to_string(rank);
}
// Every chunk node <node> may publish.
inline std::string node_log_chunks(std::string_view node) {
  return "troupe.sys.logs." + std::string(node) + ".>";
}
// Every chunk of team <team>'s workers, from any node: the subjects of its
// stream logs_stream(team). Those of two teams never overlap.
inline std::string team_log_chunks(std::string_view team) {
  return "troupe.sys.logs.*." + std::string(team) + ".>";
}
// The team of a subject made by log_chunks(); "" when it is not one.
inline std::string_view team_of_log_chunks(std::string_view subject) {
  constexpr std::string_view prefix = "troupe.sys.logs.";
  if (subject.substr(0, prefix.size()) != prefix) return {};
  subject.remove_prefix(prefix.size());
  size_t node_end = subject.find('.');
  if (node_end == std::string_view::npos) return {};
  subject.remove_prefix(node_end + 1);
  return subject.substr(0, subject.find('.'));
}

// JetStream names ([A-Za-z0-9_-]+).
inline constexpr const char* kIntakeStream = "TROUPE_INTAKE";
inline constexpr const char* kIntakeSubjects = "troupe.sys.intake.>";
inline constexpr const char* kEventsStream = "TROUPE_EVENTS";
// Workers' output as their agents ship it (messages/log_chunks.hpp), one
// stream per team (logs_stream(team), on team_log_chunks(team), each with the
// team's retention): read by the scheduler for troupe.<team>.logs once a job
// has ended.
inline constexpr const char* kLogsStreamPrefix = "TROUPE_LOGS_";
// The one stream of every team's output before streams were per team: it
// overlaps theirs, so the scheduler deletes it at start.
inline constexpr const char* kLegacyLogsStream = "TROUPE_LOGS";
inline std::string logs_stream(std::string_view team) {
  return kLogsStreamPrefix + std::string(team);  // a valid team is a valid stream name
}
inline constexpr const char* kEnqueueConsumer = "troupe-scheduler";  // durable, on kAllEnqueue
inline constexpr const char* kHandoffConsumer = "troupe-handoff";    // durable, on kAllHandoff
// A shard's, one per pool it holds: on handoff(*, pool), named after the pool
// (a pool name is a subject token, so a valid durable name).
inline std::string pool_handoff_consumer(std::string_view pool) {
  return std::string(kHandoffConsumer) + "-" + std::string(pool);
}
inline std::string pool_handoffs(std::string_view pool) {
  return std::string(kAllHandoff) + "." + std::string(pool);
}
// The front door's (troupe-dispatch) on the front NATS: troupe.*.enqueue
// stored, and its durable consumer of them.
inline constexpr const char* kDispatchIntakeStream = "TROUPE_FRONT_INTAKE";
inline constexpr const char* kDispatchConsumer = "troupe-dispatch";
// ... and the events it publishes under its ids (troupe.*.events.>), kept for
// troupe.<team>.usage at the front door.
inline constexpr const char* kDispatchEventsStream = "TROUPE_FRONT_EVENTS";
// KV buckets: actor snapshots (job.<id>, node.<name>, meta.flushed_ms, a
// shard's meta.flushed_ms.<pool>) and the leases (key "leader"; a shard's
// pool.<pool>).
inline constexpr const char* kStateBucket = "TROUPE_STATE";
inline constexpr const char* kLeaderBucket = "TROUPE_LEADER";
inline constexpr const char* kLeaderKey = "leader";
// A shard's lease on one pool (troupe-scheduler --pools; actors/policy/shards.hpp).
inline std::string pool_lease_key(std::string_view pool) {
  return "pool." + std::string(pool);
}
// A shard that names a pool another shard holds asks for it back here
// ("<holder> <wall-clock ms>", written every ttl/3 while it waits); the
// holder hands it back (docs/recovery.md "Shards").
inline std::string pool_want_key(std::string_view pool) {
  return "want." + std::string(pool);
}
// The HTTP API's bearer tokens, by SHA-256 (gateway/auth/tokens.hpp): written
// by `troupe auth add-token`, read by every troupe-gateway.
inline constexpr const char* kTokenBucket = "TROUPE_TOKENS";
// The front door's record of where each job went (key job.<front job id>;
// gateway/dispatch/policy.hpp JobPlace), on the front NATS.
inline constexpr const char* kDispatchBucket = "TROUPE_DISPATCH";
// The front door's lease in it: one troupe-dispatch serves, the others wait.
inline constexpr const char* kDispatchLeaseKey = "front";

}  // namespace troupe::subjects

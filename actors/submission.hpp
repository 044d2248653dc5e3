// The stateless half of accepting a submission (troupe.<team>.submit and
// .enqueue): reading it, checking it against the cluster config, and the
// record the intake stream keeps. Shared by the router, which adds what needs
// its state (the team's rate, idempotency keys, max_queued_jobs, the
// registered nodes), and a standby's front door (actors/shell/standby.hpp),
// which records a submission while no leader answers. No actors here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actors/policy/admission.hpp"
#include "actors/policy/config.hpp"
#include "actors/policy/shards.hpp"
#include "messages/spec.hpp"
#include "messages/wire.hpp"
#include "records.pb.h"

namespace troupe::submission {

// Job ids: "j-", the issuing process's start (milliseconds, base 36, 8 digits
// until 2059) and the job's number there (base 36, at least 5 digits): the
// start part has a fixed width, so the two never run into each other. Unique
// across processes that do not start in the same millisecond (a leader's
// router continues the numbers of the jobs it restored), and 15 characters up
// to 60 million jobs per process: short enough for std::string to keep it
// inline, so the many copies of an id (lists, queues, store) cost no heap
// block each.
std::string job_id_prefix(int64_t start_ms);
// A shard's (actors/policy/shards.hpp): "j-<pool>-" and the same start, so
// that any shard knows from a job id which pool's owner holds the job.
std::string shard_job_id_prefix(std::string_view pool, int64_t start_ms);
std::string job_id(const std::string& prefix, uint64_t number);

// The subject's team and the body's format, before anything is parsed.
struct Opened {
  policy::Decision verdict;
  std::string team;
  bool flatbuffers = false;                  // a SubmitRequest (else a JSON job spec)
  const wire::Envelope* envelope = nullptr;  // into the caller's data (flatbuffers)
};
Opened open(std::string_view subject, const std::vector<uint8_t>& data);

// The spec parsed, defaulted and checked, and what the config admits it as.
struct Read {
  policy::Decision verdict;
  pb::JobSpec spec;
  policy::Admission adm;
};
// `stream_seq`, `msg_id`: an enqueued submission's (its idempotency key
// defaults to its message id, else to "enqueue-<seq>").
Read read(const Opened& o, const std::vector<uint8_t>& data, const policy::ClusterConfig& cfg,
          const spec::Limits& limits, uint64_t stream_seq = 0, const std::string& msg_id = {});

// A submission another shard read, handed over on troupe.sys.shard.read.
// <pool>.<team> (pb::ShardSubmission): its spec checked again for the
// subject's team (no parse of the client's bytes), `opened` says the client's
// format, `original` holds its bytes.
struct Handed {
  Opened opened;
  Read read;
  std::vector<uint8_t> original;
};
Handed read_handed(std::string_view subject, const std::vector<uint8_t>& data,
                   const policy::ClusterConfig& cfg, const spec::Limits& limits);
// What a shard hands over: the spec it read, the client's format and bytes.
std::string hand_over(const pb::JobSpec& spec, bool flatbuffers,
                      const std::vector<uint8_t>& original);

// A shard's report (pb::ShardRate on troupe.sys.shard.rate): what it
// admitted per team since its last report, or (has_queued) its whole count
// of the teams' queued jobs. Read back: false for bytes that are not one; a
// team whose name is not allowed, or a count that is not a positive number,
// is left out; 4096 teams at most each. Its pools' rooms (a pool name that
// is not a subject token is left out, a negative figure read as 0; 4096 at
// most).
struct ShardReport {
  std::string shard;
  std::vector<std::pair<std::string, double>> taken;
  bool has_queued = false;
  std::vector<std::pair<std::string, int64_t>> queued;
  std::vector<std::pair<std::string, policy::PoolRoom>> rooms;
};
std::string shard_report(const ShardReport& r);
bool read_shard_report(const std::vector<uint8_t>& data, ShardReport* r);

// A spec (a submission's, or a pipeline member's) defaulted and checked for
// `team` (the subject's): the team, labels (none of the scheduler's), spec
// limits, the cluster config's admission.
Read check_spec(pb::JobSpec spec, const std::string& team, const policy::ClusterConfig& cfg,
                const spec::Limits& limits);

// A pipeline (troupe.<team>.pipeline, docs/api.md "Pipelines"): every member
// checked as a submission (the first refusal refuses all, naming the member),
// names unique tokens, depends_on by name to members, no cycle; the members
// upstream first. Their depends_on by name get their job ids from the router.
struct Member {
  pb::JobSpec spec;
  policy::Admission adm;
};
struct PipelineRead {
  policy::Decision verdict;
  std::string name;
  std::string idempotency_key;
  std::vector<Member> members;
};
PipelineRead read_pipeline(const Opened& o, const std::vector<uint8_t>& data,
                           const policy::ClusterConfig& cfg, const spec::Limits& limits);

// A submission read and checked off the router (actors/intake_reader.hpp):
// its team and format, the spec and its admission, or why it was refused
// before the router's own checks (the team's rate, open(), read()).
struct Checked {
  std::string team;
  bool flatbuffers = false;
  policy::Decision verdict;
  pb::JobSpec spec;
  policy::Admission adm;
  std::optional<PipelineRead> pipeline;  // a pipeline (spec and adm unused)
};

// team/key, or "" when the spec has no idempotency key.
std::string key_of(const std::string& team, const pb::JobSpec& s);

// The record's message id in the intake stream, which drops a second record
// under the same id (within its 2-minute window): the idempotency key; else
// the request's reply subject and a digest of its body, scoped by team (a
// request the leader and a standby both heard, or two standbys, is recorded
// once, whoever came first; a client reusing one reply subject keeps its
// distinct submissions apart); else (no reply subject) the job id.
std::string intake_msg_id(const std::string& team, const std::string& key, const std::string& reply,
                          const std::vector<uint8_t>& body, const std::string& job_id);

// The record of an accepted submission, as the intake stream keeps it.
pb::JobRecord make_record(pb::JobSpec spec, const policy::Admission& adm,
                          const policy::ClusterConfig& cfg, const std::string& checkpoint_root,
                          const std::string& job_id, uint64_t seq, int64_t now_ms);

// What the submitters of a record the intake stream dropped as a duplicate
// get: the job of the record it holds under the same message id (`original`,
// its bytes), or a refusal.
struct DuplicateAnswer {
  std::string job_id;       // the original's ("" when refused unavailable)
  std::string fingerprint;  // of the original's spec
  policy::Decision verdict;
};
// `key`: the submission's idempotency key ("" when it has none), `fingerprint`
// its spec's.
DuplicateAnswer answer_duplicate(const std::string& original, const std::string& key,
                                 const std::string& fingerprint);

// The reply to a submission: the job id, or an error with its stable code, in
// the submission's own format.
std::vector<uint8_t> reply(bool flatbuffers, const std::string& job_id, const std::string& error,
                           policy::Refusal code = policy::Refusal::none);

// The refusal text of a submission the intake stream did not store (`error`:
// the stream's): unavailable, the client retries.
std::string not_recorded(const std::string& error);

// The reply once a record appended without an actor (a standby's front door,
// a shard recording for another's pool) is stored or not: its job id; when
// the stream held a record under its message id, that one's (a spec that
// differs under the same key: idempotency_conflict); not stored:
// unavailable, to retry. `key`/`fingerprint` as for answer_duplicate.
std::vector<uint8_t> appended_reply(bool flatbuffers, const std::string& job_id, bool ok,
                                    bool duplicate, const std::string& error,
                                    const std::string& original, const std::string& key,
                                    const std::string& fingerprint);

}  // namespace troupe::submission

// Admission at the router (docs/admission.md): the refusal codes, a token
// bucket per team (time is a parameter; no clocks here), the queued-jobs and
// GPUs-per-job limits of a team, the feasibility of a spec against the largest
// nodes registered in its pool, and idempotency conflicts. Pure; the router
// (actors/router.cpp) holds the state and calls these. Unit tests:
// tests/unit/policy_admission_test.cpp.
#pragma once

#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actors/policy/config.hpp"
#include "actors/policy/placement.hpp"

namespace troupe::policy {

// Why a submission was refused: a stable code, part of the API (docs/api.md),
// beside the text for a person.
enum class Refusal {
  none,
  malformed,             // neither a JSON job spec nor a verifiable FlatBuffers SubmitRequest
  invalid_spec,          // the spec cannot be right (spec::check, the cluster config)
  wrong_team,            // the spec's team is not the subject's
  rate_limited,          // the team's submit_rate / submit_burst (requests: request_rate)
  too_many_queued,       // the team's max_queued_jobs
  too_large,             // a size limit of the spec, or the team's max_gpus_per_job
  unsatisfiable,         // no registered node of its pool could ever hold one worker
  idempotency_conflict,  // the key was used with a different spec
  unavailable,           // the intake stream did not record it: retry
  not_allowed,           // a reserved or unknown team
};
inline constexpr Refusal kAllRefusals[] = {Refusal::malformed,       Refusal::invalid_spec,
                                           Refusal::wrong_team,      Refusal::rate_limited,
                                           Refusal::too_many_queued, Refusal::too_large,
                                           Refusal::unsatisfiable,   Refusal::idempotency_conflict,
                                           Refusal::unavailable,     Refusal::not_allowed};

// "rate_limited", ...; "" for none.
const char* code_name(Refusal r);

// One submission per token; `burst` tokens at most, refilled at `rate` per
// second. A new bucket is full. Tokens go below zero only by debit_tokens
// (what other shards took): the team then waits until the refill pays it.
struct TokenBucket {
  double tokens = 0;
  int64_t last_ms = 0;
  bool used = false;  // false: not used yet (full)
};
// Takes a token at `now_ms` (any monotonic clock); false when none is left.
// `rate <= 0` means no limit (always true, the bucket is not touched).
bool take_token(TokenBucket& b, double rate, double burst, int64_t now_ms);
// Takes `n` tokens that were spent elsewhere (another shard admitted the
// team's submissions): the bucket may go into debt, at most its burst and one
// second of its rate (what the shards admit together stays one rate; a
// report that is wrong locks the team out for a bounded time).
void debit_tokens(TokenBucket& b, double n, double rate, double burst, int64_t now_ms);
// True when the bucket would be full at `now_ms` (it can be forgotten).
bool bucket_full(const TokenBucket& b, double rate, double burst, int64_t now_ms);
// Forgets every bucket of `buckets` (key -> TokenBucket) that would be full
// at `now_ms`: such a bucket is the same as none. `rate_of(key)` gives its
// {rate, burst}.
template <class Map, class RateOf>
void forget_full_buckets(Map& buckets, int64_t now_ms, RateOf rate_of) {
  for (auto it = buckets.begin(); it != buckets.end();) {
    const auto [rate, burst] = rate_of(it->first);
    it = bucket_full(it->second, rate, burst, now_ms) ? buckets.erase(it) : std::next(it);
  }
}

struct Decision {
  Refusal code = Refusal::none;
  std::string error;  // names the limit and the value
  bool ok() const { return code == Refusal::none; }
};

// The team's rate: takes a token or refuses rate_limited.
Decision check_rate(TokenBucket& b, const TeamLimits& l, std::string_view team, int64_t now_ms);
// A team's request other than a submission (`verb`: status, jobs, ...)
// against its request_rate / request_burst: a token, or rate_limited naming
// both.
Decision check_request_rate(TokenBucket& b, const TeamLimits& l, std::string_view team,
                            std::string_view verb, int64_t now_ms);
// The team's max_queued_jobs against the jobs it has queued now (accepted, or
// being recorded, and not started yet).
Decision check_queued(const TeamLimits& l, std::string_view team, int64_t queued_now,
                      int64_t adding = 1);
// The team's max_gpus_per_job against workers x GPUs per worker.
Decision check_job_gpus(const TeamLimits& l, std::string_view team, int workers, int gpus);

// The shape of one registered node (from its NodeRegister): what it could
// ever hold. `pool` is resolved with the cluster config ("" = none).
struct NodeShape {
  std::string name;
  std::string pool;
  std::string gpu_type;
  int gpus = 0;
  int cpus = 0;
  int64_t memory_mb = 0;
};

// Whether one worker of `req` (its pool resolved) could ever run on a node
// registered in that pool (of its GPU type, when it names one). A pool with
// no such node yet accepts (nodes may join later); otherwise the refusal is
// unsatisfiable with the numbers ("needs 16 GPUs per worker; the largest node
// of pool a100 has 8").
Decision check_feasible(const std::vector<NodeShape>& nodes, const PlacementRequest& req);

// The same idempotency key with another spec: `stored` is the fingerprint
// (spec::fingerprint) of the key's job, "" when unknown (then no conflict).
Decision check_idempotency(std::string_view key, std::string_view stored,
                           std::string_view fingerprint);

// A job counts against max_queued_jobs from its acceptance until it first
// leaves `queued` (starts or ends); a blocked job (depends_on) counts too. For
// a record after a restart: state blocked, queued (or not set yet) and no
// ended attempt.
bool awaiting_first_start(std::string_view state, int ended_attempts);

}  // namespace troupe::policy

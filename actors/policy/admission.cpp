#include "actors/policy/admission.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "messages/names.hpp"

namespace troupe::policy {

namespace {

std::string num(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
std::string num(int64_t v) {
  return std::to_string(v);
}

Decision refuse(Refusal r, std::string e) {
  return {r, std::move(e)};
}

}  // namespace

const char* code_name(Refusal r) {
  switch (r) {
    case Refusal::none:
      return "";
    case Refusal::malformed:
      return "malformed";
    case Refusal::invalid_spec:
      return "invalid_spec";
    case Refusal::wrong_team:
      return "wrong_team";
    case Refusal::rate_limited:
      return "rate_limited";
    case Refusal::too_many_queued:
      return "too_many_queued";
    case Refusal::too_large:
      return "too_large";
    case Refusal::unsatisfiable:
      return "unsatisfiable";
    case Refusal::idempotency_conflict:
      return "idempotency_conflict";
    case Refusal::unavailable:
      return "unavailable";
    case Refusal::not_allowed:
      return "not_allowed";
  }
  return "";
}

namespace {
// The bucket's tokens at `now_ms` (refilled, capped at burst).
double tokens_at(const TokenBucket& b, double rate, double burst, int64_t now_ms) {
  if (!b.used) return burst;
  double elapsed_s = now_ms > b.last_ms ? static_cast<double>(now_ms - b.last_ms) / 1000.0 : 0.0;
  return std::min(burst, b.tokens + elapsed_s * rate);
}
}  // namespace

bool take_token(TokenBucket& b, double rate, double burst, int64_t now_ms) {
  if (!(rate > 0)) return true;
  burst = std::max(1.0, burst);
  double t = tokens_at(b, rate, burst, now_ms);
  // A clock that went back does not refill; time starts again from now.
  b.last_ms = b.used ? std::max(b.last_ms, now_ms) : now_ms;
  b.used = true;
  if (t < 1.0) {
    b.tokens = t;
    return false;
  }
  b.tokens = t - 1.0;
  return true;
}

void debit_tokens(TokenBucket& b, double n, double rate, double burst, int64_t now_ms) {
  if (!(rate > 0) || !(n > 0)) return;
  burst = std::max(1.0, burst);
  double t = tokens_at(b, rate, burst, now_ms);
  b.last_ms = b.used ? std::max(b.last_ms, now_ms) : now_ms;
  b.used = true;
  b.tokens = std::max(-(burst + rate), t - n);
}

bool bucket_full(const TokenBucket& b, double rate, double burst, int64_t now_ms) {
  if (!(rate > 0)) return true;
  burst = std::max(1.0, burst);
  return tokens_at(b, rate, burst, now_ms) >= burst;
}

Decision check_rate(TokenBucket& b, const TeamLimits& l, std::string_view team, int64_t now_ms) {
  if (take_token(b, l.submit_rate, l.submit_burst, now_ms)) return {};
  return refuse(Refusal::rate_limited, "team " + std::string(team) +
                                           " submits faster than its limit: submit_rate " +
                                           num(l.submit_rate) + "/s, submit_burst " +
                                           num(std::max(1.0, l.submit_burst)) + "; retry later");
}

Decision check_request_rate(TokenBucket& b, const TeamLimits& l, std::string_view team,
                            std::string_view verb, int64_t now_ms) {
  if (take_token(b, l.request_rate, l.request_burst, now_ms)) return {};
  return refuse(Refusal::rate_limited,
                "team " + std::string(team) + " asks faster than its limit (" + std::string(verb) +
                    "): request_rate " + num(l.request_rate) + "/s, request_burst " +
                    num(std::max(1.0, l.request_burst)) + "; retry later");
}

Decision check_queued(const TeamLimits& l, std::string_view team, int64_t queued_now,
                      int64_t adding) {
  if (l.max_queued_jobs < 0 || queued_now + std::max<int64_t>(adding, 1) <= l.max_queued_jobs)
    return {};
  if (adding > 1)
    return refuse(Refusal::too_many_queued,
                  "the array's " + num(adding) + " tasks would take team " + std::string(team) +
                      " from " + num(queued_now) + " to " + num(queued_now + adding) +
                      " jobs queued (limit max_queued_jobs " + num(l.max_queued_jobs) +
                      "); each task counts as a job");
  return refuse(Refusal::too_many_queued, "team " + std::string(team) + " has " + num(queued_now) +
                                              " jobs queued (limit max_queued_jobs " +
                                              num(l.max_queued_jobs) +
                                              "); submit again once some have started");
}

Decision check_job_gpus(const TeamLimits& l, std::string_view team, int workers, int gpus) {
  int64_t total = int64_t{std::max(workers, 1)} * std::max(gpus, 0);
  if (l.max_gpus_per_job < 0 || total <= l.max_gpus_per_job) return {};
  return refuse(Refusal::too_large,
                "the job asks for " + num(total) + " GPUs (" + num(int64_t{workers}) +
                    " workers x " + num(int64_t{gpus}) + "); team " + std::string(team) +
                    " has the limit max_gpus_per_job " + num(int64_t{l.max_gpus_per_job}));
}

Decision check_feasible(const std::vector<NodeShape>& nodes, const PlacementRequest& req) {
  if (req.flexible()) {
    // An any-type job: feasible when one candidate pool can ever take it.
    Decision first;
    for (size_t i = 0; i < req.pools.size(); ++i) {
      PlacementRequest one = req;
      one.pool = req.pools[i];
      one.pools.clear();
      auto d = check_feasible(nodes, one);
      if (d.ok()) return d;
      if (i == 0) first = std::move(d);
    }
    return first;
  }
  bool typed = !req.gpu_type.empty() && req.gpus > 0;
  int max_gpus = 0, max_cpus = 0;
  int64_t max_mem = 0;
  size_t candidates = 0;
  for (const auto& n : nodes) {
    if (n.pool.empty() || n.pool != req.pool) continue;
    if (typed && n.gpu_type != req.gpu_type) continue;
    ++candidates;
    if (n.gpus >= req.gpus && (req.cpus <= 0 || n.cpus >= req.cpus) &&
        (req.memory_mb <= 0 || n.memory_mb >= req.memory_mb))
      return {};
    max_gpus = std::max(max_gpus, n.gpus);
    max_cpus = std::max(max_cpus, n.cpus);
    max_mem = std::max(max_mem, n.memory_mb);
  }
  if (candidates == 0) return {};  // no node yet: one may join later
  std::string where = "pool " + req.pool + (typed ? " (GPU type " + req.gpu_type + ")" : "");
  std::string e;
  if (req.gpus > max_gpus)
    e = "needs " + num(int64_t{req.gpus}) + " GPUs per worker; the largest node of " + where +
        " has " + num(int64_t{max_gpus});
  else if (req.cpus > max_cpus)
    e = "needs " + num(int64_t{req.cpus}) + " CPUs per worker; the largest node of " + where +
        " has " + num(int64_t{max_cpus});
  else if (req.memory_mb > max_mem)
    e = "needs " + num(req.memory_mb) + " MB of memory per worker; the largest node of " + where +
        " has " + num(max_mem);
  else
    e = "needs " + num(int64_t{req.gpus}) + " GPUs, " + num(int64_t{req.cpus}) + " CPUs and " +
        num(req.memory_mb) + " MB per worker together; no node of " + where +
        " has all three (largest: " + num(int64_t{max_gpus}) + " GPUs, " + num(int64_t{max_cpus}) +
        " CPUs, " + num(max_mem) + " MB)";
  return refuse(Refusal::unsatisfiable, e + " (" + num(static_cast<int64_t>(candidates)) + " node" +
                                            (candidates == 1 ? "" : "s") + " registered there)");
}

Decision check_idempotency(std::string_view key, std::string_view stored,
                           std::string_view fingerprint) {
  if (stored.empty() || stored == fingerprint) return {};
  return refuse(Refusal::idempotency_conflict,
                "idempotency_key '" + std::string(key) +
                    "' was used before with a different spec; use a new key for a new job");
}

bool awaiting_first_start(std::string_view state, int ended_attempts) {
  return (state.empty() || state == names::kBlocked || state == names::kQueued) &&
         ended_attempts == 0;
}

}  // namespace troupe::policy

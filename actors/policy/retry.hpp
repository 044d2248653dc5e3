// How an attempt ended, and what comes next: pure.
// Infrastructure failures (node lost, agent crash, the agent failing to
// launch, preemption) requeue the job without using max_retries, up to a cap.
// User failures (non-zero exit, OOM kill or another signal, exceeding
// max_runtime_s) use max_retries with exponential back-off, then fail.
// Unit tests: tests/unit/policy_retry_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::policy {

enum class FailureKind { kNone, kUser, kInfra };

struct Outcome {
  FailureKind kind = FailureKind::kNone;
  std::string cause;  // succeeded, exit_code, signal, oom_killed, log_limit, disk_limit, max_runtime,
                      // launch_failed, node_lost, agent_lost, preempted, canceled, stopped
};

// One rank's end as the agent reported it (`reason` is the agent's text).
// `stop_requested`: the scheduler had asked this attempt to stop (cancel or
// preemption); `preempting`: for a preemption.
Outcome classify_exit(int exit_code, int signal, std::string_view reason, bool stop_requested,
                      bool preempting);

// Outcome for a rank whose node was lost.
inline Outcome node_lost() { return {FailureKind::kInfra, "node_lost"}; }

struct RetryDecision {
  bool retry = false;
  int64_t delay_ms = 0;  // back-off before the next attempt may be placed
  std::string why;       // when not retried
};

struct RetryBudget {
  int max_retries = 0;        // the spec's, for user failures
  int retries_used = 0;
  int infra_cap = 10;         // requeues for infrastructure failures
  int infra_used = 0;
  int64_t backoff_base_ms = 1000;
  int64_t backoff_max_ms = 60000;
};

RetryDecision decide_retry(const Outcome& o, const RetryBudget& b);

inline const char* kind_name(FailureKind k) {
  return k == FailureKind::kUser ? "user" : k == FailureKind::kInfra ? "infra" : "none";
}

}  // namespace troupe::policy

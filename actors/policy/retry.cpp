#include "actors/policy/retry.hpp"

#include <algorithm>
#include <csignal>

namespace troupe::policy {

Outcome classify_exit(int exit_code, int signal, std::string_view reason, bool stop_requested,
                      bool preempting) {
  if (stop_requested)
    return {preempting ? FailureKind::kInfra : FailureKind::kNone,
            preempting ? "preempted" : "canceled"};
  // The agent saw its cgroup's OOM kill ("oom_killed: memory limit 64 MiB
  // exceeded ..."), whatever the exit looked like (a container's 137, say).
  if (reason.rfind("oom_killed", 0) == 0) return {FailureKind::kUser, "oom_killed"};
  // The agent killed it: its output passed the node's --job-log-max-mb.
  if (reason.rfind("log_limit", 0) == 0) return {FailureKind::kUser, "log_limit"};
  // Its job's work dir passed the node's --job-disk-max-mb.
  if (reason.rfind("disk_limit", 0) == 0) return {FailureKind::kUser, "disk_limit"};
  if (reason.rfind("launch failed", 0) == 0) return {FailureKind::kInfra, "launch_failed"};
  if (reason.find("shutting down") != std::string_view::npos ||
      reason.find("agent lost") != std::string_view::npos)
    return {FailureKind::kInfra, "agent_lost"};
  if (reason.find("node lost") != std::string_view::npos) return {FailureKind::kInfra, "node_lost"};
  if (reason.find("max_runtime") != std::string_view::npos)
    return {FailureKind::kUser, "max_runtime"};
  if (signal == SIGKILL)
    return {FailureKind::kUser, "oom_killed"};  // the kernel's OOM killer sends SIGKILL
  if (signal != 0) return {FailureKind::kUser, "signal"};
  if (exit_code != 0) return {FailureKind::kUser, "exit_code"};
  return {FailureKind::kNone, "succeeded"};
}

RetryDecision decide_retry(const Outcome& o, const RetryBudget& b) {
  RetryDecision d;
  if (o.kind == FailureKind::kInfra) {
    d.retry = b.infra_used < b.infra_cap;
    if (!d.retry)
      d.why = "infrastructure failures exceeded the requeue cap of " + std::to_string(b.infra_cap);
    return d;
  }
  if (o.kind == FailureKind::kUser) {
    d.retry = b.retries_used < b.max_retries;
    if (d.retry) {
      int64_t delay = b.backoff_base_ms;
      for (int i = 0; i < b.retries_used && delay < b.backoff_max_ms; ++i) delay *= 2;
      d.delay_ms = std::min(delay, b.backoff_max_ms);
    } else {
      d.why = "max_retries " + std::to_string(b.max_retries) + " used";
    }
  }
  return d;
}

}  // namespace troupe::policy

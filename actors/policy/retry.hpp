// Retry decisions for user failures (non-zero exit, signal, max_runtime_s):
// pure. The preemption/node-failure issue adds infrastructure causes.
#pragma once

namespace troupe::policy {

struct RetryDecision {
  bool retry = false;
};

// `used`: retries already spent; `max`: the spec's max_retries.
inline RetryDecision decide_retry(int used, int max) { return RetryDecision{used < max}; }

}  // namespace troupe::policy

// Classification of how a worker ended into Exited's (exit_code, signal,
// reason), as docs/contract.md spells the reasons. Pure.
#pragma once

#include <string>

namespace troupe::node {

// Why the agent thinks the worker ended, besides its own wait status.
enum class EndCause {
  natural,      // nobody asked it to stop
  stopped,      // after a Stop we sent (or agent shutdown)
  max_runtime,  // we killed it for max_runtime_s
  shutdown,     // the agent is shutting down (an infrastructure end, not the job's)
  log_limit,    // we killed it: its output passed the agent's --job-log-max-mb
  disk_limit,   // we killed it: its job's work dir passed the agent's --job-disk-max-mb
};

struct ExitInfo {
  int exit_code = 0;  // -1 when a signal ended the process
  int signal = 0;
  std::string reason;
  bool operator==(const ExitInfo& o) const {
    return exit_code == o.exit_code && signal == o.signal && reason == o.reason;
  }
};

// From a waitpid() status.
ExitInfo classify_wait_status(int wait_status, EndCause cause);
// From already-split values (signal > 0: killed by it; used by --simulate too).
ExitInfo classify(int exit_code, int signal, EndCause cause);
// "launch failed: <why>", exit_code -1, signal 0.
ExitInfo launch_failed(const std::string& why);

}  // namespace troupe::node

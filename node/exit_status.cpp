// Owns exit-status -> (exit_code, signal, reason) classification.
#include "node/exit_status.hpp"

#include <sys/wait.h>

namespace troupe::node {

ExitInfo classify(int exit_code, int signal, EndCause cause) {
  ExitInfo e;
  if (signal > 0) {
    e.exit_code = -1;
    e.signal = signal;
  } else {
    e.exit_code = exit_code;
    e.signal = 0;
  }
  switch (cause) {
    case EndCause::stopped:
      e.reason = "stopped";
      break;
    case EndCause::shutdown:
      e.reason = "stopped: the node agent is shutting down";
      break;
    case EndCause::max_runtime:
      e.reason = "exceeded max_runtime_s";
      break;
    case EndCause::log_limit:
      e.reason = "log_limit: its output passed the node's limit";
      break;
    case EndCause::disk_limit:
      e.reason = "disk_limit: its work dir passed the node's limit";
      break;
    case EndCause::natural:
      e.reason = signal > 0 ? "killed by signal " + std::to_string(signal)
                            : "exited with code " + std::to_string(exit_code);
      break;
  }
  return e;
}

ExitInfo classify_wait_status(int st, EndCause cause) {
  if (WIFSIGNALED(st)) return classify(-1, WTERMSIG(st), cause);
  if (WIFEXITED(st)) return classify(WEXITSTATUS(st), 0, cause);
  // Stopped/continued statuses are never asked for (no WUNTRACED); be total.
  return classify(-1, 0, cause);
}

ExitInfo launch_failed(const std::string& why) {
  return ExitInfo{-1, 0, "launch failed: " + why};
}

}  // namespace troupe::node

// Unit tests for actors/policy/retry: user vs infrastructure failures.
#include <catch2/catch.hpp>
#include <csignal>

#include "actors/policy/retry.hpp"

using namespace troupe::policy;

TEST_CASE("classify_exit tells user failures from infrastructure", "[policy][retry]") {
  struct Case {
    const char* name;
    int code, sig;
    const char* reason;
    bool stop, preempt;
    FailureKind kind;
    const char* cause;
  };
  std::vector<Case> cases = {
      {"success", 0, 0, "exited with code 0", false, false, FailureKind::kNone, "succeeded"},
      {"non-zero exit", 1, 0, "exited with code 1", false, false, FailureKind::kUser, "exit_code"},
      {"OOM kill", -1, SIGKILL, "killed by signal 9", false, false, FailureKind::kUser,
       "oom_killed"},
      {"OOM kill of the job's cgroup", -1, SIGKILL,
       "oom_killed: memory limit 64 MiB exceeded (killed by signal 9)", false, false,
       FailureKind::kUser, "oom_killed"},
      {"OOM kill seen as a container's exit 137", 137, 0,
       "oom_killed: memory limit 64 MiB exceeded (exited with code 137)", false, false,
       FailureKind::kUser, "oom_killed"},
      {"OOM kill of a worker whose agent then shut down", -1, SIGKILL,
       "oom_killed: memory limit 64 MiB exceeded; the node agent is shutting down", false, false,
       FailureKind::kUser, "oom_killed"},
      {"output past the node's log limit (killed with SIGKILL, not an OOM kill)", -1, SIGKILL,
       "log_limit: its output passed 1 MiB, the node's --job-log-max-mb", false, false,
       FailureKind::kUser, "log_limit"},
      {"work dir past the node's disk limit", -1, SIGKILL,
       "disk_limit: its work dir passed 2 MiB, the node's --job-disk-max-mb", false, false,
       FailureKind::kUser, "disk_limit"},
      {"other signal", -1, SIGSEGV, "killed by signal 11", false, false, FailureKind::kUser,
       "signal"},
      {"max runtime", -1, SIGTERM, "exceeded max_runtime_s", false, false, FailureKind::kUser,
       "max_runtime"},
      {"launch failure of the agent", -1, 0, "launch failed: fork: EAGAIN", false, false,
       FailureKind::kInfra, "launch_failed"},
      {"node lost", -1, 0, "node lost: no heartbeat from n1", false, false, FailureKind::kInfra,
       "node_lost"},
      {"agent shut down", -1, 15, "launch failed: the node agent is shutting down", false, false,
       FailureKind::kInfra, "launch_failed"},
      {"agent restarted without the worker", -1, 0, "agent lost: n1 restarted without this worker",
       false, false, FailureKind::kInfra, "agent_lost"},
      {"preempted", -1, SIGUSR1, "stopped", true, true, FailureKind::kInfra, "preempted"},
      {"canceled", -1, SIGTERM, "stopped", true, false, FailureKind::kNone, "canceled"},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      auto o = classify_exit(c.code, c.sig, c.reason, c.stop, c.preempt);
      CHECK(o.kind == c.kind);
      CHECK(o.cause == c.cause);
    }
  }
}

TEST_CASE("user failures use max_retries with back-off", "[policy][retry]") {
  Outcome user{FailureKind::kUser, "exit_code"};
  RetryBudget b;
  b.max_retries = 2;
  auto first = decide_retry(user, b);
  CHECK(first.retry);
  CHECK(first.delay_ms == 1000);
  b.retries_used = 1;
  auto second = decide_retry(user, b);
  CHECK(second.retry);
  CHECK(second.delay_ms == 2000);
  b.retries_used = 2;
  auto third = decide_retry(user, b);
  CHECK_FALSE(third.retry);
  CHECK(third.why.find("max_retries 2") != std::string::npos);
}

TEST_CASE("infrastructure failures do not use max_retries, up to a cap", "[policy][retry]") {
  Outcome lost{FailureKind::kInfra, "node_lost"};
  RetryBudget b;
  b.max_retries = 0;
  b.infra_cap = 2;
  CHECK(decide_retry(lost, b).retry);
  CHECK(decide_retry(lost, b).delay_ms == 0);
  b.infra_used = 2;
  auto capped = decide_retry(lost, b);
  CHECK_FALSE(capped.retry);
  CHECK(capped.why.find("cap of 2") != std::string::npos);
}

TEST_CASE("back-off is bounded", "[policy][retry]") {
  RetryBudget b;
  b.max_retries = 100;
  b.retries_used = 50;
  CHECK(decide_retry({FailureKind::kUser, "exit_code"}, b).delay_ms == b.backoff_max_ms);
}

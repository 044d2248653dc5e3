// Job dependencies (`depends_on`, docs/api.md "Dependencies"): whether a
// blocked job may go to its queue, must wait, or can never start, judged from
// its upstream jobs' states. Pure; the job supervisor keeps the blocked jobs
// and asks this each time one of their upstream jobs ends. Unit tests:
// tests/unit/policy_dependencies_test.cpp.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::policy::deps {

// The reason code of a job canceled because a dependency can no longer be
// met (its event's cause; its reason text starts with it).
inline constexpr const char* kDependencyFailed = "dependency_failed";

// One entry of depends_on: the upstream job and what it must end as
// (spec::kOnSucceeded, kOnFailed or kOnFinished; "" reads as succeeded).
struct Dependency {
  std::string job;
  std::string on;
};

// What one entry says, given its upstream's state ("" when the job is not
// known: never submitted, or ended and forgotten).
enum class Status { waiting, met, never };
Status status_of(std::string_view on, std::string_view upstream_state);

// All entries together: met when every one is met; never as soon as one can
// never be (`upstream`, `upstream_state`: the first such); else waiting.
struct Verdict {
  Status status = Status::waiting;
  std::string upstream;
  std::string upstream_state;
};
using StateOf = std::function<std::string(const std::string& job)>;
Verdict judge(const std::vector<Dependency>& deps, const StateOf& state_of);

// The reason of a job canceled for `v` (a `never` verdict):
// "dependency_failed: job j-… ended failed; this job needed it to succeed".
std::string failed_reason(const Verdict& v, std::string_view on);
// `troupe why` of a blocked job: each upstream job not yet as needed, with its
// state: "waiting for j-1 (running) to succeed, j-2 (queued) to finish".
std::string why_blocked(const std::vector<Dependency>& deps, const StateOf& state_of);

// A cycle among named jobs (a pipeline: name -> the names it depends on):
// the names of one cycle, in order, first repeated at the end; empty when
// there is none.
std::vector<std::string> find_cycle(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& graph);

}  // namespace troupe::policy::deps

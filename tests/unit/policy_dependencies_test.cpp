// Unit tests for actors/policy/dependencies (depends_on): the verdict of each
// `on` against every upstream state, a blocked job's why text and failure
// reason, and cycle finding among named pipeline jobs.
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "actors/policy/dependencies.hpp"

using namespace troupe::policy::deps;

namespace {
StateOf states(std::map<std::string, std::string> m) {
  return [m](const std::string& job) {
    auto it = m.find(job);
    return it == m.end() ? std::string() : it->second;
  };
}
}  // namespace

TEST_CASE("dependencies: each on against each upstream state", "[unit][policy][deps]") {
  for (const char* live : {"blocked", "queued", "starting", "running"})
    for (const char* on : {"", "succeeded", "failed", "finished"})
      CHECK(status_of(on, live) == Status::waiting);
  CHECK(status_of("", "succeeded") == Status::met);
  CHECK(status_of("succeeded", "succeeded") == Status::met);
  CHECK(status_of("succeeded", "failed") == Status::never);
  CHECK(status_of("succeeded", "canceled") == Status::never);
  CHECK(status_of("failed", "failed") == Status::met);
  CHECK(status_of("failed", "succeeded") == Status::never);
  CHECK(status_of("failed", "canceled") == Status::never);
  for (const char* end : {"succeeded", "failed", "canceled"})
    CHECK(status_of("finished", end) == Status::met);
  // An upstream nobody knows never ends.
  CHECK(status_of("finished", "") == Status::never);
  CHECK(status_of("bogus", "succeeded") == Status::never);
}

TEST_CASE("dependencies: all met, one waiting, the first that can never be",
          "[unit][policy][deps]") {
  std::vector<Dependency> d = {{"a", ""}, {"b", "finished"}, {"c", "failed"}};
  CHECK(judge(d, states({{"a", "succeeded"}, {"b", "canceled"}, {"c", "failed"}})).status ==
        Status::met);
  CHECK(judge(d, states({{"a", "succeeded"}, {"b", "running"}, {"c", "failed"}})).status ==
        Status::waiting);
  auto v = judge(d, states({{"a", "running"}, {"b", "running"}, {"c", "succeeded"}}));
  REQUIRE(v.status == Status::never);
  CHECK(v.upstream == "c");
  CHECK(v.upstream_state == "succeeded");
  CHECK(failed_reason(v, "failed") ==
        "dependency_failed: job c ended succeeded; this job needed it to fail");
  auto gone = judge({{"x", ""}}, states({}));
  REQUIRE(gone.status == Status::never);
  CHECK(failed_reason(gone, "").find("job x is not known") != std::string::npos);
  CHECK(judge({}, states({})).status == Status::met);
}

TEST_CASE("dependencies: why a blocked job waits names each upstream and its state",
          "[unit][policy][deps]") {
  std::vector<Dependency> d = {{"j-a", ""}, {"j-b", "finished"}, {"j-c", "failed"}};
  CHECK(why_blocked(d, states({{"j-a", "running"}, {"j-b", "succeeded"}, {"j-c", "queued"}})) ==
        "waiting for j-a (running) to succeed, j-c (queued) to fail");
  CHECK(why_blocked(d, states({{"j-a", "succeeded"}, {"j-b", "failed"}, {"j-c", "failed"}}))
            .find("met") != std::string::npos);
}

TEST_CASE("dependencies: a cycle among named jobs is found, a fan-in is not one",
          "[unit][policy][deps]") {
  CHECK(find_cycle({{"prep", {}},
                    {"train-a", {"prep"}},
                    {"train-b", {"prep"}},
                    {"eval", {"train-a", "train-b"}}})
            .empty());
  auto c = find_cycle({{"a", {"c"}}, {"b", {"a"}}, {"c", {"b"}}, {"d", {}}});
  REQUIRE(c.size() == 4);
  CHECK(c.front() == c.back());
  CHECK(find_cycle({{"self", {"self"}}}) == std::vector<std::string>{"self", "self"});
  // A name nobody defines is no cycle (the caller refuses it on its own).
  CHECK(find_cycle({{"a", {"ghost"}}}).empty());
}

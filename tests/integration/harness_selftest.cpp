// Checks of the harness itself (no Troupe binaries): the checks the
// acceptance tests rely on can fail, and processes are cleaned up.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <thread>

#include "harness.hpp"

using namespace troupe::it;

namespace {

Event ev(size_t seq, const std::string& job, const std::string& state, Json workers = nullptr) {
  Event e;
  e.seq = seq;
  e.job_id = job;
  e.state = state;
  e.subject = "troupe.t.events." + job;
  e.json = {{"job_id", job}, {"state", state}};
  if (!workers.is_null()) e.json["workers"] = workers;
  return e;
}

Json on(const std::string& node, std::vector<int> gpus) {
  return Json::array({{{"node", node}, {"gpus", gpus}}});
}

}  // namespace

TEST_CASE("harness: GPU replay finds two jobs on one GPU", "[harness]") {
  std::vector<Event> events = {ev(0, "a", "running", on("n1", {0})),
                               ev(1, "b", "running", on("n1", {0}))};
  auto r = replay_gpus(events);
  REQUIRE(r.clashes.size() == 1);
  CHECK_THAT(r.clashes[0], Catch::Contains("held by a"));
}

TEST_CASE("harness: GPU replay frees GPUs on any other state", "[harness]") {
  std::vector<Event> events = {
      ev(0, "a", "running", on("n1", {0, 1})),
      ev(1, "b", "running", on("n2", {0})),
      ev(2, "a", "succeeded"),
      ev(3, "c", "running", on("n1", {1})),
      ev(4, "b", "failed"),
      ev(5, "d", "running", on("n2", {0})),
      ev(6, "c", "queued"),  // a retry gives the GPU back too
      ev(7, "e", "running", on("n1", {1})),
  };
  auto r = replay_gpus(events);
  CHECK(r.clashes.empty());
  CHECK(r.max_held == 3);
  // The same job reporting running again keeps its GPUs without a clash.
  events.push_back(ev(8, "e", "running", on("n1", {1})));
  CHECK(replay_gpus(events).clashes.empty());
  // But another job on e's GPU is a clash.
  events.push_back(ev(9, "f", "running", on("n1", {1})));
  CHECK(replay_gpus(events).clashes.size() == 1);
}

TEST_CASE("harness: processes are stopped with their process group", "[harness]") {
  TmpDir tmp("troupe-selftest");
  pid_t child = 0;
  {
    // A shell that ignores SIGTERM and leaves a grandchild behind.
    Process p("stubborn",
              {"/bin/sh", "-c",
               "trap '' TERM; sleep 30 & echo $! > " + tmp.file("gc.pid") +
                   "; while true; do sleep 0.05; done"},
              tmp.file("p.out"), tmp.file("p.err"));
    for (auto deadline = Clock::now() + 5s; Clock::now() < deadline && child <= 0;) {
      std::string t = read_file(tmp.file("gc.pid"));
      if (!t.empty() && t.back() == '\n') child = static_cast<pid_t>(std::atol(t.c_str()));
      if (child <= 0) std::this_thread::sleep_for(10ms);
    }
    REQUIRE(child > 0);
    REQUIRE(p.running());
    auto start = Clock::now();
    p.stop(300ms);
    CHECK(Clock::now() - start < 3s);
    CHECK_FALSE(p.running());
    CHECK(p.exit_status() == 128 + SIGKILL);
  }
  // The grandchild (reparented to init) is gone too; give init a moment to reap.
  bool gone = false;
  for (auto deadline = Clock::now() + 5s; Clock::now() < deadline && !gone;) {
    gone = ::kill(child, 0) != 0;
    if (!gone) std::this_thread::sleep_for(10ms);
  }
  CHECK(gone);
}

TEST_CASE("harness: run_program captures output, exit code and timeouts", "[harness]") {
  TmpDir tmp("troupe-selftest");
  auto r = run_program({"/bin/sh", "-c", "echo out; echo err >&2; exit 4"}, tmp.path(), "x", 10s,
                       nullptr);
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 4);
  CHECK(r.out == "out\n");
  CHECK(r.err == "err\n");
  auto t = run_program({"/bin/sleep", "30"}, tmp.path(), "y", 200ms, nullptr);
  CHECK(t.timed_out);
  CHECK(t.exit_code == 128 + SIGTERM);
  auto e = run_program({"/bin/sh", "-c", "echo $TROUPE_NATS"}, tmp.path(), "z", 10s, nullptr,
                       {"TROUPE_NATS=nats://x:1"});
  CHECK(e.out == "nats://x:1\n");
}

TEST_CASE("harness: free_port gives a bindable port", "[harness]") {
  int a = free_port();
  CHECK(a > 0);
  CHECK(a < 65536);
}

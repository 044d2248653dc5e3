// Job arrays and sweeps (spec `array` / `sweep`; docs/api.md "Arrays and
// sweeps") with a real nats-server, scheduler and agent: at most
// `parallelism` tasks run at once (read from the events), each task sees its
// index and count (a sweep's its parameters, as env and as a file), one row
// in the job list, `troupe cancel ARRAY` ends every task, a failed task makes
// the array partially succeed, and a scheduler kill -9 runs no task twice.
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "bus/subjects.hpp"
#include "harness.hpp"

using namespace troupe;
using namespace troupe::it;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The most tasks of `array` starting or running at once, in event order.
// An array of `count` tasks, 2 at a time, each appending "run" to
// <dir>/<prefix>-<index> and then waiting until the file `go` exists; it is
// submitted, and returned once its task 1 runs. Then the scheduler is killed
// (-9), `go` written (the running tasks end while no scheduler runs) and a
// new scheduler started and serving.
std::string kill_during_array(Cluster& c, const std::string& dir, const std::string& prefix,
                              int count) {
  const std::string go = c.file("go-" + prefix);
  Json gated =
      job_spec("nlp",
               {"/bin/sh", "-c",
                "echo run >> " + dir + "/" + prefix + "-$TROUPE_ARRAY_INDEX; while [ ! -e " + go +
                    " ]; do sleep 0.05; done"},
               1);
  gated["array"] = Json{{"count", count}, {"parallelism", 2}};
  auto id = c.submit_ok("nlp", gated);
  REQUIRE(c.events().wait_state(id + "-1", "running", 30s));
  c.kill_scheduler();
  std::ofstream(go) << "go\n";
  c.restart_scheduler();
  REQUIRE(c.wait_scheduler_serving(20s));
  return id;
}

int most_at_once(Cluster& c, const std::string& array);

// The array of kill_during_array succeeded, each task ran exactly once, and
// never more than 2 at a time.
void each_ran_once(Cluster& c, const std::string& id, const std::string& dir,
                   const std::string& prefix, int count) {
  auto end = c.wait_terminal(id, 60s);
  INFO(c.events().describe());
  REQUIRE(end);
  CHECK(end->state == "succeeded");
  for (int i = 0; i < count; ++i) {
    INFO("task " << i);
    CHECK(slurp(dir + "/" + prefix + "-" + std::to_string(i)) == "run\n");
  }
  CHECK(most_at_once(c, id) <= 2);
}

int most_at_once(Cluster& c, const std::string& array) {
  std::map<std::string, std::string> state;
  int most = 0;
  for (const auto& e : c.events().all()) {
    if (e.job_id.rfind(array + "-", 0) != 0) continue;
    state[e.job_id] = e.state;
    int now = 0;
    for (const auto& [id, s] : state) now += (s == "starting" || s == "running") ? 1 : 0;
    most = std::max(most, now);
  }
  return most;
}

// How many times task `id` started.
int starts(Cluster& c, const std::string& id) {
  int n = 0;
  for (const auto& e : c.events().of_job(id)) n += e.state == "starting" ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE(
    "arrays: 20 tasks with parallelism 3 never run more than 3 at once, each sees its index, "
    "one row in the list, canceling an array ends every task",
    "[integration][arrays]") {
  Cluster c(ClusterOptions{}.node("n1", 8));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  const std::string dir = c.file("");
  Json spec = job_spec("nlp",
                       {"/bin/sh", "-c",
                        "echo \"$TROUPE_ARRAY_INDEX $TROUPE_ARRAY_COUNT $TROUPE_ARRAY_ID\" >> " +
                            dir + "/out-$TROUPE_ARRAY_INDEX; sleep 0.3"},
                       1);
  spec["array"] = Json{{"count", 20}, {"parallelism", 3}};
  auto array = c.submit_ok("nlp", spec);
  auto end = c.wait_terminal(array, 90s);
  INFO(c.events().describe());
  REQUIRE(end);
  CHECK(end->state == "succeeded");
  int most = most_at_once(c, array);
  CHECK(most <= 3);
  CHECK(most >= 2);  // (it did run tasks side by side)
  for (int i = 0; i < 20; ++i) {
    INFO("task " << i);
    CHECK(slurp(dir + "/out-" + std::to_string(i)) == std::to_string(i) + " 20 " + array + "\n");
    CHECK(starts(c, array + "-" + std::to_string(i)) == 1);
  }
  // Each task's end precedes the array's.
  CHECK(c.events().of_job(array).back().state == "succeeded");

  Json view = c.status("nlp", array);
  INFO(view.dump());
  CHECK(view["array"].value("count", 0) == 20);
  CHECK(view["array"].value("succeeded", 0) == 20);
  CHECK(view["array"].value("outcome", "") == "succeeded");
  REQUIRE(view["array"]["tasks"].size() == 20);
  CHECK(view["array"]["tasks"][7].value("job_id", "") == array + "-7");
  CHECK(view["array"]["tasks"][7].value("state", "") == "succeeded");
  // A task is a job of its own.
  Json task = c.status("nlp", array + "-4");
  CHECK(task.value("state", "") == "succeeded");
  // One row in the list: the array, none of its tasks.
  Json list = c.request(subjects::team_verb("nlp", subjects::kJobs), Json::object());
  REQUIRE(list["jobs"].size() == 1);
  CHECK(list["jobs"][0].value("job_id", "") == array);
  RunResult table = c.run_cli({"jobs", "--team", "nlp"});
  INFO(describe(table));
  CHECK(table.out.find("succeeded [20/20 done]") != std::string::npos);
  RunResult status = c.run_cli({"status", array, "--team", "nlp"});
  INFO(describe(status));
  CHECK(status.out.find("20 tasks: 20 succeeded") != std::string::npos);
  CHECK(status.out.find(array + "-19") != std::string::npos);
  // Its logs are its tasks': the array's own names them.
  Json whose = c.request(subjects::team_logs("nlp"), Json{{"job_id", array}});
  INFO(whose.dump());
  CHECK(whose.value("code", "") == "no_rank");
  CHECK(whose.value("error", "").find("troupe logs " + array + "-0") != std::string::npos);

  // Cancel: the running tasks end canceled, the others never start.
  Json slow = job_spec("nlp", {"sleep", "60"}, 1);
  slow["array"] = Json{{"count", 10}, {"parallelism", 2}};
  auto second = c.submit_ok("nlp", slow);
  REQUIRE(c.events().wait_state(second + "-0", "running", 30s));
  REQUIRE(c.events().wait_state(second + "-1", "running", 30s));
  RunResult cancel = c.run_cli({"cancel", second, "--team", "nlp"});
  INFO(describe(cancel));
  CHECK(cancel.exit_code == 0);
  auto canceled = c.wait_terminal(second, 30s);
  REQUIRE(canceled);
  CHECK(canceled->state == "canceled");
  for (int i = 0; i < 10; ++i) {
    auto id = second + "-" + std::to_string(i);
    if (i < 2) {
      auto t = c.wait_terminal(id, 10s);
      REQUIRE(t);
      CHECK(t->state == "canceled");
    } else {
      CHECK(c.events().of_job(id).empty());
    }
  }
  Json after = c.status("nlp", second);
  CHECK(after["array"].value("canceled", 0) == 10);
  CHECK(after["array"].value("outcome", "") == "canceled");
}

TEST_CASE(
    "arrays: a 2 x 2 sweep runs 4 tasks with their parameters as env and file, a failed task "
    "makes an array partially succeed, a scheduler kill -9 runs no task twice",
    "[integration][arrays][recovery]") {
  Cluster c(ClusterOptions{}.node("n1", 4));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  const std::string dir = c.file("");
  Json spec = job_spec("nlp",
                       {"/bin/sh", "-c",
                        "{ echo \"$TROUPE_PARAM_LR $TROUPE_PARAM_BATCH_SIZE\"; cat "
                        "\"$TROUPE_PARAMS_FILE\"; } > " +
                            dir + "/sweep-$TROUPE_ARRAY_INDEX"},
                       1);
  spec["sweep"] = Json{{"params", {{"lr", {0.1, 0.01}}, {"batch-size", {32, 64}}}}};
  auto sweep = c.submit_ok("nlp", spec);
  auto end = c.wait_terminal(sweep, 60s);
  INFO(c.events().describe());
  REQUIRE(end);
  CHECK(end->state == "succeeded");
  std::set<std::string> got;
  for (int i = 0; i < 4; ++i) {
    std::string out = slurp(dir + "/sweep-" + std::to_string(i));
    auto nl = out.find('\n');
    REQUIRE(nl != std::string::npos);
    got.insert(out.substr(0, nl));
    // The file holds the same point as the env.
    Json file = Json::parse(out.substr(nl + 1));
    std::ostringstream env;
    env << file["lr"].get<double>() << " " << file["batch-size"].get<int>();
    CHECK(env.str() == out.substr(0, nl));
  }
  CHECK(got == std::set<std::string>{"0.1 32", "0.1 64", "0.01 32", "0.01 64"});
  Json view = c.status("nlp", sweep);
  REQUIRE(view["array"]["tasks"].size() == 4);
  CHECK(view["array"]["tasks"][0]["params"].value("lr", "") != "");

  // Task 1 of 3 fails (no retries): the array fails, partially succeeded.
  Json mixed = job_spec("nlp", {"/bin/sh", "-c", "[ \"$TROUPE_ARRAY_INDEX\" != 1 ]"}, 1);
  mixed["array"] = Json{{"count", 3}};
  auto partial = c.submit_ok("nlp", mixed);
  auto pend = c.wait_terminal(partial, 60s);
  REQUIRE(pend);
  CHECK(pend->state == "failed");
  Json pv = c.status("nlp", partial);
  CHECK(pv["array"].value("outcome", "") == "partially_succeeded");
  CHECK(pv["array"].value("succeeded", 0) == 2);
  CHECK(pv["array"].value("failed", 0) == 1);

  // kill -9 while tasks run and others wait: every task runs once.
  auto killed = kill_during_array(c, dir, "k", 6);
  each_ran_once(c, killed, dir, "k", 6);
}

TEST_CASE(
    "arrays: a kill -9 before the array's first snapshot is stored loses no task and runs none "
    "twice",
    "[integration][arrays][recovery]") {
  // Snapshots written every 3 s: the kill comes before the array's record or
  // its tasks' reach the bucket, so the new leader knows the array from its
  // intake record and the running tasks from their events only. (Before
  // this was handled, the array came back with no tasks and "succeeded" as
  // "0 of 0 tasks", its tasks never run.)
  ClusterOptions opts = ClusterOptions{}.node("n1", 4);
  opts.scheduler_args = {"--flush-ms", "3000"};
  Cluster c(opts);
  REQUIRE(c.wait_nodes_alive(1, 20s));
  const std::string dir = c.file("");
  auto killed = kill_during_array(c, dir, "f", 5);
  each_ran_once(c, killed, dir, "f", 5);
  Json view = c.status("nlp", killed);
  CHECK(view["array"].value("succeeded", 0) == 5);
}

// Logs that outlive their node (docs/api.md, "logs"): agents ship each
// worker's output to its team's stream TROUPE_LOGS_<team> (with the team's
// retention from the config), and the scheduler answers an ended job's logs
// request from there, so `troupe logs` works once the node is gone.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <thread>
#include <tuple>

#include "bus/subjects.hpp"
#include "harness.hpp"
#include "messages/names.hpp"

using namespace troupe;
using namespace troupe::it;

TEST_CASE(
    "logs: an ended job's log is still read after its agent was killed and its state "
    "folder deleted",
    "[integration][logs]") {
  Cluster c(ClusterOptions{}.node("n1", 2));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  // More than one chunk (64 KiB each): 3000 numbered lines, then a tail
  // without a newline.
  const std::string id = c.submit_ok(
      "nlp", job_spec("nlp", {"sh", "-c",
                              "i=0; while [ $i -lt 3000 ]; do echo \"line $i of the output of "
                              "a job whose node goes away\"; i=$((i+1)); done; printf tail"}));
  auto ended = c.wait_terminal(id, 60s);
  REQUIRE(ended);
  REQUIRE(ended->state == names::kSucceeded);
  LogRead before = c.logs("nlp", id);
  REQUIRE(before.ok);
  REQUIRE(before.data.size() > 100000);
  REQUIRE(before.data.substr(before.data.size() - 4) == "tail");

  // The node is gone for good: its agent killed, its state folder deleted.
  c.node(0).kill_now();
  std::filesystem::remove_all(c.file("node-n1-state"));
  REQUIRE_FALSE(std::filesystem::exists(c.file("node-n1-state")));

  RunResult r = c.run_cli({"logs", id});
  INFO(describe(r));
  CHECK(r.exit_code == 0);
  CHECK(r.out == before.data);
  // Pages through the NATS API say where they come from.
  Json page =
      c.request(subjects::team_logs("nlp"), Json{{"job_id", id}, {"offset", 5}, {"max_bytes", 6}});
  INFO(page.dump());
  CHECK(page.value("data", "") == before.data.substr(5, 6));
  CHECK(page.value("offset", 0) == 11);
  CHECK(page.value("stored", false));
  CHECK(page.value("size", 0) == static_cast<int64_t>(before.data.size()));
  // Numbers that are not integers are refused, not cast (a float out of an
  // integer's range would be undefined behaviour in the scheduler).
  for (const Json& bad :
       {Json{{"job_id", id}, {"rank", 1e300}}, Json{{"job_id", id}, {"offset", -1e30}},
        Json{{"job_id", id}, {"max_bytes", "all"}}}) {
    Json refused = c.request(subjects::team_logs("nlp"), bad);
    INFO(bad.dump() << " -> " << refused.dump());
    CHECK(refused.value("code", "") == "bad_request");
  }
  // Still another team's job for anyone else.
  Json other = c.request(subjects::team_logs("vision"), Json{{"job_id", id}});
  CHECK(other.value("code", "") == "not_found");
}

TEST_CASE(
    "logs: a worker whose output passes the node's log limit is killed, failed log_limit, and "
    "its log cut there, and the node goes on",
    "[integration][logs]") {
  // Its log is looked at on the node after its end: kept there even on a
  // machine whose disk is fuller than --job-dir-gc-percent.
  Cluster c(ClusterOptions{}.node_args("n1", 2, false, "a100",
                                       {"--job-log-max-mb", "1", "--job-dir-gc-percent", "0"}));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  // Prints without end, at disk speed.
  const std::string id =
      c.submit_ok("nlp", job_spec("nlp", {"sh", "-c", "yes 'a line of a job that never stops'"}));
  auto ended = c.wait_terminal(id, 60s);
  REQUIRE(ended);
  INFO(ended->json.dump());
  CHECK(ended->state == names::kFailed);
  CHECK(ended->json.value("cause", "") == "log_limit");
  CHECK(ended->json.value("reason", "").find("its output passed 1 MiB") != std::string::npos);

  const std::string note = "\n[troupe-node: output cut at 1 MiB, the node's --job-log-max-mb]\n";
  // On the node: the log is the limit and the line that says so.
  const std::string path = c.file("node-n1-state") + "/logs/" + id + "/attempt-1-rank-0.log";
  REQUIRE(std::filesystem::exists(path));
  CHECK(std::filesystem::file_size(path) == (1u << 20) + note.size());
  // Through the API (the copy shipped to the team's stream): the same.
  LogRead log = c.logs("nlp", id);
  REQUIRE(log.ok);
  CHECK(log.data.size() == (1u << 20) + note.size());
  CHECK(log.data.substr(0, 34) == "a line of a job that never stops\na");
  CHECK(log.data.substr(log.data.size() - note.size()) == note);

  // The node goes on: the next job there runs and succeeds.
  const std::string next = c.submit_ok("nlp", job_spec("nlp", {"sh", "-c", "echo fine"}));
  auto done = c.wait_terminal(next, 30s);
  REQUIRE(done);
  CHECK(done->state == names::kSucceeded);
  CHECK(c.logs("nlp", next).data == "fine\n");
}

TEST_CASE(
    "logs: a job whose work dir or checkpoint dir passes the node's disk limit is killed, "
    "failed disk_limit, an ended job's folders leave the node and its log is still read",
    "[integration][logs][disk]") {
  Cluster c(ClusterOptions{}.node_args("n1", 2, false, "a100",
                                       {"--job-disk-max-mb", "2", "--job-checkpoint-max-mb", "3",
                                        "--job-dir-keep-s", "1", "--job-dir-check-ms", "100"}));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  const std::string state = c.file("node-n1-state");
  auto gone = [&](const std::string& id) {
    for (auto deadline = Clock::now() + 20s; Clock::now() < deadline;) {
      if (!std::filesystem::exists(state + "/jobs/" + id) &&
          !std::filesystem::exists(state + "/logs/" + id))
        return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  };
  // Writes 8 MiB into its work dir, then would wait a minute.
  const std::string id = c.submit_ok(
      "nlp",
      job_spec("nlp", {"sh", "-c", "echo start; head -c 8388608 /dev/zero > big; sleep 60"}));
  auto ended = c.wait_terminal(id, 60s);
  REQUIRE(ended);
  INFO(ended->json.dump());
  CHECK(ended->state == names::kFailed);
  CHECK(ended->json.value("cause", "") == "disk_limit");
  CHECK(ended->json.value("reason", "").find("its work dir passed 2 MiB") != std::string::npos);

  // A second after its end, its folders leave the node; its log is read from
  // the team's stream.
  CHECK(gone(id));
  LogRead log = c.logs("nlp", id);
  REQUIRE(log.ok);
  CHECK(log.data == "start\n");

  // The node goes on: a job under the limit succeeds, and its folders go too.
  const std::string next =
      c.submit_ok("nlp", job_spec("nlp", {"sh", "-c", "head -c 100000 /dev/zero > f; echo fine"}));
  auto done = c.wait_terminal(next, 30s);
  REQUIRE(done);
  CHECK(done->state == names::kSucceeded);
  CHECK(gone(next));
  CHECK(c.logs("nlp", next).data == "fine\n");

  // Its checkpoint dir past the node's limit: the same end, and the dir is
  // kept for the next attempt (the user trims it).
  const std::string ckpt = c.submit_ok(
      "nlp", job_spec("nlp", {"sh", "-c",
                              "echo \"$TROUPE_CHECKPOINT_DIR\"; head -c 8388608 /dev/zero > "
                              "\"$TROUPE_CHECKPOINT_DIR/step-1\"; sleep 60"}));
  auto over = c.wait_terminal(ckpt, 60s);
  REQUIRE(over);
  INFO(over->json.dump());
  CHECK(over->state == names::kFailed);
  CHECK(over->json.value("cause", "") == "disk_limit");
  CHECK(over->json.value("reason", "")
            .find("its checkpoint dir passed 3 MiB, the node's "
                  "--job-checkpoint-max-mb") != std::string::npos);
  LogRead said = c.logs("nlp", ckpt);
  REQUIRE(said.ok);
  REQUIRE(said.data.size() > 1);
  const std::string dir = said.data.substr(0, said.data.size() - 1);
  CHECK(dir.substr(dir.size() - ckpt.size()) == ckpt);
  // (Killed past the limit, maybe before head wrote it all.)
  CHECK(std::filesystem::file_size(dir + "/step-1") > (3u << 20));
}

namespace {

const char* kTwoTeams = R"(
pools:
  - {name: a100, gpu_type: a100}
default_logs: {max_age_s: 7200}
teams:
  - {name: alpha, logs: {max_bytes: 1048576, max_age_s: 3600}}
  - {name: beta, logs: {max_bytes: 2097152}}
)";

int64_t as_i64(const Json& v) {
  if (v.is_number()) return v.get<int64_t>();
  if (v.is_string()) return std::stoll(v.get<std::string>());
  return -1;
}

// $JS.API.STREAM.INFO.<name>: the stream's info, or {"error"} when it is missing.
Json stream_info(Cluster& c, const std::string& name) {
  return c.request("$JS.API.STREAM.INFO." + name, Json::object());
}

constexpr int64_t kNsPerS = 1000LL * 1000 * 1000;

}  // namespace

TEST_CASE("logs: each team's output goes to a stream of its own, with its own bounds",
          "[integration][logs]") {
  Cluster c(ClusterOptions{}.node("n1", 2).with_config(kTwoTeams));
  REQUIRE(c.wait_nodes_alive(1, 20s));

  // The configured teams' streams exist from the start: bounds from `logs:`,
  // else `default_logs:`; subjects of their own team only.
  Json a = stream_info(c, subjects::logs_stream("alpha"));
  Json b = stream_info(c, subjects::logs_stream("beta"));
  INFO(a.dump() << "\n" << b.dump());
  REQUIRE(a.contains("config"));
  REQUIRE(b.contains("config"));
  CHECK(as_i64(a["config"].value("max_bytes", Json(-1))) == 1048576);
  CHECK(as_i64(a["config"].value("max_age", Json(-1))) == 3600 * kNsPerS);
  CHECK(as_i64(b["config"].value("max_bytes", Json(-1))) == 2097152);
  CHECK(as_i64(b["config"].value("max_age", Json(-1))) == 7200 * kNsPerS);
  CHECK(a["config"]["subjects"] == Json::array({subjects::team_log_chunks("alpha")}));
  CHECK(b["config"]["subjects"] == Json::array({subjects::team_log_chunks("beta")}));
  // No shared stream any more.
  CHECK(stream_info(c, subjects::kLegacyLogsStream).contains("error"));

  const std::string ia =
      c.submit_ok("alpha", job_spec("alpha", {"sh", "-c",
                                              "i=0; while [ $i -lt 50 ]; do echo alpha $i; "
                                              "i=$((i+1)); done; printf alpha-end"}));
  const std::string ib =
      c.submit_ok("beta", job_spec("beta", {"sh", "-c",
                                            "i=0; while [ $i -lt 50 ]; do echo beta $i; "
                                            "i=$((i+1)); done; printf beta-end"}));
  for (const auto& id : {ia, ib}) {
    auto ended = c.wait_terminal(id, 60s);
    REQUIRE(ended);
    REQUIRE(ended->state == names::kSucceeded);
  }
  LogRead la = c.logs("alpha", ia);
  LogRead lb = c.logs("beta", ib);
  REQUIRE(la.ok);
  REQUIRE(lb.ok);
  REQUIRE(la.data.substr(la.data.size() - 9) == "alpha-end");
  REQUIRE(lb.data.substr(lb.data.size() - 8) == "beta-end");

  // The node is gone: each log is read back from its own team's stream.
  c.node(0).kill_now();
  for (const auto& [team, id, data] :
       {std::make_tuple("alpha", ia, la.data), std::make_tuple("beta", ib, lb.data)}) {
    Json page = c.request(subjects::team_logs(team),
                          Json{{"job_id", id}, {"offset", 0}, {"max_bytes", 1 << 20}});
    INFO(team << ": " << page.dump());
    CHECK(page.value("stored", false));
    CHECK(page.value("data", "") == data);
    // ... and only from there: the stream holds that team's chunks alone.
    Json info = stream_info(c, subjects::logs_stream(team));
    REQUIRE(info.contains("state"));
    CHECK(as_i64(info["state"].value("messages", Json(0))) > 0);
  }
  Json sa = stream_info(c, subjects::logs_stream("alpha"));
  Json sb = stream_info(c, subjects::logs_stream("beta"));
  CHECK(as_i64(sa["state"].value("bytes", Json(0))) < 1048576);
  CHECK(as_i64(sb["state"].value("bytes", Json(0))) < 2097152);
}

TEST_CASE("logs: the shared stream of an older version is deleted at start",
          "[integration][logs]") {
  Cluster c(ClusterOptions{}.with_config(kTwoTeams));
  REQUIRE(c.wait_scheduler_serving(20s));
  c.kill_scheduler();
  // What an older scheduler left: one stream over every team's output (it
  // overlaps the teams' streams, which go first).
  for (const char* team : {"alpha", "beta"})
    CHECK(c.request("$JS.API.STREAM.DELETE." + subjects::logs_stream(team), Json::object())
              .value("success", false));
  Json made = c.request(std::string("$JS.API.STREAM.CREATE.") + subjects::kLegacyLogsStream,
                        Json{{"name", subjects::kLegacyLogsStream},
                             {"subjects", Json::array({"troupe.sys.logs.>"})},
                             {"storage", "file"}});
  INFO(made.dump());
  REQUIRE_FALSE(made.contains("error"));

  c.restart_scheduler();
  REQUIRE(c.wait_scheduler_serving(30s));
  CHECK(stream_info(c, subjects::kLegacyLogsStream).contains("error"));
  for (const char* team : {"alpha", "beta"})
    CHECK(stream_info(c, subjects::logs_stream(team)).contains("config"));
  CHECK_THAT(read_file(c.scheduler().err_path()),
             Catch::Contains("deleted the stream TROUPE_LOGS of an older version"));
}

// The `troupe` CLI's sharp edges (the surfaces issue, "What was found"), each
// run as a user types it against the real binary: usage errors exit 2 and
// name the unknown verb or flag with a suggestion; a job command without --
// is shown with it; --version; durations with units; `cancel A B`; --state
// checked; the cluster unreachable exits 69; YAML numbers in a command stay
// strings and a string command is refused; `troupe wait`, `submit --wait`
// and `logs -f` exit as the job ended (0, its exit code, 124, 125, 130).
#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "load/scan.hpp"
#include "messages/names.hpp"

using namespace troupe;
using namespace troupe::it;

namespace {

// The CLI with no cluster: pointed at a loopback port nothing listens on.
RunResult offline(TmpDir& dir, FailureDump& dump, std::vector<std::string> args) {
  std::vector<std::string> argv = {bin_dir() + "/troupe", "--nats",
                                   "nats://127.0.0.1:" + std::to_string(free_port())};
  argv.insert(argv.end(), args.begin(), args.end());
  static int n = 0;
  return run_program(argv, dir.path(), "cli-offline-" + std::to_string(++n), 20s, &dump,
                     {"TROUPE_HOME=" + dir.path()});
}

}  // namespace

TEST_CASE("cli: usage errors exit 2 and name the unknown verb or flag, with a suggestion",
          "[integration][cli]") {
  TmpDir dir("troupe-cli");
  FailureDump dump;
  auto verb = offline(dir, dump, {"stauts", "j-1"});
  INFO(describe(verb));
  CHECK(verb.exit_code == 2);
  CHECK_THAT(verb.err, Catch::Contains("unknown command 'stauts'") &&
                           Catch::Contains("did you mean 'status'?"));
  auto flag = offline(dir, dump, {"submit", "--team", "nlp", "--gpu", "1", "--", "true"});
  INFO(describe(flag));
  CHECK(flag.exit_code == 2);
  CHECK_THAT(flag.err, Catch::Contains("unknown flag --gpu") && Catch::Contains("'--gpus'"));
  // A forgotten --: the command is shown with it.
  auto program = offline(dir, dump, {"submit", "--team", "nlp", "--gpus", "1", "nvidia-smi"});
  INFO(describe(program));
  CHECK(program.exit_code == 2);
  CHECK_THAT(program.err, Catch::Contains("-- nvidia-smi"));
  auto args = offline(
      dir, dump, {"submit", "--team", "nlp", "--gpus", "1", "python", "train.py", "--lr", "0.1"});
  INFO(describe(args));
  CHECK(args.exit_code == 2);
  CHECK_THAT(args.err, Catch::Contains("troupe submit [flags] -- python train.py --lr 0.1"));
  // Bad values: a duration, a size, a state.
  auto dur = offline(dir, dump, {"submit", "--team", "nlp", "--max-runtime", "soon", "--", "x"});
  CHECK(dur.exit_code == 2);
  CHECK_THAT(dur.err, Catch::Contains("not a duration"));
  auto size = offline(dir, dump, {"submit", "--team", "nlp", "--memory-mb", "lots", "--", "x"});
  CHECK(size.exit_code == 2);
  auto state = offline(dir, dump, {"jobs", "--state", "bogus"});
  INFO(describe(state));
  CHECK(state.exit_code == 2);
  CHECK_THAT(state.err, Catch::Contains("unknown state 'bogus'"));
  auto missing = offline(dir, dump, {"status"});
  CHECK(missing.exit_code == 2);
  // --version, and --help exit 0.
  auto version = offline(dir, dump, {"--version"});
  CHECK(version.exit_code == 0);
  CHECK_THAT(version.out, Catch::StartsWith("troupe "));
  CHECK(offline(dir, dump, {"--help"}).exit_code == 0);
  // The cluster cannot be reached: 69, and it says how to start one.
  auto down = offline(dir, dump, {"status", "j-1"});
  INFO(describe(down));
  CHECK(down.exit_code == 69);
  CHECK_THAT(down.err, Catch::Contains("cannot connect"));
}

TEST_CASE(
    "cli: YAML numbers stay strings, a string command is refused, durations have units, "
    "cancel takes several jobs",
    "[integration][cli]") {
  Cluster c(ClusterOptions{}.node("n1", 2, true));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  // `command: [python, train.py, --epochs, 3]` and `--lr, .001`, `010`.
  std::string spec_path = c.dir() + "/numbers.yaml";
  {
    std::ofstream f(spec_path);
    f << "team: nlp\ncommand: [simulated, train.py, --epochs, 3, --lr, .001, \"x\", 010]\n"
         "env: {TROUPE_SIM_DURATION_S: 300, SEED: 010}\nresources: {gpus: 1}\n";
  }
  // --max-runtime with units: 0m2s stops the 300 s job after 2 s.
  RunResult sub = c.run_cli({"submit", spec_path, "--max-runtime", "0m2s"});
  INFO(describe(sub));
  REQUIRE(sub.exit_code == 0);
  std::string a = sub.out.substr(0, sub.out.find_first_of(" \n"));
  auto ended = c.wait_terminal(a, 30s);
  REQUIRE(ended);
  INFO(c.events().describe(a));
  CHECK(ended->state == names::kFailed);
  CHECK(ended->json.value("cause", "") == "max_runtime");
  // troupe wait exits as the job ended: 124 for max_runtime_s.
  RunResult waited = c.run_cli({"wait", a});
  INFO(describe(waited));
  CHECK(waited.exit_code == 124);
  // submit --wait and logs -f: the worker's exit code; 0 when it succeeded.
  RunResult seven =
      c.run_cli({"submit", "--team", "nlp", "--gpus", "1", "--env", "TROUPE_SIM_DURATION_S=0.2",
                 "--env", "TROUPE_SIM_EXIT=7", "--wait", "--", "simulated"});
  INFO(describe(seven));
  CHECK(seven.exit_code == 7);
  std::string seven_id = seven.out.substr(0, seven.out.find_first_of(" \n"));
  RunResult follow = c.run_cli({"logs", "-f", seven_id});
  INFO(describe(follow));
  CHECK(follow.exit_code == 7);
  RunResult ok = c.run_cli({"submit", "--team", "nlp", "--gpus", "1", "--env",
                            "TROUPE_SIM_DURATION_S=0.2", "--wait", "--", "simulated"});
  INFO(describe(ok));
  CHECK(ok.exit_code == 0);
  RunResult both = c.run_cli({"wait", seven_id, a});  // the first that did not succeed
  CHECK(both.exit_code == 7);
  CHECK(c.run_cli({"wait", "j-00000000deadbeef"}).exit_code == 1);
  // A string command: refused before it could fail at run time.
  std::string str_path = c.dir() + "/string.yaml";
  {
    std::ofstream f(str_path);
    f << "team: nlp\ncommand: echo hello world\n";
  }
  RunResult str = c.run_cli({"submit", str_path});
  INFO(describe(str));
  CHECK(str.exit_code != 0);
  CHECK_THAT(str.err, Catch::Contains("command is a list"));
  // `cancel A B`: both.
  Json long_job = job_spec("nlp", {"simulated-work"});
  long_job["env"] = {{"TROUPE_SIM_DURATION_S", "300"}};
  auto x = c.submit_ok("nlp", long_job);
  auto y = c.submit_ok("nlp", long_job);
  RunResult cancel = c.run_cli({"cancel", x, y});
  INFO(describe(cancel));
  CHECK(cancel.exit_code == 0);
  for (const auto& id : {x, y}) {
    auto done = c.wait_terminal(id, 20s);
    REQUIRE(done);
    CHECK(done->state == names::kCanceled);
  }
  RunResult canceled = c.run_cli({"wait", x, y, "--timeout", "30s"});
  INFO(describe(canceled));
  CHECK(canceled.exit_code == 130);
  // `cancel --team T --state queued`: every queued job of the team, no other.
  // The node is cordoned first, so these stay queued.
  REQUIRE(c.run_cli({"cordon", "n1"}).exit_code == 0);
  auto q1 = c.submit_ok("nlp", long_job);
  auto q2 = c.submit_ok("nlp", long_job);
  auto other = c.submit_ok("vision", job_spec("vision", {"simulated-work"}));
  RunResult by_state = c.run_cli({"cancel", "--team", "nlp", "--state", "queued"});
  INFO(describe(by_state));
  CHECK(by_state.exit_code == 0);
  CHECK_THAT(by_state.out, Catch::Contains(q1 + " canceled") && Catch::Contains(q2 + " canceled"));
  CHECK(by_state.out.find(other) == std::string::npos);
  CHECK(c.status("vision", other).value("state", "") == names::kQueued);
  CHECK(c.run_cli({"cancel", "--state", "succeeded"}).exit_code == 2);  // ended: nothing to cancel
  CHECK(c.run_cli({"cancel", x, "--state", "queued"}).exit_code == 2);  // ids or --state
  REQUIRE(c.run_cli({"uncordon", "n1"}).exit_code == 0);
  // -o on the listings: yaml is the JSON's document, wide the table with more.
  RunResult yaml = c.run_cli({"status", x, "-o", "yaml"});
  INFO(describe(yaml));
  CHECK(yaml.exit_code == 0);
  YAML::Node doc = YAML::Load(yaml.out);
  CHECK(doc["job_id"].as<std::string>() == x);
  CHECK(doc["state"].as<std::string>() == "canceled");
  RunResult wide = c.run_cli({"jobs", "-o", "wide"});
  INFO(describe(wide));
  CHECK(wide.exit_code == 0);
  CHECK_THAT(wide.out, Catch::Contains("PLACEMENT") && Catch::Contains(x));
  RunResult nodes = c.run_cli({"nodes", "-o", "wide"});
  CHECK_THAT(nodes.out, Catch::Contains("RUNTIME"));
  CHECK(c.run_cli({"jobs", "-o", "xml"}).exit_code == 2);
  // drain --reason: troupe nodes shows it.
  RunResult drain = c.run_cli({"drain", "n1", "--reason", "disk swap"});
  INFO(describe(drain));
  CHECK(drain.exit_code == 0);
  RunResult shown = c.run_cli({"nodes"});
  INFO(describe(shown));
  CHECK_THAT(shown.out, Catch::Contains("draining (disk swap)"));
}

TEST_CASE("cli: logs --all-ranks shows every rank's output, each line with its rank",
          "[integration][cli][logs]") {
  Cluster c(ClusterOptions{}.node("r1", 2, false));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  auto id = c.submit_ok(
      "nlp",
      job_spec("nlp", {"sh", "-c", "echo first-$TROUPE_RANK; echo second-$TROUPE_RANK"}, 1, 2));
  auto done = c.wait_terminal(id, 30s);
  REQUIRE(done);
  INFO(c.events().describe(id));
  REQUIRE(done->state == names::kSucceeded);
  RunResult all = c.run_cli({"logs", "--all-ranks", id});
  INFO(describe(all));
  CHECK(all.exit_code == 0);
  for (const char* line :
       {"[rank 0] first-0\n", "[rank 0] second-0\n", "[rank 1] first-1\n", "[rank 1] second-1\n"})
    CHECK_THAT(all.out, Catch::Contains(line));
  RunResult follow = c.run_cli({"logs", "-f", "--all-ranks", id});
  CHECK(follow.exit_code == 0);
  CHECK_THAT(follow.out, Catch::Contains("[rank 1] second-1\n"));
}

TEST_CASE(
    "cli: logs -f rides out a scheduler restart and exits as the job ended, JSON views "
    "leave out zero fields",
    "[integration][cli][logs]") {
  Cluster c(ClusterOptions{}.node("f1", 2, false));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  auto id = c.submit_ok(
      "nlp", job_spec("nlp", {"sh", "-c",
                              "for i in 1 2 3 4 5 6 7 8; do echo tick $i; sleep 1; done; exit 4"}));
  REQUIRE(c.events().wait_state(id, std::string(names::kRunning), 20s));
  // Zero fields are left out of a view (docs/api.md): a running job has no
  // end_ms and no exit_code yet.
  RunResult running = c.run_cli({"status", id, "-o", "json"});
  INFO(describe(running));
  REQUIRE(running.exit_code == 0);
  Json view = Json::parse(running.out);
  CHECK_FALSE(view.contains("end_ms"));
  CHECK_FALSE(view.contains("exit_code"));
  CHECK_FALSE(view.contains("preemptions"));
  CHECK(view.value("state", "") == names::kRunning);
  // The follower asks through a scheduler that is killed and started again
  // meanwhile: it retries "no responders" and reads on where it was.
  RunResult follow;
  std::thread follower([&] { follow = c.run_cli({"logs", "-f", id}, 90s); });
  c.kill_scheduler();
  c.restart_scheduler();
  REQUIRE(c.wait_scheduler_serving(30s));
  follower.join();
  INFO(describe(follow));
  CHECK(follow.exit_code == 4);
  for (int i = 1; i <= 8; ++i)
    CHECK_THAT(follow.out, Catch::Contains("tick " + std::to_string(i) + "\n"));
  CHECK(follow.out.find("tick 1\n") == follow.out.rfind("tick 1\n"));  // nothing read twice
  RunResult ended = c.run_cli({"status", id, "-o", "json"});
  REQUIRE(ended.exit_code == 0);
  Json last = Json::parse(ended.out);
  CHECK(last.value("exit_code", -1) == 4);
  CHECK(last.contains("end_ms"));
}

TEST_CASE("cli: troupe completion bash completes verbs and flags in a real bash",
          "[integration][cli][completion]") {
  TmpDir dir("troupe-cli");
  FailureDump dump;
  const std::string troupe = bin_dir() + "/troupe";
  auto complete = [&](const std::string& words, int cword) {
    std::string script = "source <(" + troupe + " completion bash) && COMP_WORDS=(" + words +
                         ") && COMP_CWORD=" + std::to_string(cword) +
                         " && _troupe && echo \"${COMPREPLY[*]}\"";
    static int n = 0;
    return run_program({"/bin/bash", "-c", script}, dir.path(), "completion-" + std::to_string(++n),
                       20s, &dump);
  };
  auto verb = complete("troupe sta", 1);
  INFO(describe(verb));
  CHECK(verb.exit_code == 0);
  CHECK(verb.out == "status\n");
  auto flag = complete("troupe --nats nats://x:1 submit --gp", 4);
  INFO(describe(flag));
  CHECK(flag.out == "--gpus --gpu-type\n");
  auto bad = run_program({troupe, "completion", "fish"}, dir.path(), "completion-fish", 20s, &dump);
  CHECK(bad.exit_code == 2);
}

// Integration tests of troupe-load against real processes (harness.hpp):
// a load run of 300 simulated jobs on a fleet of 20 simulated nodes in one
// troupe-node process, and a small trace replay that starts its own fleet.
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "harness.hpp"
#include "messages/names.hpp"

using namespace troupe;
using namespace troupe::it;

namespace {

Json parse_report(const RunResult& r) {
  INFO("troupe-load rc=" << r.exit_code << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE_FALSE(r.timed_out);
  Json j = Json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  REQUIRE(j.is_object());
  return j;
}

}  // namespace

TEST_CASE("troupe-load: 300 jobs on a 20-node simulated fleet all end, report complete",
          "[integration][load]") {
  ClusterOptions opts;
  opts.nodes.push_back(NodeOptions{"fleet", 8, "a100", true, {"--count", "20"}});
  Cluster c(opts);
  REQUIRE(c.wait_nodes_alive(20, 30s));

  RunResult r = run_program({bin_dir() + "/troupe-load", "--nats", c.url(), "--jobs", "300",
                             "--teams", "la,lb", "--duration-s", "0.05", "--deadline-s", "40",
                             "--scheduler-pid", std::to_string(c.scheduler().pid()), "--json"},
                            c.dir(), "troupe-load", 60s, &c.dump());
  Json j = parse_report(r);
  INFO(j.dump(2) << "\nstderr:\n" << r.err);
  CHECK(r.exit_code == 0);
  for (const char* k : {"config", "submitted", "acknowledged", "rejected", "unanswered", "placed",
                        "terminal", "complete", "states", "total_s", "scheduler",
                        "submit_rate_per_s", "placement_rate_per_s", "submit_to_ack_ms",
                        "submit_to_placed_ms"})
    CHECK(j.contains(k));
  CHECK(j["submitted"] == 300);
  CHECK(j["acknowledged"] == 300);
  CHECK(j["rejected"] == 0);
  CHECK(j["unanswered"] == 0);
  CHECK(j["placed"] == 300);
  CHECK(j["terminal"] == 300);
  CHECK(j["complete"] == true);
  CHECK(j["states"]["succeeded"] == 300);
  CHECK(j["states"]["not_terminal"] == 0);
  CHECK(j["submit_rate_per_s"].get<double>() > 0);
  CHECK(j["placement_rate_per_s"].get<double>() > 0);
  for (const char* k : {"count", "mean", "p50", "p99", "p999", "max"})
    CHECK(j["submit_to_placed_ms"].contains(k));
  CHECK(j["submit_to_placed_ms"]["count"] == 300);
  CHECK(j["submit_to_placed_ms"]["p50"].get<double>() > 0);
  CHECK(j["submit_to_placed_ms"]["p50"].get<double>() <= j["submit_to_placed_ms"]["p99"].get<double>());
  REQUIRE(j["scheduler"].is_object());
  CHECK(j["scheduler"]["pid"] == c.scheduler().pid());
  CHECK(j["scheduler"]["peak_rss_kb"].get<long long>() > 0);

  // The harness's own event log agrees: 300 distinct jobs reached a terminal state.
  std::set<std::string> ended;
  for (const auto& e : c.events().all())
    if (names::is_terminal(e.state)) ended.insert(e.job_id);
  CHECK(ended.size() == 300);
}

TEST_CASE("troupe-load replay: 30 tiresias jobs on its own fleet, fast-forwarded",
          "[integration][load]") {
  Cluster c(ClusterOptions{});  // nats-server and the scheduler; the replay starts the nodes
  RunResult r = run_program({bin_dir() + "/troupe-load", "replay",
                             "/work/shared/traces/tiresias-60job/60_job.csv", "--format",
                             "tiresias", "--nats", c.url(), "--speedup", "200", "--nodes", "4",
                             "--gpus-per-node", "8", "--limit", "30", "--policy", "fifo",
                             "--deadline-s", "40", "--json"},
                            c.dir(), "troupe-load-replay", 60s, &c.dump());
  Json j = parse_report(r);
  INFO(j.dump(2) << "\nstderr:\n" << r.err);
  CHECK(r.exit_code == 0);
  CHECK(j["mode"] == "replay");
  CHECK(j["submitted"] == 30);
  CHECK(j["terminal"] == 30);
  CHECK(j["complete"] == true);
  CHECK(j["states"]["succeeded"] == 30);
  CHECK(j["config"]["policy"] == "fifo");
  CHECK(j["config"]["policy_applied"] == false);
  CHECK(j["jct"]["count"] == 30);
  CHECK(j["jct"]["avg_s"].get<double>() > 0);
  CHECK(j["jct"]["p99_s"].get<double>() >= j["jct"]["avg_s"].get<double>());
  CHECK(j["queueing_delay"]["count"] == 30);
  CHECK(j["makespan_s"].get<double>() > 0);
  CHECK(j["gpu_allocation"]["samples"].get<int>() > 0);
  CHECK(j["gpu_allocation"]["mean"].get<double>() > 0);
  CHECK(j["gpu_allocation"]["mean"].get<double>() <= 1);
  REQUIRE(j["teams"].contains("60_job"));
  CHECK(j["teams"]["60_job"]["share"].get<double>() == Approx(1));
  CHECK(j["jain_index"].get<double>() == Approx(1));
}

// gateway/format: ages, durations, tables, status and event lines of the CLI.
#include <catch2/catch.hpp>
#include <string>

#include "gateway/format.hpp"

using namespace troupe;
using namespace troupe::gateway;

namespace {

pb::JobView job(const std::string& id, const std::string& team, const std::string& state,
                int64_t submit_ms) {
  pb::JobView j;
  j.set_job_id(id);
  j.set_team(team);
  j.set_kind("training");
  j.set_state(state);
  j.set_gpus(4);
  j.set_workers(2);
  j.set_submit_ms(submit_ms);
  return j;
}

void place(pb::JobView& j, int rank, const std::string& node, std::initializer_list<int> gpus) {
  auto* w = j.add_placement();
  w->set_rank(rank);
  w->set_node(node);
  for (int g : gpus) w->add_gpus(g);
}

}  // namespace

TEST_CASE("gateway: format_age picks the largest whole unit", "[gateway][format]") {
  CHECK(format_age(0) == "0s");
  CHECK(format_age(-500) == "0s");
  CHECK(format_age(5'999) == "5s");
  CHECK(format_age(59'999) == "59s");
  CHECK(format_age(60'000) == "1m");
  CHECK(format_age(3 * 60'000 + 59'000) == "3m");
  CHECK(format_age(2 * 3'600'000 + 5) == "2h");
  CHECK(format_age(3 * 86'400'000LL) == "3d");
}

TEST_CASE("gateway: format_duration", "[gateway][format]") {
  CHECK(format_duration(850) == "850ms");
  CHECK(format_duration(2'340) == "2.3s");
  CHECK(format_duration(185'000) == "3m05s");
  CHECK(format_duration(3'720'000) == "1h02m");
  CHECK(format_duration(-1) == "0ms");
}

TEST_CASE("gateway: format_memory_mb", "[gateway][format]") {
  CHECK(format_memory_mb(0) == "-");
  CHECK(format_memory_mb(512) == "512M");
  CHECK(format_memory_mb(16 * 1024) == "16G");
  CHECK(format_memory_mb(1536) == "1.5G");
  CHECK(format_memory_mb(2LL * 1024 * 1024) == "2.0T");
}

TEST_CASE("gateway: format_clock shows milliseconds on request", "[gateway][format]") {
  CHECK(format_clock(1'700'000'000'123).size() == 8);
  std::string ms = format_clock(1'700'000'000'123, true);
  REQUIRE(ms.size() == 12);
  CHECK(ms.substr(8) == ".123");
}

TEST_CASE("gateway: render_table pads columns and trims the last one", "[gateway][format]") {
  std::string t = render_table({"A", "LONGER"}, {{"xxxx", "y"}, {"z"}});
  CHECK(t ==
        "A     LONGER\n"
        "xxxx  y\n"
        "z\n");
}

TEST_CASE("gateway: placement and node columns follow rank order", "[gateway][format]") {
  pb::JobView j = job("j-1", "t", "running", 0);
  place(j, 1, "node-2", {0, 1});
  place(j, 0, "node-1", {2, 3});
  place(j, 2, "node-1", {0});
  CHECK(placement_text(j.placement()) == "node-1[2,3] node-2[0,1] node-1[0]");
  CHECK(nodes_text(j.placement()) == "node-1,node-2");
  pb::JobView empty;
  CHECK(placement_text(empty.placement()) == "-");
  CHECK(nodes_text(empty.placement()) == "-");
  pb::JobView cpu;
  place(cpu, 0, "node-3", {});
  CHECK(placement_text(cpu.placement()) == "node-3");
}

TEST_CASE("gateway: gpus_text is per-worker GPUs x workers", "[gateway][format]") {
  pb::JobView j;
  j.set_gpus(4);
  j.set_workers(2);
  CHECK(gpus_text(j) == "4x2");
  j.set_workers(0);  // omitted in JSON: one worker
  CHECK(gpus_text(j) == "4x1");
}

TEST_CASE("gateway: jobs_table sorts by submit time and filters by state", "[gateway][format]") {
  pb::JobList list;
  *list.add_jobs() = job("j-b", "nlp", "queued", 2'000);
  auto a = job("j-a", "vision", "running", 1'000);
  place(a, 0, "node-1", {0, 1, 2, 3});
  place(a, 1, "node-2", {0, 1, 2, 3});
  *list.add_jobs() = a;
  *list.add_jobs() = job("j-c", "nlp", "failed", 3'000);

  std::string all = jobs_table(list, 125'000);
  CHECK(all.rfind("ID", 0) == 0);
  CHECK_THAT(all, Catch::Contains("NODE(S)"));
  CHECK_THAT(all, Catch::Contains("node-1,node-2"));
  CHECK_THAT(all, Catch::Contains("2m"));  // 124 s old
  CHECK(all.find("j-a") < all.find("j-b"));
  CHECK(all.find("j-b") < all.find("j-c"));

  std::string queued = jobs_table(list, 125'000, "queued");
  CHECK_THAT(queued, Catch::Contains("j-b"));
  CHECK_THAT(queued, !Catch::Contains("j-a"));
  CHECK_THAT(queued, !Catch::Contains("j-c"));

  pb::JobList none;
  CHECK(jobs_table(none, 0) == "ID  TEAM  NAME  KIND  STATE  GPUS  NODE(S)  AGE\n");
}

TEST_CASE("gateway: nodes_table shows free/total and liveness", "[gateway][format]") {
  pb::NodeList list;
  auto* n = list.add_nodes();
  n->set_node("node-2");
  n->set_gpu_type("a100");
  n->set_gpus_total(4);
  n->set_gpus_free(1);
  n->set_gpus_reserved(1);
  n->set_gpus_allocated(2);
  n->set_cpus(32);
  n->set_memory_mb(256 * 1024);
  n->set_alive(true);
  n->set_schedulable(true);
  n->set_last_heartbeat_ms(9'000);
  auto* m = list.add_nodes();
  m->set_node("node-1");
  m->set_alive(false);
  auto* c = list.add_nodes();
  c->set_node("node-3");
  c->set_alive(true);  // cordoned: alive, not schedulable
  auto* d = list.add_nodes();
  d->set_node("node-4");
  d->set_alive(true);
  d->set_draining(true);
  std::string t = nodes_table(list, 10'000);
  CHECK(node_state(*c) == "cordoned");
  CHECK(node_state(*d) == "draining");
  CHECK(node_state(*m) == "lost");
  CHECK(node_state(*n) == "alive");
  CHECK_THAT(t, Catch::Contains("cordoned") && Catch::Contains("draining"));
  CHECK_THAT(t, Catch::Contains("LAST HEARTBEAT"));
  CHECK_THAT(t, Catch::Contains("1/4"));
  CHECK_THAT(t, Catch::Contains("256G"));
  CHECK_THAT(t, Catch::Contains("alive"));
  CHECK_THAT(t, Catch::Contains("1s ago"));
  CHECK_THAT(t, Catch::Contains("lost"));
  CHECK_THAT(t, Catch::Contains("never"));
  CHECK(t.find("node-1") < t.find("node-2"));
}

TEST_CASE("gateway: status_text lists state, placement per rank, exit and reason",
          "[gateway][format]") {
  pb::JobView j = job("j-42", "vision", "failed", 1'000);
  j.set_name("bert");
  j.set_attempt(2);
  j.set_gpu_type("a100");
  place(j, 1, "node-2", {0, 1, 2, 3});
  place(j, 0, "node-1", {4, 5, 6, 7});
  j.set_start_ms(3'000);
  j.set_end_ms(8'500);
  j.set_exit_code(3);
  j.set_reason("exited with code 3");
  std::string s = status_text(j, 60'000);
  CHECK_THAT(s, Catch::Contains("failed (attempt 2)"));
  CHECK_THAT(s, Catch::Contains("4 GPUs x 2 workers (a100)"));
  CHECK_THAT(s, Catch::Contains("rank 0: node-1 gpus 4,5,6,7"));
  CHECK_THAT(s, Catch::Contains("rank 1: node-2 gpus 0,1,2,3"));
  CHECK(s.find("rank 0") < s.find("rank 1"));
  CHECK_THAT(s, Catch::Contains("exit code  3"));
  CHECK_THAT(s, Catch::Contains("exited with code 3"));
  CHECK_THAT(s, Catch::Contains("waited 2.0s"));
  CHECK_THAT(s, Catch::Contains("ran 5.5s"));
  CHECK_THAT(s, Catch::Contains("59s ago"));
}

TEST_CASE("gateway: status_text of a queued job has no placement or exit code",
          "[gateway][format]") {
  pb::JobView j = job("j-1", "nlp", "queued", 1'000);
  std::string s = status_text(j, 2'000);
  CHECK_THAT(s, Catch::Contains("placement  -"));
  CHECK_THAT(s, !Catch::Contains("exit code"));
  CHECK_THAT(s, !Catch::Contains("started"));
}

TEST_CASE("gateway: event_line", "[gateway][format]") {
  pb::JobEvent e;
  e.set_job_id("j-7");
  e.set_name("eval");
  e.set_state("failed");
  e.set_attempt(1);
  e.set_ts("2024-01-01T00:00:00Z");
  auto* w = e.add_workers();
  w->set_node("node-1");
  w->add_gpus(0);
  e.set_exit_code(3);
  e.set_reason("exited with code 3");
  std::string l = event_line(e);
  CHECK(l.rfind("2024-01-01T00:00:00Z", 0) == 0);
  CHECK_THAT(l, Catch::Contains("j-7"));
  CHECK_THAT(l, Catch::Contains("failed"));
  CHECK_THAT(l, Catch::Contains("node-1[0]"));
  CHECK_THAT(l, Catch::Contains("exit 3"));
  CHECK_THAT(l, Catch::Contains("(exited with code 3)"));
  CHECK(l.back() != ' ');
  pb::JobEvent q;
  q.set_job_id("j-8");
  q.set_state("queued");
  CHECK_THAT(event_line(q), !Catch::Contains("exit"));
}

TEST_CASE("gateway: prefix_lines prefixes whole lines and keeps a partial one for later",
          "[gateway][format][logs]") {
  std::string carry;
  CHECK(prefix_lines(carry, "a\nb", "[rank 1] ") == "[rank 1] a\n");
  CHECK(carry == "b");
  CHECK(prefix_lines(carry, "c\n\nd\n", "[rank 1] ") == "[rank 1] bc\n[rank 1] \n[rank 1] d\n");
  CHECK(carry.empty());
  CHECK(prefix_lines(carry, "", "[rank 1] ").empty());
}

TEST_CASE("gateway: the scheduler's UTC times are shown in the CLI's time zone, with its offset",
          "[gateway][format][tz]") {
  // 2024-05-31T16:08:37Z is 1717171717 s after the epoch.
  const int64_t ms = 1717171717000LL;
  std::string text = "reservation from 2024-05-31T16:08:37Z (in 55s); nothing else 12:00Z";
  CHECK(localize_times(text) == "reservation from " + format_datetime(ms) + " " + format_zone(ms) +
                                    " (in 55s); nothing else 12:00Z");
  CHECK(localize_times("2024-05-31T16:08:3Z").find("16:08:3Z") != std::string::npos);
  CHECK(format_zone(ms).size() == 5);
}

TEST_CASE(
    "gateway: wide tables add pool, priority and placement to jobs, pool, rack and shared GPUs to "
    "nodes",
    "[gateway][format][output]") {
  pb::JobList list;
  auto* j = list.add_jobs();
  *j = job("j-1", "nlp", "running", 1'000);
  j->set_pool("a100");
  j->set_priority("high");
  place(*j, 0, "node-1", {3});
  std::string wide = jobs_table(list, 2'000, {}, true);
  CHECK_THAT(wide, Catch::Contains("PLACEMENT") && Catch::Contains("a100") &&
                       Catch::Contains("high") && Catch::Contains("node-1[3]"));
  CHECK(jobs_table(list, 2'000).find("PLACEMENT") == std::string::npos);
  pb::NodeList nodes;
  auto* n = nodes.add_nodes();
  n->set_node("s1");
  n->set_alive(true);
  n->set_schedulable(true);
  n->set_pool("p");
  n->set_gpus_shared(1);
  n->set_gpu_memory_shared_mb(12000);
  n->set_gpu_memory_stranded_mb(4000);
  std::string w = nodes_table(nodes, 0, true);
  CHECK_THAT(w, Catch::Contains("SHARED GPUS") && Catch::Contains("1 (11.7G used, 3.9G left)"));
}

TEST_CASE("gateway: through a front door, nodes and jobs show their cluster", "[gateway][format]") {
  pb::NodeList nodes;
  for (const char* cluster : {"c2", "c1"}) {
    auto* n = nodes.add_nodes();
    n->set_node("node-1");
    n->set_cluster(cluster);
    n->set_alive(true);
    n->set_schedulable(true);
  }
  nodes.set_partial(true);
  nodes.add_unanswered("c3");
  std::string t = nodes_table(nodes, 10'000);
  INFO(t);
  CHECK(t.rfind("CLUSTER  NODE", 0) == 0);
  CHECK(t.find("c1       node-1") < t.find("c2       node-1"));
  CHECK_THAT(t, Catch::EndsWith("not shown (unreachable): c3\n"));
  pb::NodeList one_cluster;  // on a cluster: no CLUSTER column
  one_cluster.add_nodes()->set_node("node-1");
  CHECK(nodes_table(one_cluster, 0).rfind("NODE", 0) == 0);

  pb::JobList jobs;
  auto j = job("j-x1", "nlp", "running", 1'000);
  j.set_cluster("c2");
  j.set_cluster_job_id("j-abc");
  place(j, 0, "node-1", {0});
  *jobs.add_jobs() = j;
  *jobs.add_jobs() = job("j-x2", "nlp", "canceled", 2'000);  // taken nowhere
  t = jobs_table(jobs, 3'000);
  INFO(t);
  CHECK_THAT(t, Catch::Contains("GPUS  CLUSTER  NODE(S)  AGE\n"));
  CHECK_THAT(t, Catch::Contains("c2       node-1"));
  CHECK_THAT(t, Catch::Contains("-        -"));
  std::string s = status_text(j, 3'000);
  CHECK_THAT(s, Catch::Contains("cluster    c2 (as j-abc)\n"));
}

TEST_CASE("gateway: troupe nodes --cluster keeps one cluster's nodes of a front door's list",
          "[gateway][format]") {
  pb::NodeList list;
  for (auto [node, cluster] : {std::pair{"a1", "c1"}, {"a2", "c1"}, {"h1", "c2"}}) {
    auto* n = list.add_nodes();
    n->set_node(node);
    n->set_cluster(cluster);
  }
  list.add_unanswered("c3");
  pb::NodeList c1 = list;
  REQUIRE(keep_cluster_nodes(c1, "c1").empty());
  REQUIRE(c1.nodes_size() == 2);
  CHECK(c1.nodes(1).node() == "a2");
  CHECK(c1.unanswered().empty());
  pb::NodeList c3 = list;  // unreachable: none shown, and said so
  REQUIRE(keep_cluster_nodes(c3, "c3").empty());
  CHECK(c3.nodes().empty());
  CHECK_THAT(nodes_table(c3, 0), Catch::Contains("not shown (unreachable): c3"));
  pb::NodeList c9 = list;
  CHECK_THAT(keep_cluster_nodes(c9, "c9"), Catch::Contains("no node of cluster c9"));
  CHECK(c9.nodes_size() == 3);  // left as it was
  pb::NodeList one;             // one cluster's own NATS: its nodes name no cluster
  one.add_nodes()->set_node("node-1");
  CHECK_THAT(keep_cluster_nodes(one, "c1"), Catch::Contains("one cluster"));
}

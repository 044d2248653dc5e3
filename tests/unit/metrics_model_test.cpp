// The pure half of the metrics: cause labels, event -> observation
// transitions, counter mirroring, reply readers (gauge rows, fragmentation),
// and HOST:PORT parsing. (The node agent's nvidia-smi and exit-cause
// parsing: node_metrics_test.cpp.)
#include <catch2/catch.hpp>
#include <string>

#include "actors/metrics/exporter.hpp"
#include "actors/metrics/model.hpp"

using namespace troupe::metrics;

namespace {

JobEvent ev(const std::string& id, const std::string& state, int attempt, int64_t ts,
            const std::string& reason = {}, const std::string& cause = {}) {
  JobEvent e;
  e.job_id = id;
  e.team = "vision";
  e.kind = "training";
  e.state = state;
  e.attempt = attempt;
  e.ts_ms = ts;
  e.reason = reason;
  e.cause = cause;
  return e;
}

}  // namespace

TEST_CASE("cause labels are bounded and follow the reason text", "[metrics]") {
  CHECK(cause_of("succeeded", "all workers exited with code 0") == "succeeded");
  CHECK(cause_of("canceled", "canceled by request") == "canceled");
  CHECK(cause_of("failed", "exited with code 3") == "exit_code");
  CHECK(cause_of("failed", "rank 1 exited with code 3") == "exit_code");
  CHECK(cause_of("failed", "killed by signal 9") == "signal");
  CHECK(cause_of("failed", "rank 12 killed by signal 15") == "signal");
  CHECK(cause_of("failed", "exceeded max_runtime_s") == "max_runtime");
  CHECK(cause_of("failed", "launch failed: no such file") == "launch_failed");
  CHECK(cause_of("failed", "stopped") == "stopped");
  CHECK(cause_of("failed", "node node-2 lost") == "node_lost");
  CHECK(cause_of("failed", "agent lost") == "agent_lost");
  CHECK(cause_of("queued", "retry 1 of 2 after: exited with code 3") == "exit_code");
  CHECK(cause_of("queued", "retry 2 of 3 after: rank 0 killed by signal 9") == "signal");
  CHECK(cause_of("queued", "preempted by a higher priority job") == "preempted");
  CHECK(cause_of("failed", "something nobody expected 12345") == "other");
  CHECK(cause_of("failed", "log_limit: its output passed 1 MiB, the node's --job-log-max-mb") ==
        "log_limit");
  CHECK(cause_of("failed", "x", "log_limit") == "log_limit");
  CHECK(cause_of("failed", "disk_limit: its work dir passed 2 MiB, the node's --job-disk-max-mb") ==
        "disk_limit");
  // The event's own cause wins when it is one of the known values.
  CHECK(cause_of("failed", "exited with code 137", "oom_killed") == "oom_killed");
  CHECK(cause_of("queued", "", "preempted") == "preempted");
  CHECK(cause_of("failed", "x", "a-brand-new-cause") == "other");
  // Every derived value is in the known set.
  for (const char* r : {"exited with code 1", "killed by signal 2", "weird", "stopped"}) {
    auto c = cause_of("failed", r);
    CHECK(std::find(known_causes().begin(), known_causes().end(), c) != known_causes().end());
  }
}

TEST_CASE("parse_event reads protobuf JSON and refuses junk", "[metrics]") {
  auto e = parse_event(
      R"({"job_id":"j-1","team":"nlp","kind":"inference","state":"running","attempt":2,)"
      R"("ts_ms":"1717171720123","workers":[{"rank":0,"node":"n1","gpus":[0,1]},)"
      R"({"rank":1,"node":"n2","gpus":[2,3]}]})");
  REQUIRE(e);
  CHECK(e->job_id == "j-1");
  CHECK(e->team == "nlp");
  CHECK(e->kind == "inference");
  CHECK(e->attempt == 2);
  CHECK(e->ts_ms == 1717171720123);
  auto d = parse_event(R"({"job_id":"j-2","state":"queued","ts_ms":5})");
  REQUIRE(d);
  CHECK(d->attempt == 1);        // omitted when 0 in protobuf JSON; attempts start at 1
  CHECK(d->kind == "training");  // the default kind
  CHECK_FALSE(parse_event("not json"));
  CHECK_FALSE(parse_event("[1,2]"));
  CHECK_FALSE(parse_event(R"({"job_id":"j-3","state":"queued"})"));  // no timestamp
  CHECK_FALSE(parse_event(R"({"state":"queued","ts_ms":"5"})"));
}

TEST_CASE("tracker: queue wait, placement latency and finish of a plain job", "[metrics]") {
  EventTracker t;
  auto o = t.on_event(ev("j", "queued", 1, 1000));
  CHECK_FALSE(o.queue_wait_s);
  CHECK_FALSE(o.finished);
  o = t.on_event(ev("j", "starting", 1, 1250));
  REQUIRE(o.placement_latency_s);
  CHECK(*o.placement_latency_s == Approx(0.25));
  o = t.on_event(ev("j", "running", 1, 1600));
  REQUIRE(o.queue_wait_s);
  CHECK(*o.queue_wait_s == Approx(0.6));
  CHECK(t.tracked() == 1);
  o = t.on_event(ev("j", "succeeded", 1, 9000, "all workers exited with code 0"));
  REQUIRE(o.finished);
  CHECK(o.finished->state == "succeeded");
  CHECK(o.finished->cause == "succeeded");
  CHECK(o.attempt_ended == std::optional<std::string>("succeeded"));
  CHECK(t.tracked() == 0);  // forgotten at the end
}

TEST_CASE("tracker: a retried job measures each attempt's wait, latency once", "[metrics]") {
  EventTracker t;
  t.on_event(ev("j", "queued", 1, 1000));
  CHECK(t.on_event(ev("j", "starting", 1, 1100)).placement_latency_s);
  CHECK(*t.on_event(ev("j", "running", 1, 1200)).queue_wait_s == Approx(0.2));
  auto o = t.on_event(ev("j", "queued", 2, 5000, "retry 1 of 1 after: exited with code 3"));
  CHECK(o.attempt_ended == std::optional<std::string>("exit_code"));
  CHECK_FALSE(o.finished);
  CHECK_FALSE(t.on_event(ev("j", "starting", 2, 6000)).placement_latency_s);
  auto w = t.on_event(ev("j", "running", 2, 7000)).queue_wait_s;
  REQUIRE(w);
  CHECK(*w == Approx(2.0));  // from attempt 2's queued event
  // A late event of attempt 1 changes nothing.
  CHECK_FALSE(t.on_event(ev("j", "running", 1, 7100)).queue_wait_s);
  o = t.on_event(ev("j", "failed", 2, 8000, "exited with code 3"));
  REQUIRE(o.finished);
  CHECK(o.finished->state == "failed");
  CHECK(o.finished->cause == "exit_code");
}

TEST_CASE("tracker: duplicates and late joiners do not double count", "[metrics]") {
  EventTracker t;
  t.on_event(ev("j", "queued", 1, 1000));
  CHECK(t.on_event(ev("j", "running", 1, 2000)).queue_wait_s);
  CHECK_FALSE(t.on_event(ev("j", "running", 1, 2000)).queue_wait_s);
  // A job first seen running (the collector started late): no wait, no latency.
  auto o = t.on_event(ev("k", "running", 1, 3000));
  CHECK_FALSE(o.queue_wait_s);
  CHECK_FALSE(o.placement_latency_s);
  CHECK(t.on_event(ev("k", "canceled", 1, 4000, "canceled by request")).finished->cause ==
        "canceled");
  // A job canceled while queued ends without ever running.
  t.on_event(ev("q", "queued", 1, 1000));
  o = t.on_event(ev("q", "canceled", 1, 1500, "canceled by request"));
  REQUIRE(o.finished);
  CHECK_FALSE(o.queue_wait_s);
}

TEST_CASE("tracker: a preempted attempt ends with cause preempted", "[metrics]") {
  EventTracker t;
  t.on_event(ev("p", "queued", 1, 1));
  t.on_event(ev("p", "starting", 1, 1000));
  t.on_event(ev("p", "running", 1, 2000));
  auto o = t.on_event(ev("p", "queued", 2, 12000, "preempted for j-big", "preempted"));
  CHECK(o.attempt_ended == std::optional<std::string>("preempted"));
  CHECK_FALSE(o.finished);
}

TEST_CASE("tracker: memory stays bounded", "[metrics]") {
  EventTracker t(100);
  for (int i = 0; i < 1000; ++i) t.on_event(ev("j" + std::to_string(i), "queued", 1, 1000 + i));
  CHECK(t.tracked() <= 100);
  // The newest jobs are still measured.
  CHECK(t.on_event(ev("j999", "running", 1, 5000)).queue_wait_s);
}

TEST_CASE("counter mirror turns cumulative values into increments", "[metrics]") {
  CounterMirror m;
  CHECK(m.delta(5) == 5);
  CHECK(m.delta(5) == 0);
  CHECK(m.delta(8) == 3);
  CHECK(m.delta(2) == 2);  // the scheduler restarted from 0
  CHECK(m.delta(2.5) == Approx(0.5));
}

TEST_CASE("cumulative values: present at 0, read when the scheduler reports them", "[metrics]") {
  auto empty = cumulative_values(Json::object(), Json::object());
  CHECK(empty.size() == 21);
  for (const auto& c : empty) CHECK(c.value == 0);
  auto stats = Json::parse(R"({"accepted":7,"rejected":2,"malformed":3,"duplicates":1,
      "intake_errors":0,"handed_off":5,"bus_messages_in":"120","bus_messages_out":95,
      "restarts":{"job":1,"node":2},
      "snapshots":{"writes":10,"errors":2,"conflicts":1},"events_retried":4})");
  auto queues = Json::parse(
      R"({"reserved_idle_gpu_seconds":12.5,"grants":9,"preemptions":2,"reclaims":1,"gpu_seconds_lost":640.5})");
  std::map<std::string, double> got;
  for (const auto& c : cumulative_values(stats, queues)) {
    std::string k = c.series;
    for (const auto& [l, v] : c.labels) k += "," + l + "=" + v;
    got[k] = c.value;
  }
  CHECK(got["troupe_submissions_total,result=accepted"] == 7);
  CHECK(got["troupe_submissions_total,result=duplicate"] == 1);
  CHECK(got["troupe_submissions_total,result=handed_off"] == 5);
  CHECK(got["troupe_bus_malformed_messages_total"] == 3);
  CHECK(got["troupe_bus_messages_total,direction=in"] == 120);
  CHECK(got["troupe_bus_messages_total,direction=out"] == 95);
  CHECK(got["troupe_actor_restarts_total,actor=job"] == 1);
  CHECK(got["troupe_actor_restarts_total,actor=node"] == 2);
  CHECK(got["troupe_actor_restarts_total,actor=gang"] == 0);
  CHECK(got["troupe_snapshot_writes_total,result=ok"] == 7);
  CHECK(got["troupe_snapshot_writes_total,result=error"] == 2);
  CHECK(got["troupe_snapshot_writes_total,result=conflict"] == 1);
  CHECK(got["troupe_events_republished_total"] == 4);
  CHECK(got["troupe_reserved_idle_gpu_seconds_total"] == 12.5);
  CHECK(got["troupe_grants_total"] == 9);
  CHECK(got["troupe_preemptions_total"] == 2);
  CHECK(got["troupe_reclaims_total"] == 1);
  CHECK(got["troupe_preemption_lost_gpu_seconds_total"] == 640.5);
  // Every series named is in the table, as a counter.
  for (const auto& c : empty) {
    auto* s = find_series(scheduler_series(), c.series);
    REQUIRE(s);
    CHECK(s->type == Type::kCounter);
  }
}

namespace {

// Two a100 nodes of 4 in pool "a100", one h100 node of 8 in pool "h100", one dead node.
Json nodes_json() {
  return Json::parse(R"({"nodes":[
    {"node":"n1","gpu_type":"a100","gpus_total":4,"gpus_free":1,"gpus_allocated":3,"alive":true,"running":2,"pool":"a100"},
    {"node":"n2","gpu_type":"a100","gpus_total":4,"gpus_free":2,"gpus_reserved":1,"gpus_allocated":1,"alive":true,"running":1,"pool":"a100"},
    {"node":"n3","gpu_type":"h100","gpus_total":8,"gpus_free":8,"alive":true,"pool":"h100"},
    {"node":"n4","gpu_type":"a100","gpus_total":4,"pool":"a100"}]})");
}

}  // namespace

TEST_CASE("build_sample: GPU rows per pool and type, allocation ratio, nodes", "[metrics]") {
  auto s = build_sample(nodes_json(), Json::object(), {});
  REQUIRE(s.gpus.size() == 2);
  const auto& a = s.gpus[0];
  CHECK(a.pool == "a100");
  CHECK(a.gpu_type == "a100");
  CHECK(a.total == 8);  // the dead node is not counted
  CHECK(a.allocated == 4);
  CHECK(a.reserved == 1);
  CHECK(a.free == 3);
  CHECK(a.fragmented == 0);  // nothing pending
  CHECK(s.gpus[1].total == 8);
  CHECK(s.nodes_alive == 3);
  CHECK(s.nodes_dead == 1);
  CHECK(s.workers_running == 3);
  CHECK(s.allocation_ratio == Approx(4.0 / 16.0));
  CHECK(build_sample(Json::object(), Json::object(), {}).allocation_ratio == 0);
}

TEST_CASE("build_sample: fragmentation and held-idle GPUs", "[metrics]") {
  // A pending 4-GPU a100 job fits on neither a100 node (1 and 2 free): 3 fragmented.
  // The h100 node's 8 free GPUs are usable by no pending job either.
  auto s = build_sample(nodes_json(), Json::object(), {{4, "a100", ""}});
  CHECK(s.gpus[0].fragmented == 3);
  CHECK(s.gpus[1].fragmented == 8);
  // A pending 2-GPU job of any type fits n2 and n3: only n1's single GPU is stranded.
  s = build_sample(nodes_json(), Json::object(), {{4, "a100", ""}, {2, "", ""}});
  CHECK(s.gpus[0].fragmented == 1);
  CHECK(s.gpus[1].fragmented == 0);
  // CPU-only pending jobs use no GPUs: nothing counts as fragmented.
  s = build_sample(nodes_json(), Json::object(), {{0, "", ""}});
  CHECK(s.gpus[0].fragmented == 0);
  // Work waiting in another pool only: this pool's free GPUs are idle, not
  // fragmented (an idle pool reported its 8 free GPUs as fragmented).
  s = build_sample(nodes_json(), Json::object(), {{1, "", "h100"}});
  CHECK(s.gpus[0].fragmented == 0);
  CHECK(s.gpus[1].fragmented == 0);
  s = build_sample(nodes_json(), Json::object(), {{4, "a100", "a100"}});
  CHECK(s.gpus[0].fragmented == 3);
  CHECK(s.gpus[1].fragmented == 0);
  // Free GPUs on held nodes are held-idle, not fragmented.
  auto queues = Json::parse(
      R"({"pools":[{"pool":"a100","gpus_total":8,"hold":{"job_id":"j-big","nodes":["n2"],"idle_gpus":2}}]})");
  s = build_sample(nodes_json(), queues, {{4, "a100", ""}});
  CHECK(s.gpus[0].held_idle == 2);
  CHECK(s.gpus[0].fragmented == 1);
}

TEST_CASE("team rows and pending shapes from the queues reply", "[metrics]") {
  auto queues = Json::parse(R"({"pools":[],"teams":[
    {"team":"vision","pool":"a100","weight":2,"borrow":true,"guaranteed":4,"limit":-1,"in_use":6,
     "borrowed":2,"pending_jobs":3,"pending_gpus":12,"pending_flexible":2,"dominant_share":0.75,
     "weighted_share":0.375},
    {"team":"nlp","pool":"a100","weight":1,"guaranteed":0,"limit":8}]})");
  auto s = build_sample(Json::object(), queues, {});
  REQUIRE(s.teams.size() == 2);
  CHECK(s.teams[0].team == "vision");
  CHECK(s.teams[0].weight == 2);
  CHECK(s.teams[0].in_use == 6);
  CHECK(s.teams[0].borrowed == 2);
  CHECK(s.teams[0].pending_jobs == 3);
  CHECK(s.teams[0].pending_gpus == 12);
  CHECK(s.teams[0].pending_flexible == 2);
  CHECK(s.teams[1].pending_flexible == 0);
  CHECK(s.teams[0].weighted_share == Approx(0.375));
  CHECK(s.teams[1].pending_jobs == 0);
  CHECK(any_pending(queues));
  CHECK_FALSE(shapes_from_queues(queues));  // not reported (yet)
  auto with = Json::parse(R"({"teams":[{"team":"vision","pool":"a100",
      "pending_shapes":[{"gpus":4,"gpu_type":"a100"},{"gpus":1}]}]})");
  auto shapes = shapes_from_queues(with);
  REQUIRE(shapes);
  REQUIRE(shapes->size() == 2);
  CHECK((*shapes)[0].gpus == 4);
  CHECK((*shapes)[0].pool == "a100");  // the row's pool
  auto jobs = Json::parse(R"({"jobs":[{"job_id":"a","state":"queued","gpus":2,"gpu_type":"h100"},
      {"job_id":"b","state":"running","gpus":8}]})");
  auto js = shapes_from_jobs(jobs);
  REQUIRE(js.size() == 1);
  CHECK(js[0].gpus == 2);
  CHECK(js[0].gpu_type == "h100");
}

TEST_CASE("HOST:PORT parsing", "[metrics]") {
  std::string h;
  int p = -1;
  CHECK(split_host_port("127.0.0.1:9464", &h, &p));
  CHECK(h == "127.0.0.1");
  CHECK(p == 9464);
  CHECK(split_host_port(":0", &h, &p));
  CHECK(h.empty());
  CHECK(p == 0);
  CHECK(split_host_port("[::1]:80", &h, &p));
  CHECK(h == "[::1]");
  CHECK_FALSE(split_host_port("localhost", &h, &p));
  CHECK_FALSE(split_host_port("localhost:", &h, &p));
  CHECK_FALSE(split_host_port("localhost:http", &h, &p));
  CHECK_FALSE(split_host_port("localhost:70000", &h, &p));
}

TEST_CASE("guarantee restore histogram: increments since the last sample, a restart counted whole",
          "[metrics]") {
  std::map<std::string, HistogramMirror> seen;
  auto queues = [](const std::string& buckets, double sum, int count) {
    return Json::parse(
        R"({"teams":[{"team":"a","pool":"p"},{"team":"b","pool":"p","guarantee_restore":{"buckets":)" +
        buckets + R"(,"sum_s":)" + std::to_string(sum) + R"(,"count":)" + std::to_string(count) +
        "}}]}");
  };
  auto first = restore_increments(queues("[0,0,0,0,2,0,0,0,0,0,0]", 25.0, 2), seen);
  REQUIRE(first.size() == 1);  // team a has no histogram yet
  CHECK(first[0].team == "b");
  CHECK(first[0].pool == "p");
  REQUIRE(first[0].buckets.size() == 11);
  CHECK(first[0].buckets[4] == 2);
  CHECK(first[0].sum == Approx(25.0));
  // Nothing new: no increment.
  CHECK(restore_increments(queues("[0,0,0,0,2,0,0,0,0,0,0]", 25.0, 2), seen).empty());
  // One more wait of 3 s.
  auto more = restore_increments(queues("[0,0,1,0,2,0,0,0,0,0,0]", 28.0, 3), seen);
  REQUIRE(more.size() == 1);
  CHECK(more[0].buckets[2] == 1);
  CHECK(more[0].buckets[4] == 0);
  CHECK(more[0].sum == Approx(3.0));
  // The scheduler restarted (count went down): all of it is new.
  auto again = restore_increments(queues("[1,0,0,0,0,0,0,0,0,0,0]", 0.5, 1), seen);
  REQUIRE(again.size() == 1);
  CHECK(again[0].buckets[0] == 1);
  CHECK(again[0].sum == Approx(0.5));
}

TEST_CASE(
    "guarantee restore histogram: a hostile row keeps bucket positions and no negative counts",
    "[metrics]") {
  std::map<std::string, HistogramMirror> seen;
  Json q = Json::parse(R"({"teams":[{"team":"b","pool":"p","guarantee_restore":)"
                       R"({"buckets":["x",-4,3,0,0,0,0,0,0,0,7,9],"sum_s":40,"count":10}}]})");
  auto got = restore_increments(q, seen);
  REQUIRE(got.size() == 1);
  REQUIRE(got[0].buckets.size() == 11);
  CHECK(got[0].buckets[0] == 0);  // not a number: nothing
  CHECK(got[0].buckets[1] == 0);  // negative: nothing
  CHECK(got[0].buckets[2] == 3);  // stays in its own bucket
  CHECK(got[0].buckets[10] == 7);
}

TEST_CASE("metrics: a front door's clusters view as rows (troupe-dispatch --metrics)",
          "[metrics]") {
  Json view = Json::parse(R"({"clusters":[
      {"name":"c1","state":"reachable","gpu_types":{"a100":{"total":8,"free":3}},"queued":2,"running":5},
      {"name":"c2","state":"unreachable","gpu_types":{},"queued":0,"running":1},
      {"state":"reachable"}, 7],
    "counters":{"sent":12,"spilled":1,"bogus":"x"}})");
  auto s = dispatch_sample(view);
  std::map<std::string, double> g;
  for (const auto& r : s.gauges) {
    REQUIRE(find_series(dispatch_series(), r.series) != nullptr);
    g[key_of(r)] = r.value;
  }
  CHECK(g.at("troupe_dispatch_cluster_up,cluster=c1") == 1);
  CHECK(g.at("troupe_dispatch_cluster_up,cluster=c2") == 0);  // unreachable
  CHECK(g.at("troupe_dispatch_cluster_gpus,cluster=c1,gpu_type=a100") == 8);
  CHECK(g.at("troupe_dispatch_cluster_gpus_free,cluster=c1,gpu_type=a100") == 3);
  CHECK(g.at("troupe_dispatch_cluster_jobs,cluster=c1,state=queued") == 2);
  CHECK(g.at("troupe_dispatch_cluster_jobs,cluster=c2,state=running") == 1);
  CHECK(g.size() == 8);             // a cluster without a name, and a non-object, give none
  REQUIRE(s.counters.size() == 2);  // a counter that is not a number is left out
  CHECK(s.counters[0].labels.at("action") == "sent");
  CHECK(s.counters[0].value == 12);
  CHECK(dispatch_sample(Json::array()).gauges.empty());
  CHECK(dispatch_sample(Json::parse(R"({"clusters":7,"counters":[]})")).counters.empty());
}

// Unit tests of the replay report's additions (issue 16, item 5): JCT per job
// size, the longest wait, GPU allocation while work waits (and fits), Jain's
// index among the teams with pending work, reserved-idle GPU-seconds, the
// GPU-seconds lost to preemption, and the trace timeline of preempted
// attempts. Every input is small and hand-made; the right answers are worked
// out by hand in the comments.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "load/report.hpp"

using namespace troupe::load;
using Approx = Catch::Detail::Approx;

namespace {
int64_t ns(double s) {
  return s < 0 ? -1 : static_cast<int64_t>(std::llround(s * 1e9));
}

// A job submitted at `sent_s` (wall) that ran from `run_s` to `end_s` (wall),
// with its trace arrival and duration (s); speedup 1 makes wall = trace.
JobResult job(int gpus, double sent_s, double run_s, double end_s, double arrival_s,
              double duration_s, const std::string& team = "t") {
  JobResult r;
  r.team = team;
  r.gpus = gpus;
  r.job_id =
      "j" + std::to_string(static_cast<long long>(sent_s * 1000)) + "-" + std::to_string(gpus);
  r.sent_ns = ns(sent_s);
  r.acked_ns = ns(sent_s);
  r.placed_ns = r.running_ns = ns(run_s);
  r.ended_ns = ns(end_s);
  r.final_state = end_s >= 0 ? "succeeded" : "";
  r.trace_arrival_s = arrival_s;
  r.trace_duration_s = duration_s;
  return r;
}

AllocSample sample(double t_s, long long allocated, long long total, bool pending,
                   long long usable_free, long long held_idle = 0, int teams_pending = 0,
                   double jain = 1) {
  AllocSample s;
  s.t_ns = ns(t_s);
  s.allocated = allocated;
  s.total = total;
  s.free = total - allocated;
  s.has_queues = true;
  s.pending = pending;
  s.usable_free = usable_free;
  s.held_idle = held_idle;
  s.teams_pending = teams_pending;
  s.jain_pending = jain;
  return s;
}
}  // namespace

TEST_CASE("load report: JCT per job size bucket, wall and trace", "[load][report]") {
  // Speedup 1, no job waits (each runs on arrival): JCT = duration.
  //   1 GPU: 10 s and 20 s -> avg 15; 3 GPUs: 30 s; 8 GPUs: 40 s; 16 GPUs: 50 s.
  std::vector<JobResult> jobs{job(1, 0, 0, 10, 0, 10), job(1, 1, 1, 21, 1, 20),
                              job(3, 2, 2, 32, 2, 30), job(8, 3, 3, 43, 3, 40),
                              job(16, 4, 4, 54, 4, 50)};
  RunInfo info;
  Json r = replay_report(jobs, {}, 1.0, info);
  const Json& b = r["jct_by_size"];
  CHECK(b["1"]["count"] == 2);
  CHECK(b["1"]["avg_s"].get<double>() == Approx(15));
  CHECK(b["1"]["avg_trace_s"].get<double>() == Approx(15));
  // p99 of {10, 20}: 10 + 0.99 x 10.
  CHECK(b["1"]["p99_trace_s"].get<double>() == Approx(19.9));
  CHECK(b["2-4"]["count"] == 1);
  CHECK(b["2-4"]["avg_trace_s"].get<double>() == Approx(30));
  CHECK(b["5-8"]["avg_s"].get<double>() == Approx(40));
  CHECK(b[">8"]["avg_trace_s"].get<double>() == Approx(50));
  CHECK(r["jct"]["avg_trace_s"].get<double>() == Approx(30));  // (10+20+30+40+50) / 5

  // An empty bucket has no figures (not 0).
  Json one = replay_report({job(1, 0, 0, 10, 0, 10)}, {}, 1.0, info);
  CHECK(one["jct_by_size"]["2-4"]["count"] == 0);
  CHECK(one["jct_by_size"]["2-4"]["avg_s"].is_null());
  CHECK(one["jct_by_size"]["2-4"]["avg_trace_s"].is_null());
}

TEST_CASE("load report: the longest wait, wall and trace", "[load][report]") {
  // One GPU's worth of work, in a row, at speedup 10: A (trace 0..100) runs
  // at once; B arrives at trace 10 and waits for A: trace wait 90. Wall: A
  // sent 0, running 0.01, ended 10.01; B sent 1, running 10.5 -> wall wait
  // 9.5 (the 0.49 s beyond A's end is the scheduler's own delay).
  std::vector<JobResult> jobs{job(1, 0, 0.01, 10.01, 0, 100), job(1, 1, 10.5, 15.5, 10, 50)};
  RunInfo info;
  Json r = replay_report(jobs, {}, 10.0, info);
  CHECK(r["queueing_delay"]["max_s"].get<double>() == Approx(9.5));
  CHECK(r["queueing_delay"]["max_trace_s"].get<double>() == Approx(90));
}

TEST_CASE("load report: make_sample splits free GPUs into usable, fragmented and held",
          "[load][report]") {
  // Three 8-GPU nodes: n1 has 2 free, n2 has 6 free, n3 has 8 free and is
  // held. Pending workers want 4 GPUs: n2 fits (usable 6), n1 does not
  // (fragmented 2), n3's 8 are held-idle whatever fits there.
  std::vector<SampleNode> nodes{
      {"a100", "p", 8, 6, 2, false}, {"a100", "p", 8, 2, 6, false}, {"a100", "p", 8, 0, 8, true}};
  std::vector<SampleWant> wants{{4, "", "p"}};
  // Teams with pending work: x (4 GPUs, weight 1) and y (4 GPUs, weight 2:
  // 2 weighted): Jain = (4+2)^2 / (2 x (16+4)) = 36/40 = 0.9. z has nothing
  // pending and is left out.
  std::vector<SampleTeam> teams{{4, 1, true}, {4, 2, true}, {8, 1, false}};
  AllocSample s = make_sample(nodes, wants, teams, true);
  CHECK(s.total == 24);
  CHECK(s.allocated == 8);
  CHECK(s.free == 16);
  CHECK(s.pending);
  CHECK(s.usable_free == 6);
  CHECK(s.fragmented == 2);
  CHECK(s.held_idle == 8);
  CHECK(s.teams_pending == 2);
  CHECK(s.jain_pending == Approx(0.9));

  // Nothing pending: nothing usable or fragmented; the hold still idles.
  AllocSample idle = make_sample(nodes, {}, {{0, 1, false}}, true);
  CHECK_FALSE(idle.pending);
  CHECK(idle.usable_free == 0);
  CHECK(idle.fragmented == 0);
  CHECK(idle.held_idle == 8);
  CHECK(idle.teams_pending == 0);
  // A want of another GPU type fits nowhere: every unheld free GPU is fragmented.
  AllocSample typed = make_sample(nodes, {{1, "h100", ""}}, {}, true);
  CHECK(typed.usable_free == 0);
  CHECK(typed.fragmented == 8);
}

TEST_CASE("load report: sample_from reads teams' in_use, weight and pending jobs, and holds",
          "[load][report]") {
  Json nodes = Json::parse(R"({"nodes": [
    {"node": "rp1-00001", "pool": "default", "alive": true, "gpus_total": 8, "gpus_allocated": 8, "gpus_free": 0},
    {"node": "rp1-00002", "pool": "default", "alive": true, "gpus_total": 8, "gpus_allocated": 4, "gpus_free": 4},
    {"node": "rp1-00003", "pool": "default", "alive": true, "gpus_total": 8, "gpus_allocated": 0, "gpus_free": 8}]})");
  // Team a: 8 in use, weight 1, pending; team b: 4 in use, weight 1,
  // pending; team c: 0 in use, nothing pending. Jain over {8, 4} = 144 /
  // (2 x 80) = 0.9. Node 3 is held for a's gang.
  Json queues = Json::parse(R"({"teams": [
    {"team": "a", "pool": "default", "in_use": 8, "weight": 1, "pending_jobs": 1,
     "pending_shapes": [{"gpus": 8, "gpu_type": "", "pool": "default"}]},
    {"team": "b", "pool": "default", "in_use": 4, "weight": 1, "pending_jobs": 2,
     "pending_shapes": [{"gpus": 2, "gpu_type": "", "pool": "default"}]},
    {"team": "c", "pool": "default", "in_use": 0, "weight": 1, "pending_jobs": 0,
     "pending_shapes": []}],
    "pools": [{"pool": "default", "hold": {"job_id": "j1", "nodes": ["rp1-00003"]}}]})");
  auto s = sample_from(nodes, queues, "rp1");
  REQUIRE(s);
  CHECK(s->held_idle == 8);
  CHECK(s->usable_free == 4);  // b's 2-GPU worker fits node 2
  CHECK(s->fragmented == 0);
  CHECK(s->teams_pending == 2);
  CHECK(s->jain_pending == Approx(0.9));
}

TEST_CASE("load report: allocation while work waits and fits, fair share among waiting teams",
          "[load][report]") {
  // Samples at 0, 1, 2, 3, 4 s (the jobs span 0..4 s, so all are in the window):
  //   t0: 4/8, nothing pending;
  //   t1: 6/8, pending, 2 usable free (waits and fits), teams pending 2, Jain 0.5;
  //   t2: 8/8, pending, 0 usable (waits, does not fit), teams 2, Jain 1;
  //   t3: 2/8, pending, 0 usable but 6 held idle, 1 team pending;
  //   t4: 4/8, pending, 4 usable, 2 teams, Jain 0.8.
  std::vector<AllocSample> samples{sample(0, 4, 8, false, 0), sample(1, 6, 8, true, 2, 0, 2, 0.5),
                                   sample(2, 8, 8, true, 0, 0, 2, 1),
                                   sample(3, 2, 8, true, 0, 6, 1, 1),
                                   sample(4, 4, 8, true, 4, 0, 2, 0.8)};
  std::vector<JobResult> jobs{job(1, 0, 0, 4, 0, 4)};
  RunInfo info;
  Json r = replay_report(jobs, samples, 10.0, info);
  const Json& a = r["gpu_allocation"];
  CHECK(a["samples"] == 5);
  CHECK(a["mean"].get<double>() == Approx(24.0 / 40));
  // While waiting: t1..t4 -> (6+8+2+4)/4/8 = 0.625.
  CHECK(a["while_pending"]["samples"] == 4);
  CHECK(a["while_pending"]["mean"].get<double>() == Approx(0.625));
  // While waiting and fitting: t1, t4 -> (6+4)/2/8 = 0.625; 2 of 5 samples.
  CHECK(a["while_waiting_fits"]["samples"] == 2);
  CHECK(a["while_waiting_fits"]["mean"].get<double>() == Approx(0.625));
  CHECK(a["while_waiting_fits"]["fraction_of_samples"].get<double>() == Approx(0.4));
  // Jain among waiting teams: t1, t2, t4 (>= 2 teams): (0.5+1+0.8)/3, min 0.5.
  CHECK(r["fair_share"]["samples"] == 3);
  CHECK(r["fair_share"]["jain_pending_mean"].get<double>() == Approx(2.3 / 3).epsilon(0.002));
  CHECK(r["fair_share"]["jain_pending_min"].get<double>() == Approx(0.5));
  // Reserved-idle: 6 GPUs held from t3 to the next sample (1 s): 6 GPU-s wall,
  // x speedup 10 = 60.
  CHECK(r["reserved_idle"]["gpu_s"].get<double>() == Approx(6));
  CHECK(r["reserved_idle"]["gpu_s_scaled"].get<double>() == Approx(60));

  // No sample with work waiting: the means are null, not 0.
  Json none = replay_report(jobs, {sample(1, 4, 8, false, 0)}, 1.0, info);
  CHECK(none["gpu_allocation"]["while_waiting_fits"]["mean"].is_null());
  CHECK(none["gpu_allocation"]["while_pending"]["mean"].is_null());
  CHECK(none["fair_share"]["jain_pending_mean"].is_null());
}

TEST_CASE("load report: GPU-seconds lost to preemption, and the trace timeline of attempts",
          "[load][report]") {
  // One GPU, speedup 1 (wall = trace). A long job L (16 s) arrives at 0;
  // four 1 s jobs S2..S5 arrive at 1. L is preempted at 3 (3 s of 1 GPU
  // lost), S2..S5 run 3-4, 4-5, 5-6, 6-7, L runs again 7-23.
  // JCTs: L 23, S 3, 4, 5, 6 -> avg 41/5 = 8.2; waits: L 0, S 2, 3, 4, 5.
  JobResult l = job(1, 0, 0, 23, 0, 16);
  l.preempted_ns = {{ns(0), ns(3)}};
  l.last_running_ns = ns(7);
  std::vector<JobResult> jobs{l};
  for (int k = 0; k < 4; ++k) jobs.push_back(job(1, 1, 3 + k, 4 + k, 1, 1));
  RunInfo info;
  Json r = replay_report(jobs, {}, 1.0, info);
  CHECK(r["preemption_loss"]["attempts"] == 1);
  CHECK(r["preemption_loss"]["gpu_s"].get<double>() == Approx(3));
  CHECK(r["jct"]["avg_trace_s"].get<double>() == Approx(8.2));
  CHECK(r["queueing_delay"]["avg_trace_s"].get<double>() == Approx(14.0 / 5));
  auto t = trace_timeline(jobs, 1.0);
  CHECK(t[0].wait_s == Approx(0));
  CHECK(t[0].end_s == Approx(23));
  CHECK(t[1].start_s == Approx(3));
  CHECK(t[4].end_s == Approx(7));

  // At speedup 10 the same wall events: L's preempted attempt ran 0.3 s wall
  // = 3 trace s (the one wall length scaled), the GPU-s lost are 0.3 wall, 3
  // scaled.
  JobResult l10 = job(1, 0, 0, 2.3, 0, 16);
  l10.preempted_ns = {{ns(0), ns(0.3)}};
  l10.last_running_ns = ns(0.7);
  std::vector<JobResult> j10{l10};
  for (int k = 0; k < 4; ++k) j10.push_back(job(1, 0.1, 0.3 + 0.1 * k, 0.4 + 0.1 * k, 1, 1));
  Json r10 = replay_report(j10, {}, 10.0, info);
  CHECK(r10["preemption_loss"]["gpu_s"].get<double>() == Approx(0.3));
  CHECK(r10["preemption_loss"]["gpu_s_scaled"].get<double>() == Approx(3));
  CHECK(r10["jct"]["avg_trace_s"].get<double>() == Approx(8.2));
}

TEST_CASE("load report: exact trace times (simulate) are taken as they are", "[load][report]") {
  // Event times are trace times: B waited 90 s; the reconstruction would say
  // the same here, but a job started at another's arrival (not at an end)
  // keeps its true wait only when exact: C arrives at 5, starts at 20 though
  // nothing ended before 20 (a hold, say) -> wait 15.
  std::vector<JobResult> jobs{job(1, 0, 0, 100, 0, 100), job(1, 10, 100, 150, 10, 50),
                              job(1, 5, 20, 30, 5, 10)};
  RunInfo info;
  info.exact_trace_times = true;
  Json r = replay_report(jobs, {}, 1.0, info);
  CHECK(r["queueing_delay"]["max_trace_s"].get<double>() == Approx(90));
  // Trace waits 0, 90, 15 -> avg 35; JCTs 100, 140, 25 -> avg 88.333.
  CHECK(r["queueing_delay"]["avg_trace_s"].get<double>() == Approx(35));
  CHECK(r["jct"]["avg_trace_s"].get<double>() == Approx(88.333).epsilon(0.001));
  CHECK(r["scheduler_delay_ms"]["own"]["max"].get<double>() == Approx(0));
}

TEST_CASE("load report: no job waits longer than 2 x the longest max_runtime ahead of it",
          "[load][report]") {
  // Exact trace times, runtime limit factor 2 (max_runtime = 2 x duration):
  //   A: arrives 0, runs 0-10 (max_runtime 20);
  //   B: arrives 1, runs 10-15: ahead A (not ended at 1) -> bound 40, wait 9: fine;
  //   E: arrives 2, runs 52-53: ahead A and B -> bound 2 x 20 = 40, wait 50: too long;
  //   D: arrives 60, runs 65-70: nothing ahead (all ended) -> bound 0, wait 5: too long.
  std::vector<JobResult> jobs{job(1, 0, 0, 10, 0, 10), job(1, 1, 10, 15, 1, 5),
                              job(1, 2, 52, 53, 2, 1), job(1, 60, 65, 70, 60, 5)};
  RunInfo info;
  info.exact_trace_times = true;
  info.config = Json{{"runtime_limit_factor", 2}};
  Json r = replay_report(jobs, {}, 1.0, info);
  CHECK(r["wait_bound"]["jobs_checked"] == 4);
  CHECK(r["wait_bound"]["violations"] == 2);
  CHECK(r["wait_bound"]["worst_wait_trace_s"].get<double>() == Approx(5));  // no bound at all
  CHECK(r["wait_bound"]["worst_bound_trace_s"].get<double>() == Approx(0));
  // With factor 3, E's bound is 60: only D is left.
  info.config = Json{{"runtime_limit_factor", 3}};
  CHECK(replay_report(jobs, {}, 1.0, info)["wait_bound"]["violations"] == 1);
}

TEST_CASE("load report: the comparison has ratios for the new measures", "[load][report]") {
  RunInfo info;
  std::vector<JobResult> a{job(1, 0, 0, 10, 0, 10), job(4, 0, 10, 30, 0, 20)};
  std::vector<JobResult> b{job(1, 0, 20, 30, 0, 10), job(4, 0, 0, 20, 0, 20)};
  // Waits: a 0 and 10 (max 10); b 20 and 0 (max 20): ratio 0.5.
  // 1-GPU JCT: a 10, b 30: ratio 0.333; 2-4 GPUs: a 30, b 20: 1.5.
  Json c = compare_report(
      {{"x", replay_report(a, {}, 1.0, info)}, {"y", replay_report(b, {}, 1.0, info)}});
  CHECK(c["ratios"]["queueing_max_trace"].get<double>() == Approx(0.5));
  CHECK(c["ratios"]["jct_avg_trace_1gpu"].get<double>() == Approx(0.333));
  CHECK(c["ratios"]["jct_avg_trace_2_4gpu"].get<double>() == Approx(1.5));
  CHECK(c["ratios"]["jct_avg_trace_5_8gpu"].is_null());  // no such job
  std::string table = compare_table(c);
  CHECK(table.find("queueing max (trace s)") != std::string::npos);
  CHECK(table.find("GPU allocation while work waits and fits") != std::string::npos);
}

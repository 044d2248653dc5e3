// Unit tests of troupe-load simulate (load/simulate.hpp): synthetic traces
// whose schedules are worked out by hand in the comments, under Troupe's
// policy and the fifo baselines, with the cluster config's `order: las`.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "load/options.hpp"
#include "load/simulate.hpp"

using namespace troupe::load;
using Approx = Catch::Detail::Approx;

namespace {
struct Trace {
  std::vector<TraceJob> jobs;
  std::vector<FleetFit> fits;
};

// Jobs of (arrival s, GPUs, duration s), in arrival order, shaped on `fleet`.
Trace trace_of(const std::vector<std::tuple<double, int, double>>& rows,
               const std::vector<FleetGroup>& fleet, const std::string& team = "t") {
  Trace t;
  int k = 0;
  for (const auto& [arrival, gpus, duration] : rows) {
    TraceJob j;
    j.id = std::to_string(++k);
    j.arrival_s = arrival;
    j.gpus = gpus;
    j.duration_s = duration;
    j.team = team;
    FleetFit fit = fit_on_fleet(gpus, "", "", fleet);
    REQUIRE(fit.fits);
    j.submit_gpus = fit.shape.total_gpus();
    t.jobs.push_back(j);
    t.fits.push_back(fit);
  }
  return t;
}

Json run(const Trace& t, const std::vector<FleetGroup>& fleet, const std::string& policy,
         const std::string& config_yaml = "") {
  SimulateOptions o;
  o.policy = policy;
  o.fleet = fleet;
  if (!config_yaml.empty()) REQUIRE(troupe::policy::load_config(config_yaml, o.config) == "");
  return simulate(t.jobs, t.fits, o, Json::object());
}

double trace_jct(const Json& r) {
  return r["jct"]["avg_trace_s"].get<double>();
}
}  // namespace

TEST_CASE("load simulate: one job runs at once for its duration", "[load][simulate]") {
  std::vector<FleetGroup> fleet{{"sim", 1, 1}};
  Json r = run(trace_of({{0, 1, 10}}, fleet), fleet, "troupe");
  INFO(r.dump(2));
  CHECK(r["mode"] == "simulate");
  CHECK(r["complete"] == true);
  CHECK(r["states"]["succeeded"] == 1);
  CHECK(trace_jct(r) == Approx(10));
  CHECK(r["jct"]["avg_s"].get<double>() == Approx(10));  // wall = trace (speedup 1)
  CHECK(r["queueing_delay"]["max_trace_s"].get<double>() == Approx(0));
  CHECK(r["makespan_trace_s"].get<double>() == Approx(10));
  CHECK(r["preemptions"] == 0);
  CHECK(r["gpu_allocation"]["mean"].get<double>() > 0.9);  // busy the whole time
}

TEST_CASE("load simulate: two jobs in a row on one GPU", "[load][simulate]") {
  // A (0 s, 10 s) runs 0-10; B arrives at 2 and waits for it: 10-15.
  // JCT: A 10, B 13 -> avg 11.5; waits 0 and 8; makespan 15.
  std::vector<FleetGroup> fleet{{"sim", 1, 1}};
  for (const char* p : {"troupe", "fifo", "fifo-backfill"}) {
    INFO(p);
    Json r = run(trace_of({{0, 1, 10}, {2, 1, 5}}, fleet), fleet, p);
    CHECK(trace_jct(r) == Approx(11.5));
    CHECK(r["queueing_delay"]["avg_trace_s"].get<double>() == Approx(4));
    CHECK(r["queueing_delay"]["max_trace_s"].get<double>() == Approx(8));
    CHECK(r["makespan_trace_s"].get<double>() == Approx(15));
    CHECK(r["config"]["policy"] == p);
    // B waited from 2 to 10 while no GPU was free: allocation while it waited is 1.
    CHECK(r["gpu_allocation"]["while_pending"]["mean"].get<double>() == Approx(1));
    CHECK(r["gpu_allocation"]["while_waiting_fits"]["samples"] == 0);
  }
}

TEST_CASE("load simulate: a gang is not starved by a stream of small jobs", "[load][simulate]") {
  // 2 nodes x 4 GPUs. At 0, eight 1-GPU jobs of 10 s fill the fleet. At 1, a
  // gang of 8 GPUs (2 x 4), 10 s. From 2 to 30, a 1-GPU job of 10 s every
  // second. The gang gets a hold (its reservation from the running jobs'
  // promised ends, 2 x 10 s): a small job may use the held nodes only if
  // it is promised to end before the hold starts (at 20; 2 + 20 > 20: none
  // does). At 10 the eight end and the gang starts: wait 9, JCT 19. A
  // greedy scheduler would start the stream there instead, forever.
  std::vector<FleetGroup> fleet{{"sim", 2, 4}};
  std::vector<std::tuple<double, int, double>> rows;
  for (int i = 0; i < 8; ++i) rows.emplace_back(0, 1, 10);
  rows.emplace_back(1, 8, 10);
  for (int s = 2; s <= 30; ++s) rows.emplace_back(s, 1, 10);
  Trace t = trace_of(rows, fleet);
  for (const char* p : {"troupe", "fifo", "fifo-backfill"}) {
    INFO(p);
    Json r = run(t, fleet, p);
    INFO(r["jct_by_size"].dump());
    CHECK(r["complete"] == true);
    CHECK(r["jct_by_size"][">8"]["count"] == 0);
    CHECK(r["jct_by_size"]["5-8"]["count"] == 1);
    CHECK(r["jct_by_size"]["5-8"]["avg_trace_s"].get<double>() == Approx(19));
  }
  // Under troupe the hold left GPUs idle: none here (the gang's nodes were
  // full until it started), so no reserved-idle GPU-seconds.
  CHECK(run(t, fleet, "troupe")["reserved_idle"]["gpu_s"].get<double>() == Approx(0));
}

TEST_CASE("load simulate: EASY backfill starts a short job that strict fifo holds back",
          "[load][simulate]") {
  // One node of 4 GPUs. A (2 GPUs, 100 s) at 0; B (4 GPUs, 10 s) at 1 waits
  // for A: 100-110. C (2 GPUs, 10 s) at 2: under fifo it waits behind B
  // (110-120, JCT 118); with a reservation for B (at A's promised end, 2 x
  // 100 = 200 s) C is promised to end by 2 + 20 = 22 < 200 and starts at
  // once (JCT 10). B is not delayed: 100-110 in all three.
  std::vector<FleetGroup> fleet{{"sim", 1, 4}};
  Trace t = trace_of({{0, 2, 100}, {1, 4, 10}, {2, 2, 10}}, fleet);
  Json fifo = run(t, fleet, "fifo"), easy = run(t, fleet, "fifo-backfill"),
       troupe = run(t, fleet, "troupe");
  // avg JCT: fifo (100 + 109 + 118) / 3 = 109; backfill (100 + 109 + 10) / 3 = 73.
  CHECK(trace_jct(fifo) == Approx(109));
  CHECK(trace_jct(easy) == Approx(73));
  CHECK(trace_jct(troupe) == Approx(73));
  CHECK(fifo["queueing_delay"]["max_trace_s"].get<double>() == Approx(108));
  CHECK(easy["queueing_delay"]["max_trace_s"].get<double>() == Approx(99));
  // From 1 to 2 and from 12 to 100 the 2 free GPUs are held for B while
  // nothing fits them: reserved-idle 2 x (1 + 88) = 178 GPU-s under EASY
  // (sampled every second); fifo holds nothing.
  CHECK(easy["reserved_idle"]["gpu_s"].get<double>() == Approx(178).margin(2));
  CHECK(fifo["reserved_idle"]["gpu_s"].get<double>() == Approx(0));
}

TEST_CASE("load simulate: order las against fifo on a long-then-short trace", "[load][simulate]") {
  // One GPU. A 16 s job at 0, four 1 s jobs at 1 (the [las] integration
  // test's trace). fifo: 0-16, then 16-17 ... 19-20: JCT 16, 16, 17, 18, 19
  // -> 17.2. las (threshold 3 GPU-s, no promotion): the long job crosses 3
  // GPU-s at 3 and is preempted for the short ones (3-4 ... 6-7), then runs
  // its whole 16 s again (no checkpoint): 7-23. JCT 23, 3, 4, 5, 6 -> 8.2;
  // 3 GPU-s lost.
  std::vector<FleetGroup> fleet{{"sim", 1, 1}};
  Trace t = trace_of({{0, 1, 16}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}}, fleet, "lasdemo");
  auto cfg = [](const std::string& order) {
    return "pools: [{name: sim, gpu_type: sim}]\nteams: [{name: lasdemo, order: " + order +
           "}]\nlas: {thresholds_gpu_s: [3], promote_after_s: 0}\n";
  };
  Json fifo = run(t, fleet, "troupe", cfg("fifo"));
  Json las = run(t, fleet, "troupe", cfg("las"));
  INFO(las.dump(2));
  CHECK(trace_jct(fifo) == Approx(17.2));
  CHECK(fifo["preemptions"] == 0);
  CHECK(trace_jct(las) == Approx(8.2));
  CHECK(las["preemptions"] == 1);
  CHECK(las["preemption_loss"]["attempts"] == 1);
  CHECK(las["preemption_loss"]["gpu_s"].get<double>() == Approx(3));
  CHECK(las["makespan_trace_s"].get<double>() == Approx(23));
  // --resume-on-preempt: the long job checkpoints as it stops and runs only
  // its 13 s left, 7-20: JCT 20, 3, 4, 5, 6 -> 7.6; nothing lost.
  {
    SimulateOptions o;
    o.fleet = fleet;
    o.resume_on_preempt = true;
    REQUIRE(troupe::policy::load_config(cfg("las"), o.config) == "");
    Json resumed = simulate(t.jobs, t.fits, o, Json::object());
    CHECK(trace_jct(resumed) == Approx(7.6));
    CHECK(resumed["preemptions"] == 1);
    CHECK(resumed["simulation"]["preempted_attempts"] == 1);
    CHECK(resumed["preemption_loss"]["attempts"] == 1);
    CHECK(resumed["preemption_loss"]["gpu_s"].get<double>() == Approx(0));
    // The team held the GPU 3 + 13 + 4 x 1 = 20 GPU-s (not the wait between).
    CHECK(resumed["teams"]["lasdemo"]["gpu_s"].get<double>() == Approx(20));
    CHECK(resumed["makespan_trace_s"].get<double>() == Approx(20));
  }
  // The baseline policy never preempts, whatever the team's order.
  Json base = run(t, fleet, "fifo", cfg("las"));
  CHECK(base["preemptions"] == 0);
  CHECK(trace_jct(base) == Approx(17.2));
}

TEST_CASE("load simulate: order sjf puts short declared work first, and its guard promotes",
          "[load][simulate][sjf]") {
  // One GPU. A (100 s) runs from 0; L (1,000 s) arrives at 1, three 10 s jobs
  // at 2, 3, 4. max_runtime_s is 2 x the duration: L declares 2,000 GPU-s
  // (band 11), each short one 20 (band 5).
  //   fifo: A 0-100, L 100-1100, S 1100-1110-1120-1130: JCT 100, 1099, 1108,
  //         1117, 1126 -> 910.
  //   sjf:  A 0-100, S 100-110-120-130, L 130-1130: JCT 100, 108, 117, 126,
  //         1129 -> 316.
  //   sjf, promote_after_s 50: L is in band 0 from 51, ahead of the short
  //         ones (it came first): fifo's order again -> 910.
  std::vector<FleetGroup> fleet{{"sim", 1, 1}};
  Trace t = trace_of({{0, 1, 100}, {1, 1, 1000}, {2, 1, 10}, {3, 1, 10}, {4, 1, 10}}, fleet, "u");
  auto cfg = [](const std::string& order, const std::string& sjf) {
    return "pools: [{name: sim, gpu_type: sim}]\nteams: [{name: u, order: " + order + "}]\n" + sjf;
  };
  Json fifo = run(t, fleet, "troupe", cfg("fifo", ""));
  Json sjf = run(t, fleet, "troupe", cfg("sjf", "sjf: {promote_after_s: 0}\n"));
  Json guarded = run(t, fleet, "troupe", cfg("sjf", "sjf: {promote_after_s: 50}\n"));
  INFO(sjf.dump(2));
  CHECK(trace_jct(fifo) == Approx(910));
  CHECK(trace_jct(sjf) == Approx(316));
  CHECK(trace_jct(guarded) == Approx(910));
  CHECK(sjf["preemptions"] == 0);  // sjf never preempts
  CHECK(sjf["jct"]["no_wait_avg_trace_s"].get<double>() == Approx(226));
}

TEST_CASE("load simulate: deterministic, and a job the config refuses is counted",
          "[load][simulate]") {
  std::vector<FleetGroup> fleet{{"sim", 2, 4}};
  std::vector<std::tuple<double, int, double>> rows;
  for (int i = 0; i < 40; ++i) rows.emplace_back(i * 0.5, 1 + (i * 7) % 8, 3 + (i * 13) % 17);
  Trace t = trace_of(rows, fleet);
  Json a = run(t, fleet, "troupe"), b = run(t, fleet, "troupe");
  CHECK(a.dump() == b.dump());
  CHECK(a["complete"] == true);
  // Team t is not in this config: every job is refused at admission.
  Json refused =
      run(t, fleet, "troupe", "pools: [{name: sim, gpu_type: sim}]\nteams: [{name: x}]\n");
  CHECK(refused["rejected"] == 40);
  CHECK(refused["placed"] == 0);
}

TEST_CASE("load simulate: the command line", "[load][simulate]") {
  std::string path = "/tmp/troupe-load-simulate-test.csv";
  std::ofstream(path) << "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
                      << "1,1,0,1,m,10,0\n";
  auto parse = [](std::vector<const char*> args) {
    args.insert(args.begin(), "troupe-load");
    return parse_command_line(static_cast<int>(args.size()), args.data(), Environment{});
  };
  Command c = parse({"simulate", path.c_str(), "--fleet", "a100:2x8,t4:4x2", "--policy",
                     "fifo-backfill,troupe", "--limit", "5", "--skip-idle", "--seed", "7",
                     "--resume-on-preempt"});
  REQUIRE(c.kind == Command::run_simulate);
  CHECK(c.replay.policies == std::vector<std::string>{"fifo-backfill", "troupe"});
  CHECK(c.replay.fleet.size() == 2);
  CHECK(c.replay.limit == 5);
  CHECK(c.replay.skip_idle);
  CHECK(c.replay.seed == 7);
  CHECK(c.replay.resume_on_preempt);
  Command d = parse({"simulate", path.c_str(), "--compare"});
  REQUIRE(d.kind == Command::run_simulate);
  CHECK(d.replay.policies == std::vector<std::string>{"troupe", "fifo"});
  CHECK_FALSE(d.replay.resume_on_preempt);
  CHECK(d.replay.fleet == std::vector<FleetGroup>{{"sim", 16, 8}});
  CHECK(parse({"simulate", path.c_str(), "--policy", "sjf"}).exit_code == 2);
  CHECK(parse({"simulate", path.c_str(), "--fleet", "a:1x8", "--nodes", "3"}).exit_code == 2);
  CHECK(parse({"simulate", path.c_str(), "--idle-gap-s", "5"}).exit_code == 2);
}

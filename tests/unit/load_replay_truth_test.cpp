// Unit tests of the replay's honesty fixes (issue 16, item 5), each on small
// synthetic inputs whose right answers are worked out by hand in the
// comments: the runtime limit, trace time kept apart from wall time in the
// report, fractional GPU counts, censored jobs, RFC 4180 CSV and --skip-idle.
#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "load/jobspec.hpp"
#include "load/options.hpp"
#include "load/report.hpp"
#include "load/trace.hpp"

using namespace troupe::load;
using Approx = Catch::Detail::Approx;

namespace {
TraceParse parse(const std::string& text, TraceFormat f = TraceFormat::tiresias) {
  std::istringstream in(text);
  return parse_trace(in, f, "dflt");
}

std::vector<CsvRecord> records(const std::string& text) {
  std::istringstream in(text);
  CsvReader reader(in);
  std::vector<CsvRecord> out;
  CsvRecord r;
  while (reader.next(r)) out.push_back(r);
  return out;
}

// A replayed job: wall times in ms (-1: none), trace arrival and duration in s.
JobResult replayed(int64_t sent_ms, int64_t running_ms, int64_t end_ms, const std::string& state,
                   double arrival_s, double duration_s, bool censored = false) {
  JobResult r;
  r.team = "t";
  r.gpus = 1;
  r.job_id = "j-" + std::to_string(sent_ms);
  auto ns = [](int64_t ms) { return ms < 0 ? -1 : ms * 1000000; };
  r.sent_ns = ns(sent_ms);
  r.acked_ns = ns(sent_ms + 1);
  r.placed_ns = ns(running_ms);
  r.running_ns = ns(running_ms);
  r.ended_ns = ns(end_ms);
  r.final_state = state;
  r.trace_arrival_s = arrival_s;
  r.trace_duration_s = duration_s;
  r.censored = censored;
  return r;
}

Command parse_args(std::vector<const char*> args) {
  args.insert(args.begin(), "troupe-load");
  return parse_command_line(static_cast<int>(args.size()), args.data(), Environment{});
}
}  // namespace

TEST_CASE("load replay: max_runtime is factor x trace duration / speedup, no margin",
          "[load][replay]") {
  // 600 trace s x 2 / 100 = 12 s.
  CHECK(runtime_limit_s(600, 2, 100) == 12);
  // 100 x 3 / 7 = 42.86 -> 43 (rounded up).
  CHECK(runtime_limit_s(100, 3, 7) == 43);
  // 10 x 2 / 100 = 0.2 -> 1 (at least 1 s).
  CHECK(runtime_limit_s(10, 2, 100) == 1);
  CHECK(runtime_limit_s(0, 2, 100) == 1);
  // Exactly whole: 60 x 2.5 / 1 = 150, not 151.
  CHECK(runtime_limit_s(60, 2.5, 1) == 150);
  // The old rule gave 2 x 36 + 60 = 132 s for 3600 trace s at speedup 100.
  CHECK(runtime_limit_s(3600, 2, 100) == 72);
  // A run raised to --min-duration-s 5 gets 2 x 5 = 10 s, not 1.
  CHECK(runtime_limit_s(10, 2, 100, 5) == 10);

  const char* trace = "/work/shared/traces/tiresias-60job/60_job.csv";
  auto d = parse_args({"replay", trace});
  REQUIRE(d.kind == Command::run_replay);
  CHECK(d.replay.runtime_limit_factor == 2);
  CHECK_FALSE(d.replay.skip_idle);
  auto c = parse_args(
      {"replay", trace, "--runtime-limit-factor", "3", "--skip-idle", "--idle-gap-s", "600"});
  REQUIRE(c.kind == Command::run_replay);
  CHECK(c.replay.runtime_limit_factor == 3);
  CHECK(c.replay.skip_idle);
  CHECK(c.replay.idle_gap_s == 600);
  // A factor below 1 would kill every job.
  CHECK(parse_args({"replay", trace, "--runtime-limit-factor", "0.5"}).exit_code != 0);
  CHECK(parse_args({"replay", trace, "--idle-gap-s", "600"}).exit_code == 2);
}

TEST_CASE("load replay: trace-time waits come from trace quantities, not wall x speedup",
          "[load][replay][report]") {
  // Speedup 10, one GPU's worth of jobs in a row:
  //   A: arrives 0, runs 100 trace s; wall: sent 0, running 500 ms (500 ms of
  //      scheduler latency), ended 10.5 s.
  //   B: arrives 10, runs 50; sent 1 s, running 10.6 s (after A ended at
  //      10.5 s), ended 15.6 s.
  //   C: arrives 200, runs 20, censored; sent 20 s, running 20.3 s, ended 22.3 s.
  // Trace timeline: A starts 0, ends 100. B: A ended (wall) before B ran, so
  // B starts at max(10, 100) = 100, waits 90, ends 150. C: B ended before, so
  // C starts at max(200, 150) = 200, waits 0, ends 220.
  std::vector<JobResult> jobs = {
      replayed(0, 500, 10500, "succeeded", 0, 100),
      replayed(1000, 10600, 15600, "succeeded", 10, 50),
      replayed(20000, 20300, 22300, "succeeded", 200, 20, true),
  };
  auto tl = trace_timeline(jobs, 10);
  REQUIRE(tl.size() == 3);
  CHECK(tl[0].start_s == Approx(0));
  CHECK(tl[1].start_s == Approx(100));
  CHECK(tl[1].wait_s == Approx(90));
  CHECK(tl[1].end_s == Approx(150));
  CHECK(tl[2].wait_s == Approx(0));
  CHECK(tl[2].end_s == Approx(220));

  RunInfo info;
  info.complete = true;
  Json r = replay_report(jobs, {}, 10.0, info);
  // JCT: C is censored, so only A and B. Wall: 10.5 and 14.6 s.
  CHECK(r["censored"] == 1);
  CHECK(r["jct"]["count"] == 2);
  CHECK(r["jct"]["censored_left_out"] == 1);
  CHECK(r["jct"]["avg_s"].get<double>() == Approx((10.5 + 14.6) / 2));
  // Trace: A 0 + 100, B 90 + 50 -> avg 120 (wall x 10 would say 125.5).
  CHECK(r["jct"]["count_trace"] == 2);
  CHECK(r["jct"]["avg_trace_s"].get<double>() == Approx(120));
  // p99 between 100 and 140: 100 + 0.99 x 40.
  CHECK(r["jct"]["p99_trace_s"].get<double>() == Approx(139.6));
  // Had neither waited: A 100, B 50 -> the bound is 75 (C censored, left out).
  CHECK(r["jct"]["no_wait_avg_trace_s"].get<double>() == Approx(75));
  CHECK(r["jct"]["no_wait_p99_trace_s"].get<double>() == Approx(99.5));
  // Queueing: wall 0.5, 9.6, 0.3 s; trace 0, 90, 0 (wall x 10 would say 34.67).
  CHECK(r["queueing_delay"]["avg_s"].get<double>() == Approx(3.467).epsilon(0.001));
  CHECK(r["queueing_delay"]["avg_ms"].get<double>() == Approx(3466.667).epsilon(0.0001));
  CHECK(r["queueing_delay"]["avg_trace_s"].get<double>() == Approx(30));
  // The scheduler's own delay, wall ms: 500, 9600 - 90 / 10 x 1000 = 600, 300.
  CHECK(r["scheduler_delay_ms"]["own"]["count"] == 3);
  CHECK(r["scheduler_delay_ms"]["own"]["mean"].get<double>() == Approx(466.667).epsilon(0.0001));
  CHECK(r["scheduler_delay_ms"]["own"]["max"].get<double>() == Approx(600));
  CHECK(r["scheduler_delay_ms"]["submit_to_ack"]["max"].get<double>() == Approx(1));
  CHECK(r["scheduler_delay_ms"]["submit_to_running"]["max"].get<double>() == Approx(9600));
  // Makespan: wall 22.3 s; trace: the latest trace end, 220 (not 223).
  CHECK(r["makespan_s"].get<double>() == Approx(22.3));
  CHECK(r["makespan_trace_s"].get<double>() == Approx(220));
  // GPU time in trace seconds: 1 x (100 + 50 + 20).
  CHECK(r["teams"]["t"]["gpu_trace_s"].get<double>() == Approx(170));
}

TEST_CASE("load replay: a job that failed early frees its GPUs early in trace time",
          "[load][replay][report]") {
  // Speedup 10. X: arrives 0, 30 trace s, running 0 ms, ended 3 s. Y: arrives
  // 0, 100 trace s, running 100 ms, failed at 2.1 s (a 2 s run = 20 trace s):
  // Y ends at 0 + min(100, 20) = 20. Z: arrives 5, 10 trace s, running 2.2 s:
  // only Y ended before, so Z starts at 20 and waits 15. W has no trace data.
  std::vector<JobResult> jobs = {
      replayed(0, 0, 3000, "succeeded", 0, 30),
      replayed(0, 100, 2100, "failed", 0, 100),
      replayed(500, 2200, 3200, "succeeded", 5, 10),
      replayed(0, 10, 20, "succeeded", -1, -1),
  };
  auto tl = trace_timeline(jobs, 10);
  CHECK(tl[1].end_s == Approx(20));
  CHECK(tl[2].start_s == Approx(20));
  CHECK(tl[2].wait_s == Approx(15));
  CHECK_FALSE(tl[3].known);
  // Trace JCT of the jobs that succeeded with trace data: X 30, Z 15 + 10.
  RunInfo info;
  Json r = replay_report(jobs, {}, 10.0, info);
  CHECK(r["jct"]["count_trace"] == 2);
  CHECK(r["jct"]["avg_trace_s"].get<double>() == Approx((30 + 25) / 2.0));
  // Without waiting: X 30, Z 10 (Y failed, W has no trace data).
  CHECK(r["jct"]["no_wait_avg_trace_s"].get<double>() == Approx(20));
}

TEST_CASE("load replay: fractional GPU counts are kept and rounded up when submitted",
          "[load][replay][trace]") {
  CHECK(gpus_to_submit(0) == 0);
  CHECK(gpus_to_submit(0.25) == 1);
  CHECK(gpus_to_submit(0.5) == 1);
  CHECK(gpus_to_submit(1) == 1);
  CHECK(gpus_to_submit(1.2) == 2);
  CHECK(gpus_to_submit(2.5) == 3);
  CHECK(gpus_to_submit(8.0000001) == 8);
  CHECK(gpus_rounded(0.5));
  CHECK(gpus_rounded(2.5));
  CHECK_FALSE(gpus_rounded(1));
  CHECK_FALSE(gpus_rounded(8));

  // A fractional num_gpu is read as it is (it used to be dropped below 1 and
  // rounded to nearest above).
  auto r = parse(
      "job_id,num_gpu,submit_time,duration\n"
      "a,0.5,0,10\n"
      "b,2.5,1,10\n"
      "c,1,2,10\n"
      "d,0,3,10\n");
  REQUIRE(r.error.empty());
  REQUIRE(r.jobs.size() == 3);
  CHECK(r.jobs[0].gpus == Approx(0.5));
  CHECK(r.jobs[1].gpus == Approx(2.5));
  CHECK(r.zero_gpu == 1);
  CHECK(r.bad == 0);
  CHECK(r.skipped == 1);

  // gpu_milli: thousandths of a GPU, times num_gpu when there is one.
  auto m = parse(
      "job_id,num_gpu,gpu_milli,submit_time,duration\n"
      "p,1,500,0,10\n"
      "q,2,1000,1,10\n"
      "r,1,250,2,10\n"
      "s,0,0,3,10\n");
  REQUIRE(m.error.empty());
  REQUIRE(m.jobs.size() == 3);
  CHECK(m.jobs[0].gpus == Approx(0.5));
  CHECK(m.jobs[1].gpus == Approx(2));
  CHECK(m.jobs[2].gpus == Approx(0.25));
  CHECK(m.zero_gpu == 1);
  // gpu_milli alone stands for num_gpu.
  auto alone = parse("job_id,gpu_milli,submit_time,duration\nx,1500,0,10\n");
  REQUIRE(alone.error.empty());
  REQUIRE(alone.jobs.size() == 1);
  CHECK(alone.jobs[0].gpus == Approx(1.5));
}

TEST_CASE("load replay: censored jobs are flagged and their missing durations filled",
          "[load][replay][trace]") {
  // Trace end = the latest arrival + duration: max(0 + 100, 60 + 30) = 100.
  auto r = parse(
      "job_id,num_gpu,submit_time,duration,status\n"
      "0,1,0,100,Pass\n"
      "1,1,50,,Running\n"
      "2,1,60,30,RUNNING\n"
      "3,1,70,x,Pass\n"
      "4,1,80,nan,pending\n");
  REQUIRE(r.error.empty());
  REQUIRE(r.jobs.size() == 4);
  CHECK_FALSE(r.jobs[0].censored);
  CHECK(r.jobs[1].censored);
  CHECK(r.jobs[1].duration_s == Approx(50));  // 100 - 50
  CHECK(r.jobs[2].censored);
  CHECK(r.jobs[2].duration_s == Approx(30));  // kept: what it ran so far
  CHECK(r.jobs[3].id == "4");
  CHECK(r.jobs[3].censored);
  CHECK(r.jobs[3].duration_s == Approx(20));  // 100 - 80
  CHECK(r.censored == 3);
  CHECK(r.bad == 1);  // "x" is not a duration
  CHECK(r.bad_lines == std::vector<size_t>{5});

  // An end-time column left empty marks the job unfinished.
  auto e = parse(
      "job_id,num_gpu,submit_time,duration,end_time\n"
      "0,1,0,100,100\n"
      "1,1,10,20,\n");
  REQUIRE(e.jobs.size() == 2);
  CHECK_FALSE(e.jobs[0].censored);
  CHECK(e.jobs[1].censored);
  CHECK(e.jobs[1].duration_s == Approx(20));
  CHECK(e.censored == 1);
}

TEST_CASE("load replay: CSV records follow RFC 4180", "[load][replay][csv]") {
  auto r = records(
      "a,\"b,c\",\"say \"\"hi\"\"\"\r\n"
      "1,2,3\n"
      "\"multi\nline\",x,y\n"
      "\n"
      "last,,");
  REQUIRE(r.size() == 5);
  CHECK(r[0].fields == std::vector<std::string>{"a", "b,c", "say \"hi\""});
  CHECK(r[0].line == 1);
  CHECK(r[0].ok);
  CHECK(r[1].fields == std::vector<std::string>{"1", "2", "3"});
  CHECK(r[1].line == 2);
  CHECK(r[2].fields == std::vector<std::string>{"multi\nline", "x", "y"});
  CHECK(r[2].line == 3);
  CHECK(r[3].fields == std::vector<std::string>{""});
  CHECK(r[3].line == 5);
  CHECK(r[4].fields == std::vector<std::string>{"last", "", ""});
  CHECK(r[4].line == 6);

  // A stray quote, text after a closing quote, a quote left open.
  auto bad = records("ab\"c,d\n\"ab\"c,d\nok,1\n\"open,x\n");
  REQUIRE(bad.size() == 4);
  CHECK_FALSE(bad[0].ok);
  CHECK_FALSE(bad[1].ok);
  CHECK(bad[2].ok);
  CHECK(bad[2].fields == std::vector<std::string>{"ok", "1"});
  CHECK_FALSE(bad[3].ok);

  // In a trace: a quoted model name with a comma and quotes is read; a row
  // with a stray quote and a row with a missing field are counted as bad,
  // with their line numbers, and the rows after them are still read.
  auto t = parse(
      "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\r\n"
      "0,1,0,606,\"vgg19, big\",164,30\r\n"
      "1,2,30,133,\"say \"\"x\"\"\",147,23\r\n"
      "2,1,40,1,m\"x,5,1\r\n"
      "3,1,50,1,m,5\r\n"
      "4,1,60,1,m,5,1\n");
  REQUIRE(t.error.empty());
  REQUIRE(t.jobs.size() == 3);
  CHECK(t.jobs[0].duration_s == 164);
  CHECK(t.jobs[1].gpus == 2);
  CHECK(t.jobs[1].duration_s == 147);
  CHECK(t.jobs[2].id == "4");
  CHECK(t.bad == 2);
  CHECK(t.skipped == 2);
  CHECK(t.bad_lines == std::vector<size_t>{4, 5});
}

TEST_CASE("load replay: --skip-idle shortens idle stretches to the gap kept",
          "[load][replay][trace]") {
  auto job = [](double arrival, double gpus, double duration) {
    TraceJob j;
    j.arrival_s = arrival;
    j.gpus = gpus;
    j.duration_s = duration;
    return j;
  };
  // 8 GPUs. J1 (8 GPUs, 0..100) is done by 100; J2 arrives at 10000: idle
  // for 9900 > 3600, so 6300 s go and J2 arrives at 3700. J3 (10100) moves
  // by the same 6300 to 3800; its gap (50 s after J2's end) stays.
  std::vector<TraceJob> a = {job(0, 8, 100), job(10000, 1, 50), job(10100, 1, 10)};
  IdleSkip s = skip_idle(a, 3600, 8, 8);
  CHECK(s.gaps == 1);
  CHECK(s.removed_s == Approx(6300));
  CHECK(a[0].arrival_s == 0);
  CHECK(a[1].arrival_s == Approx(3700));
  CHECK(a[2].arrival_s == Approx(3800));

  // The fleet's capacity counts: two 8-GPU jobs of 1000 s on 8 GPUs cannot
  // both be done before 2000 s, so K3 (6000) waits 4000 > 3600 and moves by
  // 400 (by 1400 if each job started at once).
  std::vector<TraceJob> b = {job(0, 8, 1000), job(0, 8, 1000), job(6000, 1, 10)};
  IdleSkip sb = skip_idle(b, 3600, 8, 8);
  CHECK(sb.gaps == 1);
  CHECK(sb.removed_s == Approx(400));
  CHECK(b[2].arrival_s == Approx(5600));

  // A 12-GPU job on 8-GPU nodes takes 16 GPUs: 16 x 100 on a 16-GPU fleet is
  // done by 100; the next arrival at 200 is within a gap of 50? No: 100 > 50,
  // so it moves by 50 to 150.
  std::vector<TraceJob> c = {job(0, 12, 100), job(200, 1, 1)};
  IdleSkip sc = skip_idle(c, 50, 16, 8);
  CHECK(sc.gaps == 1);
  CHECK(c[1].arrival_s == Approx(150));
  // On an 8-GPU fleet the same work drains by 200: nothing to skip.
  std::vector<TraceJob> c8 = {job(0, 12, 100), job(200, 1, 1)};
  CHECK(skip_idle(c8, 50, 8, 8).gaps == 0);
  CHECK(c8[1].arrival_s == Approx(200));

  // Off (a negative gap): nothing moves.
  std::vector<TraceJob> d = {job(0, 1, 1), job(100000, 1, 1)};
  CHECK(skip_idle(d, -1, 8, 8).gaps == 0);
  CHECK(d[1].arrival_s == 100000);
}

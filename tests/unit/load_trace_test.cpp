// Unit tests of troupe-load's trace readers on real lines of each trace in
// /work/shared/traces (copied here, so the tests need no files), the arrival
// ordering, team names from paths and the GPUs-to-gang mapping; plus, when
// the shared traces are present, a whole-file read of each.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "load/trace.hpp"

using namespace troupe::load;
using Approx = Catch::Detail::Approx;

namespace {
TraceParse parse(const std::string& text, TraceFormat f, const std::string& team = "dflt") {
  std::istringstream in(text);
  return parse_trace(in, f, team);
}
}  // namespace

TEST_CASE("load trace: chronus (minutes, user = team, 0-GPU rows skipped)", "[load][trace]") {
  auto r = parse(
      "job_id,user,num_gpu,submit_time,iterations,model_name,duration,interval,expect_time_list,"
      "expect_value_list,best_effort,job_type\n"
      "0,vc_6214e9,1,8555,5049,vgg16,747,14,1105,10,0,strict\n"
      "1,vc_ed69ec,1,832,296,mobilenet_v2,98,8,128,10,0,strict\n"
      "195,vc_0e4a51,0,12134,8081,inception_v3,65,8,166,10,0,strict\n"
      "2,vc_ee9e8c,1,14341,3621,alexnet,30,17,14341,10,1,best\n",
      TraceFormat::chronus);
  REQUIRE(r.error.empty());
  CHECK(r.skipped == 1);
  REQUIRE(r.jobs.size() == 3);
  CHECK(r.jobs[0].id == "0");
  CHECK(r.jobs[0].team == "vc_6214e9");
  CHECK(r.jobs[0].gpus == 1);
  CHECK(r.jobs[0].arrival_s == Approx(8555 * 60.0));
  CHECK(r.jobs[0].duration_s == Approx(747 * 60.0));
  CHECK(r.jobs[2].team == "vc_ee9e8c");
  // Rows are not sorted by arrival in chronus files: order_trace sorts.
  order_trace(r.jobs, 0);
  CHECK(r.jobs[0].id == "1");
  CHECK(r.jobs[0].arrival_s == 0);
  CHECK(r.jobs[1].arrival_s == Approx((8555 - 832) * 60.0));
}

TEST_CASE("load trace: elasticflow raw and testbed files (seconds, no team)", "[load][trace]") {
  auto raw = parse(
      "job_id,submission_time,duration,num_gpu\n"
      "965d744f-0445-c1a8-12af-97e4c536c66e,1932025,2429,64\n"
      "fb10987f-20ac-3703-eb67-146a77a6e17c,2000581,1532,1",  // no trailing newline
      TraceFormat::elasticflow, "cluster01");
  REQUIRE(raw.error.empty());
  REQUIRE(raw.jobs.size() == 2);
  CHECK(raw.jobs[0].id == "965d744f-0445-c1a8-12af-97e4c536c66e");
  CHECK(raw.jobs[0].gpus == 64);
  CHECK(raw.jobs[0].duration_s == 2429);
  CHECK(raw.jobs[1].arrival_s == 2000581);
  CHECK(raw.jobs[1].team == "cluster01");

  auto testbed = parse(
      "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration\r\n"
      "bdd640fb-0667-1ad1-1c80-317fa3b1799d,3715485,3249,deepspeech2,3716178,32,1,1075\r\n"
      "23b8c1e9-3924-56de-3eb1-3b9046685257,3717550,48266,inception3,3720405,64,8,3604\r\n",
      TraceFormat::elasticflow, "195job");
  REQUIRE(testbed.error.empty());
  REQUIRE(testbed.jobs.size() == 2);
  CHECK(testbed.jobs[1].gpus == 8);
  CHECK(testbed.jobs[1].duration_s == 3604);
  order_trace(testbed.jobs, 0);
  CHECK(testbed.jobs[1].arrival_s == Approx(3717550 - 3715485));
}

TEST_CASE("load trace: muri (milliseconds)", "[load][trace]") {
  auto r = parse(
      "job_id,num_gpu,submit_time,iterations,model_name,batch_size,duration,interval,"
      "iteration_time,resource_time_0,resource_time_1,resource_time_2,priority\n"
      "0,1,0,5853661,dqn,128,2868294000,46122000,490,446,8,0,1\n"
      "1,8,201694000,8787693,dqn,128,4472936000,201694000,509,435,8,0.5,0\n",
      TraceFormat::muri, "trace1");
  REQUIRE(r.error.empty());
  REQUIRE(r.jobs.size() == 2);
  CHECK(r.jobs[0].duration_s == Approx(2868294.0));
  CHECK(r.jobs[1].arrival_s == Approx(201694.0));
  CHECK(r.jobs[1].gpus == 8);
  CHECK(r.jobs[1].team == "trace1");
}

TEST_CASE("load trace: tiresias (seconds)", "[load][trace]") {
  auto r = parse(
      "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
      "0,1,0,606,vgg19,164,30\n"
      "1,8,30,133,vgg11,147,23\n"
      "2,2,53,157,inception4,127,26\n",
      TraceFormat::tiresias, "60_job");
  REQUIRE(r.error.empty());
  REQUIRE(r.jobs.size() == 3);
  CHECK(r.jobs[1].arrival_s == 30);
  CHECK(r.jobs[1].duration_s == 147);
  CHECK(r.jobs[2].gpus == 2);
  CHECK(r.jobs[0].team == "60_job");
  order_trace(r.jobs, 2);
  CHECK(r.jobs.size() == 2);
}

TEST_CASE("load trace: a wrong format is refused by its header", "[load][trace]") {
  auto r = parse("job_id,submission_time,duration,num_gpu\nx,1,2,3\n", TraceFormat::chronus);
  CHECK_FALSE(r.error.empty());
  auto e = parse("", TraceFormat::tiresias);
  CHECK_FALSE(e.error.empty());
  auto bad = parse("job_id,num_gpu,submit_time,duration\n1,x,0,1\n2,1,0,-5\n3,1,0,4\n",
                   TraceFormat::tiresias);
  CHECK(bad.skipped == 2);
  CHECK(bad.jobs.size() == 1);
}

TEST_CASE("load trace: teams from paths, gangs from GPU counts", "[load][trace]") {
  CHECK(team_from_path("/work/shared/traces/tiresias-60job/60_job.csv") == "60_job");
  CHECK(team_from_path("raw/cluster01.csv") == "cluster01");
  CHECK(team_from_path("weird name.v2.csv") == "weird_name_v2");
  CHECK(parse_trace_format("muri") == TraceFormat::muri);
  CHECK_FALSE(parse_trace_format("philly"));

  CHECK(shape_for(1, 8).workers == 1);
  CHECK(shape_for(1, 8).gpus_per_worker == 1);
  CHECK(shape_for(8, 8).workers == 1);
  CHECK(shape_for(8, 8).gpus_per_worker == 8);
  CHECK(shape_for(12, 8).workers == 2);
  CHECK(shape_for(12, 8).gpus_per_worker == 8);
  CHECK(shape_for(12, 8).total_gpus() == 16);
  CHECK(shape_for(64, 8).workers == 8);
  CHECK(shape_for(16, 4).workers == 4);
}

TEST_CASE("load trace: the shared trace files read whole", "[load][trace][files]") {
  const std::string dir = "/work/shared/traces";
  struct Case {
    std::string path;
    TraceFormat format;
    size_t min_jobs;
  };
  for (const Case& c : {Case{dir + "/tiresias-60job/60_job.csv", TraceFormat::tiresias, 60},
                        Case{dir + "/muri-philly/trace3.csv", TraceFormat::muri, 992},
                        Case{dir + "/elasticflow-itp/195job.csv", TraceFormat::elasticflow, 195},
                        Case{dir + "/elasticflow-itp/raw/cluster10.csv", TraceFormat::elasticflow,
                             260},
                        Case{dir + "/chronus-philly/trace_job_Philly_MIX1.csv",
                             TraceFormat::chronus, 30000}}) {
    if (!std::filesystem::exists(c.path)) {
      WARN("skipped (absent): " << c.path);
      continue;
    }
    std::ifstream f(c.path);
    auto r = parse_trace(f, c.format, team_from_path(c.path));
    INFO(c.path);
    CHECK(r.error.empty());
    CHECK(r.jobs.size() >= c.min_jobs);
    order_trace(r.jobs, 0);
    CHECK(r.jobs.front().arrival_s == 0);
    for (size_t i = 1; i < r.jobs.size(); ++i) REQUIRE(r.jobs[i - 1].arrival_s <= r.jobs[i].arrival_s);
    if (c.format == TraceFormat::chronus) {
      CHECK(r.skipped > 0);  // the 0-GPU rows
      CHECK(r.skipped < r.jobs.size() / 50);
    }
  }
}

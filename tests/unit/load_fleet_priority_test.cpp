// Unit tests of the replay's heterogeneous fleets (--fleet TYPE:NxG,...) and
// of the trace priority columns mapped to priority classes (issue 16, item 5).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "load/jobspec.hpp"
#include "load/options.hpp"
#include "load/trace.hpp"

using namespace troupe::load;

namespace {
TraceParse parse(const std::string& text, TraceFormat f = TraceFormat::tiresias) {
  std::istringstream in(text);
  return parse_trace(in, f, "dflt");
}

Command parse_args(std::vector<const char*> args) {
  args.insert(args.begin(), "troupe-load");
  return parse_command_line(static_cast<int>(args.size()), args.data(), Environment{});
}

// The error parse_fleet gives for `text` ("" when it parses).
std::string fleet_error(const std::string& text) {
  std::string why;
  auto f = parse_fleet(text, &why);
  if (f) return "";
  CHECK_FALSE(why.empty());
  return why;
}
}  // namespace

TEST_CASE("load fleet: --fleet text parses into groups", "[load][fleet]") {
  std::string why;
  auto f = parse_fleet("a100:40x8,t4:100x2", &why);
  REQUIRE(f);
  REQUIRE(f->size() == 2);
  CHECK((*f)[0] == FleetGroup{"a100", 40, 8});
  CHECK((*f)[1] == FleetGroup{"t4", 100, 2});
  CHECK(fleet_nodes(*f) == 140);
  CHECK(fleet_gpus(*f) == 40 * 8 + 100 * 2);

  auto one = parse_fleet("sim:1x1", &why);
  REQUIRE(one);
  CHECK(*one == std::vector<FleetGroup>{{"sim", 1, 1}});
  auto dashed = parse_fleet("v100-32g:3x4,a_100:1x8", &why);
  REQUIRE(dashed);
  CHECK((*dashed)[0].gpu_type == "v100-32g");
  CHECK((*dashed)[1].gpu_type == "a_100");
}

TEST_CASE("load fleet: bad --fleet text is refused with a clear error", "[load][fleet]") {
  CHECK(fleet_error("").find("at least one group") != std::string::npos);
  CHECK(fleet_error("a100:40,t4:100x2").find("no 'x'") != std::string::npos);
  CHECK(fleet_error("a100-40x8").find("no ':'") != std::string::npos);
  CHECK(fleet_error(":40x8").find("no GPU type") != std::string::npos);
  CHECK(fleet_error("a100:0x8").find("node count '0'") != std::string::npos);
  CHECK(fleet_error("a100:4x0").find("GPUs per node '0'") != std::string::npos);
  CHECK(fleet_error("a100:x8").find("node count ''") != std::string::npos);
  CHECK(fleet_error("a100:4x").find("GPUs per node ''") != std::string::npos);
  CHECK(fleet_error("a100:-4x8").find("node count '-4'") != std::string::npos);
  CHECK(fleet_error("a100:4.5x8").find("node count '4.5'") != std::string::npos);
  CHECK(fleet_error("a100:4x2048").find("1 to 1024") != std::string::npos);
  CHECK(fleet_error("a100:2000000x8").find("1 to 1000000") != std::string::npos);
  CHECK(fleet_error("a100:4x8x2").find("GPUs per node '8x2'") != std::string::npos);
  // Types are subject tokens: they go into the node names.
  CHECK(fleet_error("a.100:4x8").find("GPU type 'a.100'") != std::string::npos);
  CHECK(fleet_error("a 100:4x8").find("GPU type 'a 100'") != std::string::npos);
  CHECK(fleet_error("a*:4x8").find("GPU type 'a*'") != std::string::npos);
  // Duplicates and empty groups.
  CHECK(fleet_error("a100:4x8,t4:2x2,a100:1x8").find("given twice") != std::string::npos);
  CHECK(fleet_error("a100:4x8,").find("empty group") != std::string::npos);
  CHECK(fleet_error("a100:4x8,,t4:1x2").find("empty group") != std::string::npos);
}

TEST_CASE("load fleet: --fleet on the replay command line", "[load][fleet]") {
  auto c = parse_args({"replay", "--fleet", "a100:40x8,t4:100x2", __FILE__});
  REQUIRE(c.kind == Command::run_replay);
  CHECK(c.replay.fleet_given);
  CHECK(c.replay.fleet == std::vector<FleetGroup>{{"a100", 40, 8}, {"t4", 100, 2}});
  CHECK(c.replay.nodes == 140);

  auto plain = parse_args({"replay", "--nodes", "3", "--gpus-per-node", "4", __FILE__});
  REQUIRE(plain.kind == Command::run_replay);
  CHECK_FALSE(plain.replay.fleet_given);
  CHECK(plain.replay.fleet == std::vector<FleetGroup>{{"sim", 3, 4}});

  for (const char* other : {"--nodes", "--gpus-per-node", "--gpu-type"}) {
    auto both = parse_args({"replay", "--fleet", "a100:4x8", other, "2", __FILE__});
    CHECK(both.kind == Command::exit_now);
    CHECK(both.exit_code == 2);
    CHECK(both.message.find("leave out --nodes") != std::string::npos);
  }
  auto bad = parse_args({"replay", "--fleet", "a100:4", __FILE__});
  CHECK(bad.kind == Command::exit_now);
  CHECK(bad.exit_code == 2);
  CHECK(bad.message.find("--fleet: group 'a100:4': no 'x'") != std::string::npos);

  auto noprio = parse_args({"replay", "--ignore-priority", __FILE__});
  REQUIRE(noprio.kind == Command::run_replay);
  CHECK(noprio.replay.ignore_priority);
}

TEST_CASE("load fleet: jobs are shaped for the group of their GPU type", "[load][fleet]") {
  const std::vector<FleetGroup> fleet{{"a100", 2, 8}, {"t4", 100, 2}};
  // Typed: that group's nodes; 12 GPUs on 8-GPU nodes -> 2 x 8.
  auto a = fit_on_fleet(12, "a100", "", fleet);
  CHECK(a.fits);
  CHECK(a.gpu_type == "a100");
  CHECK(a.shape.workers == 2);
  CHECK(a.shape.gpus_per_worker == 8);
  // 24 GPUs need 3 a100 nodes of 2: too wide, although the fleet has 216 GPUs.
  auto wide = fit_on_fleet(24, "a100", "", fleet);
  CHECK_FALSE(wide.fits);
  CHECK_FALSE(wide.type_missing);
  // The same 24 GPUs as t4: 12 x 2 on 100 nodes.
  auto t = fit_on_fleet(24, "t4", "", fleet);
  CHECK(t.fits);
  CHECK(t.shape.workers == 12);
  CHECK(t.shape.gpus_per_worker == 2);
  // A type the fleet lacks.
  auto v = fit_on_fleet(1, "v100", "", fleet);
  CHECK(v.type_missing);
  CHECK_FALSE(v.fits);
  // Untyped: asks for no type, shaped for the most GPUs per node that fits.
  auto any4 = fit_on_fleet(4, "", "", fleet);
  CHECK(any4.fits);
  CHECK(any4.gpu_type.empty());
  CHECK(any4.shape.workers == 1);
  CHECK(any4.shape.gpus_per_worker == 4);
  // 24 untyped GPUs: too wide for a100 (3 of 2 nodes), fits t4 (12 of 100).
  auto any24 = fit_on_fleet(24, "", "", fleet);
  CHECK(any24.fits);
  CHECK(any24.shape.workers == 12);
  CHECK(any24.shape.gpus_per_worker == 2);
  // Wider than every group: too wide.
  auto any_huge = fit_on_fleet(400, "", "", fleet);
  CHECK_FALSE(any_huge.fits);
  CHECK_FALSE(any_huge.type_missing);
  // Without --fleet, an untyped job asks for the fleet's --gpu-type (as before).
  const std::vector<FleetGroup> one{{"sim", 4, 8}};
  auto legacy = fit_on_fleet(12, "", "sim", one);
  CHECK(legacy.fits);
  CHECK(legacy.gpu_type == "sim");
  CHECK(legacy.shape.workers == 2);
  CHECK_FALSE(fit_on_fleet(40, "", "sim", one).fits);
}

TEST_CASE("load fleet: --skip-idle drains the GPUs each job is submitted with", "[load][fleet]") {
  // Two jobs of 1 trace GPU on a 2-GPU fleet. The first is planned as 4 GPUs
  // (submit_gpus): its 4 x 100 GPU-s drain at 2 GPU/s until 200 (mapped from
  // its 1 GPU, until 50, before its own end at 100). So the gap before the
  // arrival at 1000 is 800, and shortening it to 10 removes 790.
  std::vector<TraceJob> jobs(2);
  jobs[0].gpus = jobs[1].gpus = 1;
  jobs[0].duration_s = jobs[1].duration_s = 100;
  jobs[1].arrival_s = 1000;
  jobs[0].submit_gpus = 4;
  auto skip = skip_idle(jobs, 10, 2, 8);
  CHECK(skip.gaps == 1);
  CHECK(skip.removed_s == Catch::Detail::Approx(790));
  CHECK(jobs[1].arrival_s == Catch::Detail::Approx(210));
}

TEST_CASE("load trace: a gpu_type column is kept per job", "[load][fleet][trace]") {
  auto p = parse(
      "job_id,num_gpu,submit_time,duration,gpu_type\n"
      "1,8,0,10,a100\n"
      "2,2,5,10, t4 \n"
      "3,1,6,10,\n");
  REQUIRE(p.error.empty());
  REQUIRE(p.jobs.size() == 3);
  CHECK(p.jobs[0].gpu_type == "a100");
  CHECK(p.jobs[1].gpu_type == "t4");
  CHECK(p.jobs[2].gpu_type.empty());
  // The shared traces have none.
  auto none = parse("job_id,num_gpu,submit_time,duration\n1,1,0,10\n");
  REQUIRE(none.jobs.size() == 1);
  CHECK(none.jobs[0].gpu_type.empty());
}

TEST_CASE("load priority: generic priority/qos values map to classes", "[load][priority]") {
  auto cls = [](const std::string& v) { return priority_class(PriorityColumn::generic, v); };
  CHECK(cls("high") == std::string("high"));
  CHECK(cls(" HIGH ") == std::string("high"));
  CHECK(cls("Urgent") == std::string("high"));
  CHECK(cls("critical") == std::string("high"));
  CHECK(cls("guaranteed") == std::string("high"));
  CHECK(cls("normal") == std::string("normal"));
  CHECK(cls("default") == std::string("normal"));
  CHECK(cls("burstable") == std::string("normal"));
  CHECK(cls("low") == std::string("low"));
  CHECK(cls("best_effort") == std::string("low"));
  CHECK(cls("BestEffort") == std::string("low"));
  CHECK(cls("preemptible") == std::string("low"));
  CHECK(cls("spot") == std::string("low"));
  // Numbers (muri's 0/1 flag): above 0 high, 0 normal, below 0 low.
  CHECK(cls("1") == std::string("high"));
  CHECK(cls("7") == std::string("high"));
  CHECK(cls("0") == std::string("normal"));
  CHECK(cls("-1") == std::string("low"));
  // Empty: no class; unknown: nullopt.
  CHECK(cls("") == std::string());
  CHECK(cls("  ") == std::string());
  CHECK_FALSE(cls("vip"));
  CHECK_FALSE(cls("0.5"));
}

TEST_CASE("load priority: chronus job_type and best_effort map to classes", "[load][priority]") {
  auto jt = [](const std::string& v) {
    return priority_class(PriorityColumn::chronus_job_type, v);
  };
  CHECK(jt("strict") == std::string("high"));
  CHECK(jt("soft") == std::string("normal"));
  CHECK(jt("best") == std::string("low"));
  CHECK(jt("Best") == std::string("low"));
  CHECK_FALSE(jt("high"));
  auto be = [](const std::string& v) {
    return priority_class(PriorityColumn::chronus_best_effort, v);
  };
  CHECK(be("1") == std::string("low"));
  CHECK(be("0") == std::string("normal"));
  CHECK_FALSE(be("2"));
}

TEST_CASE("load priority: trace files carry their classes to the jobs", "[load][priority]") {
  // chronus: job_type.
  auto c = parse(
      "job_id,user,num_gpu,submit_time,duration,best_effort,job_type\n"
      "1,vc_a,1,0,10,0,strict\n"
      "2,vc_a,1,1,10,0,soft\n"
      "3,vc_b,1,2,10,1,best\n"
      "4,vc_b,1,3,10,0,weird\n",
      TraceFormat::chronus);
  REQUIRE(c.error.empty());
  REQUIRE(c.jobs.size() == 4);
  CHECK(c.priority_column == "job_type");
  CHECK(c.jobs[0].priority == "high");
  CHECK(c.jobs[1].priority == "normal");
  CHECK(c.jobs[2].priority == "low");
  CHECK(c.jobs[3].priority.empty());
  CHECK(c.priority_unknown == 1);
  // chronus without job_type: best_effort.
  auto b = parse(
      "job_id,user,num_gpu,submit_time,duration,best_effort\n"
      "1,vc_a,1,0,10,1\n"
      "2,vc_a,1,1,10,0\n",
      TraceFormat::chronus);
  REQUIRE(b.jobs.size() == 2);
  CHECK(b.priority_column == "best_effort");
  CHECK(b.jobs[0].priority == "low");
  CHECK(b.jobs[1].priority == "normal");
  // muri: the 0/1 priority flag (milliseconds).
  auto m = parse(
      "job_id,num_gpu,submit_time,duration,priority\n"
      "1,1,0,1000,1\n"
      "2,1,0,1000,0\n",
      TraceFormat::muri);
  REQUIRE(m.jobs.size() == 2);
  CHECK(m.priority_column == "priority");
  CHECK(m.jobs[0].priority == "high");
  CHECK(m.jobs[1].priority == "normal");
  // A synthetic CSV with a qos column (any format); a generic column wins over
  // chronus's job_type.
  auto q = parse(
      "job_id,num_gpu,submit_time,duration,qos\n"
      "1,1,0,10,High\n"
      "2,1,1,10,low\n"
      "3,1,2,10,\n"
      "4,1,3,10,gold\n");
  REQUIRE(q.jobs.size() == 4);
  CHECK(q.priority_column == "qos");
  CHECK(q.jobs[0].priority == "high");
  CHECK(q.jobs[1].priority == "low");
  CHECK(q.jobs[2].priority.empty());
  CHECK(q.jobs[3].priority.empty());
  CHECK(q.priority_unknown == 1);
  auto both = parse(
      "job_id,user,num_gpu,submit_time,duration,job_type,priority\n"
      "1,vc_a,1,0,10,best,high\n",
      TraceFormat::chronus);
  REQUIRE(both.jobs.size() == 1);
  CHECK(both.priority_column == "priority");
  CHECK(both.jobs[0].priority == "high");
  // No priority column: no class.
  auto none = parse("job_id,num_gpu,submit_time,duration\n1,1,0,10\n");
  CHECK(none.priority_column.empty());
  CHECK(none.jobs[0].priority.empty());
}

TEST_CASE("load priority: the job spec names its class", "[load][priority]") {
  SimJob job;
  job.team = "t";
  job.name = "trace-1";
  job.gpus_per_worker = 1;
  job.priority = "low";
  auto spec = nlohmann::json::parse(sim_job_json(job));
  CHECK(spec["priority"] == "low");
  job.priority.clear();
  auto plain = nlohmann::json::parse(sim_job_json(job));
  CHECK_FALSE(plain.contains("priority"));
}

TEST_CASE("load priority: the shared muri and chronus files map their columns",
          "[load][priority][files]") {
  const std::string dir = "/work/shared/traces";
  struct Case {
    std::string path;
    TraceFormat format;
    std::string column;
  };
  for (const Case& c :
       {Case{dir + "/muri-philly/trace3.csv", TraceFormat::muri, "priority"},
        Case{dir + "/chronus-philly/trace_job_Philly_MIX1.csv", TraceFormat::chronus, "job_type"},
        Case{dir + "/tiresias-60job/60_job.csv", TraceFormat::tiresias, ""}}) {
    if (!std::filesystem::exists(c.path)) {
      WARN("skipped (absent): " << c.path);
      continue;
    }
    std::ifstream f(c.path);
    auto r = parse_trace(f, c.format, team_from_path(c.path));
    INFO(c.path);
    REQUIRE(r.error.empty());
    CHECK(r.priority_column == c.column);
    CHECK(r.priority_unknown == 0);
    size_t high = 0, normal = 0, low = 0, none = 0;
    for (const auto& j : r.jobs) {
      high += j.priority == "high";
      normal += j.priority == "normal";
      low += j.priority == "low";
      none += j.priority.empty();
    }
    if (c.format == TraceFormat::muri) {
      // The README's 0/1 flag: 504 rows of 0 and 488 of 1.
      CHECK(high == 488);
      CHECK(normal == 504);
      CHECK(low + none == 0);
    } else if (c.format == TraceFormat::chronus) {
      // strict and best only (the 0-GPU rows are not jobs).
      CHECK(high > 20000);
      CHECK(low > 9000);
      CHECK(normal + none == 0);
      CHECK(high + low == r.jobs.size());
    } else {
      CHECK(none == r.jobs.size());
    }
  }
}

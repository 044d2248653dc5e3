// Unit tests of troupe-load's pure parts: the --mix grammar, percentiles and
// summaries, Jain's index, JSON field scanning, /proc status parsing, job
// specs, command-line parsing (identities included) and the report arithmetic.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "load/jobspec.hpp"
#include "load/mix.hpp"
#include "load/options.hpp"
#include "load/proc.hpp"
#include "load/report.hpp"
#include "load/scan.hpp"
#include "load/stats.hpp"

using namespace troupe::load;
using Approx = Catch::Detail::Approx;

TEST_CASE("load mix: the documented example", "[load][mix]") {
  std::string err;
  auto m = parse_mix("1gpu:0.8,gang2x4:0.1,8gpu:0.1", &err);
  REQUIRE(m);
  REQUIRE(m->size() == 3);
  CHECK((*m)[0].workers == 1);
  CHECK((*m)[0].gpus == 1);
  CHECK((*m)[0].weight == Approx(0.8));
  CHECK((*m)[1].label == "gang2x4");
  CHECK((*m)[1].workers == 2);
  CHECK((*m)[1].gpus == 4);
  CHECK((*m)[1].total_gpus() == 8);
  CHECK((*m)[2].gpus == 8);
  CHECK((*m)[2].workers == 1);
}

TEST_CASE("load mix: default weights, cpu, spaces", "[load][mix]") {
  std::string err;
  auto m = parse_mix(" cpu , 2gpu:3 ,0gpu", &err);
  REQUIRE(m);
  REQUIRE(m->size() == 3);
  CHECK((*m)[0].gpus == 0);
  CHECK((*m)[0].weight == 1);
  CHECK((*m)[1].gpus == 2);
  CHECK((*m)[1].weight == 3);
  CHECK((*m)[2].gpus == 0);
}

TEST_CASE("load mix: malformed specs are refused with a reason", "[load][mix]") {
  for (const char* bad : {"", "1gpu,", "gpu", "xgpu", "1gpu:0", "1gpu:-1", "1gpu:abc", "gang1x4",
                          "gang2x0", "gang2", "gangx4", "tpu", "1gpu:nan"}) {
    std::string err;
    INFO(bad);
    CHECK_FALSE(parse_mix(bad, &err));
    CHECK_FALSE(err.empty());
  }
}

TEST_CASE("load mix: picking follows the cumulative weights", "[load][mix]") {
  std::string err;
  auto m = *parse_mix("1gpu:0.8,gang2x4:0.1,8gpu:0.1", &err);
  CHECK(pick(m, 0.0) == 0);
  CHECK(pick(m, 0.79) == 0);
  CHECK(pick(m, 0.81) == 1);
  CHECK(pick(m, 0.89) == 1);
  CHECK(pick(m, 0.91) == 2);
  CHECK(pick(m, 0.999999) == 2);
  // Unnormalised weights behave the same.
  auto w = *parse_mix("1gpu:8,2gpu:2", &err);
  CHECK(pick(w, 0.79) == 0);
  CHECK(pick(w, 0.81) == 1);
}

TEST_CASE("load stats: percentiles interpolate between ranks", "[load][stats]") {
  std::vector<double> v{5, 1, 4, 2, 3};  // unsorted on purpose
  CHECK(percentile(v, 0) == 1);
  CHECK(percentile(v, 50) == 3);
  CHECK(percentile(v, 100) == 5);
  CHECK(percentile(v, 25) == 2);
  CHECK(percentile(v, 90) == Approx(4.6));
  CHECK(percentile({}, 50) == 0);
  CHECK(percentile({7}, 99.9) == 7);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  CHECK(percentile(hundred, 99) == Approx(99.01));
  CHECK(percentile(hundred, 99.9) == Approx(99.901));
  CHECK(percentile(hundred, 150) == 100);  // clamped
}

TEST_CASE("load stats: summary", "[load][stats]") {
  std::vector<double> v;
  for (int i = 1; i <= 1000; ++i) v.push_back(i);
  Summary s = summarize(v);
  CHECK(s.count == 1000);
  CHECK(s.mean == Approx(500.5));
  CHECK(s.p50 == Approx(500.5));
  CHECK(s.p99 == Approx(990.01));
  CHECK(s.p999 == Approx(999.001));
  CHECK(s.max == 1000);
  CHECK(summarize({}).count == 0);
}

TEST_CASE("load stats: Jain's fairness index", "[load][stats]") {
  CHECK(jain_index({1, 1, 1, 1}) == Approx(1));
  CHECK(jain_index({5, 0, 0, 0}) == Approx(0.25));
  CHECK(jain_index({1, 2}) == Approx(9.0 / 10.0));
  CHECK(jain_index({3, 1, 2}) == Approx(36.0 / 42.0));
  CHECK(jain_index({0, 0}) == 1);
  CHECK(jain_index({}) == 0);
  // Scale-free.
  CHECK(jain_index({10, 20, 30}) == Approx(jain_index({1, 2, 3})));
}

TEST_CASE("load scan: string fields of JSON text", "[load][scan]") {
  std::string ev =
      R"({"job_id":"j-3f9c","team":"t","state":"running","attempt":1,"workers":[{"node":"n"}]})";
  CHECK(json_string_field(ev, "state") == "running");
  CHECK(json_string_field(ev, "job_id") == "j-3f9c");
  CHECK(json_string_field(ev, "node") == "n");
  CHECK(json_string_field(ev, "missing").empty());
  CHECK(json_string_field(ev, "attempt").empty());  // not a string
  CHECK(json_string_field(R"({ "job_id" : "j-1" })", "job_id") == "j-1");
  // A value equal to a key name is not taken for the key.
  CHECK(json_string_field(R"({"name":"state","state":"queued"})", "state") == "queued");
  CHECK(json_string_field(R"({"error":"bad \"x\""})", "error") == R"(bad \"x\")");
  CHECK(json_string_field(R"({"error":"unterminated)", "error").empty());
  CHECK(last_token("troupe.t.events.j-42") == "j-42");
  CHECK(last_token("_INBOX.abc.17") == "17");
  CHECK(last_token("plain") == "plain");
}

TEST_CASE("load proc: VmHWM and argv[0]", "[load][proc]") {
  std::string status =
      "Name:\ttroupe-schedule\nVmPeak:\t  900000 kB\nVmHWM:\t   123456 kB\nVmRSS:\t  100000 kB\n";
  CHECK(parse_status_kb(status, "VmHWM") == 123456);
  CHECK(parse_status_kb(status, "VmRSS") == 100000);
  CHECK_FALSE(parse_status_kb(status, "VmSwap"));
  CHECK_FALSE(parse_status_kb(status, "VmHW"));
  const char raw[] = "/work/build/bin/troupe-scheduler\0--nats\0nats://x\0";
  std::string cmd(raw, sizeof raw - 1);
  CHECK(cmdline_runs(cmd, "troupe-scheduler"));
  CHECK_FALSE(cmdline_runs(cmd, "troupe"));
  CHECK(cmdline_runs(std::string("troupe-scheduler\0", 17), "troupe-scheduler"));
  CHECK_FALSE(cmdline_runs("", "troupe-scheduler"));
  // Our own process is found by its name.
  auto self = read_proc_memory(::getpid());
  CHECK(self.hwm_kb.value_or(0) > 0);
}

TEST_CASE("load jobspec: simulated job JSON", "[load][jobspec]") {
  SimJob j;
  j.team = "vision";
  j.name = "load-7";
  j.workers = 2;
  j.gpus_per_worker = 4;
  j.duration_s = 0.25;
  auto spec = nlohmann::json::parse(sim_job_json(j));
  CHECK(spec["team"] == "vision");
  CHECK(spec["name"] == "load-7");
  CHECK(spec["workers"] == 2);
  CHECK(spec["resources"]["gpus"] == 4);
  CHECK_FALSE(spec["resources"].contains("gpu_type"));
  CHECK_FALSE(spec.contains("pool"));
  CHECK(spec["env"]["TROUPE_SIM_DURATION_S"] == "0.25");
  CHECK(spec["max_runtime_s"] == "61");
  CHECK(spec["command"] == nlohmann::json{"troupe-sim", "load-7"});
  j.command = "sleep $TROUPE_SIM_DURATION_S";
  CHECK(nlohmann::json::parse(sim_job_json(j))["command"] ==
        nlohmann::json{"sh", "-c", "sleep $TROUPE_SIM_DURATION_S"});
  SimJob cpu;
  cpu.team = "t";
  cpu.duration_s = 100;
  cpu.gpu_type = "";
  auto c = nlohmann::json::parse(sim_job_json(cpu));
  CHECK_FALSE(c.contains("resources"));
  CHECK_FALSE(c.contains("workers"));
  CHECK(c["max_runtime_s"] == "260");
  cpu.pool = "a100";
  CHECK(nlohmann::json::parse(sim_job_json(cpu))["pool"] == "a100");
  CHECK(duration_text(1) == "1");
  CHECK(duration_text(0.000001) == "0.000001");
  CHECK(duration_text(-3) == "0");
  CHECK(default_max_runtime_s(0) == 60);
}

namespace {
Command parse(std::vector<const char*> args, std::optional<std::string> env = std::nullopt) {
  args.insert(args.begin(), "troupe-load");
  return parse_command_line(static_cast<int>(args.size()), args.data(), Environment{env, {}, {}});
}
Command parse_env(std::vector<const char*> args, const Environment& env) {
  args.insert(args.begin(), "troupe-load");
  return parse_command_line(static_cast<int>(args.size()), args.data(), env);
}
}  // namespace

TEST_CASE("load options: the load run", "[load][options]") {
  auto c =
      parse({"--nats", "nats://h:1", "--jobs", "300", "--rate", "50", "--mix", "1gpu:1,gang2x8:1",
             "--teams", "a,b", "--duration-s", "0.5", "--json", "--scheduler-pid", "42"});
  REQUIRE(c.kind == Command::run_load);
  CHECK(c.load.nats == "nats://h:1");
  CHECK(c.load.jobs == 300);
  CHECK(c.load.rate == 50);
  CHECK(c.load.mix.size() == 2);
  CHECK(c.load.teams == std::vector<std::string>{"a", "b"});
  CHECK(c.load.duration_s == 0.5);
  CHECK(c.load.json);
  CHECK(c.load.scheduler_pid == 42);

  auto d = parse({}, std::string("nats://env:4222"));
  REQUIRE(d.kind == Command::run_load);
  CHECK(d.load.nats == "nats://env:4222");
  CHECK(d.load.mix.size() == 3);
  CHECK(d.load.teams == std::vector<std::string>{"load"});
  CHECK_FALSE(d.load.scheduler_pid);

  CHECK(parse({"--mix", "banana"}).exit_code == 2);
  CHECK(parse({"--teams", "sys"}).exit_code == 2);
  CHECK(parse({"--teams", "a.b"}).exit_code == 2);
  CHECK(parse({"--jobs", "0"}).kind == Command::exit_now);
  auto h = parse({"--help"});
  CHECK(h.kind == Command::exit_now);
  CHECK(h.exit_code == 0);
  CHECK(h.message.find("--mix") != std::string::npos);
}

TEST_CASE("load options: replay", "[load][options]") {
  const char* trace = "/work/shared/traces/tiresias-60job/60_job.csv";
  auto c = parse({"--nats", "nats://top:1", "replay", trace, "--format", "tiresias", "--speedup",
                  "100", "--nodes", "4", "--gpus-per-node", "8", "--limit", "30", "--json",
                  "--policy", "fifo", "--no-fleet"});
  REQUIRE(c.kind == Command::run_replay);
  CHECK(c.replay.nats == "nats://top:1");
  CHECK(c.replay.traces == std::vector<std::string>{trace});
  CHECK(c.replay.format == TraceFormat::tiresias);
  CHECK(c.replay.speedup == 100);
  CHECK(c.replay.nodes == 4);
  CHECK(c.replay.limit == 30);
  CHECK(c.replay.json);
  CHECK(c.replay.no_fleet);
  CHECK(c.replay.policy == "fifo");
  CHECK(parse({"replay", trace, "--format", "slurm"}).exit_code != 0);
  CHECK(parse({"replay", "/no/such/file.csv"}).exit_code != 0);
  CHECK(parse({"replay", trace, "--speedup", "0"}).exit_code != 0);
}

namespace {
JobResult job(const std::string& team, int gpus, int64_t sent_ms, int64_t ack_ms, int64_t placed_ms,
              int64_t running_ms, int64_t end_ms, const std::string& state) {
  JobResult r;
  r.team = team;
  r.gpus = gpus;
  r.job_id = ack_ms >= 0 ? "j-" + std::to_string(sent_ms) : "";
  auto ns = [](int64_t ms) { return ms < 0 ? -1 : ms * 1000000; };
  r.sent_ns = ns(sent_ms);
  r.acked_ns = ns(ack_ms);
  r.placed_ns = ns(placed_ms);
  r.running_ns = ns(running_ms);
  r.ended_ns = ns(end_ms);
  r.final_state = state;
  return r;
}
}  // namespace

TEST_CASE("load report: counts, rates and latencies", "[load][report]") {
  std::vector<JobResult> jobs = {
      job("a", 1, 0, 10, 100, 110, 200, "succeeded"),
      job("a", 1, 0, 20, 200, 210, 300, "failed"),
      job("b", 8, 0, 30, -1, -1, -1, ""),
  };
  JobResult rej;
  rej.sent_ns = 0;
  rej.error = "unknown kind";
  jobs.push_back(rej);
  JobResult lost;
  lost.sent_ns = 0;
  jobs.push_back(lost);
  RunInfo info;
  info.total_s = 1.5;
  ProcMemory m;
  m.pid = 7;
  m.hwm_kb = 2048;
  info.scheduler = m;
  Json r = load_report(jobs, info);
  CHECK(r["submitted"] == 5);
  CHECK(r["acknowledged"] == 3);
  CHECK(r["rejected"] == 1);
  CHECK(r["unanswered"] == 1);
  CHECK(r["placed"] == 2);
  CHECK(r["terminal"] == 2);
  CHECK(r["states"]["succeeded"] == 1);
  CHECK(r["states"]["failed"] == 1);
  CHECK(r["states"]["not_terminal"] == 1);
  CHECK(r["errors"]["unknown kind"] == 1);
  CHECK(r["submit_rate_per_s"].get<double>() == Approx(100));    // 3 acks in 30 ms
  CHECK(r["placement_rate_per_s"].get<double>() == Approx(10));  // 2 placements in 200 ms
  CHECK(r["submit_to_placed_ms"]["p50"].get<double>() == Approx(150));
  CHECK(r["submit_to_placed_ms"]["count"] == 2);
  CHECK(r["submit_to_ack_ms"]["max"].get<double>() == Approx(30));
  CHECK(r["scheduler"]["peak_rss_kb"] == 2048);
  CHECK(r["scheduler"]["peak_rss_mb"].get<double>() == Approx(2));
  CHECK(r["scheduler"]["rss_kb"].is_null());
  std::string table = report_table(r);
  CHECK(table.find("submit_to_placed_ms.p99") != std::string::npos);
  CHECK(table.find("states.succeeded") != std::string::npos);
}

TEST_CASE("load report: replay JCT, queueing, allocation and fairness", "[load][report]") {
  // Team a: 2 jobs of 1 GPU running 1 s each; team b: one 2-GPU job running 1 s.
  std::vector<JobResult> jobs = {
      job("a", 1, 0, 1, 100, 100, 1100, "succeeded"),
      job("a", 1, 1000, 1001, 1300, 1300, 2300, "succeeded"),
      job("b", 2, 0, 1, 500, 500, 1500, "succeeded"),
  };
  std::vector<AllocSample> samples = {{0, 2, 4}, {1000000000, 4, 4}, {3000000000, 0, 4}};
  RunInfo info;
  info.complete = true;
  // Speedup 10: each job arrived (trace) at its send time x 10 and runs 10
  // trace s. Trace timeline: a1 and b start at 0 (nothing ended before they
  // ran) and end at 10; a2 (arrived 10) ran after a1 ended, so it starts at
  // max(10, 10) = 10 and ends at 20. No wall latency is scaled into these.
  for (auto& j : jobs) {
    j.trace_arrival_s = static_cast<double>(j.sent_ns) / 1e9 * 10;
    j.trace_duration_s = 10;
  }
  Json r = replay_report(jobs, samples, 10.0, info);
  CHECK(r["jct"]["count"] == 3);
  CHECK(r["jct"]["avg_s"].get<double>() == Approx((1.1 + 1.3 + 1.5) / 3).epsilon(0.001));
  CHECK(r["jct"]["avg_trace_s"].get<double>() == Approx(10.0).epsilon(0.001));
  CHECK(r["queueing_delay"]["avg_s"].get<double>() == Approx((0.1 + 0.3 + 0.5) / 3).epsilon(0.001));
  CHECK(r["queueing_delay"]["avg_ms"].get<double>() == Approx(300));
  CHECK(r["queueing_delay"]["avg_trace_s"].get<double>() == Approx(0));
  CHECK(r["makespan_s"].get<double>() == Approx(2.3));
  CHECK(r["makespan_trace_s"].get<double>() == Approx(20));
  // The sample at 3 s is after the last job ended: left out.
  CHECK(r["gpu_allocation"]["samples"] == 2);
  CHECK(r["gpu_allocation"]["mean"].get<double>() == Approx(0.75));
  CHECK(r["teams"]["a"]["gpu_s"].get<double>() == Approx(2));
  CHECK(r["teams"]["b"]["gpu_s"].get<double>() == Approx(2));
  CHECK(r["teams"]["a"]["share"].get<double>() == Approx(0.5));
  CHECK(r["jain_index"].get<double>() == Approx(1));
}

TEST_CASE("load options: --compare, --policy A,B and --self-host", "[load][options]") {
  const char* trace = "/work/shared/traces/tiresias-60job/60_job.csv";
  auto c = parse({"replay", trace, "--compare"});
  REQUIRE(c.kind == Command::run_replay);
  CHECK(c.replay.policies == std::vector<std::string>{"troupe", "fifo"});
  CHECK(c.replay.self_host);
  auto both = parse({"replay", trace, "--policy", "fifo,troupe"});
  REQUIRE(both.kind == Command::run_replay);
  CHECK(both.replay.policies == std::vector<std::string>{"fifo", "troupe"});
  CHECK(both.replay.self_host);
  auto one = parse({"replay", trace, "--policy", "fifo", "--self-host"});
  REQUIRE(one.kind == Command::run_replay);
  CHECK(one.replay.policies == std::vector<std::string>{"fifo"});
  auto easy = parse({"replay", trace, "--policy", "fifo-backfill,troupe"});
  REQUIRE(easy.kind == Command::run_replay);
  CHECK(easy.replay.policies == std::vector<std::string>{"fifo-backfill", "troupe"});
  auto plain = parse({"replay", trace, "--self-host"});
  REQUIRE(plain.kind == Command::run_replay);
  CHECK(plain.replay.policies == std::vector<std::string>{"troupe"});
  // An external cluster: one policy, checked, not started.
  auto ext = parse({"replay", trace, "--nats", "nats://x:1", "--policy", "fifo"});
  REQUIRE(ext.kind == Command::run_replay);
  CHECK_FALSE(ext.replay.self_host);
  CHECK(ext.replay.nats_given);
  // Refused: self-hosting with --nats or --no-fleet, unknown or repeated policies.
  CHECK(parse({"replay", trace, "--compare", "--nats", "nats://x:1"}).exit_code == 2);
  CHECK(parse({"replay", trace, "--compare", "--no-fleet"}).exit_code == 2);
  CHECK(parse({"replay", trace, "--policy", "troupe,slurm"}).exit_code == 2);
  CHECK(parse({"replay", trace, "--policy", "fifo,fifo"}).exit_code == 2);
  CHECK(parse({"replay", trace, "--policy", "a,b,c"}).exit_code == 2);
  CHECK(parse({"replay", trace, "--compare", "--policy", "fifo"}).exit_code == 2);
}

TEST_CASE("load options: --creds, --tls-ca and --creds-dir, with the environment's defaults",
          "[load][options]") {
  const char* trace = "/work/shared/traces/tiresias-60job/60_job.csv";
  // --creds-dir must name an existing folder; nothing in it is read here.
  const std::string d = std::filesystem::temp_directory_path().string();
  Environment env{std::string("nats://env:1"), std::string("/env/admin.creds"),
                  std::string("/env/ca.pem")};

  // None: no identity (an open cluster).
  auto none = parse({"--teams", "la,lb"});
  REQUIRE(none.kind == Command::run_load);
  CHECK(none.load.identity.creds.empty());
  CHECK(none.load.identity.tls_ca.empty());
  CHECK(none.load.identity.creds_dir.empty());

  // The environment gives the defaults; the flags win, anywhere on the line.
  auto e = parse_env({}, env);
  REQUIRE(e.kind == Command::run_load);
  CHECK(e.load.nats == "nats://env:1");
  CHECK(e.load.identity.creds == "/env/admin.creds");
  CHECK(e.load.identity.tls_ca == "/env/ca.pem");
  auto f = parse_env(
      {"--jobs", "5", "--creds", "/x/team-la.creds", "--tls-ca", "/x/ca.pem", "--teams", "la"},
      env);
  REQUIRE(f.kind == Command::run_load);
  CHECK(f.load.identity.creds == "/x/team-la.creds");
  CHECK(f.load.identity.tls_ca == "/x/ca.pem");
  CHECK(f.load.jobs == 5);
  // An empty flag overrides the environment with "none".
  auto g = parse_env({"--creds", ""}, env);
  REQUIRE(g.kind == Command::run_load);
  CHECK(g.load.identity.creds.empty());

  // --creds-dir: per team; the admin's --creds (or the environment's) stays
  // for troupe.sys.* requests.
  auto h = parse({"--creds-dir", d.c_str(), "--teams", "la,lb"});
  REQUIRE(h.kind == Command::run_load);
  CHECK(h.load.identity.creds_dir == d);
  CHECK(h.load.identity.creds.empty());
  auto i = parse_env({"--creds-dir", d.c_str()}, env);
  REQUIRE(i.kind == Command::run_load);
  CHECK(i.load.identity.creds == "/env/admin.creds");
  CHECK(parse({"--creds-dir", "/no/such/dir"}).exit_code != 0);
  CHECK(parse({"--help"}).message.find("--creds-dir") != std::string::npos);

  // Paths and the CA default.
  CHECK(team_creds_path("/a/auth", "la") == "/a/auth/team-la.creds");
  CHECK(team_creds_path("/a/auth/", "la") == "/a/auth/team-la.creds");
  auto yes = [](const std::string&) { return true; };
  auto no = [](const std::string&) { return false; };
  IdentityOptions id;
  id.creds_dir = "/a/auth";
  CHECK(effective_tls_ca(id, yes) == "/a/auth/ca.pem");
  CHECK(effective_tls_ca(id, no).empty());
  id.tls_ca = "/given/ca.pem";
  CHECK(effective_tls_ca(id, yes) == "/given/ca.pem");
  IdentityOptions plain;
  CHECK(effective_tls_ca(plain, yes).empty());

  // replay: the same flags, before or after `replay`.
  auto r =
      parse({"--creds", "/x/admin.creds", "replay", trace, "--tls-ca", "/x/ca.pem", "--no-fleet"});
  REQUIRE(r.kind == Command::run_replay);
  CHECK(r.replay.identity.creds == "/x/admin.creds");
  CHECK(r.replay.identity.tls_ca == "/x/ca.pem");
  auto rd = parse({"replay", trace, "--creds-dir", d.c_str(), "--creds", "/x/admin.creds"});
  REQUIRE(rd.kind == Command::run_replay);
  CHECK(rd.replay.identity.creds_dir == d);
  CHECK(rd.replay.identity.creds == "/x/admin.creds");
  auto re = parse_env({"replay", trace}, env);
  REQUIRE(re.kind == Command::run_replay);
  CHECK(re.replay.identity.creds == "/env/admin.creds");
  CHECK(re.replay.identity.tls_ca == "/env/ca.pem");
  // The replay's troupe.sys.* requests need an admin: --creds-dir alone is refused.
  auto ra = parse({"replay", trace, "--creds-dir", d.c_str()});
  CHECK(ra.exit_code == 2);
  CHECK(ra.message.find("--creds") != std::string::npos);
  // Self-hosting runs its own open nats-server: identity flags are refused,
  // the environment's dropped.
  CHECK(parse({"replay", trace, "--compare", "--creds", "/x/admin.creds"}).exit_code == 2);
  CHECK(parse({"--tls-ca", "/x/ca.pem", "replay", trace, "--self-host"}).exit_code == 2);
  auto sh = parse_env({"replay", trace, "--compare"}, Environment{{}, env.creds, env.tls_ca});
  REQUIRE(sh.kind == Command::run_replay);
  CHECK(sh.replay.identity.creds.empty());
  CHECK(sh.replay.identity.tls_ca.empty());
}

TEST_CASE("load report: allocation and fragmentation samples from nodes and queues",
          "[load][report]") {
  Json nodes = Json::parse(R"({"nodes": [
    {"node": "rp1-00001", "alive": true, "gpus_total": 8, "gpus_allocated": 6, "gpus_reserved": 0,
     "gpus_free": 2, "gpu_type": "sim", "pool": "sim"},
    {"node": "rp1-00002", "alive": true, "gpus_total": 8, "gpus_allocated": 0, "gpus_reserved": 0,
     "gpus_free": 8, "gpu_type": "sim", "pool": "sim"},
    {"node": "rp1-00003", "alive": true, "gpus_total": 8, "gpus_allocated": 5, "gpus_reserved": 0,
     "gpus_free": 3, "gpu_type": "sim", "pool": "sim"},
    {"node": "rp1-00004", "alive": false, "gpus_total": 8, "gpus_allocated": 0, "gpus_free": 8},
    {"node": "other-00001", "alive": true, "gpus_total": 8, "gpus_allocated": 0, "gpus_free": 8}
  ]})");
  // A 4-GPU worker is pending: node 1 (2 free) is fragmented, node 2 fits it,
  // node 3 (3 free) is held for a gang, so not counted.
  Json queues = Json::parse(R"({"policy": "troupe",
    "pools": [{"pool": "sim", "hold": {"job_id": "j-1", "nodes": ["rp1-00003"]}}],
    "teams": [{"team": "a", "pool": "sim", "pending_shapes": [{"gpus": 4, "gpu_type": "sim", "pool": "sim"}]},
              {"team": "b", "pool": "sim", "pending_shapes": []}]})");
  size_t alive = 0;
  auto s = sample_from(nodes, queues, "rp1", &alive);
  REQUIRE(s);
  CHECK(alive == 3);
  CHECK(s->total == 24);
  CHECK(s->allocated == 11);
  CHECK(s->free == 13);
  CHECK(s->has_queues);
  CHECK(s->pending);
  CHECK(s->fragmented == 2);
  // Nothing pending: nothing fragmented.
  Json idle = Json::parse(R"({"teams": [{"team": "a", "pool": "sim", "pending_shapes": []}]})");
  auto s2 = sample_from(nodes, idle, "rp1");
  REQUIRE(s2);
  CHECK(s2->has_queues);
  CHECK_FALSE(s2->pending);
  CHECK(s2->fragmented == 0);
  // No queues reply: allocation only; every node without a prefix.
  auto s3 = sample_from(nodes, Json(), "", &alive);
  REQUIRE(s3);
  CHECK(alive == 4);
  CHECK(s3->total == 32);
  CHECK_FALSE(s3->has_queues);
  // Another type pending: every free GPU outside holds is fragmented.
  Json other = Json::parse(
      R"({"teams": [{"team": "a", "pool": "", "pending_shapes": [{"gpus": 1, "gpu_type": "h100", "pool": ""}]}]})");
  auto s4 = sample_from(nodes, other, "rp1");
  REQUIRE(s4);
  CHECK(s4->fragmented == 13);
  CHECK_FALSE(sample_from(Json::parse(R"({"error": "x"})"), queues, ""));
}

TEST_CASE("load report: fragmentation and preemptions in the replay report", "[load][report]") {
  std::vector<JobResult> jobs = {job("a", 1, 0, 1, 100, 100, 2000, "succeeded")};
  AllocSample a{500000000, 4, 8, 4, 2, true, true};
  AllocSample b{1500000000, 8, 8, 0, 0, true, false};
  AllocSample no_queues{1000000000, 8, 8, 0, 0, false, false};
  RunInfo info;
  info.complete = true;
  info.preemptions = 3;
  Json r = replay_report(jobs, {a, b, no_queues}, 1.0, info);
  CHECK(r["fragmentation"]["samples"] == 2);
  CHECK(r["fragmentation"]["samples_with_pending"] == 1);
  CHECK(r["fragmentation"]["mean_gpus"].get<double>() == Approx(1));
  CHECK(r["fragmentation"]["max_gpus"] == 2);
  CHECK(r["fragmentation"]["mean_fraction"].get<double>() == Approx(0.125));
  CHECK(r["fragmentation"]["mean_free_gpus"].get<double>() == Approx(2));
  CHECK(r["preemptions"] == 3);
  RunInfo unknown;
  CHECK(replay_report(jobs, {}, 1.0, unknown)["preemptions"].is_null());
}

TEST_CASE("load report: two policies side by side with ratios", "[load][report]") {
  std::vector<JobResult> fast = {job("a", 1, 0, 1, 100, 100, 1000, "succeeded"),
                                 job("b", 1, 0, 1, 100, 100, 1000, "succeeded")};
  std::vector<JobResult> slow = {job("a", 1, 0, 1, 100, 100, 1000, "succeeded"),
                                 job("b", 1, 0, 1, 1100, 1100, 2000, "succeeded")};
  RunInfo info;
  info.complete = true;
  info.preemptions = 0;
  Json t = replay_report(fast, {{500000000, 2, 4}}, 10.0, info);
  Json f = replay_report(slow, {{500000000, 1, 4}}, 10.0, info);
  Json c = compare_report({{"troupe", t}, {"fifo", f}});
  CHECK(c["mode"] == "replay_compare");
  CHECK(c["policies"] == Json::array({"troupe", "fifo"}));
  CHECK(c["complete"] == true);
  CHECK(c["runs"]["troupe"]["jct"]["avg_s"].get<double>() == Approx(1.0));
  CHECK(c["ratios"]["of"] == "troupe / fifo");
  CHECK(c["ratios"]["jct_avg"].get<double>() == Approx(1.0 / 1.5).epsilon(0.01));
  CHECK(c["ratios"]["makespan"].get<double>() == Approx(0.5));
  CHECK(c["ratios"]["queueing_avg"].get<double>() == Approx(0.1 / 0.6).epsilon(0.01));
  CHECK(c["ratios"]["gpu_allocation_mean"].get<double>() == Approx(2.0));
  CHECK(c["ratios"]["jain_index"].is_number());
  // The baseline's 0 gives no ratio.
  CHECK(c["ratios"]["fragmented_gpus_mean"].is_null());
  std::string table = compare_table(c);
  CHECK(table.find("JCT avg (s)") != std::string::npos);
  CHECK(table.find("troupe / fifo") != std::string::npos);
  CHECK(table.find("share a") != std::string::npos);
  CHECK(table.find("complete: yes") != std::string::npos);
  // One incomplete run makes the comparison incomplete.
  RunInfo late;
  Json f2 = replay_report(slow, {}, 10.0, late);
  CHECK(compare_report({{"troupe", t}, {"fifo", f2}})["complete"] == false);
}

TEST_CASE("load: failed jobs are counted and their first reasons shown", "[load][report]") {
  std::vector<troupe::load::JobResult> jobs(5);
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].job_id = "j-" + std::to_string(i);
    jobs[i].final_state = i == 0 ? "succeeded" : "failed";
    jobs[i].end_reason = i == 1 ? "" : "cannot execute 'troupe-sim'";
  }
  CHECK(troupe::load::failed_text({}).empty());
  CHECK(troupe::load::failed_text({jobs[0]}).empty());
  auto t = troupe::load::failed_text(jobs, 2);
  CHECK(t == "4 job(s) failed: j-1: no reason given; j-2: cannot execute 'troupe-sim'; ...\n");
}

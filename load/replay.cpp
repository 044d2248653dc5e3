// Owns the trace replay: reading and merging the traces, starting and
// waiting for the simulated fleet, pacing submissions at arrival/speedup,
// sampling troupe.sys.nodes every second, and the replay report.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <mutex>
#include <thread>

#include "bus/nats.hpp"
#include "load/child.hpp"
#include "load/engine.hpp"
#include "load/host.hpp"
#include "load/jobspec.hpp"
#include "load/plan.hpp"
#include "load/proc.hpp"
#include "load/progress.hpp"
#include "load/report.hpp"
#include "load/run.hpp"
#include "load/trace.hpp"
#include "messages/json_text.hpp"

namespace troupe::load {

namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

Clock::duration secs(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

std::optional<Json> request_json(bus::Connection& conn, const char* subject, int timeout_ms) {
  auto reply = conn.request(subject, std::string("{}"), timeout_ms);
  if (!reply) return std::nullopt;
  Json j = json_text::parse<Json>(reply->begin(), reply->end());
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

// One allocation (and, when queues answers, fragmentation) sample over the
// alive nodes named `prefix`-… (every node when empty). nullopt: no usable
// troupe.sys.nodes reply.
std::optional<AllocSample> sample_nodes(bus::Connection& conn, const std::string& prefix,
                                        bool with_queues, size_t* alive_out = nullptr) {
  auto nodes = request_json(conn, "troupe.sys.nodes", 3000);
  if (!nodes) return std::nullopt;
  Json queues;  // null unless asked for and answered
  if (with_queues)
    if (auto q = request_json(conn, "troupe.sys.queues", 3000)) queues = std::move(*q);
  return sample_from(*nodes, queues, prefix, alive_out);
}

// What the scheduler says in troupe.sys.queues: its policy and preemptions so far.
struct QueuesFigures {
  std::string policy;
  std::optional<long long> preemptions;
};
QueuesFigures queues_figures(bus::Connection& conn) {
  QueuesFigures f;
  if (auto q = request_json(conn, "troupe.sys.queues", 5000)) {
    if (q->contains("policy") && (*q)["policy"].is_string())
      f.policy = (*q)["policy"].get<std::string>();
    if (q->contains("preemptions") && (*q)["preemptions"].is_number_integer())
      f.preemptions = (*q)["preemptions"].get<long long>();
  }
  return f;
}

// One replay of the plan against the cluster at `url`: starts the fleet,
// submits, waits, samples, and builds the report. `policy` is the one asked
// for ("" when none); `host` is the self-hosted cluster, when there is one.
// Returns the exit code (0: every job answered and terminal in time).
int replay_once(const ReplayOptions& opt, const Plan& plan, const std::string& url,
                const std::string& policy, SelfHost* host, Json& report, std::ostream& err) {
  const auto& runnable = plan.runnable;
  std::string error;
  EngineOptions eo;
  eo.url = url;
  // A self-hosted cluster is open: no identity there.
  if (host == nullptr) eo.identity = opt.identity;
  for (const auto& j : runnable)
    if (std::find(eo.teams.begin(), eo.teams.end(), j.team) == eo.teams.end())
      eo.teams.push_back(j.team);
  // troupe.sys.nodes and troupe.sys.queues: the fleet wait and the samples.
  eo.admin_requests = true;
  auto engine = Engine::open(eo, &error);
  if (!engine) {
    err << "troupe-load: " << error << "\n";
    return 1;
  }
  if (!engine->can_request()) {
    err << "troupe-load: the replay asks troupe.sys.nodes and troupe.sys.queues, which only an "
           "admin may: give --creds admin-<name>.creds with --creds-dir\n";
    return 2;
  }
  QueuesFigures before = queues_figures(engine->requester());

  // --- the fleet ---
  std::string prefix =
      opt.fleet_prefix.empty() ? "rp" + std::to_string(::getpid()) : opt.fleet_prefix;
  const std::vector<FleetGroup> groups = groups_of(opt);
  const long long fleet_size = fleet_nodes(groups);
  std::unique_ptr<TempDir> fleet_dir;
  // One troupe-node --simulate process per group. With --fleet, group g's
  // nodes are <prefix>-<type>-00001...; without, <prefix>-00001... as before.
  std::vector<std::unique_ptr<Child>> fleet;
  std::vector<std::string> fleet_logs;
  if (!opt.no_fleet) {
    fleet_dir = std::make_unique<TempDir>("troupe-load-fleet", memory_temp_base());
    for (const auto& g : groups) {
      const std::string group_prefix = opt.fleet_given ? prefix + "-" + g.gpu_type : prefix;
      std::vector<std::string> argv = {own_dir() + "/troupe-node",
                                       "--nats",
                                       url,
                                       "--simulate",
                                       "--gpus",
                                       std::to_string(g.gpus_per_node),
                                       "--gpu-type",
                                       g.gpu_type,
                                       "--state-dir",
                                       fleet_dir->path() + "/state",
                                       "--heartbeat-ms",
                                       std::to_string(opt.fleet_heartbeat_ms),
                                       "--log-level",
                                       "warn"};
      if (g.nodes > 1) {
        argv.insert(argv.end(),
                    {"--count", std::to_string(g.nodes), "--name-prefix", group_prefix});
      } else {
        argv.insert(argv.end(), {"--name", group_prefix + "-00001"});
      }
      fleet_logs.push_back(fleet_dir->path() + "/fleet-" + g.gpu_type + ".log");
      fleet.push_back(std::make_unique<Child>(argv, fleet_logs.back()));
      if (fleet.back()->pid() == 0) {
        err << "troupe-load: " << fleet.back()->error() << "\n";
        return 1;
      }
    }
    auto until =
        Clock::now() + std::chrono::seconds(60) + std::chrono::milliseconds(fleet_size * 5);
    size_t alive = 0;
    while (true) {
      sample_nodes(engine->requester(), prefix, false, &alive);
      if (static_cast<long long>(alive) >= fleet_size) break;
      for (size_t i = 0; i < fleet.size(); ++i) {
        if (fleet[i]->running()) continue;
        err << "troupe-load: the fleet (troupe-node --count " << groups[i].nodes << " --gpu-type "
            << groups[i].gpu_type << ") exited; its log:\n"
            << tail_of(fleet_logs[i]);
        return 1;
      }
      if (Clock::now() > until) {
        err << "troupe-load: only " << alive << " of " << fleet_size
            << " fleet nodes became alive in time (is troupe-scheduler running?)\n";
        if (host != nullptr) err << "troupe-scheduler's log:\n" << host->scheduler_log_tail();
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }

  // --- GPU allocation and fragmentation samples, every second ---
  std::mutex samples_mu;
  std::vector<AllocSample> samples;
  std::atomic<bool> stop_sampling{false};
  std::thread sampler([&] {
    while (!stop_sampling.load()) {
      auto next = Clock::now() + std::chrono::seconds(1);
      if (auto s = sample_nodes(engine->requester(), opt.no_fleet ? "" : prefix, true)) {
        s->t_ns = engine->now_ns();
        std::lock_guard<std::mutex> lock(samples_mu);
        samples.push_back(*s);
      }
      while (!stop_sampling.load() && Clock::now() < next)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  struct Joiner {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Joiner() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } joiner{stop_sampling, sampler};

  // --- submissions at arrival / speedup ---
  const auto start = Clock::now();
  RunInfo info;
  {
    Ticker ticker(opt.progress, [&] {
      return (policy.empty() ? std::string() : policy + ": ") +
             progress_line(engine->progress(), runnable.size(), seconds_since(start));
    });
    for (size_t k = 0; k < runnable.size(); ++k) {
      const TraceJob& j = runnable[k];
      std::this_thread::sleep_until(start + secs(j.arrival_s / opt.speedup));
      if (!engine->wait_inflight_below(opt.max_inflight, Clock::now() + std::chrono::seconds(30))) {
        err << "troupe-load: no reply to " << opt.max_inflight
            << " outstanding submissions for 30 s; giving up submitting\n";
        break;
      }
      const JobShape s = plan.fits[k].shape;
      SimJob job;
      job.team = j.team;
      job.name = "trace-" + j.id;
      job.workers = s.workers;
      job.gpus_per_worker = s.gpus_per_worker;
      job.duration_s = std::max(j.duration_s / opt.speedup, opt.min_duration_s);
      job.max_runtime_s =
          runtime_limit_s(j.duration_s, opt.runtime_limit_factor, opt.speedup, opt.min_duration_s);
      job.gpu_type = plan.fits[k].gpu_type;
      job.priority = j.priority;
      engine->submit(job.team, sim_job_json(job), s.total_gpus());
    }
    info.complete = engine->wait_done(Clock::now() + secs(plan.deadline_s));
  }
  info.total_s = seconds_since(start);
  stop_sampling = true;
  if (sampler.joinable()) sampler.join();
  QueuesFigures after = queues_figures(engine->requester());
  if (after.preemptions)
    info.preemptions = *after.preemptions - (before.preemptions ? *before.preemptions : 0);
  std::optional<int> sched_pid = opt.scheduler_pid;
  if (host != nullptr) sched_pid = host->scheduler_pid();
  info.scheduler = memory_of(sched_pid, "troupe-scheduler");
  info.dropped = engine->dropped();
  info.rerouted = engine->rerouted();
  for (auto& f : fleet) f->stop();
  if (host != nullptr && !host->scheduler_running())
    err << "troupe-load: troupe-scheduler (" << policy << ") exited during the replay; its log:\n"
        << host->scheduler_log_tail();

  std::string reported = after.policy.empty() ? before.policy : after.policy;
  std::vector<std::string> traces = opt.traces;
  info.config =
      Json{{"nats", url},
           {"self_hosted", host != nullptr},
           {"traces", traces},
           {"format", trace_format_name(opt.format)},
           {"speedup", opt.speedup},
           {"nodes", fleet_size},
           {"gpus_per_node", opt.fleet_given ? Json(nullptr) : Json(opt.gpus_per_node)},
           {"fleet_groups", fleet_json(groups)},
           {"fleet_gpus", fleet_gpus(groups)},
           {"limit", opt.limit},
           {"fleet", opt.no_fleet ? "" : prefix},
           {"policy", !policy.empty()     ? policy
                      : !reported.empty() ? reported
                                          : "default"},
           {"policy_reported", reported.empty() ? Json(nullptr) : Json(reported)},
           // The scheduler said it runs the policy asked for (or, when none was
           // asked for, said which one it runs).
           {"policy_applied", !reported.empty() && (policy.empty() || reported == policy)},
           {"deadline_s", plan.deadline_s},
           {"min_duration_s", opt.min_duration_s},
           {"runtime_limit_factor", opt.runtime_limit_factor}};
  info.config.update(plan_trace_json(opt, plan));
  std::vector<AllocSample> snap;
  {
    std::lock_guard<std::mutex> lock(samples_mu);
    snap = samples;
  }
  std::vector<JobResult> results = engine->results();
  // Submission i is runnable[i] (submitted in order; a stop leaves the rest out).
  for (size_t i = 0; i < results.size() && i < runnable.size(); ++i) {
    results[i].trace_arrival_s = runnable[i].arrival_s;
    results[i].trace_duration_s = runnable[i].duration_s;
    results[i].censored = runnable[i].censored;
  }
  report = replay_report(results, snap, opt.speedup, info);
  bool ok = info.complete && report["rejected"] == 0 && report["unanswered"] == 0;
  if (!info.complete)
    err << "troupe-load: " << (policy.empty() ? "" : policy + ": ") << "not every job ended within "
        << plan.deadline_s << " s\n";
  if (!policy.empty() && reported != policy)
    err << "troupe-load: asked for policy " << policy << " but the scheduler reports '" << reported
        << "'\n";
  return ok ? 0 : 1;
}

}  // namespace

int run_replay(const ReplayOptions& opt, std::ostream& out, std::ostream& err) {
  Plan plan;
  if (int rc = make_plan(opt, plan, err); rc != 0) return rc;
  bus::Library library;

  if (!opt.self_host) {
    Json report;
    int rc = replay_once(opt, plan, opt.nats, opt.policies.empty() ? "" : opt.policies[0], nullptr,
                         report, err);
    if (report.is_null()) return rc;
    if (opt.json)
      out << report.dump(2) << "\n";
    else
      out << report_table(report);
    return rc;
  }

  // Self-hosted: one nats-server, scheduler and fleet per policy, in turn.
  std::vector<std::pair<std::string, Json>> runs;
  int rc = 0;
  for (const auto& policy : opt.policies) {
    HostOptions ho;
    ho.policy = policy;
    ho.nats_server = opt.nats_server;
    ho.config = opt.scheduler_config;
    std::string error;
    auto host = SelfHost::start(ho, &error);
    if (!host) {
      err << "troupe-load: cannot host a cluster for policy " << policy << ": " << error << "\n";
      return 1;
    }
    Json report;
    int one = replay_once(opt, plan, host->url(), policy, host.get(), report, err);
    host->stop();
    if (report.is_null()) return one;
    rc = std::max(rc, one);
    runs.emplace_back(policy, std::move(report));
  }
  out << runs_text(runs, opt.json);
  return rc;
}

}  // namespace troupe::load

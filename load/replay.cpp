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
#include "load/jobspec.hpp"
#include "load/proc.hpp"
#include "load/progress.hpp"
#include "load/report.hpp"
#include "load/run.hpp"
#include "load/trace.hpp"

namespace troupe::load {

namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

Clock::duration secs(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// GPUs allocated / in total over the alive nodes of a NodeList reply whose
// name starts with `prefix` (every node when empty). nullopt: no usable reply.
std::optional<AllocSample> sample_nodes(bus::Connection& conn, const std::string& prefix,
                                        size_t* alive_out = nullptr) {
  auto reply = conn.request("troupe.sys.nodes", std::string("{}"), 3000);
  if (!reply) return std::nullopt;
  Json j = Json::parse(reply->begin(), reply->end(), nullptr, false);
  if (j.is_discarded() || !j.contains("nodes") || !j["nodes"].is_array()) return std::nullopt;
  AllocSample s;
  size_t alive = 0;
  for (const auto& n : j["nodes"]) {
    if (!n.value("alive", false)) continue;
    std::string name = n.value("node", "");
    if (!prefix.empty() && name.rfind(prefix + "-", 0) != 0) continue;
    ++alive;
    s.allocated += n.value("gpus_allocated", 0);
    s.total += n.value("gpus_total", 0);
  }
  if (alive_out != nullptr) *alive_out = alive;
  return s;
}

}  // namespace

int run_replay(const ReplayOptions& opt, std::ostream& out, std::ostream& err) {
  // --- the trace ---
  std::vector<TraceJob> jobs;
  size_t skipped_rows = 0;
  for (const auto& path : opt.traces) {
    std::ifstream f(path);
    if (!f) {
      err << "troupe-load: cannot read " << path << "\n";
      return 2;
    }
    TraceParse p = parse_trace(f, opt.format, team_from_path(path));
    if (!p.error.empty()) {
      err << "troupe-load: " << path << ": " << p.error << "\n";
      return 2;
    }
    skipped_rows += p.skipped;
    for (auto& j : p.jobs) jobs.push_back(std::move(j));
  }
  order_trace(jobs, opt.limit);
  if (jobs.empty()) {
    err << "troupe-load: the trace has no job to replay\n";
    return 2;
  }
  // Jobs wider than the fleet would wait forever: left out and counted.
  std::vector<TraceJob> runnable;
  size_t too_wide = 0;
  double gpu_seconds = 0, max_duration = 0;
  for (auto& j : jobs) {
    JobShape s = shape_for(j.gpus, opt.gpus_per_node);
    if (s.workers > opt.nodes) {
      ++too_wide;
      continue;
    }
    gpu_seconds += s.total_gpus() * j.duration_s;
    max_duration = std::max(max_duration, j.duration_s);
    runnable.push_back(std::move(j));
  }
  if (runnable.empty()) {
    err << "troupe-load: every job needs more nodes than --nodes " << opt.nodes << "\n";
    return 2;
  }
  const double last_arrival = runnable.back().arrival_s;
  // Default deadline: the work spread on the whole fleet, the longest job and
  // a margin, all in wall time.
  double deadline_s = opt.deadline_s > 0
                          ? opt.deadline_s
                          : (gpu_seconds / (opt.nodes * static_cast<double>(opt.gpus_per_node)) +
                             max_duration) / opt.speedup * 2 + 60;

  bus::Library library;
  std::string error;
  auto engine = Engine::open(opt.nats, &error);
  if (!engine) {
    err << "troupe-load: " << error << "\n";
    return 1;
  }

  // --- the fleet ---
  std::string prefix = opt.fleet_prefix.empty() ? "rp" + std::to_string(::getpid()) : opt.fleet_prefix;
  std::unique_ptr<TempDir> fleet_dir;
  std::unique_ptr<Child> fleet;
  if (!opt.no_fleet) {
    fleet_dir = std::make_unique<TempDir>("troupe-load-fleet");
    std::vector<std::string> argv = {own_dir() + "/troupe-node",
                                     "--nats", opt.nats,
                                     "--simulate",
                                     "--gpus", std::to_string(opt.gpus_per_node),
                                     "--gpu-type", opt.gpu_type,
                                     "--state-dir", fleet_dir->path() + "/state",
                                     "--heartbeat-ms", std::to_string(opt.fleet_heartbeat_ms),
                                     "--log-level", "warn"};
    if (opt.nodes > 1) {
      argv.insert(argv.end(), {"--count", std::to_string(opt.nodes), "--name-prefix", prefix});
    } else {
      argv.insert(argv.end(), {"--name", prefix + "-00001"});
    }
    fleet = std::make_unique<Child>(argv, fleet_dir->path() + "/fleet.log");
    if (fleet->pid() == 0) {
      err << "troupe-load: " << fleet->error() << "\n";
      return 1;
    }
    auto until = Clock::now() + std::chrono::seconds(60) + std::chrono::milliseconds(opt.nodes * 5);
    size_t alive = 0;
    while (true) {
      sample_nodes(engine->requester(), prefix, &alive);
      if (alive >= static_cast<size_t>(opt.nodes)) break;
      if (!fleet->running()) {
        err << "troupe-load: the fleet (troupe-node --count " << opt.nodes << ") exited; see "
            << "its log (kept only while running)\n";
        return 1;
      }
      if (Clock::now() > until) {
        err << "troupe-load: only " << alive << " of " << opt.nodes
            << " fleet nodes became alive in time (is troupe-scheduler running?)\n";
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }

  // --- GPU allocation samples, every second ---
  std::mutex samples_mu;
  std::vector<AllocSample> samples;
  std::atomic<bool> stop_sampling{false};
  std::thread sampler([&] {
    while (!stop_sampling.load()) {
      auto next = Clock::now() + std::chrono::seconds(1);
      if (auto s = sample_nodes(engine->requester(), opt.no_fleet ? "" : prefix)) {
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
      return progress_line(engine->progress(), runnable.size(), seconds_since(start));
    });
    for (const auto& j : runnable) {
      std::this_thread::sleep_until(start + secs(j.arrival_s / opt.speedup));
      if (!engine->wait_inflight_below(opt.max_inflight, Clock::now() + std::chrono::seconds(30))) {
        err << "troupe-load: no reply to " << opt.max_inflight
            << " outstanding submissions for 30 s; giving up submitting\n";
        break;
      }
      JobShape s = shape_for(j.gpus, opt.gpus_per_node);
      SimJob job;
      job.team = j.team;
      job.name = "trace-" + j.id;
      job.workers = s.workers;
      job.gpus_per_worker = s.gpus_per_worker;
      job.duration_s = std::max(j.duration_s / opt.speedup, opt.min_duration_s);
      job.gpu_type = opt.gpu_type;
      engine->submit(job.team, sim_job_json(job), s.total_gpus());
    }
    info.complete = engine->wait_done(Clock::now() + secs(deadline_s));
  }
  info.total_s = seconds_since(start);
  stop_sampling = true;
  if (sampler.joinable()) sampler.join();
  info.scheduler = memory_of(opt.scheduler_pid, "troupe-scheduler");
  info.dropped = engine->dropped();
  if (fleet) fleet->stop();

  std::vector<std::string> traces = opt.traces;
  info.config = Json{{"nats", opt.nats},
                     {"traces", traces},
                     {"format", trace_format_name(opt.format)},
                     {"speedup", opt.speedup},
                     {"nodes", opt.nodes},
                     {"gpus_per_node", opt.gpus_per_node},
                     {"limit", opt.limit},
                     {"fleet", opt.no_fleet ? "" : prefix},
                     {"policy", opt.policy.empty() ? "default" : opt.policy},
                     {"policy_applied", false},
                     {"deadline_s", deadline_s},
                     {"min_duration_s", opt.min_duration_s},
                     {"trace_jobs", jobs.size()},
                     {"trace_rows_skipped", skipped_rows},
                     {"jobs_too_wide_skipped", too_wide},
                     {"trace_span_s", last_arrival}};
  std::vector<AllocSample> snap;
  {
    std::lock_guard<std::mutex> lock(samples_mu);
    snap = samples;
  }
  Json report = replay_report(engine->results(), snap, opt.speedup, info);
  if (opt.json)
    out << report.dump(2) << "\n";
  else
    out << report_table(report);
  bool ok = info.complete && report["rejected"] == 0 && report["unanswered"] == 0;
  if (!info.complete) err << "troupe-load: not every job ended within " << deadline_s << " s\n";
  return ok ? 0 : 1;
}

}  // namespace troupe::load

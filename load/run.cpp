// Owns the load run: pacing, the mix draws, the wait for terminal states, and
// the report (load/report.hpp) printed as a table or JSON.
#include "load/run.hpp"

#include <filesystem>
#include <random>
#include <system_error>
#include <thread>

#include "bus/nats.hpp"
#include "load/engine.hpp"
#include "load/jobspec.hpp"
#include "load/proc.hpp"
#include "load/progress.hpp"
#include "load/report.hpp"

namespace troupe::load {

namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Submits opt.jobs jobs drawn from the mix, paced at opt.rate (0: no
// pacing), never more than opt.max_inflight awaiting their reply.
void submit_all(const LoadOptions& opt, Engine& engine, Clock::time_point start,
                std::ostream& err) {
  std::mt19937_64 rng(opt.seed);
  std::uniform_real_distribution<double> draw(0.0, 1.0);
  for (size_t i = 0; i < opt.jobs; ++i) {
    if (opt.rate > 0)
      std::this_thread::sleep_until(
          start + std::chrono::duration_cast<Clock::duration>(
                      std::chrono::duration<double>(static_cast<double>(i) / opt.rate)));
    if (!engine.wait_inflight_below(opt.max_inflight, Clock::now() + std::chrono::seconds(30))) {
      if (!engine.refused().empty()) break;  // run_load says why
      err << "troupe-load: no reply to " << opt.max_inflight
          << " outstanding submissions for 30 s; giving up submitting\n";
      break;
    }
    const MixEntry& shape = opt.mix[pick(opt.mix, draw(rng))];
    SimJob job;
    job.team = opt.teams[i % opt.teams.size()];
    job.name = "load-" + std::to_string(i);
    job.workers = shape.workers;
    job.gpus_per_worker = shape.gpus;
    job.duration_s = opt.duration_s;
    job.gpu_type = opt.gpu_type;
    job.pool = opt.pool;
    job.command = opt.command;
    engine.submit(job.team, sim_job_json(job), shape.total_gpus(), nullptr, opt.pool);
  }
}

Json or_null(const std::string& s) {
  return s.empty() ? Json(nullptr) : Json(s);
}

// Who the run was on the bus (paths only, never the credentials).
Json identity_json(const IdentityOptions& id, const char* mode) {
  return Json{{"mode", mode},
              {"creds", or_null(id.creds)},
              {"creds_dir", or_null(id.creds_dir)},
              {"tls_ca", or_null(effective_tls_ca(id, [](const std::string& p) {
                 std::error_code ec;
                 return std::filesystem::is_regular_file(p, ec);
               }))}};
}

}  // namespace

int run_load(const LoadOptions& opt, std::ostream& out, std::ostream& err) {
  bus::Library library;
  std::string error;
  EngineOptions eo;
  eo.url = opt.nats;
  eo.identity = opt.identity;
  eo.teams = opt.teams;
  // The load run asks nothing of troupe.sys.*: the scheduler's memory comes
  // from /proc, everything else from the replies and the events.
  eo.admin_requests = false;
  auto engine = Engine::open(eo, &error);
  if (!engine) {
    err << "troupe-load: " << error << "\n";
    return 1;
  }
  const auto start = Clock::now();
  RunInfo info;
  {
    // The progress line runs while submitting and waiting, and is gone
    // before the report is printed.
    Ticker ticker(opt.progress, [&] {
      return progress_line(engine->progress(), opt.jobs, seconds_since(start));
    });
    submit_all(opt, *engine, start, err);
    info.complete =
        engine->wait_done(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(opt.deadline_s)));
  }
  info.total_s = seconds_since(start);
  info.scheduler = memory_of(opt.scheduler_pid, "troupe-scheduler");
  info.dropped = engine->dropped();
  info.rerouted = engine->rerouted();
  std::vector<JobResult> results = engine->results();

  info.config = Json{{"nats", opt.nats},
                     {"jobs", opt.jobs},
                     {"rate", opt.rate},
                     {"mix", opt.mix_text},
                     {"teams", opt.teams},
                     {"duration_s", opt.duration_s},
                     {"deadline_s", opt.deadline_s},
                     {"max_inflight", opt.max_inflight},
                     {"seed", opt.seed},
                     {"identity", identity_json(opt.identity, engine->identity_mode())}};
  Json report = load_report(results, info);
  if (opt.json)
    out << report.dump(2) << "\n";
  else
    out << report_table(report);
  // A refusal by the server fails the run even when it came before the
  // first submission (nothing submitted is "complete").
  bool ok = engine->refused().empty() && info.complete && report["rejected"] == 0 &&
            report["unanswered"] == 0;
  // Jobs that failed fail the run: it measured something else than asked
  // (`cannot execute` on real agents, say). The first reasons are shown.
  if (auto failed = failed_text(results); !failed.empty()) {
    err << "troupe-load: " << failed;
    ok = false;
  }
  if (std::string why = engine->refused(); !why.empty())
    err << "troupe-load: stopped: "
        << Engine::refusal_text(why, opt.identity.creds_dir.empty() && !opt.identity.creds.empty())
        << "\n";
  else if (!ok && !info.complete)
    err << "troupe-load: not every job ended within --deadline-s " << opt.deadline_s << "\n";
  return ok ? 0 : 1;
}

}  // namespace troupe::load

// Owns troupe-load's command-line grammar (CLI11) and its checks.
#include "load/options.hpp"

#include <sstream>

#include <CLI/CLI.hpp>

#include "bus/subjects.hpp"

namespace troupe::load {

namespace {
const char* kMixHelp =
    "job mix: comma-separated SHAPE[:WEIGHT]; SHAPE is cpu, <N>gpu (one worker, N GPUs) or "
    "gang<W>x<G> (W workers of G GPUs); weights are relative";
}

Command parse_command_line(int argc, const char* const* argv,
                           const std::optional<std::string>& env_nats) {
  Command c;
  LoadOptions& l = c.load;
  ReplayOptions& r = c.replay;
  if (env_nats && !env_nats->empty()) l.nats = r.nats = *env_nats;

  CLI::App app{"troupe-load: load generator and trace replayer for Troupe", "troupe-load"};
  auto* nats_opt =
      app.add_option("--nats", l.nats, "NATS URL (default $TROUPE_NATS or nats://127.0.0.1:4222)");
  app.add_option("--jobs", l.jobs, "jobs to submit")->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{100000000}));
  app.add_option("--rate", l.rate, "submissions per second (0: as fast as possible)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--mix", l.mix_text, kMixHelp)->capture_default_str();
  std::string teams = "load";
  app.add_option("--teams", teams, "comma-separated teams, used round-robin")
      ->capture_default_str();
  app.add_option("--duration-s", l.duration_s, "simulated run time of each job (s)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--deadline-s", l.deadline_s,
                 "wait at most this long after the last submission for every job to end")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--max-inflight", l.max_inflight, "submissions awaiting a reply at once")
      ->capture_default_str()->check(CLI::Range(size_t{1}, size_t{10000000}));
  app.add_option("--seed", l.seed, "seed of the mix draws")->capture_default_str();
  app.add_option("--gpu-type", l.gpu_type, "GPU type asked for (default: any)");
  app.add_flag("--json", l.json, "print the report as JSON on stdout");
  int sched_pid = 0;
  auto* pid_opt = app.add_option("--scheduler-pid", sched_pid,
                                 "troupe-scheduler's pid for its peak RSS (default: found by name)")
                      ->check(CLI::PositiveNumber);
  bool no_progress = false;
  app.add_flag("--no-progress", no_progress, "no progress bar on stderr");

  CLI::App* rp = app.add_subcommand(
      "replay", "replay a GPU-cluster trace against a simulated fleet (troupe-node --count)");
  rp->add_option("trace", r.traces, "trace file(s); several are merged (each its own team when "
                                    "the format has no tenant column)")
      ->required()->check(CLI::ExistingFile);
  std::string format = "tiresias";
  rp->add_option("--format", format, "chronus | elasticflow | muri | tiresias")
      ->capture_default_str()
      ->check(CLI::IsMember({"chronus", "elasticflow", "muri", "tiresias"}));
  auto* rp_nats_opt = rp->add_option("--nats", r.nats, "NATS URL");
  rp->add_option("--speedup", r.speedup, "trace time / wall time")->capture_default_str()
      ->check(CLI::PositiveNumber);
  rp->add_option("--nodes", r.nodes, "simulated nodes to start")->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  rp->add_option("--gpus-per-node", r.gpus_per_node, "GPUs per simulated node")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  rp->add_option("--limit", r.limit, "replay only the first K jobs (by arrival)")
      ->check(CLI::NonNegativeNumber);
  rp->add_flag("--json", r.json, "print the report as JSON on stdout");
  rp->add_flag("--no-fleet", r.no_fleet, "use the nodes already on the bus; start none");
  rp->add_option("--fleet-prefix", r.fleet_prefix, "node name prefix of the fleet (default rp<pid>)");
  rp->add_option("--fleet-heartbeat-ms", r.fleet_heartbeat_ms, "heartbeat period of the fleet")
      ->capture_default_str()->check(CLI::PositiveNumber);
  rp->add_option("--gpu-type", r.gpu_type, "GPU type of the fleet and of the jobs")
      ->capture_default_str();
  rp->add_option("--policy", r.policy,
                 "troupe | fifo | troupe,fifo: the scheduler policy; with a self-hosted "
                 "scheduler it is started with it, otherwise it is checked against "
                 "troupe.sys.queues; two names run the replay once with each and compare");
  bool compare = false;
  rp->add_flag("--compare", compare,
               "replay twice, each on its own nats-server, scheduler and fleet: --policy "
               "troupe, then fifo; report both and the ratios troupe / fifo");
  rp->add_flag("--self-host", r.self_host,
               "start an own nats-server -js (free loopback port) and troupe-scheduler "
               "--policy P for the run");
  rp->add_option("--nats-server", r.nats_server, "nats-server to start when self-hosting "
                                                 "(default: found in $PATH or /usr/sbin)");
  rp->add_option("--scheduler-config", r.scheduler_config,
                 "cluster config file for the self-hosted scheduler (--config)")
      ->check(CLI::ExistingFile);
  rp->add_option("--deadline-s", r.deadline_s,
                 "give up this long after the last submission (default: derived from the trace)")
      ->check(CLI::NonNegativeNumber);
  rp->add_option("--min-duration-s", r.min_duration_s,
                 "raise shorter simulated run times to this (s)")
      ->check(CLI::NonNegativeNumber);
  int rp_pid = 0;
  auto* rp_pid_opt = rp->add_option("--scheduler-pid", rp_pid, "troupe-scheduler's pid")
                         ->check(CLI::PositiveNumber);
  rp->add_option("--max-inflight", r.max_inflight, "submissions awaiting a reply at once")
      ->capture_default_str()->check(CLI::Range(size_t{1}, size_t{10000000}));
  bool rp_no_progress = false;
  rp->add_flag("--no-progress", rp_no_progress, "no progress bar on stderr");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    c.exit_code = app.exit(e, out, err);
    c.message = out.str() + err.str();
    c.kind = Command::exit_now;
    return c;
  }
  auto fail = [&](const std::string& why) {
    c.kind = Command::exit_now;
    c.exit_code = 2;
    c.message = why + "\nRun with --help for more information.\n";
    return c;
  };

  if (rp->parsed()) {
    r.format = *parse_trace_format(format);
    if (rp_nats_opt->empty() && !nats_opt->empty()) r.nats = l.nats;
    r.nats_given = !rp_nats_opt->empty() || !nats_opt->empty();
    r.policies.clear();
    {
      std::stringstream ps(r.policy);
      for (std::string p; std::getline(ps, p, ',');)
        if (!p.empty()) r.policies.push_back(p);
    }
    if (compare) {
      if (r.policies.size() > 1) return fail("--compare: give --policy with one name, or none");
      if (!r.policies.empty() && r.policies[0] != "troupe")
        return fail("--compare runs troupe against fifo; use --policy A,B for other pairs");
      r.policies = {"troupe", "fifo"};
    }
    if (r.policies.size() > 2) return fail("--policy: at most two policies");
    if (r.policies.size() == 2 && r.policies[0] == r.policies[1])
      return fail("--policy: the two policies are the same");
    if (r.policies.size() > 1) r.self_host = true;
    if (r.self_host) {
      if (r.nats_given)
        return fail("--compare and --self-host start their own nats-server and scheduler; "
                    "leave out --nats (or drop --compare/--self-host to use that cluster)");
      if (r.no_fleet) return fail("--no-fleet needs an external cluster: drop --self-host/--compare");
      if (r.policies.empty()) r.policies = {"troupe"};
      for (const auto& p : r.policies)
        if (p != "troupe" && p != "fifo")
          return fail("--policy: '" + p + "' is not a policy of troupe-scheduler (troupe, fifo)");
    }
    if (!rp_pid_opt->empty()) r.scheduler_pid = rp_pid;
    else if (!pid_opt->empty()) r.scheduler_pid = sched_pid;
    r.progress = !(rp_no_progress || no_progress);
    if (r.json == false && l.json) r.json = true;
    if (!r.fleet_prefix.empty()) {
      if (auto why = subjects::check_token(r.fleet_prefix); !why.empty())
        return fail("--fleet-prefix: " + why);
    }
    c.kind = Command::run_replay;
    return c;
  }

  std::string err;
  auto mix = parse_mix(l.mix_text, &err);
  if (!mix) return fail("--mix: " + err);
  l.mix = *mix;
  l.teams.clear();
  std::stringstream ss(teams);
  for (std::string t; std::getline(ss, t, ',');) {
    if (!subjects::valid_team(t)) return fail("--teams: '" + t + "' is not a valid team name");
    l.teams.push_back(t);
  }
  if (l.teams.empty()) return fail("--teams: give at least one team");
  if (!pid_opt->empty()) l.scheduler_pid = sched_pid;
  l.progress = !no_progress;
  c.kind = Command::run_load;
  return c;
}

}  // namespace troupe::load

// Owns troupe-load's command-line grammar (CLI11) and its checks.
#include "load/options.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <sstream>

#include "bus/subjects.hpp"

namespace troupe::load {

std::string team_creds_path(const std::string& creds_dir, const std::string& team) {
  std::string dir = creds_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir + "/" + std::string(subjects::kTeamIdentityPrefix) + team + ".creds";
}

std::string effective_tls_ca(const IdentityOptions& id,
                             const std::function<bool(const std::string&)>& exists) {
  if (!id.tls_ca.empty() || id.creds_dir.empty()) return id.tls_ca;
  std::string dir = id.creds_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  std::string ca = dir + "/ca.pem";
  return exists(ca) ? ca : std::string();
}

std::optional<std::vector<FleetGroup>> parse_fleet(const std::string& text, std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<std::vector<FleetGroup>> {
    if (error != nullptr) *error = why;
    return std::nullopt;
  };
  // A whole number in [lo, hi] made of digits only.
  auto whole = [](const std::string& s, long long lo, long long hi) -> std::optional<int> {
    if (s.empty() || s.size() > 9) return std::nullopt;
    long long v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return std::nullopt;
      v = v * 10 + (c - '0');
    }
    if (v < lo || v > hi) return std::nullopt;
    return static_cast<int>(v);
  };
  if (text.empty()) return fail("give at least one group TYPE:NODESxGPUS (e.g. a100:40x8)");
  std::vector<FleetGroup> out;
  size_t pos = 0;
  while (true) {
    size_t comma = text.find(',', pos);
    std::string item =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const std::string where = "group '" + item + "': ";
    if (item.empty()) return fail("an empty group (two commas, or a comma at an end)");
    size_t colon = item.find(':');
    if (colon == std::string::npos)
      return fail(where + "no ':' (the form is TYPE:NODESxGPUS, e.g. a100:40x8)");
    FleetGroup g;
    g.gpu_type = item.substr(0, colon);
    if (g.gpu_type.empty()) return fail(where + "no GPU type before ':'");
    if (auto why = subjects::check_token(g.gpu_type); !why.empty())
      return fail(where + "GPU type '" + g.gpu_type + "': " + why);
    std::string shape = item.substr(colon + 1);
    size_t x = shape.find('x');
    if (x == std::string::npos)
      return fail(where + "no 'x' between the node count and the GPUs per node (e.g. 40x8)");
    std::string n = shape.substr(0, x), gp = shape.substr(x + 1);
    auto nodes = whole(n, 1, 1000000);
    if (!nodes)
      return fail(where + "node count '" + n + "' is not a whole number from 1 to 1000000");
    auto gpus = whole(gp, 1, 1024);
    if (!gpus)
      return fail(where + "GPUs per node '" + gp + "' is not a whole number from 1 to 1024");
    g.nodes = *nodes;
    g.gpus_per_node = *gpus;
    for (const auto& o : out)
      if (o.gpu_type == g.gpu_type)
        return fail("GPU type '" + g.gpu_type + "' is given twice (one group per type)");
    out.push_back(std::move(g));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

namespace {
const char* kMixHelp =
    "job mix: comma-separated SHAPE[:WEIGHT]; SHAPE is cpu, <N>gpu (one worker, N GPUs) or "
    "gang<W>x<G> (W workers of G GPUs); weights are relative";
const char* kCredsHelp =
    "NATS .creds file (default $TROUPE_NATS_CREDS): the one identity, or with --creds-dir the "
    "admin's for troupe.sys.* requests";
const char* kTlsCaHelp =
    "CA bundle (PEM) the server's certificate must be signed by (default $TROUPE_NATS_CA, "
    "else <creds-dir>/ca.pem when it exists)";
const char* kCredsDirHelp =
    "folder holding team-<t>.creds for every team submitted as: each team submits, and "
    "watches its events, with its own identity";

// The identity flags of one (sub)command; `given` tells which were on the line.
struct IdentityFlags {
  IdentityOptions values;
  CLI::Option* creds = nullptr;
  CLI::Option* tls_ca = nullptr;
  CLI::Option* creds_dir = nullptr;
  bool any() const { return !creds->empty() || !tls_ca->empty() || !creds_dir->empty(); }
};

void add_identity_flags(CLI::App& app, IdentityFlags& f) {
  f.creds = app.add_option("--creds", f.values.creds, kCredsHelp);
  f.tls_ca = app.add_option("--tls-ca", f.values.tls_ca, kTlsCaHelp);
  f.creds_dir = app.add_option("--creds-dir", f.values.creds_dir, kCredsDirHelp)
                    ->check(CLI::ExistingDirectory);
}

// Each value from the subcommand's flag, else the top level's, else the
// environment.
IdentityOptions merge_identity(const IdentityFlags& sub, const IdentityFlags& top,
                               const Environment& env) {
  IdentityOptions id;
  auto pick = [](const CLI::Option* s, const std::string& sv, const CLI::Option* t,
                 const std::string& tv, const std::optional<std::string>& e) {
    if (s != nullptr && !s->empty()) return sv;
    if (!t->empty()) return tv;
    return e.value_or(std::string());
  };
  id.creds = pick(sub.creds, sub.values.creds, top.creds, top.values.creds, env.creds);
  id.tls_ca = pick(sub.tls_ca, sub.values.tls_ca, top.tls_ca, top.values.tls_ca, env.tls_ca);
  id.creds_dir =
      pick(sub.creds_dir, sub.values.creds_dir, top.creds_dir, top.values.creds_dir, std::nullopt);
  return id;
}
}  // namespace

Command parse_command_line(int argc, const char* const* argv, const Environment& env) {
  Command c;
  LoadOptions& l = c.load;
  ReplayOptions& r = c.replay;
  if (env.nats && !env.nats->empty()) l.nats = r.nats = *env.nats;

  CLI::App app{"troupe-load: load generator and trace replayer for Troupe", "troupe-load"};
  auto* nats_opt = app.add_option(
      "--nats", l.nats,
      "NATS URL, or several comma-separated (default $TROUPE_NATS or nats://127.0.0.1:4222)");
  app.add_option("--jobs", l.jobs, "jobs to submit")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{100000000}));
  app.add_option("--rate", l.rate, "submissions per second (0: as fast as possible)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--mix", l.mix_text, kMixHelp)->capture_default_str();
  std::string teams = "load";
  app.add_option("--teams", teams, "comma-separated teams, used round-robin")
      ->capture_default_str();
  app.add_option("--duration-s", l.duration_s, "simulated run time of each job (s)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--command", l.command,
                 "run this with sh -c in each job (real agents: `troupe up`) instead of the "
                 "simulated run a --simulate agent makes; TROUPE_SIM_DURATION_S is in its "
                 "environment (e.g. 'sleep $TROUPE_SIM_DURATION_S')");
  app.add_option("--deadline-s", l.deadline_s,
                 "wait at most this long after the last submission for every job to end")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-inflight", l.max_inflight, "submissions awaiting a reply at once")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{10000000}));
  app.add_option("--seed", l.seed, "seed of the mix draws")->capture_default_str();
  app.add_option("--gpu-type", l.gpu_type, "GPU type asked for (default: any)");
  app.add_option("--pool", l.pool,
                 "pool asked for, the submissions addressed to it (troupe.<team>.submit.<pool>: "
                 "read by its shard)")
      ->check([](const std::string& p) { return subjects::check_token(p); });
  app.add_flag("--json", l.json, "print the report as JSON on stdout");
  int sched_pid = 0;
  auto* pid_opt = app.add_option("--scheduler-pid", sched_pid,
                                 "troupe-scheduler's pid for its peak RSS (default: found by name)")
                      ->check(CLI::PositiveNumber);
  bool no_progress = false;
  app.add_flag("--no-progress", no_progress, "no progress bar on stderr");
  IdentityFlags top_id;
  add_identity_flags(app, top_id);

  CLI::App* rp = app.add_subcommand(
      "replay", "replay a GPU-cluster trace against a simulated fleet (troupe-node --count)");
  rp->add_option("trace", r.traces,
                 "trace file(s); several are merged (each its own team when "
                 "the format has no tenant column)")
      ->required()
      ->check(CLI::ExistingFile);
  std::string format = "tiresias";
  rp->add_option("--format", format, "chronus | elasticflow | muri | tiresias")
      ->capture_default_str()
      ->check(CLI::IsMember({"chronus", "elasticflow", "muri", "tiresias"}));
  auto* rp_nats_opt = rp->add_option("--nats", r.nats, "NATS URL, or several comma-separated");
  rp->add_option("--speedup", r.speedup, "trace time / wall time")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  auto* nodes_opt = rp->add_option("--nodes", r.nodes, "simulated nodes to start")
                        ->capture_default_str()
                        ->check(CLI::Range(1, 1000000));
  auto* gpn_opt = rp->add_option("--gpus-per-node", r.gpus_per_node, "GPUs per simulated node")
                      ->capture_default_str()
                      ->check(CLI::Range(1, 1024));
  std::string fleet_text;
  auto* fleet_opt =
      rp->add_option("--fleet", fleet_text,
                     "heterogeneous fleet TYPE:NODESxGPUS[,...], e.g. a100:40x8,t4:100x2 "
                     "(instead of --nodes/--gpus-per-node/--gpu-type)");
  rp->add_flag("--ignore-priority", r.ignore_priority,
               "submit every job in the default priority class, whatever the trace says");
  rp->add_option("--limit", r.limit, "replay only the first K jobs (by arrival)")
      ->check(CLI::NonNegativeNumber);
  rp->add_flag("--json", r.json, "print the report as JSON on stdout");
  rp->add_flag("--no-fleet", r.no_fleet, "use the nodes already on the bus; start none");
  rp->add_option("--fleet-prefix", r.fleet_prefix,
                 "node name prefix of the fleet (default rp<pid>)");
  rp->add_option("--fleet-heartbeat-ms", r.fleet_heartbeat_ms, "heartbeat period of the fleet")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  auto* gpu_type_opt =
      rp->add_option("--gpu-type", r.gpu_type,
                     "GPU type of the fleet and of the jobs whose trace names none")
          ->capture_default_str();
  rp->add_option("--policy", r.policy,
                 "troupe | fifo | fifo-backfill | A,B: the scheduler policy; with a self-hosted "
                 "scheduler it is started with it, otherwise it is checked against "
                 "troupe.sys.queues; two names run the replay once with each and compare");
  bool compare = false;
  rp->add_flag("--compare", compare,
               "replay twice, each on its own nats-server, scheduler and fleet: --policy "
               "troupe, then fifo; report both and the ratios troupe / fifo");
  rp->add_flag("--self-host", r.self_host,
               "start an own nats-server -js (free loopback port) and troupe-scheduler "
               "--policy P for the run");
  rp->add_option("--nats-server", r.nats_server,
                 "nats-server to start when self-hosting "
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
  rp->add_option("--runtime-limit-factor", r.runtime_limit_factor,
                 "each job's max_runtime_s is this x its trace duration / speedup (rounded up, "
                 "at least 1 s)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e6));
  rp->add_flag("--skip-idle", r.skip_idle,
               "shorten idle stretches of the trace (nothing queued or running) longer than "
               "--idle-gap-s to that");
  auto* idle_gap_opt =
      rp->add_option("--idle-gap-s", r.idle_gap_s,
                     "with --skip-idle: the longest idle stretch kept (trace seconds)")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
  int rp_pid = 0;
  auto* rp_pid_opt = rp->add_option("--scheduler-pid", rp_pid, "troupe-scheduler's pid")
                         ->check(CLI::PositiveNumber);
  rp->add_option("--max-inflight", r.max_inflight, "submissions awaiting a reply at once")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{10000000}));
  bool rp_no_progress = false;
  rp->add_flag("--no-progress", rp_no_progress, "no progress bar on stderr");
  IdentityFlags rp_id;
  add_identity_flags(*rp, rp_id);

  // simulate: the trace in virtual time against the pure policy (load/simulate.hpp).
  ReplayOptions sim;
  CLI::App* sm = app.add_subcommand(
      "simulate",
      "run a GPU-cluster trace in virtual time against the scheduler's pure policy (no NATS)");
  sm->add_option("trace", sim.traces, "trace file(s); several are merged")
      ->required()
      ->check(CLI::ExistingFile);
  std::string sm_format = "tiresias";
  sm->add_option("--format", sm_format, "chronus | elasticflow | muri | tiresias")
      ->capture_default_str()
      ->check(CLI::IsMember({"chronus", "elasticflow", "muri", "tiresias"}));
  auto* sm_nodes_opt = sm->add_option("--nodes", sim.nodes, "nodes of the fleet")
                           ->capture_default_str()
                           ->check(CLI::Range(1, 1000000));
  auto* sm_gpn_opt = sm->add_option("--gpus-per-node", sim.gpus_per_node, "GPUs per node")
                         ->capture_default_str()
                         ->check(CLI::Range(1, 1024));
  std::string sm_fleet_text;
  auto* sm_fleet_opt = sm->add_option("--fleet", sm_fleet_text,
                                      "heterogeneous fleet TYPE:NODESxGPUS[,...] (instead of "
                                      "--nodes/--gpus-per-node/--gpu-type)");
  auto* sm_gpu_type_opt =
      sm->add_option("--gpu-type", sim.gpu_type, "GPU type of the fleet")->capture_default_str();
  sm->add_flag("--ignore-priority", sim.ignore_priority,
               "every job in the default priority class, whatever the trace says");
  sm->add_option("--limit", sim.limit, "only the first K jobs (by arrival)")
      ->check(CLI::NonNegativeNumber);
  sm->add_flag("--json", sim.json, "print the report as JSON on stdout");
  sm->add_option("--policy", sim.policy,
                 "troupe | fifo | fifo-backfill, or A,B to run both and compare (default troupe)");
  bool sm_compare = false;
  sm->add_flag("--compare", sm_compare, "the same as --policy troupe,fifo");
  sm->add_option("--scheduler-config", sim.scheduler_config,
                 "cluster config (teams, pools, quotas, order las, las bands, classes)")
      ->check(CLI::ExistingFile);
  sm->add_option("--runtime-limit-factor", sim.runtime_limit_factor,
                 "each job's max_runtime_s is this x its trace duration")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e6));
  sm->add_flag("--skip-idle", sim.skip_idle,
               "shorten idle stretches of the trace longer than --idle-gap-s to that");
  auto* sm_idle_gap_opt =
      sm->add_option("--idle-gap-s", sim.idle_gap_s,
                     "with --skip-idle: the longest idle stretch kept (trace seconds)")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
  sm->add_option("--seed", sim.seed, "recorded in the report (the simulation has no randomness)")
      ->capture_default_str();
  sm->add_flag("--resume-on-preempt", sim.resume_on_preempt,
               "a preempted job checkpoints as it stops and later runs only what is left "
               "(default: its work is lost, as with troupe-node --simulate)");
  sm->add_option("--sample-s", sim.sample_s,
                 "allocation sample period in trace seconds (default: span / 20000, at least 1)")
      ->check(CLI::NonNegativeNumber);

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
        return fail(
            "--compare and --self-host start their own nats-server and scheduler; "
            "leave out --nats (or drop --compare/--self-host to use that cluster)");
      if (r.no_fleet)
        return fail("--no-fleet needs an external cluster: drop --self-host/--compare");
      if (rp_id.any() || top_id.any())
        return fail(
            "--compare and --self-host start their own open nats-server; "
            "leave out --creds, --tls-ca and --creds-dir");
      if (r.policies.empty()) r.policies = {"troupe"};
      for (const auto& p : r.policies)
        if (p != "troupe" && p != "fifo" && p != "fifo-backfill")
          return fail("--policy: '" + p +
                      "' is not a policy of troupe-scheduler (troupe, fifo, fifo-backfill)");
    }
    // The self-hosted nats-server is open: no identity (not the environment's either).
    if (!r.self_host) r.identity = merge_identity(rp_id, top_id, env);
    if (!r.identity.creds_dir.empty() && r.identity.creds.empty())
      return fail(
          "replay --creds-dir: the replay asks troupe.sys.nodes and troupe.sys.queues, "
          "which only an admin may; give --creds admin-<name>.creds (or "
          "$TROUPE_NATS_CREDS) as well");
    if (!idle_gap_opt->empty() && !r.skip_idle) return fail("--idle-gap-s needs --skip-idle");
    if (!rp_pid_opt->empty())
      r.scheduler_pid = rp_pid;
    else if (!pid_opt->empty())
      r.scheduler_pid = sched_pid;
    r.progress = !(rp_no_progress || no_progress);
    if (r.json == false && l.json) r.json = true;
    if (!r.fleet_prefix.empty()) {
      if (auto why = subjects::check_token(r.fleet_prefix); !why.empty())
        return fail("--fleet-prefix: " + why);
    }
    if (!fleet_opt->empty()) {
      if (!nodes_opt->empty() || !gpn_opt->empty() || !gpu_type_opt->empty())
        return fail(
            "--fleet gives the nodes, GPUs and GPU type of each group: leave out --nodes, "
            "--gpus-per-node and --gpu-type");
      std::string why;
      auto groups = parse_fleet(fleet_text, &why);
      if (!groups) return fail("--fleet: " + why);
      r.fleet = std::move(*groups);
      r.fleet_given = true;
      r.nodes = static_cast<int>(std::min<long long>(fleet_nodes(r.fleet), 1000000000));
      r.gpus_per_node = 0;
      for (const auto& g : r.fleet) r.gpus_per_node = std::max(r.gpus_per_node, g.gpus_per_node);
    } else {
      r.fleet = {FleetGroup{r.gpu_type, r.nodes, r.gpus_per_node}};
    }
    c.kind = Command::run_replay;
    return c;
  }

  if (sm->parsed()) {
    sim.format = *parse_trace_format(sm_format);
    sim.policies.clear();
    {
      std::stringstream ps(sim.policy);
      for (std::string p; std::getline(ps, p, ',');)
        if (!p.empty()) sim.policies.push_back(p);
    }
    if (sm_compare) {
      if (!sim.policies.empty()) return fail("simulate --compare: leave out --policy");
      sim.policies = {"troupe", "fifo"};
    }
    if (sim.policies.empty()) sim.policies = {"troupe"};
    if (sim.policies.size() > 2) return fail("--policy: at most two policies");
    if (sim.policies.size() == 2 && sim.policies[0] == sim.policies[1])
      return fail("--policy: the two policies are the same");
    for (const auto& p : sim.policies)
      if (p != "troupe" && p != "fifo" && p != "fifo-backfill")
        return fail("--policy: '" + p + "' is not a policy (troupe, fifo, fifo-backfill)");
    if (!sm_idle_gap_opt->empty() && !sim.skip_idle) return fail("--idle-gap-s needs --skip-idle");
    if (sim.json == false && l.json) sim.json = true;
    sim.progress = false;
    if (!sm_fleet_opt->empty()) {
      if (!sm_nodes_opt->empty() || !sm_gpn_opt->empty() || !sm_gpu_type_opt->empty())
        return fail(
            "--fleet gives the nodes, GPUs and GPU type of each group: leave out --nodes, "
            "--gpus-per-node and --gpu-type");
      std::string why;
      auto groups = parse_fleet(sm_fleet_text, &why);
      if (!groups) return fail("--fleet: " + why);
      sim.fleet = std::move(*groups);
      sim.fleet_given = true;
      sim.nodes = static_cast<int>(std::min<long long>(fleet_nodes(sim.fleet), 1000000000));
      sim.gpus_per_node = 0;
      for (const auto& g : sim.fleet)
        sim.gpus_per_node = std::max(sim.gpus_per_node, g.gpus_per_node);
    } else {
      sim.fleet = {FleetGroup{sim.gpu_type, sim.nodes, sim.gpus_per_node}};
    }
    c.replay = std::move(sim);
    c.kind = Command::run_simulate;
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
  l.identity = merge_identity(IdentityFlags{}, top_id, env);
  l.progress = !no_progress;
  c.kind = Command::run_load;
  return c;
}

}  // namespace troupe::load

// main() of the `troupe` CLI: parses the command line (CLI11) and runs one
// verb from gateway/commands.hpp. Nothing else lives here.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "bus/nats.hpp"
#include "gateway/auth/store.hpp"
#include "gateway/client.hpp"
#include "gateway/commands.hpp"
#include "gateway/submit_args.hpp"
#include "gateway/usage.hpp"
#include "messages/names.hpp"

namespace gw = troupe::gateway;

int main(int argc, char** argv) {
  // Everything after the first "--" is the job's command (troupe submit).
  auto split = gw::split_at_dashdash(argc, argv);
  std::vector<const char*> args;
  for (const auto& a : split.options) args.push_back(a.c_str());

  CLI::App app{"troupe: submit and watch GPU jobs on a Troupe cluster, or run one locally"};
  app.set_version_flag("--version", std::string("troupe ") + TROUPE_VERSION);
  app.require_subcommand(1);
  app.fallthrough();
  std::string url = gw::kDefaultNatsUrl;
  app.add_option("--nats", url, "NATS server URL, or a NATS cluster's URLs comma-separated")
      ->envname("TROUPE_NATS")
      ->capture_default_str();
  bool utc = false;
  app.add_flag("--utc", utc, "show times in UTC (default: the local time zone, with its offset)");
  std::string creds, tls_ca;
  app.add_option("--creds", creds,
                 "NATS credentials file (default: $TROUPE_NATS_CREDS, else a `troupe up` "
                 "cluster's admin identity in $TROUPE_HOME/auth)")
      ->envname("TROUPE_NATS_CREDS");
  app.add_option("--tls-ca", tls_ca,
                 "CA of the NATS server's TLS certificate (default: $TROUPE_NATS_CA, else "
                 "$TROUPE_HOME/auth/ca.pem)")
      ->envname("TROUPE_NATS_CA");

  // submit
  auto* submit =
      app.add_subcommand("submit", "Submit a job from a spec file and/or flags (command after --)");
  std::string file;
  gw::SubmitFlags flags;
  std::string team, name, kind, gpu_type, priority, idem;
  int gpus = 0, workers = 0, max_retries = 0, cpus = 0;
  std::string max_runtime, memory_mb;
  auto* o_file = submit->add_option("file", file, "job spec (YAML or JSON)");
  auto* o_team = submit->add_option("--team", team, "team (queue) the job belongs to");
  auto* o_name = submit->add_option("--name", name, "job name");
  auto* o_kind = submit->add_option("--kind", kind, "training | inference | evaluation");
  auto* o_gpus = submit->add_option("--gpus", gpus, "GPUs per worker");
  auto* o_type = submit->add_option("--gpu-type", gpu_type, "GPU type (e.g. a100); empty: any");
  auto* o_workers =
      submit->add_option("--workers", workers, "workers (> 1: a gang, all-or-nothing)");
  auto* o_cpus = submit->add_option("--cpus", cpus, "CPUs per worker");
  auto* o_mem = submit->add_option("--memory-mb", memory_mb,
                                   "memory per worker: MiB, or with a unit (512M, 64G)");
  auto* o_prio = submit->add_option("--priority", priority, "high | normal | low");
  auto* o_runtime = submit->add_option("--max-runtime", max_runtime,
                                       "time before it is stopped: seconds, or 90m, 1h30m, 2d");
  auto* o_retries = submit->add_option("--max-retries", max_retries, "retries after a failure");
  submit
      ->add_option("--after", flags.after,
                   "JOB_ID[:succeeded|failed|finished]: start once that job ended so (default "
                   "succeeded; repeat the flag for more; the job is blocked until then)")
      ->allow_extra_args(false);
  submit->add_option("--array", flags.array,
                     "N[%K]: a job array of N tasks, at most K at once (each task gets "
                     "TROUPE_ARRAY_INDEX and TROUPE_ARRAY_COUNT)");
  submit->add_option("--env", flags.env, "KEY=VALUE (repeat the flag for more)")
      ->allow_extra_args(false);
  auto* o_idem =
      submit->add_option("--idempotency-key", idem, "same key twice: same job id, runs once");
  bool submit_wait = false;
  submit->add_flag("--wait", submit_wait,
                   "wait for the job; exit as it ended (see troupe wait --help)");

  // -o on the listings (status, jobs, nodes, queues, why, history)
  std::string output;

  // status
  auto* status = app.add_subcommand("status", "Show one job");
  std::string job_id, job_team;
  bool json = false;
  status->add_option("id", job_id, "job id")->required();
  status->add_option("--team", job_team, "the job's team (else looked up)");
  status->add_flag("--json", json, "print the JobView JSON");
  status->add_option("-o,--output", output, "table | wide | json | yaml");

  // jobs
  auto* jobs = app.add_subcommand("jobs", "List jobs (every team unless --team)");
  std::string state;
  bool all = false;
  jobs->add_option("--team", job_team, "only this team's jobs");
  jobs->add_flag("--all", all, "every team's jobs (the default without --team)");
  jobs->add_option("--state", state, "only jobs in this state (queued, running, failed, ...)");
  long long jobs_limit = 0;
  std::string jobs_after;
  jobs->add_option("--limit", jobs_limit, "at most this many jobs (default: all, page by page)")
      ->check(CLI::PositiveNumber);
  jobs->add_option("--after", jobs_after, "start after this job id (submit order)");
  std::string jobs_pipeline, jobs_label;
  jobs->add_option("--pipeline", jobs_pipeline,
                   "only this pipeline's jobs (a pipeline id p-..., upstream first)");
  jobs->add_option("--label", jobs_label, "only jobs with this label (KEY=VALUE)");
  std::string jobs_schedule;
  jobs->add_option("--schedule", jobs_schedule,
                   "only this schedule's runs (the label troupe.schedule=NAME)");
  std::string jobs_cluster;
  jobs->add_option("--cluster", jobs_cluster,
                   "at a front door (troupe-dispatch): only the jobs in this cluster");
  jobs->add_flag("--json", json, "print the JobList JSON");
  jobs->add_option("-o,--output", output, "table | wide | json | yaml");

  // cancel
  auto* cancel = app.add_subcommand("cancel", "Cancel jobs; prints each one's new state");
  std::vector<std::string> job_ids;
  cancel->add_option("id", job_ids, "job ids");
  cancel->add_option("--team", job_team, "the job's team (else looked up)");
  std::string cancel_state;
  cancel->add_option("--state", cancel_state,
                     "instead of ids: every job in this state (queued, placing, starting, "
                     "running) of --team, or of every team");

  // wait
  auto* wait = app.add_subcommand(
      "wait",
      "Wait until jobs end; exit 0 if all succeeded, else as the first that did not: its exit "
      "code (1-255), 124 max_runtime_s, 125 failed without an exit code, 130 canceled; 69 "
      "cluster unreachable");
  std::vector<std::string> wait_ids;
  std::string wait_timeout;
  wait->add_option("id", wait_ids, "job ids")->required();
  wait->add_option("--team", job_team, "the jobs' team (else looked up)");
  wait->add_option("--timeout", wait_timeout, "give up after this long (90s, 10m, 2h); exit 1");

  // logs
  auto* logs = app.add_subcommand("logs", "Print a job's output (one rank)");
  int rank = 0;
  bool follow = false;
  logs->add_option("id", job_id, "job id")->required();
  logs->add_option("--team", job_team, "the job's team (else looked up)");
  logs->add_option("--rank", rank, "worker rank")->capture_default_str();
  logs->add_flag("-f,--follow", follow,
                 "keep printing until the job ends; exit as it ended (see troupe wait --help)");
  bool all_ranks = false;
  logs->add_flag("--all-ranks", all_ranks, "every rank's output, each line prefixed [rank N]");

  // nodes
  auto* nodes = app.add_subcommand("nodes", "List the cluster's nodes");
  nodes->add_flag("--json", json, "print the NodeList JSON");
  nodes->add_option("-o,--output", output, "table | wide | json | yaml");
  std::string nodes_cluster;
  nodes->add_option("--cluster", nodes_cluster,
                    "at a front door (troupe-dispatch): only the nodes of this cluster");

  // clusters (a front door)
  auto* clusters = app.add_subcommand(
      "clusters", "The clusters behind a front door (troupe-dispatch): GPUs, queue, state");
  clusters->add_flag("--json", json, "print the raw troupe.sys.clusters reply");

  // queues
  auto* queues = app.add_subcommand(
      "queues", "Per team and pool: quota, GPUs in use and borrowed, pending work, share");
  queues->add_flag("--json", json, "print the raw troupe.sys.queues reply");
  queues->add_option("-o,--output", output, "table | wide | json | yaml");
  std::string queues_cluster;
  queues->add_option("--cluster", queues_cluster,
                     "at a front door (troupe-dispatch): only this cluster's pools, teams and "
                     "counters");

  // cordon / uncordon / drain
  std::string node_name;
  auto* cordon = app.add_subcommand("cordon", "Take no new work on a node (running work goes on)");
  cordon->add_option("node", node_name, "node name")->required();
  auto* uncordon = app.add_subcommand("uncordon", "Make a node schedulable again");
  uncordon->add_option("node", node_name, "node name")->required();
  auto* drain =
      app.add_subcommand("drain", "Let a node's running jobs finish and take no new ones");
  drain->add_option("node", node_name, "node name")->required();
  auto* remove_node = app.add_subcommand(
      "remove-node", "Forget a lost node for good (its agent stopped, nothing held there)");
  remove_node->add_option("node", node_name, "node name")->required();
  std::string node_reason, node_cluster;
  for (auto* sc : {cordon, drain})
    sc->add_option("--reason", node_reason, "why (shown by troupe nodes)");
  for (auto* sc : {cordon, uncordon, drain, remove_node})
    sc->add_option(
        "--cluster", node_cluster,
        "at a front door: the node's cluster (needed when two have a node of that name)");

  // why
  auto* why = app.add_subcommand("why", "Say why a job is not running now");
  why->add_option("id", job_id, "job id")->required();
  why->add_option("--team", job_team, "the job's team (else looked up)");
  why->add_flag("--json", json, "print the raw troupe.<team>.why reply");
  why->add_option("-o,--output", output, "table | wide | json | yaml");

  // usage
  auto* usage_cmd = app.add_subcommand(
      "usage", "GPU-hours used and lost to preemption, ends, queue waits (from the job events)");
  std::string usage_since = "7d", usage_until = "now", usage_by = "team", usage_output = "table";
  usage_cmd->add_option("--team", job_team, "one team (else every team: an admin)");
  usage_cmd->add_option("--since", usage_since,
                        "from: a duration back from --until (7d, 12h), or a UTC date/time "
                        "(2026-12-01, 2026-12-01T08:30); default 7d");
  usage_cmd->add_option("--until", usage_until, "to: now (default), a duration back, or a date");
  usage_cmd->add_option("--by", usage_by, "team | kind | day | none")
      ->check(CLI::IsMember({"team", "kind", "day", "none"}));
  usage_cmd->add_option("-o,--output", usage_output, "table | json | csv")
      ->check(CLI::IsMember({"table", "json", "csv"}));

  // history
  auto* history =
      app.add_subcommand("history", "Show every stored state change of a job, oldest first");
  history->add_option("id", job_id, "job id")->required();
  history->add_option("--team", job_team, "the job's team (else every team's events are searched)");
  history->add_flag("--json", json, "print the raw events (JobEvent JSON) as a JSON array");
  history->add_option("-o,--output", output, "table | wide | json | yaml");

  // up
  auto* up =
      app.add_subcommand("up", "Run a local cluster (nats-server, scheduler, 2 nodes) and a demo");
  gw::UpOptions upo;
  bool no_demo = false;
  up->add_option("--home", upo.home,
                 "state and logs directory (default $TROUPE_HOME or ./.troupe)");
  up->add_flag("--no-demo", no_demo, "start the cluster only");
  up->add_flag("--exit-after-demo", upo.exit_after_demo,
               "stop after the demo (exit 1 if it misbehaved)");
  up->add_option("--port", upo.port, "NATS port")->capture_default_str();
  up->add_option("--nats-cluster", upo.nats_cluster,
                 "run N nats-servers as one NATS cluster (client ports --port..--port+N-1, "
                 "routes --port+2000..), streams and buckets with 3 replicas from 3 servers on")
      ->capture_default_str()
      ->check(CLI::Range(1, 5));
  up->add_option("--config", upo.config,
                 "cluster config for troupe-scheduler --config (YAML or JSON)");
  up->add_option("--http-port", upo.http_port,
                 "port of the HTTP API and web console (troupe-gateway); 0: a free one")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  bool no_http = false;
  up->add_flag("--no-http", no_http, "start no troupe-gateway (no HTTP API, no console)");
  up->add_option("--clusters", upo.clusters,
                 "run N clusters (c1 a100, c2 h100, ...; NATS on --port + 10 i) behind one front "
                 "door (troupe-dispatch) on --port")
      ->capture_default_str()
      ->check(CLI::Range(1, 4));
  up->add_option("--gpu-type", upo.gpu_type, "the nodes' GPU type")->capture_default_str();
  up->add_option("--leaf-port", upo.leaf_port,
                 "accept a front door's leaf node links on this port (+ i for server i); makes "
                 "dispatch.creds for them")
      ->check(CLI::Range(1, 65535));
  up->add_flag("--insecure", upo.insecure,
               "open NATS: no identities, no TLS (anyone on this machine may act as any team)");

  // auth: NATS identities and TLS material under <home>/auth (gateway/auth/store.hpp)
  auto* auth =
      app.add_subcommand("auth", "Make NATS identities (.creds) and TLS material in <home>/auth");
  auth->require_subcommand(1);
  std::string auth_home, auth_name;
  int auth_count = 0;
  bool auth_rotate = false;
  auto* auth_init = auth->add_subcommand("init",
                                         "Create the operator, accounts, TLS material, "
                                         "scheduler.creds and nats-auth.conf (keeps what exists)");
  auto* auth_team =
      auth->add_subcommand("add-team", "Write team-NAME.creds (the team's verbs and events)");
  auto* auth_node = auth->add_subcommand("add-node", "Write node-NAME.creds (one node agent)");
  auto* auth_fleet = auth->add_subcommand(
      "add-fleet", "Write fleet-PREFIX.creds (troupe-node --count N --name-prefix PREFIX)");
  auto* auth_admin =
      auth->add_subcommand("add-admin", "Write admin-NAME.creds (every team, node operations)");
  auto* auth_gateway = auth->add_subcommand(
      "add-gateway", "Write gateway.creds (troupe-gateway: the HTTP API and console)");
  auto* auth_dispatch = auth->add_subcommand(
      "add-dispatch",
      "Write dispatch.creds (in a cluster: a front door's leaf node link signs in with it)");
  auto* auth_link = auth->add_subcommand(
      "add-link",
      "In a front door's NATS: make the link account of cluster NAME and link-NAME.creds; prints "
      "the creds path and the account's public key (the leafnode remote's account:)");
  auto* auth_server = auth->add_subcommand(
      "add-server",
      "Write server-NAME-cert.pem and -key.pem: a TLS certificate from ca.pem for one nats-server "
      "of several machines (--dns/--ip: the names its clients and peers dial; default DNS NAME, "
      "when NAME is a host name)");
  std::vector<std::string> server_dns, server_ips;
  auth_server->add_option("--dns", server_dns, "host names, comma-separated")->delimiter(',');
  auth_server->add_option("--ip", server_ips, "IP addresses, comma-separated")->delimiter(',');
  auto* auth_token = auth->add_subcommand(
      "add-token",
      "Print a new bearer token of the HTTP API for a team (or --admin NAME); the cluster must "
      "run");
  auto* auth_revoke = auth->add_subcommand("revoke-token", "Revoke a bearer token of the HTTP API");
  std::string token_team, token_admin, token_text;
  auto* o_token_team = auth_token->add_option("--team", token_team, "the team it acts for");
  auto* o_token_admin =
      auth_token->add_option("--admin", token_admin, "an operator's token (every team), by name");
  o_token_team->excludes(o_token_admin);
  auth_revoke->add_option("TOKEN", token_text, "the token")->required();
  for (auto* sc : {auth_init, auth_team, auth_node, auth_fleet, auth_admin, auth_gateway,
                   auth_dispatch, auth_link, auth_server, auth_token, auth_revoke})
    sc->add_option("--home", auth_home, "state directory (default $TROUPE_HOME or ./.troupe)");
  auth_team->add_option("NAME", auth_name, "team name")->required();
  auth_node->add_option("NAME", auth_name, "node name (troupe-node --name)")->required();
  auth_fleet->add_option("PREFIX", auth_name, "fleet name prefix (members PREFIX-00001 ...)")
      ->required();
  auth_fleet->add_option("--count", auth_count, "number of fleet members")->required();
  auth_admin->add_option("NAME", auth_name, "admin name")->required();
  auth_link->add_option("NAME", auth_name, "cluster name (as in dispatch.yaml)")->required();
  auth_server->add_option("NAME", auth_name, "server name (its files' names)")->required();
  for (auto* sc :
       {auth_team, auth_node, auth_fleet, auth_admin, auth_gateway, auth_dispatch, auth_link})
    sc->add_flag("--rotate", auth_rotate, "replace the identity's key even if its .creds exists");

  // pipeline submit|status|cancel
  auto* pipeline = app.add_subcommand(
      "pipeline", "Submit several dependent jobs at once (all or none), see or cancel them");
  pipeline->require_subcommand(1);
  auto* pipeline_submit = pipeline->add_subcommand(
      "submit", "Submit a pipeline file (YAML or JSON); prints its id and each job's id");
  auto* pipeline_status =
      pipeline->add_subcommand("status", "Show a pipeline's jobs, upstream first, and its state");
  auto* pipeline_cancel = pipeline->add_subcommand(
      "cancel", "Cancel every job of a pipeline not ended yet, the last first");
  std::string pipeline_file, pipeline_id;
  pipeline_submit->add_option("file", pipeline_file, "pipeline file (YAML or JSON)")->required();
  pipeline_submit->add_option("--team", job_team,
                              "team of the pipeline (else the file's team:, else its first "
                              "job's)");
  for (auto* sc : {pipeline_status, pipeline_cancel}) {
    sc->add_option("id", pipeline_id, "pipeline id (p-...)")->required();
    sc->add_option("--team", job_team, "the pipeline's team (else every team's jobs are searched)");
  }
  for (auto* sc : {pipeline_submit, pipeline_status})
    sc->add_option("-o,--output", output, "table | json | yaml");

  // schedule create|list|show|delete|suspend|resume
  auto* schedule =
      app.add_subcommand("schedule", "Recurring jobs: a job spec run on a cron or @every schedule");
  schedule->require_subcommand(1);
  gw::ScheduleArgs sched;
  std::string sched_spec;
  auto* sched_create = schedule->add_subcommand(
      "create", "Create a schedule: NAME --cron EXPR [--tz ZONE] SPEC (a job spec file)");
  sched_create->add_option("name", sched.name, "schedule name (lower-case letters, digits, '-')")
      ->required();
  sched_create->add_option("spec", sched_spec, "job spec file (YAML or JSON) each run submits")
      ->required();
  sched_create
      ->add_option("--cron", sched.cron,
                   "5-field cron (\"0 3 * * *\"), @hourly|@daily|@weekly|@monthly|@yearly, or "
                   "\"@every 30s\"")
      ->required();
  sched_create->add_option("--tz", sched.tz, "time zone of the cron fields (default UTC)");
  sched_create->add_option("--concurrency", sched.concurrency,
                           "forbid (skip a tick while the last run is active) | replace | allow "
                           "(default allow)");
  sched_create->add_option("--missed", sched.missed,
                           "run_once (default: one run for the ticks missed while down) | skip");
  std::vector<std::pair<CLI::App*, std::string>> sched_verbs = {{sched_create, "create"}};
  for (const auto& [verb, help] :
       std::vector<std::pair<std::string, std::string>>{{"list", "List the team's schedules"},
                                                        {"show", "Show one schedule"},
                                                        {"delete", "Delete a schedule"},
                                                        {"suspend", "Stop firing a schedule"},
                                                        {"resume", "Fire a schedule again"}}) {
    auto* sc = schedule->add_subcommand(verb, help);
    if (verb != "list") sc->add_option("name", sched.name, "schedule name")->required();
    sched_verbs.emplace_back(sc, verb);
  }
  for (auto& [sc, verb] : sched_verbs) {
    sc->add_option("--team", job_team,
                   verb == "create" ? "the schedule's team (else the spec's)" : "the team");
    sc->add_option("-o,--output", output, "table | json | yaml");
  }

  // completion
  auto* completion =
      app.add_subcommand("completion", "Print a shell completion script (bash or zsh)");
  std::string shell;
  completion->add_option("shell", shell, "bash | zsh")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}));

  // A verb's flags, with those of its own verbs (troupe pipeline status --team)
  // and their names (troupe auth init, add-team, ...): usage errors and
  // completion.
  auto flags_of = [](CLI::App* sc) {
    gw::VerbFlags vf;
    vf.verb = sc->get_name();
    auto add = [&vf](const std::string& flag, bool valued) {
      auto& list = valued ? vf.with_value : vf.without_value;
      if (std::find(list.begin(), list.end(), flag) == list.end()) list.push_back(flag);
    };
    for (const auto* o : sc->get_options())
      for (const auto& l : o->get_lnames()) add("--" + l, o->get_expected_min() != 0);
    for (auto* nested : sc->get_subcommands([](CLI::App*) { return true; })) {
      add(nested->get_name(), false);
      for (const auto* o : nested->get_options())
        for (const auto& l : o->get_lnames()) add("--" + l, o->get_expected_min() != 0);
    }
    return vf;
  };

  // An unknown verb is named (with the closest one) before CLI11 reads the rest.
  std::vector<std::string> words(split.options.begin() + 1, split.options.end());
  std::vector<std::string> verbs;
  for (const auto* sc : app.get_subcommands([](CLI::App*) { return true; }))
    verbs.push_back(sc->get_name());
  if (auto bad = gw::unknown_verb(words, verbs, {"--nats", "--creds", "--tls-ca"})) {
    std::cerr << "troupe: " << *bad << "\n";
    return gw::kUsageExit;
  }
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    gw::VerbFlags vf;
    for (const auto& w : words)
      if (std::find(verbs.begin(), verbs.end(), w) != verbs.end()) {
        vf = flags_of(app.get_subcommand(w));
        break;
      }
    std::cerr << gw::usage_error(vf, {"--nats", "--creds", "--tls-ca"}, words, e.what()) << "\n";
    return gw::kUsageExit;  // every usage error
  }
  if (split.had_dashdash && !submit->parsed()) {
    std::cerr << "troupe: only `troupe submit` takes a command after --\n";
    return 2;
  }

  if (auth_token->parsed() || auth_revoke->parsed()) {
    namespace ta = troupe::auth;
    if (auth_token->parsed()) {
      std::string usage = !token_admin.empty()  ? ta::check_node_name(token_admin)
                          : !token_team.empty() ? ta::check_team_name(token_team)
                                                : "add-token needs --team TEAM or --admin NAME";
      if (!usage.empty()) {
        std::cerr << "troupe auth: " << usage << "\n";
        return gw::kUsageExit;
      }
    }
    troupe::bus::Library lib;
    if (auth_token->parsed()) return gw::run_add_token(url, auth_home, token_team, token_admin);
    return gw::run_revoke_token(url, auth_home, token_text);
  }
  if (auth->parsed()) {
    namespace ta = troupe::auth;
    std::string usage = auth_team->parsed()    ? ta::check_team_name(auth_name)
                        : auth_fleet->parsed() ? ta::check_fleet(auth_name, auth_count)
                        : auth_init->parsed() || auth_gateway->parsed() || auth_dispatch->parsed()
                            ? std::string()
                            : ta::check_node_name(auth_name);
    if (!usage.empty()) {
      std::cerr << "troupe auth: " << usage << "\n";
      return 2;
    }
    const std::string dir = ta::auth_dir_of(ta::troupe_home(auth_home));
    std::string written, error;
    if (auth_init->parsed()) error = ta::init(dir);
    if (auth_team->parsed()) error = ta::add_team(dir, auth_name, auth_rotate, &written);
    if (auth_node->parsed()) error = ta::add_node(dir, auth_name, auth_rotate, &written);
    if (auth_fleet->parsed())
      error = ta::add_fleet(dir, auth_name, auth_count, auth_rotate, &written);
    if (auth_admin->parsed()) error = ta::add_admin(dir, auth_name, auth_rotate, &written);
    if (auth_gateway->parsed()) error = ta::add_gateway(dir, auth_rotate, &written);
    if (auth_dispatch->parsed()) error = ta::add_dispatch(dir, auth_rotate, &written);
    std::string link_account;
    if (auth_link->parsed())
      error = ta::add_link(dir, auth_name, auth_rotate, &written, &link_account);
    if (auth_server->parsed())
      error = ta::add_server(dir, auth_name, server_dns, server_ips, &written);
    if (!error.empty()) {
      std::cerr << "troupe auth: " << error << "\n";
      return 1;
    }
    if (auth_init->parsed()) {  // paths only, never their content
      std::cout << ta::server_config_path(dir, true) << "\n"
                << ta::server_config_path(dir, false) << "\n"
                << dir << "/" << ta::kCaCertFile << "\n"
                << ta::creds_path(dir, "scheduler") << "\n";
    } else {
      std::cout << written << "\n";
      if (!link_account.empty()) std::cout << link_account << "\n";
    }
    return 0;
  }

  if (completion->parsed()) {
    std::vector<gw::VerbFlags> all;
    for (auto* sc : app.get_subcommands([](CLI::App*) { return true; }))
      all.push_back(flags_of(sc));
    std::cout << gw::completion_script(
        shell, all, {"--nats", "--creds", "--tls-ca", "--utc", "--version", "--help"},
        {"--nats", "--creds", "--tls-ca"});
    return 0;
  }
  if (up->parsed()) {
    upo.demo = !no_demo;
    upo.http = !no_http;
    if (no_demo && upo.exit_after_demo) {
      std::cerr << "troupe up: --exit-after-demo needs the demo (drop --no-demo)\n";
      return 2;
    }
    return upo.clusters > 1 ? gw::run_up_clusters(upo) : gw::run_up(upo);
  }

  if (utc) {  // every time the CLI prints goes through localtime_r
    ::setenv("TZ", "UTC", 1);
    ::tzset();
  }
  // The identity flags reach Client::connect through the environment it reads
  // (gateway/client.hpp resolve_identity), the same way as for child processes.
  if (!creds.empty()) ::setenv("TROUPE_NATS_CREDS", creds.c_str(), 1);
  if (!tls_ca.empty()) ::setenv("TROUPE_NATS_CA", tls_ca.c_str(), 1);
  troupe::bus::Library lib;
  if (submit->parsed()) {
    if (o_team->count()) flags.team = team;
    if (o_name->count()) flags.name = name;
    if (o_kind->count()) flags.kind = kind;
    if (o_gpus->count()) flags.gpus = gpus;
    if (o_type->count()) flags.gpu_type = gpu_type;
    if (o_workers->count()) flags.workers = workers;
    if (o_cpus->count()) flags.cpus = cpus;
    if (o_mem->count()) {
      auto mb = gw::parse_size_mb(memory_mb);
      if (!mb) {
        std::cerr << "troupe submit: --memory-mb " << memory_mb
                  << " is not a size (MiB, or with a unit: 512M, 64G)\n";
        return gw::kUsageExit;
      }
      flags.memory_mb = *mb;
    }
    if (o_prio->count()) flags.priority = priority;
    if (o_runtime->count()) {
      auto s = gw::parse_duration_s(max_runtime);
      if (!s) {
        std::cerr << "troupe submit: --max-runtime " << max_runtime
                  << " is not a duration (seconds, or 90m, 1h30m, 2d)\n";
        return gw::kUsageExit;
      }
      flags.max_runtime_s = *s;
    }
    if (o_retries->count()) flags.max_retries = max_retries;
    if (o_idem->count()) flags.idempotency_key = idem;
    flags.command = split.command;
    if (!o_file->count() && split.command.empty()) {
      std::cerr
          << "troupe submit: give a spec file, or a command after -- (see troupe submit --help)\n";
      return 2;
    }
    if (o_file->count() && !gw::readable_file(file)) {
      // `troupe submit --gpus 1 nvidia-smi`: a command without --.
      std::cerr << "troupe submit: cannot read the spec file '" << file
                << "'. To run it as the job's command, put it after --: troupe submit [flags] -- "
                << file << "\n";
      return gw::kUsageExit;
    }
    return gw::run_submit(url, o_file->count() ? std::optional<std::string>(file) : std::nullopt,
                          flags, submit_wait);
  }
  // -o: json is --json; yaml converts what --json prints; wide widens tables.
  gw::Output out = gw::Output::table;
  if (!output.empty()) {
    auto o = gw::parse_output(output);
    if (!o) {
      std::cerr << "troupe: -o " << output << ": not an output (table, wide, json, yaml)\n";
      return gw::kUsageExit;
    }
    out = *o;
    if (out == gw::Output::json || out == gw::Output::yaml) json = true;
  }
  const bool wide = out == gw::Output::wide;
  auto listing = [&](auto run) -> int {
    if (out != gw::Output::yaml) return run();
    std::ostringstream buf;
    auto* old = std::cout.rdbuf(buf.rdbuf());
    int rc = run();
    std::cout.rdbuf(old);
    std::string yaml = rc == 0 ? gw::json_to_yaml(buf.str()) : std::string();
    std::cout << (yaml.empty() ? buf.str() : yaml);
    return rc;
  };
  if (status->parsed()) return listing([&] { return gw::run_status(url, job_id, job_team, json); });
  if (jobs->parsed()) {
    if (all && !job_team.empty()) {
      std::cerr << "troupe jobs: --all and --team exclude each other\n";
      return 2;
    }
    if (!state.empty()) {
      if (auto bad = gw::check_state(state); !bad.empty()) {
        std::cerr << "troupe jobs: " << bad << "\n";
        return gw::kUsageExit;
      }
    }
    if (!jobs_schedule.empty()) {
      if (!jobs_label.empty() || !jobs_pipeline.empty()) {
        std::cerr << "troupe jobs: --schedule, --label and --pipeline exclude each other\n";
        return gw::kUsageExit;
      }
      jobs_label = std::string(troupe::names::kScheduleLabel) + "=" + jobs_schedule;
    }
    if (!jobs_label.empty()) {
      if (auto bad = gw::check_label_filter(jobs_label); !bad.empty()) {
        std::cerr << "troupe jobs: " << bad << "\n";
        return gw::kUsageExit;
      }
    }
    return listing([&] {
      return gw::run_jobs(url, job_team, state, json, jobs_limit, jobs_after, wide, jobs_pipeline,
                          jobs_label, jobs_cluster);
    });
  }
  if (pipeline_submit->parsed()) {
    if (!gw::readable_file(pipeline_file)) {
      std::cerr << "troupe pipeline submit: cannot read the pipeline file '" << pipeline_file
                << "'\n";
      return gw::kUsageExit;
    }
    return listing([&] { return gw::run_pipeline_submit(url, pipeline_file, job_team, json); });
  }
  if (pipeline_status->parsed())
    return listing([&] { return gw::run_pipeline_status(url, pipeline_id, job_team, json); });
  if (pipeline_cancel->parsed()) return gw::run_pipeline_cancel(url, pipeline_id, job_team);
  for (auto& [sc, verb] : sched_verbs)
    if (sc->parsed())
      return listing(
          [&] { return gw::run_schedule(url, verb, job_team, sched, sched_spec, json); });
  if (cancel->parsed()) {
    if (job_ids.empty() == cancel_state.empty()) {
      std::cerr << "troupe cancel: give job ids, or --state STATE (with --team TEAM for one "
                   "team's jobs), not both\n";
      return gw::kUsageExit;
    }
    if (!cancel_state.empty()) {
      if (auto bad = gw::check_state(cancel_state); !bad.empty()) {
        std::cerr << "troupe cancel: " << bad << "\n";
        return gw::kUsageExit;
      }
      if (troupe::names::is_terminal(cancel_state)) {
        std::cerr << "troupe cancel: " << cancel_state
                  << " jobs have ended; --state takes queued, placing, starting or running\n";
        return gw::kUsageExit;
      }
      return gw::run_cancel_where(url, job_team, cancel_state);
    }
    int rc = 0;
    for (const auto& id : job_ids) {
      int one = gw::run_cancel(url, id, job_team);
      if (rc == 0) rc = one;
    }
    return rc;
  }
  if (wait->parsed()) {
    int64_t timeout_s = 0;
    if (!wait_timeout.empty()) {
      auto s = gw::parse_duration_s(wait_timeout);
      if (!s) {
        std::cerr << "troupe wait: --timeout " << wait_timeout
                  << " is not a duration (seconds, or 90s, 10m, 2h)\n";
        return gw::kUsageExit;
      }
      timeout_s = *s;
    }
    return gw::run_wait(url, wait_ids, job_team, timeout_s);
  }
  if (logs->parsed()) return gw::run_logs(url, job_id, job_team, rank, follow, all_ranks);
  if (nodes->parsed())
    return listing([&] { return gw::run_nodes(url, json, wide, nodes_cluster); });
  if (queues->parsed()) return listing([&] { return gw::run_queues(url, json, queues_cluster); });
  if (clusters->parsed()) return gw::run_clusters(url, json);
  if (usage_cmd->parsed())
    return gw::run_usage(url, job_team, usage_since, usage_until, usage_by, usage_output);
  if (why->parsed()) return listing([&] { return gw::run_why(url, job_id, job_team, json); });
  if (history->parsed())
    return listing([&] { return gw::run_history(url, job_id, job_team, json); });
  if (cordon->parsed()) return gw::run_node_op(url, "cordon", node_name, node_reason, node_cluster);
  if (uncordon->parsed()) return gw::run_node_op(url, "uncordon", node_name, {}, node_cluster);
  if (drain->parsed()) return gw::run_node_op(url, "drain", node_name, node_reason, node_cluster);
  if (remove_node->parsed())
    return gw::run_node_op(url, "remove-node", node_name, {}, node_cluster);
  return 2;
}

// The `troupe` verbs. Each returns the process exit code (0 ok, 1 failed),
// prints results on stdout and errors on stderr. All but run_up expect a
// bus::Library to exist (main creates it); run_up makes its own, after it has
// blocked the stop signals.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gateway/schedule_view.hpp"
#include "gateway/submit_args.hpp"

namespace troupe::gateway {

// With `wait`: then waits for the job and exits as run_wait.
int run_submit(const std::string& url, const std::optional<std::string>& file,
               const SubmitFlags& flags, bool wait = false);
int run_status(const std::string& url, const std::string& job_id, const std::string& team,
               bool json);
// `troupe jobs`: pages of troupe.<team>.jobs / troupe.sys.jobs until `limit`
// jobs (0: all), after the job `after` when given; a hint on stderr when more
// remain.
// `pipeline` / `label` (troupe jobs --pipeline ID / --label KEY=VALUE): only
// that pipeline's jobs / the jobs with that label (the scheduler filters).
// `cluster` (--cluster NAME, at a front door): only the jobs in that cluster.
int run_jobs(const std::string& url, const std::string& team, const std::string& state, bool json,
             int64_t limit = 0, const std::string& after = {}, bool wide = false,
             const std::string& pipeline = {}, const std::string& label = {},
             const std::string& cluster = {});
int run_cancel(const std::string& url, const std::string& job_id, const std::string& team);
// `troupe cancel --state S [--team T]`: every job of T (of every team when
// T is "") in state S, each printed with its new state ("<id> <state>").
int run_cancel_where(const std::string& url, const std::string& team, const std::string& state);
// `troupe wait ID...`: until every job is terminal (at most `timeout_s`, 0:
// no limit; requests that fail meanwhile, as in a scheduler failover, are
// tried again). Exits as the first job in `ids` that did not succeed
// (job_exit_code: 0, its exit code, 124, 125, 130), 69 when the cluster
// cannot be reached, 1 when the time ran out or a job is unknown.
int run_wait(const std::string& url, const std::vector<std::string>& ids, const std::string& team,
             int64_t timeout_s = 0);
// `troupe logs`: one rank's output, or with `all_ranks` every rank's, each
// line prefixed "[rank N] "; with `follow` until the job ends, then exits as
// run_wait.
int run_logs(const std::string& url, const std::string& job_id, const std::string& team, int rank,
             bool follow, bool all_ranks = false);
int run_nodes(const std::string& url, bool json, bool wide = false,
              const std::string& cluster = {});
// `troupe clusters`: the clusters behind a front door (troupe-dispatch).
int run_clusters(const std::string& url, bool json);
// `troupe queues`: per team and pool quota, use, pending work and share.
int run_queues(const std::string& url, bool json, const std::string& cluster = {});
// `troupe cordon|uncordon|drain NODE`.
// `reason` (cordon, drain): why, shown by troupe nodes. `cluster`: at a
// front door, the node's cluster ("": the one that has it).
int run_node_op(const std::string& url, const std::string& op, const std::string& node,
                const std::string& reason = {}, const std::string& cluster = {});

// `troupe pipeline submit FILE`: the pipeline file (YAML or JSON) on
// troupe.<team>.pipeline (team: `team`, else the file's, else its first
// job's); prints the pipeline id, then each job's name and id (`json`: the
// reply as it is). Refused: exit 1, no job was made.
int run_pipeline_submit(const std::string& url, const std::string& file, const std::string& team,
                        bool json);
// `troupe pipeline status ID`: the pipeline's jobs (of `team`, or of every
// team when ""), upstream first, and its state (pipeline_view.hpp). Exit 1
// when no job is of that pipeline.
int run_pipeline_status(const std::string& url, const std::string& pipeline_id,
                        const std::string& team, bool json);
// `troupe pipeline cancel ID`: cancels each job of the pipeline not ended
// yet, the last first; prints "<id> <state>" per job as troupe cancel
// --state does. Exit 1 when no job is of that pipeline or a cancel failed.
int run_pipeline_cancel(const std::string& url, const std::string& pipeline_id,
                        const std::string& team);

// `troupe schedule create|list|show|delete|suspend|resume`: the request on
// troupe.<team>.schedule (create: the spec file `spec_file`, YAML or JSON,
// whose team is taken when `team` is ""); prints the reply as
// schedule_view.hpp reads it (`json`: as it is). Exit 1 when refused.
int run_schedule(const std::string& url, const std::string& op, std::string team, ScheduleArgs a,
                 const std::string& spec_file, bool json);

// `troupe why ID`: why the job is not running now.
// troupe usage: GPU-hours, ends, waits over [since, until) per team, kind or
// day (docs/api.md "Usage"); team "" asks for every team (an admin).
int run_usage(const std::string& url, const std::string& team, const std::string& since,
              const std::string& until, const std::string& by, const std::string& output);
int run_why(const std::string& url, const std::string& job_id, const std::string& team, bool json);

// `troupe history ID`: every stored event of the job, oldest first (a table,
// or with `json` the raw events as a JSON array). No events: exit code 1.
int run_history(const std::string& url, const std::string& job_id, const std::string& team,
                bool json);

// `troupe auth add-token --team T | --admin NAME`: a fresh bearer token of the
// HTTP API, printed once on stdout; only its SHA-256 is stored, in the token
// bucket (written with the home's scheduler identity, so the cluster must
// run). `troupe auth revoke-token TOKEN` removes one.
int run_add_token(const std::string& url, const std::string& home, const std::string& team,
                  const std::string& admin_name);
int run_revoke_token(const std::string& url, const std::string& home, const std::string& token);
// The same as a function: "" and `token`, or why not (printed on stderr too).
std::string make_token(const std::string& url, const std::string& home, const std::string& team,
                       const std::string& admin_name, std::string* token);

struct UpOptions {
  std::string home;  // "" -> $TROUPE_HOME or ./.troupe
  int port = 4222;
  // nats-servers: 1, or a NATS cluster of that many on 127.0.0.1 (client
  // ports port..port+N-1, routes port+2000..; JetStream R3 from 3 servers).
  int nats_cluster = 1;
  bool demo = true;
  bool exit_after_demo = false;
  int nodes = 2;
  int gpus_per_node = 4;
  std::string gpu_type = "a100";
  std::string config;  // cluster config for troupe-scheduler --config ("" none)
  // Open NATS (no identities, no TLS), as before the trust work: anyone on
  // the machine may act as any team, node or scheduler. Off by default.
  bool insecure = false;
  // troupe-gateway (the HTTP API and console) on 127.0.0.1:http_port (0: a
  // free port); not started when !http.
  bool http = true;
  int http_port = 4280;
  // Several clusters behind one front door (docs/clusters.md): with N >= 2,
  // cluster c<i> is a whole `troupe up` of its own on --port + 10 i (c1
  // a100, c2 h100, ...) and troupe-dispatch serves the front NATS on --port.
  int clusters = 1;
  // A port for a front door's leaf node links (docs/clusters.md): server i
  // listens on leaf_port + i (TLS unless insecure), and dispatch.creds is
  // made for the link to sign in with. 0: none.
  int leaf_port = 0;
};
int run_up(const UpOptions& opts);
int run_up_clusters(const UpOptions& opts);

}  // namespace troupe::gateway

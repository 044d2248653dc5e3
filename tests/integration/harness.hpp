// Integration test harness: a Troupe cluster made of real processes.
//
//   Cluster c(ClusterOptions{}.node("n1").node("n2"));   // nats-server, scheduler, 2 agents
//   REQUIRE(c.wait_nodes_alive(2, 20s));
//   auto id = c.submit_ok("t1", job_spec("t1", {"sh", "-c", "echo hi"}));
//   auto done = c.wait_terminal(id, 30s);
//
// Every process writes stdout/stderr to files in a temporary directory; when
// the running test case has failed, the tails of those files are printed and
// the directory is kept. Everything is stopped (SIGTERM, then SIGKILL) when
// the Cluster goes away. Job events are recorded from before the first
// submission (EventLog), and waits are built on a condition variable.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bus/nats.hpp"
#include "load/host.hpp"

namespace troupe::it {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;
using namespace std::chrono_literals;

// Directory of the built binaries (troupe-scheduler, troupe-node, troupe).
std::string bin_dir();
// Whether a TCP port on 127.0.0.1 can be bound now.
bool bindable(int port);
// Path of nats-server.
std::string nats_server_path();
// A TCP port on 127.0.0.1 that was free a moment ago (shared with troupe-load).
inline int free_port() {
  return load::free_loopback_port();
}
// True when an assertion of the running test case failed, or an exception is
// unwinding the stack.
bool current_test_failed();
// Whole content of a file ("" when it cannot be read).
std::string read_file(const std::string& path);
// Last `max_lines` lines of a file.
std::string tail_file(const std::string& path, size_t max_lines = 60);

// A temporary directory, removed on destruction unless the test failed.
class TmpDir {
 public:
  explicit TmpDir(const std::string& prefix = "troupe-it");
  ~TmpDir();
  TmpDir(const TmpDir&) = delete;
  TmpDir& operator=(const TmpDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Files whose tails are printed when the test failed (on destruction).
class FailureDump {
 public:
  ~FailureDump();
  void add(const std::string& label, const std::string& path);
  void print() const;

 private:
  std::vector<std::pair<std::string, std::string>> files_;
};

// One child process in its own process group, stdout/stderr to files.
class Process {
 public:
  // `argv[0]` is the executable path. `env` entries ("K=V") are added to the
  // environment of this process (PATH gets bin_dir() in front).
  Process(std::string name, std::vector<std::string> argv, const std::string& out_path,
          const std::string& err_path, const std::vector<std::string>& env = {});
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  const std::string& name() const { return name_; }
  pid_t pid() const { return pid_; }
  const std::string& out_path() const { return out_; }
  const std::string& err_path() const { return err_; }
  std::string command_line() const;

  // True while the process has not exited.
  bool running();
  // Exit code, or 128 + signal; nullopt while running.
  std::optional<int> exit_status();
  // Waits for the exit until `deadline`; true when it exited.
  bool wait_exit(Clock::time_point deadline);
  // SIGTERM to the process group.
  void terminate();
  // Any signal to the process itself (not its group), e.g. SIGHUP; false when
  // it has exited.
  bool signal(int sig);
  // SIGKILL to the process group, then reaps.
  void kill_now();
  // terminate(), wait up to `grace`, then kill_now().
  void stop(Clock::duration grace = 5s);

 private:
  void reap(bool block);
  std::string name_;
  std::vector<std::string> argv_;
  std::string out_, err_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
};

// Stops several processes at once: SIGTERM to all, one shared grace period,
// SIGKILL to the rest.
void stop_all(const std::vector<Process*>& procs, Clock::duration grace = 5s);

struct RunResult {
  int exit_code = -1;  // exit code, or 128 + signal
  bool timed_out = false;
  std::string out;
  std::string err;
};

// A run's exit code and the start of its output, for failure messages.
std::string describe(const RunResult& r);

// Runs a program to completion (killed at `timeout`), capturing its output in
// files `<dir>/<label>.out|.err` that are also added to `dump`.
RunResult run_program(const std::vector<std::string>& argv, const std::string& dir,
                      const std::string& label, Clock::duration timeout, FailureDump* dump,
                      const std::vector<std::string>& env = {});

// One JobEvent as received on troupe.<team>.events.<job_id>.
struct Event {
  size_t seq = 0;  // arrival order
  std::string subject;
  Json json;
  std::string job_id;
  std::string state;
};

// Records every message on troupe.*.events.> from construction on.
class EventLog {
 public:
  explicit EventLog(bus::Connection& conn);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  using Pred = std::function<bool(const std::vector<Event>&)>;
  // Waits until `pred(events)` holds; false at the deadline.
  bool wait_for(const Pred& pred, Clock::duration timeout);
  // First event of `job_id` whose state satisfies `accept`, waiting up to `timeout`.
  std::optional<Event> wait_state(const std::string& job_id,
                                  const std::function<bool(const std::string&)>& accept,
                                  Clock::duration timeout);
  std::optional<Event> wait_state(const std::string& job_id, const std::string& state,
                                  Clock::duration timeout);

  std::vector<Event> all() const;
  std::vector<Event> of_job(const std::string& job_id) const;
  // Messages that were not a JSON object with job_id and state.
  std::vector<std::string> malformed() const;
  // Every event, one line each (for failure messages).
  std::string describe(const std::string& job_id = {}) const;

 private:
  void on_message(Inbound&& in);
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Event> events_;
  std::vector<std::string> malformed_;
  bus::SubscriptionPtr sub_;
};

struct NodeOptions {
  std::string name;
  int gpus = 4;
  std::string gpu_type = "a100";
  bool simulate = false;
  std::vector<std::string> extra_args;
};

struct ClusterOptions {
  std::vector<NodeOptions> nodes;
  bool scheduler = true;
  // Secured like a `troupe up` cluster (docs/security.md): nats-server in
  // operator mode with the identities `troupe auth` makes, over TLS. Every
  // process connects with its own identity; the harness's own connections use
  // the scheduler's (which may do everything). false: an open server (what
  // `troupe up --insecure` runs).
  bool secure = true;
  bool tls = true;
  // nats-servers: 1, or a NATS cluster of that many (routes on loopback,
  // JetStream clustered); with 3 or more the scheduler gets --replicas 3.
  int nats_servers = 1;
  std::vector<std::string> scheduler_args;
  // Cluster config text (YAML or JSON). When set, it is written to
  // <dir>/cluster-config.yaml and the scheduler gets --config with that file.
  std::string config;
  // Each nats-server also accepts leaf node links (a front door's, secure
  // clusters; TLS when tls) on a free port: Cluster::leaf_url().
  bool leaf_listen = false;
  // What those servers tell a leaf node link to reconnect to
  // (leafnodes.advertise, "host:port"; "": their own address): a proxy's,
  // when the link comes through one.
  std::string leaf_advertise;
  // A front door's NATS: a leaf node link to each of these (name: the
  // cluster, url: its leaf port, creds/ca: what to sign in with there), each
  // bound to the link account `troupe auth add-link NAME` makes here.
  struct LeafRemote {
    std::string name, url, creds, ca;
  };
  std::vector<LeafRemote> leaf_remotes;

  ClusterOptions& node(const std::string& name, int gpus = 4, bool simulate = false,
                       const std::string& gpu_type = "a100") {
    nodes.push_back(NodeOptions{name, gpus, gpu_type, simulate, {}});
    return *this;
  }
  // A node with extra troupe-node arguments (e.g. {"--pool", "p", "--rack", "r1"}).
  ClusterOptions& node_args(const std::string& name, int gpus, bool simulate,
                            const std::string& gpu_type, std::vector<std::string> extra) {
    nodes.push_back(NodeOptions{name, gpus, gpu_type, simulate, std::move(extra)});
    return *this;
  }
  ClusterOptions& with_config(std::string text) {
    config = std::move(text);
    return *this;
  }
  ClusterOptions& nats_cluster(int servers) {
    nats_servers = servers;
    return *this;
  }
  ClusterOptions& insecure() {
    secure = false;
    tls = false;
    return *this;
  }
};

// How a config reload (SIGHUP) ended, as the scheduler's stderr tells it.
enum class Reload { applied, refused, no_answer };

// What a logs request (or a series of them) returned.
struct LogRead {
  bool ok = false;
  std::string data;
  std::string error;  // the {"error"} reply, or why no reply came
};

class Cluster {
 public:
  explicit Cluster(const ClusterOptions& opts);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  const std::string& url() const { return url_; }
  const std::string& dir() const { return tmp_.path(); }
  std::string file(const std::string& name) const { return tmp_.file(name); }
  EventLog& events() { return *events_; }
  bus::Connection& conn() { return *conn_; }
  Process& scheduler() { return *scheduler_; }
  Process& node(size_t i) { return *nodes_.at(i); }
  FailureDump& dump() { return dump_; }

  // Starts one more agent (after the cluster is up).
  Process& add_node(const NodeOptions& n);

  // Raw request; nullopt (and `error`) when no reply came.
  std::optional<std::vector<uint8_t>> request_raw(const std::string& subject,
                                                  const std::vector<uint8_t>& data,
                                                  Clock::duration timeout = 10s,
                                                  std::string* error = nullptr);
  // JSON request. Fails the test when no reply comes or it is not JSON.
  Json request(const std::string& subject, const Json& body, Clock::duration timeout = 10s);
  // The same with a body given as text (may be invalid JSON on purpose).
  Json request_text(const std::string& subject, const std::string& body,
                    Clock::duration timeout = 10s);
  bool publish(const std::string& subject, const std::vector<uint8_t>& data);

  // troupe.<team>.submit with a JSON spec: the reply ({"job_id"} or {"error"}).
  Json submit_json(const std::string& team, const Json& spec);
  // The same, failing the test unless a job id came back.
  std::string submit_ok(const std::string& team, const Json& spec);
  Json status(const std::string& team, const std::string& job_id);
  Json cancel(const std::string& team, const std::string& job_id);
  // Reads a worker's whole log through troupe.<team>.logs (offset by offset).
  LogRead logs(const std::string& team, const std::string& job_id, int rank = 0);

  // The job's terminal event, waiting up to `timeout`.
  std::optional<Event> wait_terminal(const std::string& job_id, Clock::duration timeout);
  // Polls troupe.sys.nodes until at least `n` nodes are alive.
  bool wait_nodes_alive(size_t n, Clock::duration timeout);
  // troupe.sys.nodes reply (or {"error"}).
  Json nodes(Clock::duration timeout = 5s);

  // The cluster config file ("" when the cluster was started without one).
  const std::string& config_path() const { return config_path_; }
  // Writes `text` over the config file and sends SIGHUP to the scheduler;
  // waits for its stderr to say "config reloaded" or "config reload refused".
  Reload reload_config(const std::string& text, Clock::duration timeout = 10s);
  // troupe.sys.queues and troupe.<team>.why replies (fail the test when none comes).
  Json queues(Clock::duration timeout = 5s);
  Json why(const std::string& team, const std::string& job_id, Clock::duration timeout = 5s);

  // Runs the troupe CLI (TROUPE_NATS set to this cluster, and the admin
  // identity when secure) to completion.
  RunResult run_cli(const std::vector<std::string>& args, Clock::duration timeout = 60s);

  // --- the HTTP API ---------------------------------------------------------
  // Starts troupe-gateway on a free loopback port with identity `gateway`
  // (plus `extra` flags) and waits until it listens; its base URL
  // "http://127.0.0.1:PORT".
  std::string start_gateway(const std::vector<std::string>& extra = {});
  Process& gateway() { return *gateway_; }
  // `troupe auth add-token --team TEAM` (or `--admin NAME`): the token.
  std::string add_token(const std::string& team_or_name, bool admin = false);

  // --- identities (secure clusters) ----------------------------------------
  bool secure() const { return secure_; }
  // <dir>/auth: what `troupe auth` wrote (creds files, ca.pem).
  std::string auth_dir() const { return file("auth"); }
  // Runs `troupe auth ARGS --home <dir>`; fails the test unless it exits 0.
  // Returns what it wrote on stdout.
  std::string auth(const std::vector<std::string>& args);
  // The .creds file of `identity` (team-t1, node-n1, admin-admin, scheduler),
  // made with `troupe auth add-team|add-node|add-admin` when missing.
  std::string creds(const std::string& identity);
  // CA of the server's certificate ("" without TLS).
  std::string tls_ca() const { return tls_ ? file("auth/ca.pem") : std::string(); }
  // A new connection as `identity` ("" for none); nullptr and `error` when
  // the server refuses it.
  bus::ConnectionPtr connect_as(const std::string& identity, std::string* error = nullptr);
  // TROUPE_NATS, TROUPE_NATS_CREDS (the admin's) and TROUPE_NATS_CA, for
  // programs run against this cluster (troupe, troupe-load).
  std::vector<std::string> client_env();
  // The arguments giving a binary an identity: --creds FILE [--tls-ca CA].
  std::vector<std::string> identity_args(const std::string& identity);
  // The leaf node URLs of a leaf_listen cluster (tls:// when it serves TLS).
  std::string leaf_url() const;
  // `troupe auth add-link NAME`: the link account's public key.
  std::string add_link(const std::string& name);

  // --- recovery -----------------------------------------------------------
  // SIGKILL to the scheduler (no clean stop).
  void kill_scheduler();
  // Starts the scheduler again with the same arguments (new output files).
  Process& restart_scheduler();
  // One more scheduler process with the same arguments (a standby).
  Process& add_scheduler();
  // One more with some arguments changed: each (flag, value) pair replaces
  // the value after that flag, or is added (a shard's --pools, say).
  Process& add_scheduler(const std::vector<std::pair<std::string, std::string>>& changed);
  std::vector<Process*> schedulers();
  // nats-server stopped (SIGKILL when `kill`, else SIGTERM) and started again
  // on the same port and store directory; waits for this harness's
  // connections to reconnect.
  void restart_nats(bool kill = false, Clock::duration timeout = 20s);
  Process& nats() { return *nats_.at(0).proc; }
  // --- a NATS cluster (ClusterOptions::nats_servers > 1) ---------------------
  size_t nats_servers() const { return nats_.size(); }
  // Server `i` stopped (SIGKILL when `kill`, else SIGTERM), started again on
  // its ports and store, and waited for until it serves clients again.
  void restart_nats_server(size_t i, bool kill, Clock::duration timeout = 30s);
  // Waits until every stream (KV buckets too) has a leader and each of its
  // replicas is current: a cluster that lost no copy. False at the deadline
  // (`why` says which stream was not).
  bool wait_streams_current(Clock::duration timeout, std::string* why = nullptr);
  // A stream with a replica behind: its name and the servers ("s0", ...) whose
  // copy is not current (or is offline).
  struct LaggingStream {
    std::string stream;
    std::string leader;               // "" while it has none
    std::vector<std::string> behind;  // the servers whose copy is behind
  };
  std::vector<LaggingStream> lagging_streams();
  // The server leading `stream` ("s0", ...; "" when none or no answer).
  std::string stream_leader(const std::string& stream);
  // What an operator does to bring every stream's copies current
  // (docs/deploy.md, Upgrade order): waits `first`; then steps down the
  // leader of each stream still behind (again while the same server leads,
  // three times at most) and waits `after_step_down`; then restarts
  // (SIGTERM) each server holding a copy still behind and waits 60 s. On
  // nats-server 2.9 a replica of an idle stream may stay behind after its
  // server restarted until the stream's next write or leader change, and
  // once in a while after a leader change too (its catch-up stalled).
  struct CatchUp {
    bool current = false;
    std::vector<std::string> steps;  // what was done, and why
    std::string why;                 // the last stream found behind
  };
  CatchUp bring_streams_current(Clock::duration first,
                                Clock::duration after_step_down = std::chrono::seconds(30));
  // The client URL of server `i`.
  std::string nats_url(size_t i) const;
  // Server `i`'s process (to kill it without a restart).
  Process& nats_server_process(size_t i) { return *nats_.at(i).proc; }
  // Polls troupe.sys.stats until a scheduler answers (one leads and serves).
  bool wait_scheduler_serving(Clock::duration timeout);

 private:
  void start_nats(const ClusterOptions& opts);
  void launch_nats(size_t i, const std::string& label);
  bool wait_jetstream(Clock::duration timeout, std::string* why);
  void start_scheduler(const ClusterOptions& opts);
  std::vector<std::string> node_argv(const NodeOptions& n) const;

  // Destruction order matters: processes and connections go first, then the
  // failure dump prints, then the directory is removed.
  TmpDir tmp_;
  FailureDump dump_;
  struct NatsServer {
    std::unique_ptr<Process> proc;
    std::vector<std::string> argv;
    std::string base;  // file prefix of its config and output
    int port = 0;
    int leaf_port = 0;  // 0: no leaf node listener
    int starts = 0;
  };
  std::vector<NatsServer> nats_;
  std::string url_;                            // every server's client URL, comma-separated
  std::unique_ptr<bus::Connection> conn_;      // requests and publishes
  std::unique_ptr<bus::Connection> sub_conn_;  // the event subscription
  std::unique_ptr<EventLog> events_;
  std::unique_ptr<Process> scheduler_;
  std::vector<std::unique_ptr<Process>> old_schedulers_;  // killed or extra ones
  std::vector<std::string> scheduler_argv_;
  int scheduler_starts_ = 0;
  std::vector<std::unique_ptr<Process>> nodes_;
  std::unique_ptr<Process> gateway_;
  std::string gateway_url_;
  std::string config_path_;
  int cli_runs_ = 0;
  bool secure_ = true;
  bool tls_ = true;
  int auth_runs_ = 0;
};

// Replays job events in arrival order and reports every moment two jobs held
// the same GPU: a "running" event takes each (node, gpu) of its workers for
// the job; any other state of that job gives them back. A shared worker
// (its placement's gpu_memory_mb > 0) takes that much of its GPU: shared
// workers may be together on one GPU, never with a whole-GPU job, and (when
// `gpu_memory_mb` is given) never beyond that memory.
struct GpuReplay {
  std::vector<std::string> clashes;  // one line per clash
  size_t max_held = 0;               // most GPUs held at once (how concurrent it was)
  size_t max_sharing = 0;            // most jobs on one GPU at once
  int64_t max_memory_mb = 0;         // most shared memory on one GPU at once
};
GpuReplay replay_gpus(const std::vector<Event>& events, int64_t gpu_memory_mb = 0);

// The scheduler's KV bucket (TROUPE_STATE) on the cluster's connection, for
// tests that read what is stored; the test fails when it cannot be opened.
struct StateBucket {
  std::unique_ptr<bus::JetStream> js;
  std::unique_ptr<bus::KeyValue> kv;  // refers to js
};
StateBucket open_state_bucket(Cluster& c);

// A JetStream context on the cluster's connection with a test stream `name`
// over `subjects` made (file storage, R1); the test fails when it cannot be.
std::unique_ptr<bus::JetStream> open_test_stream(Cluster& c, const std::string& name,
                                                 const std::vector<std::string>& subjects);

// A JSON job spec: team, command, GPUs per worker, workers.
Json job_spec(const std::string& team, const std::vector<std::string>& command, int gpus = 1,
              int workers = 1);

}  // namespace troupe::it

// The node agent's core: the table of workers and everything that changes it
// (Launch, Stop, child exits, --simulate ends, max_runtime_s, shutdown), plus
// register/heartbeat/logs and the checkpoint watch (docs/checkpointing.md). It talks to the outside
// only through the Publish function it is given, so tests drive it without NATS; troupe-node's
// main() wires it to bus::Connection.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bus/inbound.hpp"
#include "messages/wire.hpp"
#include "node/cgroup.hpp"
#include "node/checkpoint.hpp"
#include "node/exit_status.hpp"
#include "node/inventory.hpp"
#include "node/isolation.hpp"
#include "node/job_user.hpp"
#include "node/launch_spec.hpp"
#include "node/reaper.hpp"
#include "node/recent.hpp"
#include "node/spawner.hpp"
#include "node/timer_queue.hpp"

namespace troupe::node {

struct AgentConfig {
  std::string name;
  std::string host = "127.0.0.1";
  std::string state_dir;  // absolute
  bool simulate = false;
  int grace_s = 10;  // Stop without grace_s, and shutdown
  int heartbeat_ms = 1000;
  // A worker's output (its log file here) past this is killed at the next
  // heartbeat, its attempt ends "log_limit: ..." and its log is cut to it;
  // 0: no limit.
  long long log_max_bytes = 0;
  // A job's work dir holding more than this (du, at each folder check) ends
  // its workers here with SIGKILL, "disk_limit: ...", and the dir is emptied
  // before the job's next worker here; 0: no limit.
  long long disk_max_bytes = 0;
  // The same for the files (and folders) in it: inodes every job shares.
  long long disk_max_files = 0;
  // The same two for a running job's checkpoint dir, which is kept (it
  // outlives attempts: the next one finds it as full); 0: no limit; -1: a
  // quarter of the file system the dir is on, looked up at each check.
  long long checkpoint_max_bytes = 0;
  long long checkpoint_max_files = 0;
  // An ended job's work dir and log folder here are removed this long after
  // its last worker here ended (the scheduler reads an ended job's log from
  // its team's stream); 0: kept for ever.
  int64_t dir_keep_ms = 0;
  // How often the folder guard measures and sweeps; 0: five heartbeats.
  int dir_check_ms = 0;
  // The state folder's file system fuller than this (percent of its blocks):
  // ended jobs' folders are removed, the longest ended first, whatever
  // dir_keep_ms says, until it is not; 0: never.
  double dir_gc_percent = 0;
  Inventory inventory;
  // The environment a worker starts from when isolation is off (the agent's
  // PATH, locale and the like, "K=V"). With isolation on it starts from
  // job_base_env() instead: nothing of the agent's.
  std::vector<std::string> base_env;
  IsolationOptions isolation;  // users, cgroups, sandbox, runtime (node/isolation.hpp)
  std::string pool;            // --pool, sent in NodeRegister ("": the pool of the GPU type)
  std::string rack;            // --rack, the topology label sent in NodeRegister
  bool mps = false;            // --mps: shared workers get CUDA_MPS_PINNED_DEVICE_MEM_LIMIT
  // Delay of the first heartbeat after start(); < 0: heartbeat_ms. A fleet
  // spreads its agents' heartbeats over one period with it.
  int first_heartbeat_ms = -1;
  // Log the one-line summary at shutdown (a fleet of thousands turns it off).
  bool log_summary = true;
  // Ship each worker's output to TROUPE_LOGS_<team> (messages/log_chunks.hpp) once a
  // heartbeat period, and the rest when it ends, so that it outlives the node.
  // A fleet's identity may not publish there: off for fleets.
  bool ship_logs = true;
};

// Publishes `size` bytes on `subject` (thread-safe; called with the agent's
// lock held, so Started is always published before its Exited).
using Publish = std::function<void(const std::string& subject, const void* data, size_t size)>;

struct AgentCounters {
  uint64_t bad_messages = 0;  // malformed, wrong body, unknown kind, no reply subject
  uint64_t fenced = 0;        // Launch/Stop from a deposed scheduler (older epoch), refused
  uint64_t launches = 0;      // launches accepted (Started published)
  uint64_t duplicates = 0;    // Launch ignored as a duplicate
  uint64_t launch_failures = 0;
  uint64_t exits = 0;             // Exited published
  uint64_t checkpoints = 0;       // Checkpointed published
  uint64_t log_chunks = 0;        // chunks of workers' output shipped to TROUPE_LOGS_<team>
  uint64_t disk_limit_kills = 0;  // workers killed for their job's work or checkpoint dir size
  uint64_t folders_removed = 0;   // ended jobs' folders removed (node/job_dirs.hpp)
  uint64_t folders_removed_for_space = 0;  // of those, before their keep time: a full disk
  uint64_t folder_removal_failures = 0;    // folders rm could not remove (each counted once)
  uint64_t guard_checks = 0;               // rounds of the folder guard done
  // Forget (a job forgotten for good): checkpoint dirs removed, and those rm
  // could not remove (or that were not folders); a Forget the agent refused
  // (a bad path) is a bad message.
  uint64_t checkpoint_dirs_removed = 0;
  uint64_t checkpoint_dir_removal_failures = 0;
};

// The counters an operator reads (troupe_node_agent_events_total{event}), by
// name: what the agent refused or did beyond launches and exits.
std::vector<std::pair<std::string, uint64_t>> named(const AgentCounters& c);

// How a Stop asks a worker to end: `signal` to its process group now; when it
// is not SIGTERM, SIGTERM after grace_s and SIGKILL kill_after_s later; when it
// is SIGTERM, SIGKILL after grace_s; SIGKILL: at once.
struct StopPlan {
  int signal = 15;
  int grace_s = 10;
  int kill_after_s = 5;
};

class Agent {
 public:
  Agent(AgentConfig cfg, Publish publish);
  // The same on a timer thread shared with other agents (node/fleet.hpp). The
  // agent never stops it; its owner stops it (joins the thread) before any
  // agent that used it is destroyed, since pending callbacks point at them.
  // A simulating agent starts no reaper thread either way.
  Agent(AgentConfig cfg, Publish publish, std::shared_ptr<TimerQueue> shared_timers);
  ~Agent();  // shutdown() if not done
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Publishes NodeRegister and starts heartbeating.
  void start();
  // One message from the subscriptions (troupe.sys.node.<name>.> and
  // troupe.sys.hello). Never throws; bad messages are logged and counted.
  void on_message(const Inbound& in);
  // Stops every worker (SIGTERM, SIGKILL after grace_s), publishes their
  // Exited (reason "stopped: the node agent is shutting down"), waits for
  // them, stops the threads. Idempotent.
  void shutdown();

  void publish_register();
  AgentCounters counters() const;
  std::vector<WorkerKey> running() const;
  // Waits until no worker runs; false on timeout.
  bool wait_idle(std::chrono::milliseconds timeout);

 private:
  using Clock = std::chrono::steady_clock;
  struct Worker {
    uint64_t id = 0;
    LaunchInfo launch;
    pid_t pid = 0;  // 0 in --simulate
    EndCause cause = EndCause::natural;
    SimParams sim;
    CheckpointWatch checkpoint;  // active for rank 0 of a real worker with a checkpoint dir
    // Isolation: its cgroup (killed whole and removed when it ends), whether
    // pid is a wrapper (bwrap, podman) rather than the job's own process,
    // and its container's name (removed after it ends).
    std::optional<JobCgroup> cgroup;
    bool wrapped = false;
    std::string container;
    // Stop escalation: signals sent, and when SIGTERM / SIGKILL are due
    // (Clock::time_point::max(): not planned). A later Stop may only bring
    // them forward, never push them back.
    std::set<int> signals_sent;
    bool term_sent = false;
    bool kill_sent = false;
    std::chrono::steady_clock::time_point term_at = std::chrono::steady_clock::time_point::max();
    std::chrono::steady_clock::time_point kill_at = std::chrono::steady_clock::time_point::max();
    // Bytes of its log shipped to TROUPE_LOGS_<team> so far.
    int64_t log_shipped = 0;
    // Its log was cut to cfg.log_max_bytes (cut_log_locked): until then no
    // more than that is shipped, then the rest (the line that says so).
    bool log_cut = false;
  };

  void handle_launch(const wire::Launch& l);
  void handle_stop(const wire::Stop& s);
  void handle_logs(const Inbound& in);
  void bad(const std::string& what, const std::string& subject);

  // All below: with mu_ held.
  void launch_sim(LaunchInfo info);
  void launch_real(LaunchInfo info);
  void stop_worker(Worker& w, EndCause cause, const StopPlan& plan);
  // cfg_.log_max_bytes: kills a real worker whose log file is past it
  // (EndCause::log_limit); after its exit, cut_log_locked truncates the log
  // to the limit and says so on its last line.
  void check_log_limit_locked(Worker& w);
  void cut_log_locked(Worker& w);
  void fail_launch(const WorkerKey& key, const std::string& why);
  // Prepares an isolated launch: the user, owner-only folders, the cgroup
  // and the command line (sandbox or container). "" when ready, else why not.
  std::string isolate(const LaunchInfo& info, ProcessSpec& spec, Worker& w);
  // Sends `sig` to the worker: to every process of its cgroup (except a
  // wrapper, which would die of it instead of passing it on), else to its
  // process group.
  void signal_worker(Worker& w, int sig);
  // Ends what is left of a worker after its process ended: every process of
  // its cgroup, the cgroup, its container. Returns the OOM kills seen.
  uint64_t end_isolation(Worker& w);
  void poll_checkpoint(Worker& w);
  void finish(const WorkerKey& key, const ExitInfo& e);
  void publish_exited(const WorkerKey& key, const ExitInfo& e);
  std::vector<WorkerKey> running_locked() const;

  // Timer and reaper callbacks (take mu_).
  void on_child_exit(pid_t pid, std::optional<int> status);
  void on_sim_end(const WorkerKey& key, uint64_t id);
  void on_max_runtime(const WorkerKey& key, uint64_t id);
  void on_escalate(const WorkerKey& key, uint64_t id);
  void on_heartbeat();
  void on_checkpoint_poll();

  // The folder guard (its own thread, cfg_.dir_check_ms apart; no lock held
  // while du or rm runs): kills the workers of a job whose work dir or
  // checkpoint dir passed its limits (cfg_.disk_max_*, cfg_.checkpoint_max_*),
  // and moves the folders node/job_dirs.hpp's
  // removal_of gives up into <state>/trash (with mu_, so a Launch never
  // sees them half gone), then removes the trash.
  void guard_loop();
  void guard_round();
  // Forget: checked here, the dir removed by the guard's thread (rm may take
  // long on shared storage), never while a worker of the job runs here.
  void handle_forget(const wire::Forget& f);
  void remove_checkpoint_dir(const std::string& job_id, const std::string& dir);
  void measure_running_dirs();
  // A job whose workers here a folder's size ended.
  struct DiskLimited {
    std::string reason;    // its workers' end
    bool work_dir = true;  // its work dir's size (emptied), not its checkpoint dir's (kept)
  };
  void over_disk_limit(const std::string& job_id, const DiskLimited& why);
  // With mu_ held: renames the job's work dir (and with `logs` its log
  // folder) into the trash. False when a worker of the job runs here.
  bool trash_folders_locked(const std::string& job_id, bool logs);
  bool job_running_locked(const std::string& job_id) const;
  void empty_trash();

  void send(const std::string& subject, const wire::Bytes& bytes);
  // Publishes what the worker's log gained since the last call, at most
  // `budget` bytes (in chunks; never waits for the bus: a slow bus drops).
  void ship_log_locked(Worker& w, int64_t budget);

  const AgentConfig cfg_;
  JobUsers users_;
  CgroupHost cgroups_;
  std::string cgroup_path_;  // node_cgroup_path(): "troupe/<node>.<hash>"

  const Publish publish_;
  const std::string exited_subject_, started_subject_, register_subject_, heartbeat_subject_,
      checkpointed_subject_;

  mutable std::mutex mu_;
  std::condition_variable idle_cv_;
  std::map<WorkerKey, Worker> running_;
  std::unordered_map<pid_t, WorkerKey> by_pid_;
  // Finished workers, remembered for de-duplication of repeated Launches.
  Recent<WorkerKey, bool> finished_{100000};
  // How recently ended workers ended: re-sent with every register (a
  // restarted scheduler) and on a repeated Launch.
  Recent<WorkerKey, ExitInfo> ended_{2048};
  // Highest leader epoch seen (troupe.sys.hello, Launch, Stop): a Launch or
  // Stop from an older one (a deposed scheduler) is refused.
  uint64_t epoch_ = 0;
  bool fenced(uint64_t epoch, const std::string& what);
  wire::Bytes register_locked() const;
  uint64_t next_id_ = 1;
  // Folders: when each job's last worker here ended (wall ms; forgotten
  // with its folders), and the jobs killed for their work dir's size.
  std::unordered_map<std::string, int64_t> job_ended_ms_;
  std::map<std::string, DiskLimited> disk_limited_;  // by job id
  uint64_t trash_seq_ = 0;
  // Trash entries rm could not remove (warned about and counted once, tried
  // again every round).
  std::set<std::string> trash_stuck_;
  bool guard_on_ = false;  // the folder guard sweeps folders: job_ended_ms_ is kept
  uint64_t heartbeat_seq_ = 0;
  bool started_ = false;
  bool shutting_down_ = false;
  bool shut_down_ = false;
  AgentCounters counters_;

  // The folder guard's thread and its wake-up (shutdown stops it first).
  std::mutex guard_mu_;
  std::condition_variable guard_cv_;
  bool guard_stop_ = false;
  // Checkpoint dirs to remove (job id, dir), from Forget; at most
  // kMaxForgets wait (more are dropped, counted as failures).
  std::deque<std::pair<std::string, std::string>> forgets_;
  std::thread guard_;

  // Declared last: destroyed first, so their threads stop before the state above goes.
  std::shared_ptr<TimerQueue> timers_;
  bool own_timers_ = true;
  std::unique_ptr<Reaper> reaper_;  // null while simulating
  // Forks every real worker; stopped last, after the workers are gone (their
  // parent-death signal is tied to its thread). Null while simulating.
  std::unique_ptr<Spawner> spawner_;
};

}  // namespace troupe::node

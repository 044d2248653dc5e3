// Owns the agent's worker table and its life cycle: launch (real or
// simulated), stop with signal/SIGTERM/SIGKILL escalation, max_runtime_s,
// reaping, Exited classification, register/heartbeat, logs requests, the
// checkpoint watch, and the folder guard (a job's work dir size; ended jobs'
// folders removed, node/job_dirs.hpp).
#include "node/agent.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "bus/subjects.hpp"
#include "messages/json_text.hpp"
#include "messages/log_chunks.hpp"
#include "node/agent_messages.hpp"
#include "node/job_dirs.hpp"
#include "node/logs.hpp"
#include "node/process.hpp"

namespace troupe::node {

namespace {
constexpr auto kReapWait = std::chrono::seconds(5);  // after SIGKILL at shutdown
constexpr long long kMaxDelayS = 100000000;          // ~3 years: keeps time_point math finite
// How often TROUPE_CHECKPOINT_DIR/latest is looked at for each watched worker.
constexpr auto kCheckpointPoll = std::chrono::milliseconds(250);
// Log shipping (TROUPE_LOGS_<team>): at most this much of a worker's output a
// heartbeat, and this much in all (what is beyond stays on the node only).
constexpr int64_t kShipBytesPerBeat = 1 << 20;
constexpr int64_t kShipBytesAtEnd = 16 << 20;  // the rest, with the agent's lock held
constexpr int64_t kMaxShippedLogBytes = 256LL << 20;
// Forgotten jobs' checkpoint dirs waiting for the guard's thread, at most.
constexpr size_t kMaxForgets = 100000;

std::chrono::seconds secs(long long s) {
  return std::chrono::seconds(std::min(std::max(s, 0LL), kMaxDelayS));
}

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t mtime_ms(const std::string& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
}

// When a job's folders here last changed: its folders' and its log files'
// newest mtime (a log file is written until its worker ends).
int64_t newest_change_ms(const std::string& work, const std::string& logs) {
  int64_t t = std::max(mtime_ms(work), mtime_ms(logs));
  std::error_code ec;
  for (std::filesystem::directory_iterator it(logs, ec), end; !ec && it != end; it.increment(ec))
    t = std::max(t, mtime_ms(it->path().string()));
  return t;
}

bool path_exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

// Creates `dir` (and its parents) and makes it owner-only for `user`'s uid.
// A symbolic link in its place is refused: the folder is the agent's to make.
std::string owned_dir(const std::string& dir, const std::optional<JobUser>& user) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return "cannot create " + dir + ": " + ec.message();
  if (!user) return {};
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return dir + " is not a folder";
  if (::chown(dir.c_str(), user->uid, user->gid) != 0 || ::chmod(dir.c_str(), 0700) != 0)
    return "cannot give " + dir + " to uid " + std::to_string(user->uid) + ": " +
           std::strerror(errno);
  return {};
}

// A sweep task's parameters (its TROUPE_PARAMS) as a file in its work
// folder, given to its user; TROUPE_PARAMS_FILE names it in `env`. The
// folder is the job's (its user may have put anything there): written under
// a new name never followed (O_EXCL, O_NOFOLLOW), then renamed into place.
std::string give_params(const LaunchInfo& info, const std::string& dir,
                        const std::optional<JobUser>& user, std::vector<std::string>& env) {
  std::string json;
  for (const auto& [k, v] : info.env)
    if (k == "TROUPE_PARAMS") json = v;
  if (json.empty()) return {};
  const std::string path = dir + "/troupe-params.json";
  const std::string tmp =
      path + "." + std::to_string(info.key.attempt) + "-" + std::to_string(info.key.rank) + ".tmp";
  ::unlink(tmp.c_str());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  bool ok = static_cast<bool>(fd) &&
            ::write(fd.get(), json.data(), json.size()) == static_cast<ssize_t>(json.size()) &&
            (!user || ::fchown(fd.get(), user->uid, user->gid) == 0);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return "cannot write the sweep parameters to " + path + ": " + why;
  }
  env.push_back("TROUPE_PARAMS_FILE=" + path);
  return {};
}

// A folder of the agent's that job users pass through but cannot list.
void traverse_only(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ::chmod(dir.c_str(), 0711);
}
}  // namespace

Agent::Agent(AgentConfig cfg, Publish publish)
    : Agent(std::move(cfg), std::move(publish), nullptr) {}

Agent::Agent(AgentConfig cfg, Publish publish, std::shared_ptr<TimerQueue> shared_timers)
    : cfg_(std::move(cfg)),
      publish_(std::move(publish)),
      exited_subject_(subjects::agent_to_scheduler(cfg_.name, subjects::kExited)),
      started_subject_(subjects::agent_to_scheduler(cfg_.name, subjects::kStarted)),
      register_subject_(subjects::agent_to_scheduler(cfg_.name, subjects::kRegister)),
      heartbeat_subject_(subjects::agent_to_scheduler(cfg_.name, subjects::kHeartbeat)),
      checkpointed_subject_(subjects::agent_to_scheduler(cfg_.name, subjects::kCheckpointed)),
      timers_(shared_timers ? shared_timers : std::make_shared<TimerQueue>()),
      own_timers_(!shared_timers) {
  // Real workers need the reaper and the spawner thread; simulated ones never fork.
  if (!cfg_.simulate && cfg_.isolation.enabled) {
    users_.set_agent_uid(::getuid());
    cgroups_ = detect_cgroups(cfg_.isolation.cgroup_root);
    cgroup_path_ = node_cgroup_path(cfg_.name, cfg_.state_dir);
    if (cgroups_.version == CgroupHost::Version::none)
      spdlog::error("isolation: {}; every launch will fail", cgroups_.why_none);
    // Jobs of an agent of this node that died are not left running.
    if (int n = reap_stale_groups(cgroups_, cgroup_path_); n > 0)
      spdlog::warn("isolation: killed and removed {} job cgroup(s) left by an earlier agent", n);
    for (const auto& d : {cfg_.state_dir, cfg_.state_dir + "/jobs", cfg_.state_dir + "/logs"})
      traverse_only(d);
  }
  if (!cfg_.simulate) {
    reaper_ = std::make_unique<Reaper>(
        [this](pid_t pid, std::optional<int> st) { on_child_exit(pid, st); });
    spawner_ = std::make_unique<Spawner>();
  }
}

Agent::~Agent() {
  shutdown();
}

void Agent::send(const std::string& subject, const wire::Bytes& bytes) {
  publish_(subject, bytes.data(), bytes.size());
}

void Agent::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_ || shutting_down_) return;
  started_ = true;
  send(register_subject_, register_locked());
  int first = cfg_.first_heartbeat_ms >= 0 ? cfg_.first_heartbeat_ms : cfg_.heartbeat_ms;
  timers_->after(std::chrono::milliseconds(first), [this] { on_heartbeat(); });
  // --simulate does nothing for checkpoints.
  if (!cfg_.simulate) timers_->after(kCheckpointPoll, [this] { on_checkpoint_poll(); });
  // Nor writes folders. The guard's thread also removes forgotten jobs'
  // checkpoint dirs, so it runs on every real agent; it sweeps folders when
  // a limit or keep time asks it to.
  if (!cfg_.simulate) {
    guard_on_ = cfg_.disk_max_bytes > 0 || cfg_.disk_max_files > 0 ||
                cfg_.checkpoint_max_bytes != 0 || cfg_.checkpoint_max_files != 0 ||
                cfg_.dir_keep_ms > 0 || cfg_.dir_gc_percent > 0;
    guard_ = std::thread([this] { guard_loop(); });
  }
}

void Agent::publish_register() {
  std::lock_guard<std::mutex> lock(mu_);
  send(register_subject_, register_locked());
}

wire::Bytes Agent::register_locked() const {
  Ended ended(ended_.items().begin(), ended_.items().end());
  return make_register(cfg_.name, cfg_.host, cfg_.inventory, cfg_.simulate, running_locked(),
                       cfg_.pool, cfg_.rack, ended, cfg_.isolation.runtime, cfg_.isolation.sandbox);
}

bool Agent::fenced(uint64_t epoch, const std::string& what) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Never an epoch lower than the highest seen, and never none: a leader's
    // epoch is its lease revision (>= 1); a Launch or Stop without one was not
    // sent by a scheduler.
    if (epoch > 0 && epoch >= epoch_) {
      epoch_ = std::max(epoch_, epoch);
      return false;
    }
    ++counters_.fenced;
  }
  if (epoch == 0)
    spdlog::warn("refused {} without a leader's epoch (not sent by a scheduler)", what);
  else
    spdlog::warn("refused {} from a deposed scheduler (epoch {} < {})", what, epoch, epoch_);
  return true;
}

void Agent::ship_log_locked(Worker& w, int64_t budget) {
  int64_t cap = kMaxShippedLogBytes;
  if (cfg_.log_max_bytes > 0 && !w.log_cut) cap = std::min<int64_t>(cap, cfg_.log_max_bytes);
  if (!cfg_.ship_logs || w.log_shipped >= cap) return;
  std::ifstream f(log_path(cfg_.state_dir, w.launch.key), std::ios::binary);
  if (!f) return;
  f.seekg(w.log_shipped);
  budget = std::min(budget, cap - w.log_shipped);
  const std::string subject = subjects::log_chunks(cfg_.name, w.launch.team, w.launch.key.job_id,
                                                   w.launch.key.attempt, w.launch.key.rank);
  std::string buf(static_cast<size_t>(logchunks::kMaxChunkBytes), '\0');
  while (budget > 0) {
    f.read(buf.data(), std::min<int64_t>(budget, logchunks::kMaxChunkBytes));
    const auto n = static_cast<int64_t>(f.gcount());
    if (n <= 0) break;
    std::string chunk = logchunks::encode(w.log_shipped, std::string_view(buf.data(), n));
    publish_(subject, chunk.data(), chunk.size());
    w.log_shipped += n;
    budget -= n;
    ++counters_.log_chunks;
  }
}

void Agent::check_log_limit_locked(Worker& w) {
  if (cfg_.log_max_bytes <= 0 || w.pid == 0 || w.cause != EndCause::natural) return;
  struct stat st {};
  if (::stat(log_path(cfg_.state_dir, w.launch.key).c_str(), &st) != 0 ||
      st.st_size <= cfg_.log_max_bytes)
    return;
  spdlog::warn("{} (pid {}): its output passed {} MiB ({} bytes): killed", to_string(w.launch.key),
               w.pid, cfg_.log_max_bytes / (1024 * 1024), static_cast<long long>(st.st_size));
  StopPlan plan;
  plan.signal = SIGKILL;  // a grace period would let it write on at disk speed
  stop_worker(w, EndCause::log_limit, plan);
}

void Agent::cut_log_locked(Worker& w) {
  w.log_cut = true;
  const std::string path = log_path(cfg_.state_dir, w.launch.key);
  if (::truncate(path.c_str(), cfg_.log_max_bytes) != 0) {
    spdlog::warn("cannot cut {} to {} bytes: {}", path, cfg_.log_max_bytes, std::strerror(errno));
    return;
  }
  std::ofstream f(path, std::ios::binary | std::ios::app);
  f << "\n[troupe-node: output cut at " << cfg_.log_max_bytes / (1024 * 1024)
    << " MiB, the node's --job-log-max-mb]\n";
}

void Agent::on_heartbeat() {
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return;
  for (auto& [key, w] : running_) {
    check_log_limit_locked(w);
    ship_log_locked(w, kShipBytesPerBeat);
  }
  send(heartbeat_subject_, make_heartbeat(cfg_.name, ++heartbeat_seq_, running_locked()));
  timers_->after(std::chrono::milliseconds(cfg_.heartbeat_ms), [this] { on_heartbeat(); });
}

std::vector<std::pair<std::string, uint64_t>> named(const AgentCounters& c) {
  return {{"bad_messages", c.bad_messages},
          {"fenced", c.fenced},
          {"duplicates", c.duplicates},
          {"launch_failures", c.launch_failures},
          {"checkpoints", c.checkpoints},
          {"log_chunks", c.log_chunks},
          {"disk_limit_kills", c.disk_limit_kills},
          {"folders_removed", c.folders_removed},
          {"folders_removed_for_space", c.folders_removed_for_space},
          {"folder_removal_failures", c.folder_removal_failures},
          {"checkpoint_dirs_removed", c.checkpoint_dirs_removed},
          {"checkpoint_dir_removal_failures", c.checkpoint_dir_removal_failures}};
}

AgentCounters Agent::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

std::vector<WorkerKey> Agent::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_locked();
}

std::vector<WorkerKey> Agent::running_locked() const {
  std::vector<WorkerKey> out;
  out.reserve(running_.size());
  for (const auto& [k, w] : running_) out.push_back(k);
  return out;
}

bool Agent::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, timeout, [this] { return running_.empty(); });
}

void Agent::bad(const std::string& what, const std::string& subject) {
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    n = ++counters_.bad_messages;
  }
  // Log the first few in full, then every 1000th, so a flood cannot flood the log.
  if (n <= 20 || n % 1000 == 0)
    spdlog::warn("dropped a message on {}: {} ({} dropped so far)", subject, what, n);
}

// --- inbound -------------------------------------------------------------------

void Agent::on_message(const Inbound& in) {
  try {
    if (in.subject == subjects::kSysHello) {
      // {"epoch": N} from a scheduler that took the leader lease.
      auto j = json_text::parse(in.data.begin(), in.data.end());
      if (j.is_object() && j.contains("epoch") && j["epoch"].is_number_unsigned() &&
          j["epoch"].get<uint64_t>() > 0)
        fenced(j["epoch"].get<uint64_t>(), "nothing");  // records the newer epoch
      publish_register();
      return;
    }
    // troupe.sys.node.<name>.<kind>, exactly five tokens.
    if (subjects::token(in.subject, 3) != cfg_.name || !subjects::token(in.subject, 5).empty() ||
        in.subject.rfind("troupe.sys.node.", 0) != 0) {
      bad("unexpected subject", in.subject);
      return;
    }
    auto kind = subjects::token(in.subject, 4);
    if (kind == subjects::kHello) {
      publish_register();
      return;
    }
    if (kind == subjects::kLogs) {
      handle_logs(in);
      return;
    }
    if (kind != subjects::kLaunch && kind != subjects::kStop && kind != subjects::kForget) {
      bad("unknown message kind '" + std::string(kind) + "'", in.subject);
      return;
    }
    const wire::Envelope* env = wire::open(in.data);
    if (env == nullptr) {
      bad("malformed envelope (" + std::to_string(in.data.size()) + " bytes)", in.subject);
      return;
    }
    if (kind == subjects::kLaunch) {
      if (const auto* l = env->body_as_Launch()) {
        if (!fenced(l->epoch(), "a launch")) handle_launch(*l);
      } else
        bad(std::string("expected Launch, got ") + wire::body_name(env->body_type()), in.subject);
    } else if (kind == subjects::kStop) {
      if (const auto* s = env->body_as_Stop()) {
        if (!fenced(s->epoch(), "a stop")) handle_stop(*s);
      } else
        bad(std::string("expected Stop, got ") + wire::body_name(env->body_type()), in.subject);
    } else {
      if (const auto* f = env->body_as_Forget()) {
        if (!fenced(f->epoch(), "a forget")) handle_forget(*f);
      } else
        bad(std::string("expected Forget, got ") + wire::body_name(env->body_type()), in.subject);
    }
  } catch (const std::exception& e) {
    bad(std::string("error while handling it: ") + e.what(), in.subject);
  }
}

void Agent::handle_logs(const Inbound& in) {
  if (in.reply.empty()) {
    bad("logs request without a reply subject", in.subject);
    return;
  }
  std::string body(in.data.begin(), in.data.end());
  std::string reply = handle_logs_request(cfg_.state_dir, body);
  publish_(in.reply, reply.data(), reply.size());
}

void Agent::handle_launch(const wire::Launch& l) {
  LaunchInfo info = decode_launch(l);
  info.mps = cfg_.mps;
  std::lock_guard<std::mutex> lock(mu_);
  if (running_.count(info.key) != 0 || finished_.contains(info.key)) {
    ++counters_.duplicates;
    spdlog::debug("ignoring duplicate launch of {}", to_string(info.key));
    // Sent again because the scheduler lost track of it: how it ended, again.
    if (const auto* e = ended_.find(info.key)) publish_exited(info.key, *e);
    return;
  }
  if (shutting_down_) return fail_launch(info.key, "the node agent is shutting down");
  if (auto why = validate_launch(info, !cfg_.simulate); !why.empty())
    return fail_launch(info.key, why);
  if (cfg_.simulate)
    launch_sim(std::move(info));
  else
    launch_real(std::move(info));
}

void Agent::launch_sim(LaunchInfo info) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string path = log_path(cfg_.state_dir, info.key);
  fs::create_directories(log_dir(cfg_.state_dir, info.key.job_id), ec);
  {
    std::ofstream log(path, std::ios::app);
    if (log)
      log << "simulated run of " << command_line(info.command) << "\n";
    else
      spdlog::warn("cannot write {} (simulated run goes on)", path);
  }
  Worker w;
  w.id = next_id_++;
  w.sim = sim_params(info);
  w.launch = std::move(info);
  WorkerKey key = w.launch.key;
  uint64_t id = w.id;
  auto now = Clock::now();
  auto end = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                       std::min(w.sim.duration_s, static_cast<double>(kMaxDelayS))));
  long long max_rt = w.launch.max_runtime_s;
  running_.emplace(key, std::move(w));
  ++counters_.launches;
  send(started_subject_, make_started(cfg_.name, key, 0));
  timers_->at(end, [this, key, id] { on_sim_end(key, id); });
  if (max_rt > 0) timers_->at(now + secs(max_rt), [this, key, id] { on_max_runtime(key, id); });
}

void Agent::fail_launch(const WorkerKey& key, const std::string& why) {
  ++counters_.launch_failures;
  spdlog::warn("launch of {} failed: {}", to_string(key), why);
  finished_.remember(key);
  publish_exited(key, launch_failed(why));
}

void Agent::launch_real(LaunchInfo info) {
  // TROUPE_CHECKPOINT_DIR outlives attempts: create it (mkdir -p) if needed.
  info.checkpoint_dir = resolve_checkpoint_dir(cfg_.state_dir, info.checkpoint_dir);
  if (!info.image.empty() && cfg_.isolation.runtime.empty())
    return fail_launch(info.key, "the job names image " + info.image +
                                     ", and this node runs no container runtime "
                                     "(troupe-node --runtime podman); it never runs an image's "
                                     "job on the host");
  job_ended_ms_.erase(info.key.job_id);
  // Its work dir's size ended the last attempt here: this one starts empty.
  // (A checkpoint dir's size: it is kept, and the next check measures it again.)
  if (auto d = disk_limited_.find(info.key.job_id);
      d != disk_limited_.end() && (!d->second.work_dir || trash_folders_locked(d->first, false)))
    disk_limited_.erase(d);
  Worker w;
  ProcessSpec spec;
  spec.argv = info.command;
  spec.cwd = work_dir(cfg_.state_dir, info.key.job_id);
  spec.log_file = log_path(cfg_.state_dir, info.key);
  if (cfg_.isolation.enabled) {
    if (auto why = isolate(info, spec, w); !why.empty()) {
      if (w.cgroup) w.cgroup->remove();
      return fail_launch(info.key, why);
    }
  } else {
    spec.env = build_child_env(cfg_.base_env, info);
    if (auto why = owned_dir(spec.cwd, std::nullopt); !why.empty())
      return fail_launch(info.key, why);
    if (auto why = give_params(info, spec.cwd, std::nullopt, spec.env); !why.empty())
      return fail_launch(info.key, why);
    if (!info.checkpoint_dir.empty())
      if (auto why = owned_dir(info.checkpoint_dir, std::nullopt); !why.empty())
        return fail_launch(info.key, "cannot create the checkpoint dir: " + why);
  }
  // Forked on the spawner thread, so the worker dies with this agent
  // (PR_SET_PDEATHSIG) and not with the thread that handled the Launch.
  SpawnResult r = spawner_->spawn(spec);
  if (r.pid <= 0) {
    end_isolation(w);
    return fail_launch(info.key, r.error);
  }
  if (!r.exec_error.empty())
    spdlog::warn("{}: {} (the worker exits 127)", to_string(info.key), r.exec_error);
  w.id = next_id_++;
  w.pid = r.pid;
  // Rank 0 only: the folder is the job's, shared by its ranks, so one
  // watcher per attempt reports each checkpoint once.
  if (info.key.rank == 0 && !info.checkpoint_dir.empty())
    w.checkpoint = CheckpointWatch(info.checkpoint_dir);
  w.launch = std::move(info);
  WorkerKey key = w.launch.key;
  uint64_t id = w.id;
  long long max_rt = w.launch.max_runtime_s;
  running_.emplace(key, std::move(w));
  by_pid_.emplace(r.pid, key);
  ++counters_.launches;
  spdlog::info("started {} as pid {}: {}", to_string(key), r.pid, command_line(spec.argv));
  send(started_subject_, make_started(cfg_.name, key, r.pid));
  reaper_->watch(r.pid);
  if (max_rt > 0) timers_->after(secs(max_rt), [this, key, id] { on_max_runtime(key, id); });
}

std::string Agent::isolate(const LaunchInfo& info, ProcessSpec& spec, Worker& w) {
  const IsolationOptions& iso = cfg_.isolation;
  std::string err;
  auto user = users_.resolve(info.team, info.run_as_uid, &err);
  if (!user) return err;
  // Owner-only folders: the work dir, the log folder and file, the checkpoint dir.
  for (const auto& d : {spec.cwd, log_dir(cfg_.state_dir, info.key.job_id), info.checkpoint_dir})
    if (!d.empty())
      if (auto why = owned_dir(d, user); !why.empty()) return why;
  UniqueFd log(
      ::open(spec.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!log || ::fchown(log.get(), user->uid, user->gid) != 0)
    return "cannot prepare the log " + spec.log_file + ": " + std::strerror(errno);

  WorkerPaths paths{spec.cwd, info.checkpoint_dir};
  spec.env = build_child_env(job_base_env(iso, user->name, spec.cwd), info);
  if (auto why = give_params(info, spec.cwd, user, spec.env); !why.empty()) return why;
  auto devices = job_devices(iso, info.gpus, &path_exists);
  CgroupLimits limits;
  long long mb = info.memory_mb > 0 ? info.memory_mb : iso.default_memory_mb;
  limits.memory_bytes = mb * 1024 * 1024;
  limits.cpus = info.cpus;
  limits.pids_max = iso.pids_max;
  if (iso.io_max_mbps > 0 && iso.io_disk_major >= 0) {
    const int64_t bps = iso.io_max_mbps * 1024 * 1024;
    limits.io.push_back(IoLimit{iso.io_disk_major, iso.io_disk_minor, bps, bps});
  }
  // A container runtime sets the devices of its own group (under ours) from
  // its --device list; ours may not deny what it allows.
  limits.restrict_devices = info.image.empty();
  for (const auto& d : devices)
    if (auto rule = device_rule_of(d.host)) limits.devices.push_back(*rule);
  std::string group = info.key.job_id + "-a" + std::to_string(info.key.attempt) + "-r" +
                      std::to_string(info.key.rank);
  auto cg = JobCgroup::create(cgroups_, cgroup_path_, group, limits, &err);
  if (!cg) return "cannot make the job's cgroup: " + err;
  spec.cgroup_procs = cg->procs_files();
  spec.oom_score_adj = 500;  // the kernel's OOM killer takes jobs before the agent
  w.cgroup = std::move(cg);
  if (!info.image.empty()) {
    // podman runs as root (it must), the container as the job's user.
    w.container = container_name(cfg_.name, info.key);
    w.wrapped = true;
    spec.argv = podman_command(iso, info, paths, devices, spec.env, user->uid, user->gid,
                               w.container, "/" + cgroup_path_ + "/" + group);
    return {};
  }
  spec.uid = user->uid;
  spec.gid = user->gid;
  if (iso.sandbox == "bwrap") {
    spec.argv = bwrap_command(iso, info, paths, devices);
    w.wrapped = true;
  }
  return {};
}

void Agent::signal_worker(Worker& w, int sig) {
  if (!w.cgroup || !w.cgroup->valid()) {
    signal_group(w.pid, sig);
    return;
  }
  if (sig == SIGKILL) {
    w.cgroup->kill_all(1000);
    return;
  }
  for (int pid : w.cgroup->pids()) {
    if (w.wrapped && pid == w.pid) continue;
    // conmon watches a container for podman: it must see the container end.
    if (!w.container.empty()) {
      std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
      std::string name;
      if (comm >> name && (name == "conmon" || name == "podman")) continue;
    }
    ::kill(pid, sig);
  }
}

uint64_t Agent::end_isolation(Worker& w) {
  uint64_t ooms = 0;
  if (w.cgroup && w.cgroup->valid()) {
    // Whatever the job left (a `setsid cmd &`, a daemon) ends with it.
    if (!w.cgroup->kill_all())
      spdlog::error("{}: processes of its cgroup survive SIGKILL", to_string(w.launch.key));
    ooms = w.cgroup->oom_kills();
    w.cgroup->remove();
  }
  if (!w.container.empty()) {
    // The container is gone with its processes; its record goes too.
    ProcessSpec rm;
    rm.argv = {cfg_.isolation.podman, "rm", "--force", "--ignore", w.container};
    rm.cwd = cfg_.state_dir;
    rm.log_file = cfg_.state_dir + "/podman-rm.log";
    rm.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
    SpawnResult r = spawn_process(rm);
    if (r.pid > 0 && reaper_) reaper_->watch(r.pid);  // reaped; not a worker
  }
  return ooms;
}

void Agent::handle_stop(const wire::Stop& s) {
  std::string job_id = wire::str(s.job_id());
  int attempt = s.attempt();
  int rank = s.rank();
  // grace_s only counts when the scheduler set it (an absent field reads as
  // the schema default, 10, which is not what --grace-s may say).
  // (Generated tables derive privately from flatbuffers::Table; a C-style
  // cast is the one cast allowed to reach a private base.)
  const auto* table = (const flatbuffers::Table*)(&s);
  bool has_grace = table->CheckField(wire::Stop::VT_GRACE_S);
  StopPlan plan;
  plan.grace_s = has_grace && s.grace_s() >= 0 ? s.grace_s() : cfg_.grace_s;
  plan.signal = s.signal() > 0 && s.signal() < NSIG ? s.signal() : SIGTERM;
  plan.kill_after_s = s.kill_after_s() >= 0 ? s.kill_after_s() : 5;
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<WorkerKey> targets;
  if (rank < 0) {
    for (auto it = running_.lower_bound(WorkerKey{job_id, attempt, -1});
         it != running_.end() && it->first.job_id == job_id && it->first.attempt == attempt; ++it)
      targets.push_back(it->first);
  } else if (running_.count(WorkerKey{job_id, attempt, rank}) != 0) {
    targets.push_back(WorkerKey{job_id, attempt, rank});
  }
  if (targets.empty()) {
    spdlog::debug("stop of {} attempt {} rank {}: nothing runs here", job_id, attempt, rank);
    return;
  }
  for (const auto& k : targets) {
    auto it = running_.find(k);
    if (it != running_.end()) stop_worker(it->second, EndCause::stopped, plan);
  }
}

void Agent::stop_worker(Worker& w, EndCause cause, const StopPlan& plan) {
  if (w.pid == 0) {  // simulated: ends at once
    WorkerKey key = w.launch.key;
    finish(key, classify(-1, SIGTERM, cause));
    return;
  }
  // The first reason to stop is the one reported; later Stops may only make
  // the end come sooner (a cancel after a preemption's SIGUSR1, a fencing
  // SIGKILL after anything).
  if (w.cause == EndCause::natural) w.cause = cause;
  WorkerKey key = w.launch.key;
  uint64_t id = w.id;
  auto now = Clock::now();
  auto grace = secs(plan.grace_s);
  if (plan.signal == SIGKILL) {
    spdlog::info("stopping {} (pid {}): SIGKILL", to_string(key), w.pid);
    w.kill_at = now;
    w.kill_sent = true;
    signal_worker(w, SIGKILL);
    return;
  }
  if (plan.signal == SIGTERM) {
    spdlog::info("stopping {} (pid {}): SIGTERM, SIGKILL after {} s", to_string(key), w.pid,
                 plan.grace_s);
    if (!w.term_sent && !w.kill_sent) signal_worker(w, SIGTERM);
    w.term_sent = true;
    w.kill_at = std::min(w.kill_at, now + grace);
  } else {
    spdlog::info("stopping {} (pid {}): signal {}, SIGTERM after {} s, SIGKILL {} s later",
                 to_string(key), w.pid, plan.signal, plan.grace_s, plan.kill_after_s);
    // The same signal twice (a repeated Stop) would ask for a second checkpoint.
    if (!w.term_sent && !w.kill_sent && w.signals_sent.insert(plan.signal).second)
      signal_worker(w, plan.signal);
    w.term_at = std::min(w.term_at, now + grace);
    w.kill_at = std::min(w.kill_at, now + grace + secs(plan.kill_after_s));
  }
  if (!w.term_sent) timers_->at(w.term_at, [this, key, id] { on_escalate(key, id); });
  timers_->at(w.kill_at, [this, key, id] { on_escalate(key, id); });
}

void Agent::poll_checkpoint(Worker& w) {
  if (!w.checkpoint.active() || w.pid == 0) return;
  auto seen = w.checkpoint.poll();
  if (!seen) return;
  ++counters_.checkpoints;
  spdlog::info("{}: checkpoint {} ({}/latest)", to_string(w.launch.key), seen->path,
               w.checkpoint.dir());
  send(checkpointed_subject_, make_checkpointed(cfg_.name, w.launch.key, seen->path, seen->ts_ms));
}

void Agent::on_checkpoint_poll() {
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return;
  for (auto& [k, w] : running_) poll_checkpoint(w);
  timers_->after(kCheckpointPoll, [this] { on_checkpoint_poll(); });
}

// --- timers and reaper ------------------------------------------------------------

void Agent::on_sim_end(const WorkerKey& key, uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = running_.find(key);
  if (it == running_.end() || it->second.id != id) return;
  finish(key, classify(it->second.sim.exit_code, 0, EndCause::natural));
}

void Agent::on_max_runtime(const WorkerKey& key, uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = running_.find(key);
  if (it == running_.end() || it->second.id != id) return;
  spdlog::info("{} exceeded max_runtime_s={}", to_string(key), it->second.launch.max_runtime_s);
  StopPlan plan;
  plan.signal = SIGTERM;
  plan.grace_s = it->second.launch.grace_s >= 0 ? it->second.launch.grace_s : cfg_.grace_s;
  stop_worker(it->second, EndCause::max_runtime, plan);
}

void Agent::on_escalate(const WorkerKey& key, uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = running_.find(key);
  if (it == running_.end() || it->second.id != id || it->second.pid == 0) return;
  Worker& w = it->second;
  auto now = Clock::now();
  if (!w.kill_sent && now >= w.kill_at) {
    spdlog::warn("{} (pid {}) outlived its grace period: SIGKILL", to_string(key), w.pid);
    w.kill_sent = true;
    signal_worker(w, SIGKILL);
  } else if (!w.term_sent && !w.kill_sent && now >= w.term_at) {
    spdlog::info("{} (pid {}) still runs after its grace period: SIGTERM", to_string(key), w.pid);
    w.term_sent = true;
    signal_worker(w, SIGTERM);
  }
}

void Agent::on_child_exit(pid_t pid, std::optional<int> status) {
  std::lock_guard<std::mutex> lock(mu_);
  auto p = by_pid_.find(pid);
  if (p == by_pid_.end()) return;
  WorkerKey key = p->second;
  by_pid_.erase(p);
  auto it = running_.find(key);
  if (it == running_.end()) return;
  EndCause cause = it->second.cause;
  // Leftovers of the worker's process group go with it once we asked it to stop.
  if (cause != EndCause::natural) ::kill(-pid, SIGKILL);
  // Everything else it started, too (its whole cgroup), whatever the cause.
  uint64_t ooms = end_isolation(it->second);
  // A checkpoint marked just before the exit goes out before the Exited, so
  // the scheduler knows it when it decides on the next attempt.
  poll_checkpoint(it->second);
  ExitInfo e = status ? classify_wait_status(*status, cause) : classify(-1, 0, cause);
  if (cause == EndCause::log_limit) {
    cut_log_locked(it->second);
    e.reason = "log_limit: its output passed " +
               std::to_string(cfg_.log_max_bytes / (1024 * 1024)) +
               " MiB, the node's --job-log-max-mb";
  }
  if (cause == EndCause::disk_limit)
    if (auto d = disk_limited_.find(key.job_id); d != disk_limited_.end())
      e.reason = d->second.reason;
  if (ooms > 0 && cause == EndCause::natural)
    e.reason = "oom_killed: the memory limit of " +
               std::to_string(it->second.cgroup->memory_limit() / (1024 * 1024)) +
               " MiB was exceeded (" + e.reason + ")";
  spdlog::info("{} (pid {}) ended: {}", to_string(key), pid, e.reason);
  finish(key, e);
}

void Agent::finish(const WorkerKey& key, const ExitInfo& e) {
  // The rest of its output goes out before its Exited: once the job has
  // ended, its whole log is in the stream (same connection, same order).
  if (auto it = running_.find(key); it != running_.end())
    ship_log_locked(it->second, kShipBytesAtEnd);
  running_.erase(key);
  finished_.remember(key);
  ended_.remember(key, e);
  if (guard_on_ && !job_running_locked(key.job_id)) job_ended_ms_[key.job_id] = wall_ms();
  publish_exited(key, e);
  if (running_.empty()) idle_cv_.notify_all();
}

void Agent::publish_exited(const WorkerKey& key, const ExitInfo& e) {
  ++counters_.exits;
  send(exited_subject_, make_exited(cfg_.name, key, e));
}

// --- the folder guard --------------------------------------------------------------

void Agent::guard_loop() {
  const auto period =
      std::chrono::milliseconds(cfg_.dir_check_ms > 0 ? cfg_.dir_check_ms : 5 * cfg_.heartbeat_ms);
  empty_trash();  // what an earlier agent left
  auto next = Clock::now() + period;
  std::unique_lock<std::mutex> lock(guard_mu_);
  while (true) {
    guard_cv_.wait_until(lock, next, [this] { return guard_stop_ || !forgets_.empty(); });
    if (guard_stop_) return;
    auto forgets = std::move(forgets_);
    forgets_.clear();
    lock.unlock();
    for (const auto& [job_id, dir] : forgets) remove_checkpoint_dir(job_id, dir);
    if (Clock::now() >= next) {
      if (guard_on_) guard_round();
      std::lock_guard<std::mutex> counted(mu_);
      ++counters_.guard_checks;
      next = Clock::now() + period;
    }
    lock.lock();
  }
}

void Agent::handle_forget(const wire::Forget& f) {
  const std::string job_id = wire::str(f.job_id());
  const std::string dir = resolve_checkpoint_dir(cfg_.state_dir, wire::str(f.checkpoint_dir()));
  if (auto why = forget_refusal(job_id, dir); !why.empty()) {
    bad("Forget refused: " + why, subjects::scheduler_to_agent(cfg_.name, subjects::kForget));
    return;
  }
  if (cfg_.simulate) return;  // a simulated worker makes no folders
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(guard_mu_);
    if (forgets_.size() < kMaxForgets) {
      forgets_.emplace_back(job_id, dir);
      queued = true;
    }
  }
  if (queued) {
    guard_cv_.notify_all();
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++counters_.checkpoint_dir_removal_failures;
  spdlog::warn("{} left: {} forgotten jobs' checkpoint dirs wait already", dir, kMaxForgets);
}

void Agent::remove_checkpoint_dir(const std::string& job_id, const std::string& dir) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (job_running_locked(job_id)) {
      // A forgotten job never runs again: a scheduler that still places it
      // is not the one that forgot it. Its folder stays.
      spdlog::warn("{}: not removed, a worker of {} runs here", dir, job_id);
      ++counters_.checkpoint_dir_removal_failures;
      return;
    }
  }
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) return;  // never made here, or removed by another node
  bool gone = false;
  if (S_ISDIR(st.st_mode))
    gone = remove_tree(dir);
  else
    spdlog::warn("{}: not removed, not a folder", dir);
  std::lock_guard<std::mutex> lock(mu_);
  if (gone) {
    ++counters_.checkpoint_dirs_removed;
    spdlog::info("{}: forgotten, its checkpoint dir {} removed", job_id, dir);
  } else {
    ++counters_.checkpoint_dir_removal_failures;
    if (S_ISDIR(st.st_mode))
      spdlog::warn("cannot remove {} (a forgotten job's checkpoint dir)", dir);
  }
}

bool Agent::job_running_locked(const std::string& job_id) const {
  auto it = running_.lower_bound(
      WorkerKey{job_id, std::numeric_limits<int>::min(), std::numeric_limits<int>::min()});
  return it != running_.end() && it->first.job_id == job_id;
}

void Agent::guard_round() {
  const std::string jobs = cfg_.state_dir + "/jobs", logs = cfg_.state_dir + "/logs";
  measure_running_dirs();
  std::set<std::string> names;
  for (const auto& d : {jobs, logs})
    for (auto& n : folder_names(d)) names.insert(std::move(n));
  {
    // Ends of jobs whose folders are gone (removed by hand, say).
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = job_ended_ms_.begin(); it != job_ended_ms_.end();)
      it = names.count(it->first) == 0 ? job_ended_ms_.erase(it) : std::next(it);
  }
  const int64_t now = wall_ms();
  std::vector<std::pair<std::string, JobFolder>> kept;  // ended, not removed
  for (const auto& id : names) {
    JobFolder f;
    {
      std::lock_guard<std::mutex> lock(mu_);
      f.running = job_running_locked(id);
      auto d = disk_limited_.find(id);
      f.disk_limited = d != disk_limited_.end() && d->second.work_dir;
      if (auto it = job_ended_ms_.find(id); it != job_ended_ms_.end()) f.ended_ms = it->second;
    }
    if (f.running) continue;
    if (f.ended_ms < 0) f.mtime_ms = newest_change_ms(jobs + "/" + id, logs + "/" + id);
    const Removal r = removal_of(f, now, cfg_.dir_keep_ms);
    if (r != Removal::all) kept.emplace_back(id, f);
    if (r == Removal::keep) continue;
    std::lock_guard<std::mutex> lock(mu_);
    if (!trash_folders_locked(id, r == Removal::all)) continue;  // launched again meanwhile
    disk_limited_.erase(id);
    if (r == Removal::all) job_ended_ms_.erase(id);
  }
  empty_trash();
  // The disk fuller than cfg_.dir_gc_percent: ended jobs' folders go, the
  // longest ended first, whatever their keep time, until it is not.
  if (cfg_.dir_gc_percent <= 0 || kept.empty()) return;
  auto used = used_percent(cfg_.state_dir);
  if (!used || *used < cfg_.dir_gc_percent) return;
  spdlog::warn(
      "the state folder's file system is {:.1f} % full (--job-dir-gc-percent {}): "
      "removing ended jobs' folders, the oldest first",
      *used, cfg_.dir_gc_percent);
  for (const auto& id : pressure_order(kept)) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!trash_folders_locked(id, true)) continue;
      disk_limited_.erase(id);
      job_ended_ms_.erase(id);
      ++counters_.folders_removed_for_space;
    }
    empty_trash();
    used = used_percent(cfg_.state_dir);
    if (!used || *used < cfg_.dir_gc_percent) break;
  }
}

void Agent::measure_running_dirs() {
  FolderLimit work{cfg_.disk_max_bytes, cfg_.disk_max_files, "work dir",
                   "the node's --job-disk-max-mb", "the node's --job-disk-max-files"};
  const bool checkpoints = cfg_.checkpoint_max_bytes != 0 || cfg_.checkpoint_max_files != 0;
  if (work.max_bytes <= 0 && work.max_files <= 0 && !checkpoints) return;
  std::map<std::string, std::string> jobs;  // running here: job id -> its checkpoint dir
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [k, w] : running_)
      if (w.pid != 0 && w.cause == EndCause::natural)
        jobs.emplace(k.job_id, w.launch.checkpoint_dir);
  }
  for (const auto& [id, checkpoint_dir] : jobs) {
    if (auto why = over_limit(work_dir(cfg_.state_dir, id), work)) {
      over_disk_limit(id, {*why, true});
      continue;
    }
    if (!checkpoints || checkpoint_dir.empty()) continue;
    // Shared storage: every node a job runs on measures it, the first over kills.
    FolderLimit ckpt{cfg_.checkpoint_max_bytes, cfg_.checkpoint_max_files, "checkpoint dir",
                     "the node's --job-checkpoint-max-mb", "the node's --job-checkpoint-max-files"};
    if (ckpt.max_bytes < 0 || ckpt.max_files < 0) {
      const auto [bytes, files] = quarter_of_file_system(checkpoint_dir);
      if (ckpt.max_bytes < 0) {
        ckpt.max_bytes = bytes;
        ckpt.bytes_source = "a quarter of its file system (the node's --job-checkpoint-max-mb -1)";
      }
      if (ckpt.max_files < 0) {
        ckpt.max_files = files;
        ckpt.files_source =
            "a quarter of its file system's inodes (the node's --job-checkpoint-max-files -1)";
      }
    }
    if (auto why = over_limit(checkpoint_dir, ckpt)) over_disk_limit(id, {*why, false});
  }
}

void Agent::over_disk_limit(const std::string& job_id, const DiskLimited& why) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [k, w] : running_) {
    if (k.job_id != job_id || w.pid == 0 || w.cause != EndCause::natural) continue;
    spdlog::warn("{} (pid {}): {}: killed", to_string(k), w.pid, why.reason);
    StopPlan plan;
    plan.signal = SIGKILL;  // a grace period would let it write on at disk speed
    stop_worker(w, EndCause::disk_limit, plan);
    ++counters_.disk_limit_kills;
    disk_limited_[job_id] = why;
  }
}

bool Agent::trash_folders_locked(const std::string& job_id, bool logs) {
  if (job_running_locked(job_id)) return false;
  const std::string trash = cfg_.state_dir + "/trash";
  std::error_code ec;
  std::filesystem::create_directories(trash, ec);
  (void)::chmod(trash.c_str(), 0700);
  std::vector<std::string> from = {work_dir(cfg_.state_dir, job_id)};
  if (logs) from.push_back(log_dir(cfg_.state_dir, job_id));
  for (const auto& f : from) {
    const std::string to =
        trash + "/" + std::to_string(wall_ms()) + "-" + std::to_string(++trash_seq_);
    if (::rename(f.c_str(), to.c_str()) != 0 && errno != ENOENT) {
      spdlog::warn("cannot move {} away: {}", f, std::strerror(errno));
      ++counters_.folder_removal_failures;
    }
  }
  return true;
}

void Agent::empty_trash() {
  const std::string trash = cfg_.state_dir + "/trash";
  const auto names = folder_names(trash);  // sorted
  std::unique_lock<std::mutex> lock(mu_);
  for (auto it = trash_stuck_.begin(); it != trash_stuck_.end();)  // gone by hand, say
    it = std::binary_search(names.begin(), names.end(), *it) ? std::next(it)
                                                             : trash_stuck_.erase(it);
  for (const auto& name : names) {
    const std::string path = trash + "/" + name;
    lock.unlock();  // rm may take long: Launch and exits go on meanwhile
    const bool gone = remove_tree(path);
    lock.lock();
    if (gone) {
      ++counters_.folders_removed;
      trash_stuck_.erase(name);
    } else if (trash_stuck_.insert(name).second) {
      ++counters_.folder_removal_failures;
      spdlog::warn("cannot remove {} (left in the trash; tried again every check)", path);
    }
  }
}

// --- shutdown -------------------------------------------------------------------------

void Agent::shutdown() {
  {
    std::lock_guard<std::mutex> lock(guard_mu_);
    guard_stop_ = true;
  }
  guard_cv_.notify_all();
  if (guard_.joinable()) guard_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_ || shutting_down_) return;
    shutting_down_ = true;
    std::vector<WorkerKey> keys = running_locked();
    if (!keys.empty())
      spdlog::info("shutting down: stopping {} worker(s), grace {} s", keys.size(), cfg_.grace_s);
    for (const auto& k : keys) {
      auto it = running_.find(k);
      if (it == running_.end()) continue;
      if (it->second.pid == 0) {
        finish(k, classify(-1, SIGTERM, EndCause::shutdown));
      } else {
        // Reported as the agent's end (an infrastructure failure), whatever
        // asked the worker to stop before.
        it->second.cause = EndCause::shutdown;
        if (!it->second.term_sent && !it->second.kill_sent) signal_worker(it->second, SIGTERM);
        it->second.term_sent = true;
      }
    }
  }
  if (!wait_idle(secs(cfg_.grace_s))) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [k, w] : running_) {
      spdlog::warn("{} (pid {}) outlived the grace period: SIGKILL", to_string(k), w.pid);
      signal_worker(w, SIGKILL);
    }
  }
  if (!wait_idle(kReapWait)) {
    // Cannot happen short of an unkillable (D state) process; say so and go.
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [k, w] : running_) {
      spdlog::error("{} (pid {}) did not die after SIGKILL; reporting it lost", to_string(k),
                    w.pid);
      publish_exited(k, classify(-1, SIGKILL, EndCause::shutdown));
    }
  }
  if (own_timers_) timers_->stop();
  reaper_.reset();
  // Last: its thread's end would SIGKILL any worker still alive.
  if (spawner_) spawner_->stop();
  std::lock_guard<std::mutex> lock(mu_);
  shut_down_ = true;
  if (cfg_.log_summary)
    spdlog::info(
        "node agent stopped: {} launched, {} exited, {} launch failures, "
        "{} duplicates, {} bad messages dropped",
        counters_.launches, counters_.exits, counters_.launch_failures, counters_.duplicates,
        counters_.bad_messages);
}

}  // namespace troupe::node

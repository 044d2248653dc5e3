#include "harness.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <catch2/catch.hpp>

#include "bus/server_config.hpp"
#include "bus/subjects.hpp"
#include "messages/names.hpp"

extern char** environ;

namespace troupe::it {

namespace fs = std::filesystem;

// --- test outcome ---------------------------------------------------------------

namespace {

std::atomic<bool> g_test_failed{false};

// Sees every assertion of the running test case, so that destructors (which
// cannot ask Catch) know whether to keep the directory and print the logs.
struct FailureListener : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(Catch::TestCaseInfo const& info) override {
    g_test_failed = false;
    TestEventListenerBase::testCaseStarting(info);
  }
  bool assertionEnded(Catch::AssertionStats const& stats) override {
    if (!stats.assertionResult.isOk()) g_test_failed = true;
    return true;
  }
};

CATCH_REGISTER_LISTENER(FailureListener)

}  // namespace

bool current_test_failed() {
  return g_test_failed || std::uncaught_exceptions() > 0;
}

// --- small helpers ------------------------------------------------------------

std::string bin_dir() {
  // TROUPE_TEST_BIN_DIR: binaries copied elsewhere (a run that goes on while
  // the build tree is rebuilt).
  if (const char* d = std::getenv("TROUPE_TEST_BIN_DIR"); d != nullptr && *d != 0) return d;
  return TROUPE_BIN_DIR;
}
std::string nats_server_path() {
  return TROUPE_NATS_SERVER;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tail_file(const std::string& path, size_t max_lines) {
  std::string s = read_file(path);
  if (s.size() > 64 * 1024) s = s.substr(s.size() - 64 * 1024);
  size_t lines = 0;
  size_t pos = s.size();
  if (pos > 0 && s[pos - 1] == '\n') --pos;
  while (pos > 0) {
    if (s[pos - 1] == '\n' && ++lines >= max_lines) break;
    --pos;
  }
  return s.substr(pos);
}

namespace {

bus::Library& library() {
  static bus::Library lib;
  return lib;
}

bool is_regular(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// <auth dir>/<identity>.creds (the layout `troupe auth` writes).
std::string creds_path_of(const std::string& auth_dir, const std::string& identity) {
  return auth_dir + "/" + identity + ".creds";
}

bool is_executable(const std::string& path) {
  return ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

// --- TmpDir / FailureDump -----------------------------------------------------------

TmpDir::TmpDir(const std::string& prefix) {
  std::string tmpl = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr)
    throw std::runtime_error("mkdtemp failed: " + std::string(std::strerror(errno)));
  path_ = buf.data();
  // Jobs run as their team's user (docs/security.md): they pass through to
  // their folders under the agents' state dirs, and tests' jobs leave files
  // here (pids, marks), as under /tmp: world-writable with the sticky bit.
  ::chmod(path_.c_str(), 01777);
}

TmpDir::~TmpDir() {
  if (current_test_failed() || std::getenv("TROUPE_KEEP_TMP") != nullptr) {
    std::cerr << "[harness] " << (current_test_failed() ? "test failed" : "TROUPE_KEEP_TMP set")
              << ": keeping " << path_ << "\n";
    return;
  }
  std::error_code ec;
  fs::remove_all(path_, ec);
}

FailureDump::~FailureDump() {
  if (current_test_failed()) print();
}

void FailureDump::add(const std::string& label, const std::string& path) {
  files_.emplace_back(label, path);
}

void FailureDump::print() const {
  // Our processes first, the nats-servers' long logs last.
  auto ordered = files_;
  std::stable_partition(ordered.begin(), ordered.end(),
                        [](const auto& f) { return f.first.rfind("nats-server", 0) != 0; });
  for (const auto& [label, path] : ordered) {
    std::string t = tail_file(path, 60);
    std::cerr << "----- " << label << " (" << path << ")" << (t.empty() ? " [empty]" : "")
              << " -----\n"
              << t;
    if (!t.empty() && t.back() != '\n') std::cerr << "\n";
  }
  if (!files_.empty()) std::cerr << "----- end of process logs -----\n";
}

// --- Process ------------------------------------------------------------------------

Process::Process(std::string name, std::vector<std::string> argv, const std::string& out_path,
                 const std::string& err_path, const std::vector<std::string>& env)
    : name_(std::move(name)), argv_(std::move(argv)), out_(out_path), err_(err_path) {
  if (argv_.empty()) throw std::runtime_error("Process: empty argv");

  std::vector<std::string> envs;
  std::string path_value = bin_dir() + ":/usr/sbin:/usr/bin:/sbin:/bin";
  if (const char* p = std::getenv("PATH")) path_value = bin_dir() + ":" + p + ":/usr/sbin";
  auto key_of = [](const std::string& kv) { return kv.substr(0, kv.find('=')); };
  std::vector<std::string> override_keys = {"PATH"};
  for (const auto& kv : env) override_keys.push_back(key_of(kv));
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    bool overridden = false;
    for (const auto& k : override_keys) overridden = overridden || key_of(kv) == k;
    if (!overridden) envs.push_back(kv);
  }
  envs.push_back("PATH=" + path_value);
  for (const auto& kv : env) envs.push_back(kv);

  std::vector<char*> cargv;
  for (auto& a : argv_) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<char*> cenv;
  for (auto& e : envs) cenv.push_back(e.data());
  cenv.push_back(nullptr);

  // posix_spawn: no code of ours runs in the child, so no inherited lock or
  // signal handler (Catch installs some) can bite between fork and exec.
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);  // its own process group
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, cargv[0], &fa, &attr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw std::runtime_error("cannot start " + argv_[0] + ": " + std::strerror(rc));
  pid_ = pid;
}

Process::~Process() {
  if (pid_ > 0) stop(5s);
}

std::string Process::command_line() const {
  std::string s;
  for (const auto& a : argv_) {
    if (!s.empty()) s += ' ';
    s += a;
  }
  return s;
}

void Process::reap(bool block) {
  if (exited_ || pid_ <= 0) return;
  int st = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &st, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) {
    exited_ = true;
    status_ = st;
  } else if (r < 0) {
    exited_ = true;  // not our child any more (should not happen)
    status_ = 0;
  }
}

bool Process::running() {
  reap(false);
  return !exited_;
}

std::optional<int> Process::exit_status() {
  reap(false);
  if (!exited_) return std::nullopt;
  if (WIFEXITED(status_)) return WEXITSTATUS(status_);
  if (WIFSIGNALED(status_)) return 128 + WTERMSIG(status_);
  return -1;
}

bool Process::wait_exit(Clock::time_point deadline) {
  // Process exit has no event to wait on here: poll waitpid.
  while (true) {
    reap(false);
    if (exited_) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
}

void Process::terminate() {
  if (pid_ <= 0) return;
  reap(false);
  if (exited_) return;
  if (::kill(-pid_, SIGTERM) != 0) ::kill(pid_, SIGTERM);
}

bool Process::signal(int sig) {
  if (!running()) return false;
  return ::kill(pid_, sig) == 0;
}

void Process::kill_now() {
  if (pid_ <= 0) return;
  // The whole group: also strays the process left behind.
  ::kill(-pid_, SIGKILL);
  reap(false);
  if (!exited_) {
    ::kill(pid_, SIGKILL);
    reap(true);
  }
}

void Process::stop(Clock::duration grace) {
  terminate();
  wait_exit(Clock::now() + grace);
  kill_now();
}

void stop_all(const std::vector<Process*>& procs, Clock::duration grace) {
  for (auto* p : procs) p->terminate();
  auto deadline = Clock::now() + grace;
  for (auto* p : procs) p->wait_exit(deadline);
  for (auto* p : procs) p->kill_now();
}

RunResult run_program(const std::vector<std::string>& argv, const std::string& dir,
                      const std::string& label, Clock::duration timeout, FailureDump* dump,
                      const std::vector<std::string>& env) {
  RunResult r;
  std::string out = dir + "/" + label + ".out";
  std::string err = dir + "/" + label + ".err";
  if (dump != nullptr) {
    dump->add(label + " stdout", out);
    dump->add(label + " stderr", err);
  }
  Process p(label, argv, out, err, env);
  if (!p.wait_exit(Clock::now() + timeout)) {
    r.timed_out = true;
    p.stop(3s);
  }
  p.kill_now();  // strays left in its process group
  r.exit_code = p.exit_status().value_or(-1);
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

// --- EventLog ----------------------------------------------------------------------

EventLog::EventLog(bus::Connection& conn) {
  sub_ = conn.subscribe(subjects::kAllEvents, [this](Inbound&& in) { on_message(std::move(in)); });
  if (!sub_) throw std::runtime_error("cannot subscribe to troupe.*.events.>");
  // The server has the subscription once the flush round trip returns.
  if (!conn.flush(5000)) throw std::runtime_error("flush after subscribe failed");
}

EventLog::~EventLog() {
  sub_.reset();
}

void EventLog::on_message(Inbound&& in) {
  std::string text(in.data.begin(), in.data.end());
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  std::lock_guard<std::mutex> lock(mu_);
  if (j.is_discarded() || !j.is_object() || !j.contains("job_id") || !j["job_id"].is_string() ||
      !j.contains("state") || !j["state"].is_string()) {
    malformed_.push_back(in.subject + ": " + text);
  } else {
    Event e;
    e.seq = events_.size();
    e.subject = in.subject;
    e.job_id = j["job_id"].get<std::string>();
    e.state = j["state"].get<std::string>();
    e.json = std::move(j);
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

bool EventLog::wait_for(const Pred& pred, Clock::duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_until(lock, Clock::now() + timeout, [&] { return pred(events_); });
}

std::optional<Event> EventLog::wait_state(const std::string& job_id,
                                          const std::function<bool(const std::string&)>& accept,
                                          Clock::duration timeout) {
  std::optional<Event> found;
  wait_for(
      [&](const std::vector<Event>& events) {
        for (const auto& e : events) {
          if (e.job_id == job_id && accept(e.state)) {
            found = e;
            return true;
          }
        }
        return false;
      },
      timeout);
  return found;
}

std::optional<Event> EventLog::wait_state(const std::string& job_id, const std::string& state,
                                          Clock::duration timeout) {
  return wait_state(
      job_id, [&](const std::string& s) { return s == state; }, timeout);
}

std::vector<Event> EventLog::all() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

std::vector<Event> EventLog::of_job(const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Event> out;
  for (const auto& e : events_)
    if (e.job_id == job_id) out.push_back(e);
  return out;
}

std::vector<std::string> EventLog::malformed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return malformed_;
}

std::string EventLog::describe(const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream ss;
  size_t shown = 0;
  for (const auto& e : events_) {
    if (!job_id.empty() && e.job_id != job_id) continue;
    ss << "  #" << e.seq << " " << e.subject << " " << e.json.dump() << "\n";
    if (++shown >= 400) {
      ss << "  ...\n";
      break;
    }
  }
  if (shown == 0) ss << "  (no events" << (job_id.empty() ? "" : " for " + job_id) << ")\n";
  for (const auto& m : malformed_) ss << "  malformed: " << m << "\n";
  return ss.str();
}

// --- Cluster ----------------------------------------------------------------------

Cluster::Cluster(const ClusterOptions& opts) {
  library();
  for (const char* b : {"troupe-scheduler", "troupe-node"}) {
    std::string p = bin_dir() + "/" + b;
    INFO("missing binary " << p << " (build it first: cmake --build build)");
    REQUIRE(is_executable(p));
  }
  secure_ = opts.secure;
  tls_ = opts.secure && opts.tls;
  if (secure_) {
    REQUIRE(is_executable(bin_dir() + "/troupe"));
    auth({"init"});
    auth({"add-admin", "admin"});
  }
  start_nats(opts);
  if (opts.scheduler) start_scheduler(opts);
  for (const auto& n : opts.nodes) add_node(n);
}

Cluster::~Cluster() {
  std::vector<Process*> procs;
  if (gateway_) procs.push_back(gateway_.get());
  for (auto& n : nodes_) procs.push_back(n.get());
  if (scheduler_) procs.push_back(scheduler_.get());
  for (auto& p : old_schedulers_) procs.push_back(p.get());
  stop_all(procs, 5s);
  bool failed = current_test_failed();
  if (failed) {
    std::cerr << "[harness] cluster at " << url_ << ", directory " << dir() << "\n";
    for (auto* p : procs) {
      std::cerr << "[harness] " << p->name() << " (pid " << p->pid() << "): " << p->command_line()
                << "\n";
    }
    if (events_) std::cerr << "[harness] job events seen:\n" << events_->describe();
  }
  events_.reset();
  sub_conn_.reset();
  conn_.reset();
  for (auto& sv : nats_)
    if (sv.proc) sv.proc->stop(3s);
}

void Cluster::start_nats(const ClusterOptions& opts) {
  std::string last_error;
  const size_t n = static_cast<size_t>(std::max(1, opts.nats_servers));
  // A front door's leaf node links, each bound to its cluster's link account.
  std::vector<bus::LeafRemote> remotes;
  for (const auto& r : opts.leaf_remotes) {
    INFO("leaf node remotes need a secure cluster (link accounts)");
    REQUIRE(secure_);
    remotes.push_back({r.url, add_link(r.name), r.creds, r.ca});
  }
  for (int attempt = 1; attempt <= 5; ++attempt) {
    nats_.clear();
    nats_.resize(n);
    std::vector<int> route_ports(n, 0);
    bool ports = true;
    for (size_t i = 0; i < n; ++i) {
      nats_[i].port = free_port();
      if (n > 1) route_ports[i] = free_port();
      if (opts.leaf_listen) nats_[i].leaf_port = free_port();
      if (nats_[i].port == 0 || (n > 1 && route_ports[i] == 0) ||
          (opts.leaf_listen && nats_[i].leaf_port == 0))
        ports = false;
    }
    if (!ports) continue;
    url_.clear();
    for (size_t i = 0; i < n; ++i) {
      auto& sv = nats_[i];
      sv.base = file("nats-" + std::to_string(attempt) + (n > 1 ? "-s" + std::to_string(i) : ""));
      std::string store = sv.base + "-store";
      ::mkdir(store.c_str(), 0755);
      sv.argv = {nats_server_path(),      "-js", "-a", "127.0.0.1", "-p",
                 std::to_string(sv.port), "-sd", store};
      if (secure_ || n > 1 || opts.leaf_listen) {
        std::string conf = sv.base + ".conf";
        bus::ServerConfig c;
        c.port = sv.port;
        c.store_dir = store;
        c.leaf_port = sv.leaf_port;
        // A link that comes through a proxy must learn the proxy's address,
        // not this server's: it would reconnect past a cut proxy.
        c.leaf_advertise = opts.leaf_advertise;
        if (tls_ && sv.leaf_port != 0) {
          c.tls_cert = file("auth/server-cert.pem");
          c.tls_key = file("auth/server-key.pem");
        }
        c.leaf_remotes = remotes;
        // One cluster: routes between the servers, on loopback.
        c.cluster_name = "troupe-it";
        if (n > 1) c.route_ports = route_ports;
        c.index = i;
        // Operator mode (and TLS) from what `troupe auth init` wrote
        // (nats-server reads an include relative to the config's folder).
        if (secure_) c.include = tls_ ? "auth/nats-auth.conf" : "auth/nats-auth-notls.conf";
        std::ofstream(conf) << bus::server_config(c);
        dump_.add("nats-server config" + (n > 1 ? " s" + std::to_string(i) : std::string()), conf);
        sv.argv = {nats_server_path(), "-c", conf};
      }
      url_ += (i == 0 ? "" : ",") + nats_url(i);
      launch_nats(i, "#" + std::to_string(attempt));
    }

    // Readiness: the servers accept a client connection. Polled (there is no
    // event to wait on), bounded by a deadline (load/host.hpp, as troupe-load does).
    bus::ConnectOptions o;
    o.url = url_;
    o.timeout_ms = 1000;
    if (secure_) {
      o.creds_file = creds(std::string(subjects::kSchedulerIdentity));
      o.tls_ca = tls_ca();
    }
    auto alive = [this] {
      for (auto& sv : nats_)
        if (sv.proc->running()) return true;
      return false;
    };
    o.name = "troupe-it";
    conn_ = load::connect_when_up(o, 10s, alive, &last_error);
    if (conn_) {
      o.name = "troupe-it-events";
      // (Retried like the first: once, a second connection right after the
      // first was refused with an authorization error while the server was
      // still starting up.)
      sub_conn_ = load::connect_when_up(o, 5s, alive, &last_error);
      INFO("second connection to " << url_ << ": " << last_error);
      REQUIRE(sub_conn_);
      // A cluster's JetStream answers once its servers have elected a
      // metadata leader.
      if (n > 1) {
        const bool ready = wait_jetstream(30s, &last_error);
        INFO("JetStream of the NATS cluster at " << url_ << " not ready: " << last_error);
        REQUIRE(ready);
      }
      events_ = std::make_unique<EventLog>(*sub_conn_);
      return;
    }
    // Port taken between free_port() and the bind, or a slow start: retry.
    for (auto& sv : nats_) sv.proc->stop(2s);
  }
  FAIL("nats-server did not start after 5 attempts: " << last_error);
}

std::string Cluster::nats_url(size_t i) const {
  return "nats://127.0.0.1:" + std::to_string(nats_.at(i).port);
}

void Cluster::launch_nats(size_t i, const std::string& label) {
  auto& sv = nats_.at(i);
  const std::string who = nats_.size() > 1 ? "nats-server s" + std::to_string(i) : "nats-server";
  const std::string out = sv.base + (sv.starts == 0 ? "" : "-restart-" + std::to_string(sv.starts));
  sv.proc = std::make_unique<Process>(who, sv.argv, out + ".out", out + ".err");
  dump_.add(who + " " + label + " stderr", out + ".err");
  ++sv.starts;
}

bool Cluster::wait_jetstream(Clock::duration timeout, std::string* why) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    std::string err;
    auto r = conn_->request("$JS.API.INFO", std::string(), 1000, &err);
    if (r) {
      Json j = Json::parse(r->begin(), r->end(), nullptr, false);
      if (j.is_object() && !j.contains("error")) return true;
      err = std::string(r->begin(), r->end());
    }
    if (why != nullptr) *why = err;
    std::this_thread::sleep_for(100ms);  // polled: no event says "elected"
  }
  return false;
}

bool Cluster::wait_streams_current(Clock::duration timeout, std::string* why) {
  auto deadline = Clock::now() + timeout;
  std::string last;
  while (Clock::now() < deadline) {
    last.clear();
    std::string err;
    auto r = conn_->request("$JS.API.STREAM.NAMES", std::string("{}"), 2000, &err);
    Json names = r ? Json::parse(r->begin(), r->end(), nullptr, false) : Json();
    if (!names.is_object() || !names.contains("streams") || !names["streams"].is_array()) {
      last = "stream names: " + (r ? std::string(r->begin(), r->end()) : err);
    } else {
      for (const auto& name : names["streams"]) {
        if (!name.is_string()) continue;
        auto info = conn_->request("$JS.API.STREAM.INFO." + name.get<std::string>(), std::string(),
                                   2000, &err);
        Json j = info ? Json::parse(info->begin(), info->end(), nullptr, false) : Json();
        if (!j.is_object() || !j.contains("cluster") || !j.contains("config")) {
          last = name.get<std::string>() + ": " + (info ? j.dump() : err);
          break;
        }
        const Json& cl = j["cluster"];
        const int want = j["config"].value("num_replicas", 1) - 1;
        int current = 0;
        if (cl.contains("replicas") && cl["replicas"].is_array())
          for (const auto& rep : cl["replicas"])
            if (rep.value("current", false) && !rep.value("offline", false)) ++current;
        if (cl.value("leader", "").empty() || current < want) {
          last = name.get<std::string>() + ": " + cl.dump();
          break;
        }
      }
      if (last.empty()) return true;
    }
    std::this_thread::sleep_for(200ms);  // polled: no event says "caught up"
  }
  if (why != nullptr) *why = last;
  return false;
}

std::vector<Cluster::LaggingStream> Cluster::lagging_streams() {
  std::vector<LaggingStream> lagging;
  std::string err;
  auto r = conn_->request("$JS.API.STREAM.NAMES", std::string("{}"), 2000, &err);
  Json names = r ? Json::parse(r->begin(), r->end(), nullptr, false) : Json();
  if (!names.is_object() || !names.contains("streams") || !names["streams"].is_array())
    return lagging;
  for (const auto& name : names["streams"]) {
    if (!name.is_string()) continue;
    const std::string stream = name.get<std::string>();
    auto info = conn_->request("$JS.API.STREAM.INFO." + stream, std::string(), 2000, &err);
    Json j = info ? Json::parse(info->begin(), info->end(), nullptr, false) : Json();
    if (!j.is_object() || !j.contains("cluster") || !j.contains("config")) continue;
    const Json& cl = j["cluster"];
    LaggingStream l{stream, cl.value("leader", ""), {}};
    int current = 0;
    if (cl.contains("replicas") && cl["replicas"].is_array())
      for (const auto& rep : cl["replicas"]) {
        if (rep.value("current", false) && !rep.value("offline", false))
          ++current;
        else
          l.behind.push_back(rep.value("name", ""));
      }
    if (current >= j["config"].value("num_replicas", 1) - 1) continue;
    lagging.push_back(std::move(l));
  }
  return lagging;
}

std::string Cluster::stream_leader(const std::string& stream) {
  std::string err;
  auto info = conn_->request("$JS.API.STREAM.INFO." + stream, std::string(), 2000, &err);
  Json j = info ? Json::parse(info->begin(), info->end(), nullptr, false) : Json();
  if (!j.is_object() || !j.contains("cluster") || !j["cluster"].is_object()) return {};
  return j["cluster"].value("leader", "");
}

Cluster::CatchUp Cluster::bring_streams_current(Clock::duration first,
                                                Clock::duration after_step_down) {
  CatchUp r;
  auto seconds = [](Clock::duration d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + " s";
  };
  if (wait_streams_current(first, &r.why)) {
    r.current = true;
    return r;
  }
  r.steps.push_back("streams behind after " + seconds(first) + ": " + r.why);
  std::string asked;
  for (const auto& l : lagging_streams()) {
    // Asked again (three times at most) while the same server leads: it may
    // win the election that follows.
    const std::string was = l.leader;
    std::string now = was;
    for (int tries = 0; tries < 3 && now == was; ++tries) {
      std::string err;
      conn_->request("$JS.API.STREAM.LEADER.STEPDOWN." + l.stream, std::string(), 2000, &err);
      for (auto until = Clock::now() + 5s; now == was && Clock::now() < until;) {
        std::this_thread::sleep_for(200ms);  // polled: no event says "elected"
        now = stream_leader(l.stream);
      }
    }
    asked += " " + l.stream + " (" + was + " -> " + (now.empty() ? "none" : now) + ")";
  }
  r.steps.push_back("their leaders asked to step down:" + asked);
  if (wait_streams_current(after_step_down, &r.why)) {
    r.current = true;
    return r;
  }
  r.steps.push_back("still behind " + seconds(after_step_down) + " later: " + r.why);
  std::set<size_t> servers;
  for (const auto& l : lagging_streams())
    for (const auto& name : l.behind)
      for (size_t i = 0; i < nats_.size(); ++i)
        if (name == "s" + std::to_string(i)) servers.insert(i);
  for (size_t i : servers) {
    r.steps.push_back("restart nats-server s" + std::to_string(i) +
                      " (SIGTERM), whose copy is behind");
    restart_nats_server(i, false, 30s);
  }
  r.current = wait_streams_current(60s, &r.why);
  r.steps.push_back(r.current ? "current again" : "still behind 60 s later: " + r.why);
  return r;
}

void Cluster::start_scheduler(const ClusterOptions& opts) {
  std::vector<std::string> argv = {bin_dir() + "/troupe-scheduler", "--nats", url_};
  for (auto& a : identity_args(std::string(subjects::kSchedulerIdentity))) argv.push_back(a);
  if (nats_.size() >= 3) {  // one copy of every stream and bucket on three servers
    argv.push_back("--replicas");
    argv.push_back("3");
  }
  if (!opts.config.empty()) {
    config_path_ = file("cluster-config.yaml");
    std::ofstream(config_path_) << opts.config;
    dump_.add("cluster config", config_path_);
    argv.push_back("--config");
    argv.push_back(config_path_);
  }
  for (const auto& a : opts.scheduler_args) argv.push_back(a);
  scheduler_argv_ = argv;
  restart_scheduler();
}

Process& Cluster::restart_scheduler() {
  if (scheduler_) old_schedulers_.push_back(std::move(scheduler_));
  std::string n = scheduler_starts_++ == 0 ? "" : "-" + std::to_string(scheduler_starts_);
  scheduler_ =
      std::make_unique<Process>("troupe-scheduler" + n, scheduler_argv_,
                                file("scheduler" + n + ".out"), file("scheduler" + n + ".err"));
  dump_.add("troupe-scheduler" + n + " stdout", file("scheduler" + n + ".out"));
  dump_.add("troupe-scheduler" + n + " stderr", file("scheduler" + n + ".err"));
  return *scheduler_;
}

void Cluster::kill_scheduler() {
  REQUIRE(scheduler_);
  scheduler_->kill_now();
}

Process& Cluster::add_scheduler() {
  auto current = std::move(scheduler_);
  auto& p = restart_scheduler();
  // The earlier one stays the "current" scheduler; the new one is extra.
  old_schedulers_.push_back(std::move(scheduler_));
  scheduler_ = std::move(current);
  return p;
}

Process& Cluster::add_scheduler(const std::vector<std::pair<std::string, std::string>>& changed) {
  const auto argv = scheduler_argv_;
  for (const auto& [flag, value] : changed) {
    auto it = std::find(scheduler_argv_.begin(), scheduler_argv_.end(), flag);
    if (it != scheduler_argv_.end() && std::next(it) != scheduler_argv_.end()) {
      *std::next(it) = value;
    } else {
      scheduler_argv_.push_back(flag);
      scheduler_argv_.push_back(value);
    }
  }
  auto& p = add_scheduler();
  scheduler_argv_ = argv;
  return p;
}

std::vector<Process*> Cluster::schedulers() {
  std::vector<Process*> all;
  for (auto& p : old_schedulers_) all.push_back(p.get());
  if (scheduler_) all.push_back(scheduler_.get());
  return all;
}

void Cluster::restart_nats(bool kill, Clock::duration timeout) {
  restart_nats_server(0, kill, timeout);
}

void Cluster::restart_nats_server(size_t i, bool kill, Clock::duration timeout) {
  REQUIRE(i < nats_.size());
  auto& sv = nats_[i];
  if (kill)
    sv.proc->kill_now();
  else
    sv.proc->stop(5s);
  launch_nats(i, "restart #" + std::to_string(sv.starts));
  auto deadline = Clock::now() + timeout;
  if (nats_.size() > 1) {
    // The others served on: this one is back once it takes a client.
    bus::ConnectOptions o;
    o.url = nats_url(i);
    o.timeout_ms = 1000;
    o.name = "troupe-it-probe";
    if (secure_) {
      o.creds_file = creds(std::string(subjects::kSchedulerIdentity));
      o.tls_ca = tls_ca();
    }
    std::string err;
    auto probe = load::connect_when_up(
        o, std::chrono::duration_cast<std::chrono::milliseconds>(timeout),
        [&sv] { return sv.proc->running(); }, &err);
    INFO("nats-server s" << i << " did not take a client after its restart: " << err);
    REQUIRE(probe);
  }
  while (Clock::now() < deadline && !(conn_->connected() && sub_conn_->connected()))
    std::this_thread::sleep_for(50ms);
  INFO("harness connections did not reconnect to the restarted nats-server");
  REQUIRE((conn_->connected() && sub_conn_->connected()));
}

bool Cluster::wait_scheduler_serving(Clock::duration timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    std::string err;
    auto r = conn_->request(subjects::kSysStats, std::string("{}"), 1000, &err);
    if (r) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

std::vector<std::string> Cluster::node_argv(const NodeOptions& n) const {
  std::vector<std::string> argv = {bin_dir() + "/troupe-node",
                                   "--nats",
                                   url_,
                                   "--name",
                                   n.name,
                                   "--gpus",
                                   std::to_string(n.gpus),
                                   "--gpu-type",
                                   n.gpu_type,
                                   "--state-dir",
                                   file("node-" + n.name + "-state")};
  if (n.simulate) argv.push_back("--simulate");
  for (const auto& a : n.extra_args) argv.push_back(a);
  if (secure_) {
    // One identity per node; a simulated fleet (--count N) shares one for
    // its N members.
    std::string identity = std::string(subjects::kNodeIdentityPrefix) + n.name;
    for (size_t i = 0; i + 1 < n.extra_args.size(); ++i) {
      if (n.extra_args[i] != "--count") continue;
      identity = std::string(subjects::kFleetIdentityPrefix) + n.name;
      if (!is_regular(creds_path_of(auth_dir(), identity)))
        const_cast<Cluster*>(this)->auth({"add-fleet", n.name, "--count", n.extra_args[i + 1]});
    }
    for (auto& a : const_cast<Cluster*>(this)->identity_args(identity)) argv.push_back(a);
  }
  return argv;
}

std::string Cluster::auth(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {bin_dir() + "/troupe", "auth"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--home");
  argv.push_back(dir());
  auto r = run_program(argv, dir(), "auth-" + std::to_string(++auth_runs_), 30s, &dump_);
  INFO("troupe auth " << args.at(0) << " failed (rc " << r.exit_code << "): " << r.err);
  REQUIRE(r.exit_code == 0);
  return r.out;
}

std::string Cluster::leaf_url() const {
  std::string out;
  for (const auto& sv : nats_)
    if (sv.leaf_port != 0)
      out += (out.empty() ? "" : ",") + std::string(tls_ ? "tls" : "nats") +
             "://127.0.0.1:" + std::to_string(sv.leaf_port);
  return out;
}

std::string Cluster::add_link(const std::string& name) {
  std::string out = auth({"add-link", name});
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out.substr(out.rfind('\n') + 1);  // the account's public key, its last line
}

std::string Cluster::creds(const std::string& identity) {
  std::string path = creds_path_of(auth_dir(), identity);
  if (is_regular(path)) return path;
  for (auto [prefix, verb] : {std::pair{subjects::kTeamIdentityPrefix, "add-team"},
                              std::pair{subjects::kNodeIdentityPrefix, "add-node"},
                              std::pair{subjects::kAdminIdentityPrefix, "add-admin"}}) {
    if (identity.rfind(std::string(prefix), 0) == 0) {
      auth({verb, identity.substr(prefix.size())});
      break;
    }
  }
  if (identity == subjects::kGatewayIdentity) auth({"add-gateway"});
  if (identity == subjects::kDispatchIdentity) auth({"add-dispatch"});
  INFO("no credentials for " << identity << " at " << path);
  REQUIRE(is_regular(path));
  return path;
}

bus::ConnectionPtr Cluster::connect_as(const std::string& identity, std::string* error) {
  bus::ConnectOptions o;
  o.url = url_;
  o.name = "troupe-it-" + identity;
  o.timeout_ms = 2000;
  o.max_reconnect = 0;
  if (!identity.empty()) o.creds_file = creds(identity);
  o.tls_ca = tls_ca();
  o.on_error = [](const std::string&) {};  // tests read last_async_error()
  std::string err;
  auto c = bus::Connection::open(o, &err);
  if (error != nullptr) *error = err;
  return c;
}

std::vector<std::string> Cluster::client_env() {
  std::vector<std::string> env = {"TROUPE_NATS=" + url_};
  if (secure_) {
    env.push_back("TROUPE_NATS_CREDS=" + creds("admin-admin"));
    if (tls_) env.push_back("TROUPE_NATS_CA=" + tls_ca());
  } else {
    // Never an identity found under $TROUPE_HOME for an open cluster.
    env.push_back("TROUPE_HOME=" + file("no-home"));
  }
  return env;
}

std::vector<std::string> Cluster::identity_args(const std::string& identity) {
  if (!secure_) return {};
  std::vector<std::string> a = {"--creds", creds(identity)};
  if (tls_) {
    a.push_back("--tls-ca");
    a.push_back(tls_ca());
  }
  return a;
}

Process& Cluster::add_node(const NodeOptions& n) {
  std::string out = file("node-" + n.name + ".out");
  std::string err = file("node-" + n.name + ".err");
  nodes_.push_back(std::make_unique<Process>("troupe-node " + n.name, node_argv(n), out, err));
  dump_.add("troupe-node " + n.name + " stdout", out);
  dump_.add("troupe-node " + n.name + " stderr", err);
  return *nodes_.back();
}

std::optional<std::vector<uint8_t>> Cluster::request_raw(const std::string& subject,
                                                         const std::vector<uint8_t>& data,
                                                         Clock::duration timeout,
                                                         std::string* error) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
  return conn_->request(subject, data.data(), data.size(), static_cast<int>(ms), error);
}

Json Cluster::request_text(const std::string& subject, const std::string& body,
                           Clock::duration timeout) {
  std::string err;
  auto reply = request_raw(subject, std::vector<uint8_t>(body.begin(), body.end()), timeout, &err);
  if (!reply) FAIL("no reply on " << subject << " to " << body << ": " << err);
  std::string text(reply->begin(), reply->end());
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded()) FAIL("reply on " << subject << " is not JSON: " << text);
  return j;
}

Json Cluster::request(const std::string& subject, const Json& body, Clock::duration timeout) {
  return request_text(subject, body.dump(), timeout);
}

bool Cluster::publish(const std::string& subject, const std::vector<uint8_t>& data) {
  return conn_->publish(subject, data) && conn_->flush(5000);
}

Json Cluster::submit_json(const std::string& team, const Json& spec) {
  return request(subjects::team_submit(team), spec);
}

std::string Cluster::submit_ok(const std::string& team, const Json& spec) {
  Json r = submit_json(team, spec);
  INFO("submit of " << spec.dump() << " answered " << r.dump());
  REQUIRE(r.is_object());
  REQUIRE_FALSE(r.contains("error"));
  REQUIRE(r.contains("job_id"));
  REQUIRE(r["job_id"].is_string());
  std::string id = r["job_id"].get<std::string>();
  REQUIRE_FALSE(id.empty());
  return id;
}

Json Cluster::status(const std::string& team, const std::string& job_id) {
  return request(subjects::team_status(team), Json{{"job_id", job_id}});
}

Json Cluster::cancel(const std::string& team, const std::string& job_id) {
  return request(subjects::team_cancel(team), Json{{"job_id", job_id}});
}

LogRead Cluster::logs(const std::string& team, const std::string& job_id, int rank) {
  LogRead r;
  int64_t offset = 0;
  for (int i = 0; i < 1000; ++i) {
    Json req = {{"job_id", job_id}, {"rank", rank}, {"offset", offset}, {"max_bytes", 65536}};
    std::string err;
    std::string body = req.dump();
    auto reply = request_raw(subjects::team_logs(team),
                             std::vector<uint8_t>(body.begin(), body.end()), 10s, &err);
    if (!reply) {
      r.error = "no reply: " + err;
      return r;
    }
    std::string text(reply->begin(), reply->end());
    Json j = Json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      r.error = "reply is not a JSON object: " + text;
      return r;
    }
    if (j.contains("error")) {
      r.error = j["error"].is_string() ? j["error"].get<std::string>() : j["error"].dump();
      return r;
    }
    std::string data =
        j.contains("data") && j["data"].is_string() ? j["data"].get<std::string>() : std::string();
    r.data += data;
    offset += static_cast<int64_t>(data.size());
    bool eof = j.contains("eof") && j["eof"].is_boolean() && j["eof"].get<bool>();
    if (eof || data.empty()) break;
  }
  r.ok = true;
  return r;
}

std::optional<Event> Cluster::wait_terminal(const std::string& job_id, Clock::duration timeout) {
  return events_->wait_state(
      job_id, [](const std::string& s) { return names::is_terminal(s); }, timeout);
}

Json Cluster::nodes(Clock::duration timeout) {
  std::string err;
  std::string body = "{}";
  auto reply = request_raw(subjects::kSysNodes, std::vector<uint8_t>(body.begin(), body.end()),
                           timeout, &err);
  if (!reply) return Json{{"error", err}};
  Json j = Json::parse(reply->begin(), reply->end(), nullptr, false);
  if (j.is_discarded()) return Json{{"error", "not JSON"}};
  return j;
}

bool Cluster::wait_nodes_alive(size_t n, Clock::duration timeout) {
  // There is no event for "node alive": poll troupe.sys.nodes.
  auto deadline = Clock::now() + timeout;
  Json last;
  while (true) {
    last = nodes(1s);
    size_t alive = 0;
    if (last.is_object() && last.contains("nodes") && last["nodes"].is_array()) {
      for (const auto& node : last["nodes"])
        if (node.is_object() && node.value("alive", false)) ++alive;
    }
    if (alive >= n) return true;
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(100ms);
  }
  std::cerr << "[harness] wait_nodes_alive(" << n << "): last troupe.sys.nodes reply "
            << last.dump() << "\n";
  // Said here, at the head of the output, as well as in the dump at its end
  // (CI shows a long output's head and tail only).
  if (scheduler_) {
    auto status = scheduler_->exit_status();
    std::cerr << "[harness] troupe-scheduler "
              << (status ? "exited with status " + std::to_string(*status) : "running")
              << "; the end of its stderr:\n"
              << tail_file(scheduler_->err_path(), 15) << "\n";
  }
  return false;
}

namespace {

size_t count_occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

Reload Cluster::reload_config(const std::string& text, Clock::duration timeout) {
  REQUIRE_FALSE(config_path_.empty());
  REQUIRE(scheduler_);
  const std::string applied = "config reloaded", refused = "config reload refused";
  std::string before = read_file(scheduler_->err_path());
  size_t n_applied = count_occurrences(before, applied);
  size_t n_refused = count_occurrences(before, refused);
  {
    std::ofstream out(config_path_, std::ios::trunc);
    out << text;
  }
  REQUIRE(scheduler_->signal(SIGHUP));
  // The scheduler answers a reload only in its log: poll it (bounded).
  for (auto deadline = Clock::now() + timeout; Clock::now() < deadline;) {
    std::string now = read_file(scheduler_->err_path());
    if (count_occurrences(now, applied) > n_applied) return Reload::applied;
    if (count_occurrences(now, refused) > n_refused) return Reload::refused;
    std::this_thread::sleep_for(20ms);
  }
  return Reload::no_answer;
}

Json Cluster::queues(Clock::duration timeout) {
  return request(subjects::kSysQueues, Json::object(), timeout);
}

Json Cluster::why(const std::string& team, const std::string& job_id, Clock::duration timeout) {
  return request(subjects::team_why(team), Json{{"job_id", job_id}}, timeout);
}

std::string Cluster::start_gateway(const std::vector<std::string>& extra) {
  REQUIRE(!gateway_);
  const std::string port_file = file("gateway.port");
  std::vector<std::string> argv = {bin_dir() + "/troupe-gateway",
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--nats",
                                   url_,
                                   "--port-file",
                                   port_file};
  if (secure_) {
    for (auto& a : identity_args(std::string(subjects::kGatewayIdentity))) argv.push_back(a);
  } else {
    argv.emplace_back("--insecure");
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  gateway_ = std::make_unique<Process>("gateway", argv, file("gateway.out"), file("gateway.err"));
  dump_.add("gateway stderr", gateway_->err_path());
  auto deadline = Clock::now() + 15s;
  int port = 0;
  while (Clock::now() < deadline && gateway_->running()) {
    std::ifstream in(port_file);
    if (in >> port && port > 0) break;
    std::this_thread::sleep_for(20ms);  // polling a file another process writes
  }
  INFO("troupe-gateway did not write its port: " << gateway_->command_line());
  REQUIRE(port > 0);
  gateway_url_ = "http://127.0.0.1:" + std::to_string(port);
  return gateway_url_;
}

std::string Cluster::add_token(const std::string& team, bool admin) {
  RunResult r = run_cli({"auth", "add-token", admin ? "--admin" : "--team", team, "--home", dir()});
  INFO(describe(r));
  REQUIRE(r.exit_code == 0);
  return r.out.substr(0, r.out.find('\n'));
}

RunResult Cluster::run_cli(const std::vector<std::string>& args, Clock::duration timeout) {
  std::vector<std::string> argv = {bin_dir() + "/troupe"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string label = "cli-" + std::to_string(++cli_runs_);
  return run_program(argv, dir(), label, timeout, &dump_, client_env());
}

StateBucket open_state_bucket(Cluster& c) {
  StateBucket b;
  std::string err;
  b.js = bus::JetStream::open(c.conn(), &err);
  INFO("JetStream: " << err);
  REQUIRE(b.js);
  b.kv = bus::KeyValue::open(*b.js, subjects::kStateBucket, &err);
  INFO("KV: " << err);
  REQUIRE(b.kv);
  return b;
}

bool bindable(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

std::unique_ptr<bus::JetStream> open_test_stream(Cluster& c, const std::string& name,
                                                 const std::vector<std::string>& subjects) {
  std::string err;
  auto js = bus::JetStream::open(c.conn(), &err);
  INFO("JetStream: " << err);
  REQUIRE(js);
  bus::StreamConfig sc;
  sc.name = name;
  sc.subjects = subjects;
  INFO("stream " << name);
  REQUIRE(js->ensure_stream(sc, &err));
  return js;
}

std::string describe(const RunResult& r) {
  std::ostringstream s;
  s << "exit " << r.exit_code << (r.timed_out ? " (timed out)" : "") << "\nstdout:\n"
    << r.out.substr(0, 2000) << "\nstderr:\n"
    << r.err.substr(0, 2000);
  return s.str();
}

GpuReplay replay_gpus(const std::vector<Event>& events, int64_t gpu_memory_mb) {
  GpuReplay r;
  // (node, gpu) -> job -> its memory there (0: the whole GPU).
  std::map<std::pair<std::string, int>, std::map<std::string, int64_t>> held;
  std::map<std::string, std::vector<std::pair<std::string, int>>> by_job;
  auto memory_mb = [](const Json& w) -> int64_t {
    if (!w.contains("gpu_memory_mb")) return 0;
    const auto& m = w["gpu_memory_mb"];
    if (m.is_number()) return m.get<int64_t>();
    if (m.is_string()) return std::stoll(m.get<std::string>());
    return 0;
  };
  // A job's events in its own order (JobEvent.seq): an event sent again (a
  // publish retried while a NATS server was lost reaches subscribers twice,
  // the stream keeps it once) that arrives after a newer one says nothing new.
  std::map<std::string, int64_t> newest;
  auto seq_of = [](const Json& j) -> int64_t {
    if (!j.contains("seq")) return -1;
    const auto& v = j["seq"];
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_string()) return std::atoll(v.get<std::string>().c_str());
    return -1;
  };
  for (const auto& e : events) {
    if (int64_t seq = seq_of(e.json); seq >= 0) {
      auto [it, fresh] = newest.emplace(e.job_id, seq);
      if (!fresh && seq <= it->second) continue;
      it->second = seq;
    }
    if (e.state == names::kRunning) {
      if (!e.json.contains("workers") || !e.json["workers"].is_array()) continue;
      for (const auto& w : e.json["workers"]) {
        std::string node = w.value("node", "");
        if (!w.contains("gpus") || !w["gpus"].is_array()) continue;
        int64_t mb = memory_mb(w);
        for (const auto& g : w["gpus"]) {
          auto key = std::make_pair(node, g.get<int>());
          auto& on = held[key];
          on.erase(e.job_id);  // the same job again (a re-sent event)
          std::string where = node + " GPU " + std::to_string(key.second);
          for (const auto& [other, other_mb] : on)
            if (mb == 0 || other_mb == 0)
              r.clashes.push_back("event #" + std::to_string(e.seq) + ": " + e.job_id +
                                  " runs on " + where + " held by " + other);
          on[e.job_id] = mb;
          int64_t sum = 0;
          for (const auto& [job, m] : on) sum += m;
          r.max_memory_mb = std::max(r.max_memory_mb, sum);
          r.max_sharing = std::max(r.max_sharing, on.size());
          if (mb > 0 && gpu_memory_mb > 0 && sum > gpu_memory_mb)
            r.clashes.push_back("event #" + std::to_string(e.seq) + ": " + e.job_id + " brings " +
                                where + " to " + std::to_string(sum) + " of " +
                                std::to_string(gpu_memory_mb) + " MB");
          by_job[e.job_id].push_back(key);
        }
      }
      r.max_held = std::max(r.max_held, held.size());
    } else {
      auto jt = by_job.find(e.job_id);
      if (jt == by_job.end()) continue;
      for (const auto& key : jt->second) {
        auto it = held.find(key);
        if (it == held.end()) continue;
        it->second.erase(e.job_id);
        if (it->second.empty()) held.erase(it);
      }
      by_job.erase(jt);
    }
  }
  return r;
}

Json job_spec(const std::string& team, const std::vector<std::string>& command, int gpus,
              int workers) {
  Json j = {
      {"team", team}, {"kind", "training"}, {"command", command}, {"resources", {{"gpus", gpus}}}};
  if (workers != 1) j["workers"] = workers;
  return j;
}

}  // namespace troupe::it

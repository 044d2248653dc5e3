// `troupe up`: a local cluster of real processes (nats-server with JetStream,
// troupe-scheduler, two troupe-node agents), the demo that shows jobs moving
// through their states, and an orderly shutdown on Ctrl-C / SIGTERM.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "bus/nats.hpp"
#include "bus/server_config.hpp"
#include "bus/subjects.hpp"
#include "gateway/auth/store.hpp"
#include "gateway/client.hpp"
#include "gateway/commands.hpp"
#include "gateway/demo.hpp"
#include "gateway/format.hpp"
#include "gateway/pipeline_view.hpp"
#include "gateway/process.hpp"
#include "messages/json_text.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"

namespace troupe::gateway {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr auto kNatsDeadline = std::chrono::seconds(10);
constexpr auto kNodesDeadline = std::chrono::seconds(15);
constexpr auto kDemoDeadline = std::chrono::seconds(90);
constexpr auto kStopGrace = std::chrono::seconds(5);

// How a wait ended: done, deadline, a stop signal, or a child process died.
enum class Wait { ok, timeout, signal, child_died };

// The cluster's processes, stopped in reverse start order.
class Cluster {
 public:
  ~Cluster() { stop(); }
  bool start(const std::string& name, const std::vector<std::string>& argv,
             const std::string& log_dir) {
    std::string err;
    auto c = Child::start(name, argv, log_dir + "/" + name + ".log", &err);
    if (!c) {
      std::cerr << "troupe up: " << err << "\n";
      return false;
    }
    std::cout << "  started " << name << " (pid " << c->pid() << "), log " << c->log_path() << "\n";
    children_.push_back(std::move(*c));
    return true;
  }
  // The first child not in `ignore` that is no longer running, or nullptr.
  Child* dead(const std::set<std::string>& ignore = {}) {
    for (auto& c : children_)
      if (ignore.count(c.name()) == 0 && !c.running()) return &c;
    return nullptr;
  }
  void stop() {
    if (children_.empty()) return;
    std::cout << "Stopping the cluster...\n";
    for (auto it = children_.rbegin(); it != children_.rend(); ++it) {
      bool was_running = it->running();
      bool clean = it->stop(kStopGrace);
      std::cout << "  " << it->name() << ": "
                << (was_running
                        ? (clean ? "stopped"
                                 : "killed after " + std::to_string(kStopGrace.count()) + " s")
                        : it->exit_text())
                << "\n";
    }
    children_.clear();
  }

 private:
  std::vector<Child> children_;
};

std::string describe_death(Child& c) {
  std::string s = c.name() + " " + c.exit_text() + "; last lines of " + c.log_path() + ":\n" +
                  tail_file(c.log_path(), 15);
  return s;
}

// JobEvent JSON from the NATS thread to the main thread.
class EventQueue {
 public:
  void push(std::string s) {
    std::lock_guard<std::mutex> lock(mu_);
    q_.push_back(std::move(s));
  }
  std::deque<std::string> drain() {
    std::lock_guard<std::mutex> lock(mu_);
    std::deque<std::string> out;
    out.swap(q_);
    return out;
  }

 private:
  std::mutex mu_;
  std::deque<std::string> q_;
};

// The demo's teams (and `demo`, the team of the hint printed at the end).
constexpr const char* kUpTeams[] = {"vision", "nlp", "research", "demo"};

std::string up_node_name(int i) {
  return "node-" + std::to_string(i);
}

// The trust boundary, shown: team nlp may not even ask about team vision's
// job (NATS refuses the publish), and asking under its own name says only
// "not found". Appends to `problems` when either leaks.
void show_isolation(const std::string& auth_dir, const bus::ConnectOptions& admin,
                    const std::string& vision_job, std::vector<std::string>& problems) {
  bus::ConnectOptions o = admin;
  o.name = "troupe-up-nlp";
  o.creds_file = auth::creds_path(auth_dir, "team-nlp");
  o.on_error = [](const std::string&) {};
  std::string err;
  auto nlp = bus::Connection::open(o, &err);
  if (!nlp) {
    problems.push_back("team nlp cannot connect with its own identity: " + err);
    return;
  }
  std::string body = nlohmann::json{{"job_id", vision_job}}.dump();
  std::cout << "\nTrust: team nlp (its own identity) asks about team vision's job " << vision_job
            << "\n";
  if (auto r = nlp->request(subjects::team_status("vision"), body, 1000, &err)) {
    problems.push_back("team nlp read team vision's job on troupe.vision.status");
  } else {
    std::cout << "  on troupe.vision.status: refused by NATS (" << err << ")\n";
  }
  if (auto r = nlp->request(subjects::team_status("nlp"), body, 3000, &err)) {
    std::string reply(r->begin(), r->end());
    auto j = json_text::parse(reply);
    if (j.is_object() && j.contains("error"))
      std::cout << "  on troupe.nlp.status:    " << j.value("code", "") << " ("
                << j["error"].get<std::string>() << ")\n";
    else
      problems.push_back("team nlp read team vision's job on troupe.nlp.status: " + reply);
  } else {
    problems.push_back("troupe.nlp.status did not answer: " + err);
  }
}

std::string run_tag() {
  std::ostringstream ss;
  ss << std::hex << now_ms() << "-" << ::getpid();
  return ss.str();
}

std::string home_dir(const UpOptions& o) {
  std::string h = o.home;
  if (h.empty()) {
    const char* env = std::getenv("TROUPE_HOME");
    h = env != nullptr && *env != '\0' ? env : "./.troupe";
  }
  std::error_code ec;
  fs::path p = fs::absolute(h, ec);
  return (ec ? fs::path(h) : p).lexically_normal().string();
}

// Connects to NATS (as `id`), retrying until the deadline.
Wait connect_nats(const bus::ConnectOptions& id, SignalWatch& sig, Cluster& cluster, ClientPtr* out,
                  std::string* last_error) {
  auto deadline = Clock::now() + kNatsDeadline;
  while (Clock::now() < deadline) {
    if (auto c = Client::open(id, last_error)) {
      *out = std::move(c);
      return Wait::ok;
    }
    if (cluster.dead() != nullptr) return Wait::child_died;
    if (sig.wait(milliseconds(200)) != 0) return Wait::signal;
  }
  return Wait::timeout;
}

// What a Troupe process gets to connect as an identity of `auth_dir`
// (`tls_ca`: its CA); nothing with --insecure.
using IdentityArgs = std::function<std::vector<std::string>(const std::string&)>;
IdentityArgs identity_args_in(bool insecure, const std::string& auth_dir,
                              const std::string& tls_ca) {
  return [=](const std::string& identity) {
    if (insecure) return std::vector<std::string>{};
    return std::vector<std::string>{"--creds", auth::creds_path(auth_dir, identity), "--tls-ca",
                                    tls_ca};
  };
}

// Starts troupe-gateway on 127.0.0.1:o.http_port (0: a free port it picks)
// and waits until it listens (its --port-file); `url_out` is its base URL.
Wait start_gateway(const UpOptions& o, const std::string& binary, const std::string& nats_url,
                   const std::string& home, const IdentityArgs& identity, SignalWatch& sig,
                   Cluster& cluster, std::string* url_out, std::string* err) {
  std::string why;
  if (o.http_port != 0 && !port_free(o.http_port, &why)) {
    *err = "port " + std::to_string(o.http_port) + " is in use (" + why +
           "); pass --http-port N (0: any free port) or --no-http";
    return Wait::timeout;
  }
  const std::string port_file = home + "/gateway.port";
  std::error_code ec;
  fs::remove(port_file, ec);
  std::vector<std::string> argv = {binary,   "--listen", "127.0.0.1:" + std::to_string(o.http_port),
                                   "--nats", nats_url,   "--port-file",
                                   port_file};
  if (o.insecure) argv.emplace_back("--insecure");
  for (auto& a : identity(std::string(subjects::kGatewayIdentity))) argv.push_back(a);
  if (!cluster.start("gateway", argv, home + "/logs")) {
    *err = "cannot start it";
    return Wait::timeout;
  }
  auto deadline = Clock::now() + std::chrono::seconds(15);
  while (Clock::now() < deadline) {
    std::ifstream in(port_file);
    int port = 0;
    if (in >> port && port > 0) {
      *url_out = "http://127.0.0.1:" + std::to_string(port) + "/";
      return Wait::ok;
    }
    if (cluster.dead() != nullptr) return Wait::child_died;
    if (sig.wait(milliseconds(100)) != 0) return Wait::signal;
  }
  *err = "it did not listen within 15 s";
  return Wait::timeout;
}

Wait wait_for_nodes(Client& client, int want, SignalWatch& sig, Cluster& cluster,
                    std::string* last) {
  auto deadline = Clock::now() + kNodesDeadline;
  client.set_timeout_ms(1000);
  Wait result = Wait::timeout;
  while (Clock::now() < deadline) {
    pb::NodeList nodes;
    std::string err = client.nodes(&nodes);
    if (err.empty()) {
      int alive = 0;
      for (const auto& n : nodes.nodes()) alive += n.alive() ? 1 : 0;
      *last = std::to_string(alive) + " of " + std::to_string(want) + " nodes alive";
      if (alive >= want) {
        result = Wait::ok;
        break;
      }
    } else {
      *last = err;
    }
    if (cluster.dead() != nullptr) {
      result = Wait::child_died;
      break;
    }
    if (sig.wait(milliseconds(250)) != 0) {
      result = Wait::signal;
      break;
    }
  }
  client.set_timeout_ms(kRequestTimeoutMs);
  return result;
}

// Submits the demo, prints events as they come, then a summary. 0 when every
// job ended as expected; 1 otherwise; 130 on Ctrl-C.
int run_demo(Client& client, const UpOptions& o, SignalWatch& sig, Cluster& cluster,
             const std::string& auth_dir, const bus::ConnectOptions& admin) {
  EventQueue events;
  auto sub = client.connection().subscribe(subjects::kAllEvents, [&events](Inbound&& m) {
    events.push(std::string(m.data.begin(), m.data.end()));
  });
  client.connection().flush();

  const std::string tag = run_tag();
  auto jobs = demo_jobs(o.gpu_type, tag);
  std::vector<std::string> problems;
  std::vector<std::string> ids;
  std::cout << "\nDemo: submitting " << jobs.size() << " jobs\n";
  for (auto& j : jobs) {
    std::string id;
    if (j.in_pipeline) {  // submitted below, all members in one request
      ids.emplace_back();
      continue;
    }
    if (j.after && *j.after < ids.size()) {
      auto* d = j.spec.add_depends_on();
      d->set_job(ids[*j.after]);
      d->set_on(j.after_on);
    }
    if (auto err = client.submit(j.spec, &id); !err.empty()) {
      std::cerr << "troupe up: submitting " << j.spec.name() << " failed: " << err << "\n";
      problems.push_back(j.spec.name() + ": submit failed: " + err);
      ids.emplace_back();
      continue;
    }
    char line[200];
    std::snprintf(line, sizeof line, "  %-16s  %-26s  %-10s  %dx%d GPUs", id.c_str(),
                  (j.spec.team() + "/" + j.spec.name()).c_str(), j.spec.kind().c_str(),
                  j.spec.resources().gpus(), j.spec.workers());
    std::cout << line << "\n";
    ids.push_back(id);
  }
  // The pipeline: its members in one request, all accepted or none.
  std::string pipeline_team;
  for (const auto& j : jobs)
    if (j.in_pipeline) pipeline_team = j.spec.team();
  if (!pipeline_team.empty()) {
    std::string raw;
    auto err = client.pipeline(pipeline_team, demo_pipeline_request(jobs, tag), &raw);
    auto reply = parse_pipeline_reply(raw);
    if (err.empty()) err = reply.error;
    if (!err.empty()) {
      problems.push_back("the demo pipeline was refused: " + err);
    } else {
      std::cout << "  pipeline " << reply.pipeline_id << ":\n";
      for (size_t i = 0; i < jobs.size(); ++i)
        for (const auto& m : reply.jobs)
          if (jobs[i].in_pipeline && m.name == jobs[i].spec.name()) {
            ids[i] = m.job_id;
            std::cout << "    " << m.job_id << "  " << pipeline_team << "/" << m.name << "\n";
          }
    }
  }
  // Idempotency: the same key again must give the same job, which runs once.
  if (!ids.empty() && !ids[0].empty()) {
    std::string again;
    if (auto err = client.submit(jobs[0].spec, &again); !err.empty()) {
      problems.push_back("resubmitting " + jobs[0].spec.name() + " with its key failed: " + err);
    } else if (again != ids[0]) {
      problems.push_back("resubmitting " + jobs[0].spec.name() +
                         " with the same idempotency key "
                         "gave a new job " +
                         again + " (expected " + ids[0] + ")");
    } else {
      std::cout << "  resubmitted " << jobs[0].spec.name()
                << " with the same idempotency key: same id " << again << " (runs once)\n";
    }
  }

  if (!auth_dir.empty() && !ids.empty() && !ids[0].empty() && jobs[0].spec.team() == "vision")
    show_isolation(auth_dir, admin, ids[0], problems);

  std::set<std::string> mine;
  std::map<std::string, size_t> index;  // job id -> position in `jobs`
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i].empty()) continue;
    mine.insert(ids[i]);
    index[ids[i]] = i;
  }
  std::map<std::string, std::string> state;  // job id -> last known state
  auto all_terminal = [&] {
    for (const auto& id : mine) {
      auto it = state.find(id);
      if (it == state.end() || !names::is_terminal(it->second)) return false;
    }
    return true;
  };

  std::cout << "\nLive events (troupe.*.events.>):\n";
  auto deadline = Clock::now() + kDemoDeadline;
  auto next_poll = Clock::now() + std::chrono::seconds(1);
  int rc = 0;
  while (!mine.empty()) {
    for (const auto& body : events.drain()) {
      pb::JobEvent ev;
      if (!parse_view(body, ev).empty() || mine.count(ev.job_id()) == 0) continue;
      std::cout << "  " << event_line(ev) << "\n";
      state[ev.job_id()] = ev.state();
    }
    std::cout.flush();
    if (all_terminal()) break;
    // Events are the display; status polling makes the end certain even if
    // an event were missed.
    if (Clock::now() >= next_poll) {
      for (const auto& id : mine) {
        if (names::is_terminal(state[id])) continue;
        pb::JobView v;
        const std::string& team = jobs[index.at(id)].spec.team();
        if (client.status(team, id, &v).empty() && names::is_terminal(v.state()))
          state[id] = v.state();
      }
      next_poll = Clock::now() + std::chrono::seconds(1);
      if (all_terminal()) {
        // Let the last events arrive so they are shown.
        sig.wait(milliseconds(300));
        continue;
      }
    }
    if (Clock::now() >= deadline) {
      problems.push_back("jobs still not finished after " + std::to_string(kDemoDeadline.count()) +
                         " s");
      break;
    }
    if (Child* d = cluster.dead()) {
      std::cerr << "troupe up: " << describe_death(*d);
      problems.push_back(d->name() + " " + d->exit_text());
      break;
    }
    if (sig.wait(milliseconds(100)) != 0) {
      rc = 130;
      break;
    }
  }
  sub.reset();
  if (rc == 130) return rc;

  std::vector<pb::JobView> views;
  for (size_t i = 0; i < ids.size(); ++i) {
    pb::JobView v;
    if (!ids[i].empty()) {
      if (auto err = client.status(jobs[i].spec.team(), ids[i], &v); !err.empty())
        problems.push_back(jobs[i].spec.name() + ": status failed: " + err);
    }
    views.push_back(v);
  }
  std::cout << "\nSummary\n" << demo_summary(views);

  // What the processes wrote: the gang's ranks and the failing job.
  auto show_log = [&](size_t i, int rank) {
    if (i >= ids.size() || ids[i].empty()) return;
    LogChunk chunk;
    std::string err = client.logs(jobs[i].spec.team(), ids[i], rank, 0, 4096, &chunk);
    std::cout << "\n  troupe logs " << ids[i] << " --rank " << rank << "   (" << jobs[i].spec.name()
              << ")\n";
    if (!err.empty()) {
      std::cout << "    (no logs: " << err << ")\n";
      return;
    }
    std::istringstream in(chunk.data);
    for (std::string line; std::getline(in, line);) std::cout << "    " << line << "\n";
  };
  std::cout << "\nOutput of some jobs:";
  show_log(0, 0);
  show_log(0, 1);
  show_log(jobs.size() - 1, 0);

  for (const auto& p : demo_problems(jobs, views)) problems.push_back(p);
  if (problems.empty()) {
    std::cout << "\nDemo OK: every job ended as expected (eval-broken failed on purpose with exit "
                 "code 3).\n";
    return 0;
  }
  std::cout << "\nDemo did NOT behave:\n";
  for (const auto& p : problems) std::cout << "  - " << p << "\n";
  return 1;
}

}  // namespace

int run_up(const UpOptions& o) {
  SignalWatch sig;  // before any thread exists, so every thread blocks SIGINT/SIGTERM
  bus::Library lib;

  if (o.port < 1 || o.port > 65535) {
    std::cerr << "troupe up: --port must be in 1..65535\n";
    return 2;
  }
  std::string config;  // absolute, so the scheduler finds it whatever its cwd
  if (!o.config.empty()) {
    std::error_code cec;
    config = fs::absolute(o.config, cec).string();
    if (cec || !fs::is_regular_file(config, cec)) {
      std::cerr << "troupe up: --config " << o.config << ": no such file\n";
      return 2;
    }
  }
  if (o.nats_cluster < 1 || o.nats_cluster > 5 || o.port + 2000 + o.nats_cluster > 65536) {
    std::cerr << "troupe up: --nats-cluster must be 1..5, with its ports (--port + 2000 + N) "
                 "below 65536\n";
    return 2;
  }
  const int servers = o.nats_cluster;
  const std::string home = home_dir(o);
  const std::string logs = home + "/logs";
  std::string url;  // every server's client URL, comma-separated
  for (int i = 0; i < servers; ++i)
    url += std::string(i == 0 ? "" : ",") + "nats://127.0.0.1:" + std::to_string(o.port + i);
  const std::string auth_dir = auth::auth_dir_of(home);
  std::error_code ec;
  for (const auto& d : {home + "/nats", logs, home + "/nodes"}) {
    fs::create_directories(d, ec);
    if (ec) {
      std::cerr << "troupe up: cannot create " << d << ": " << ec.message() << "\n";
      return 1;
    }
  }

  const std::string nats =
      find_binary("nats-server", {"/usr/sbin", "/usr/local/sbin", "/usr/local/bin", "/usr/bin"});
  const std::string scheduler = find_binary("troupe-scheduler");
  const std::string node = find_binary("troupe-node");
  const std::string gateway = o.http ? find_binary("troupe-gateway") : std::string();
  bool missing = false;
  if (nats.empty()) {
    std::cerr << "troupe up: nats-server not found (in $PATH or /usr/sbin); run scripts/setup.sh\n";
    missing = true;
  }
  for (const auto& [name, path] :
       {std::pair{"troupe-scheduler", scheduler}, std::pair{"troupe-node", node},
        std::pair{"troupe-gateway", o.http ? gateway : std::string("-")}}) {
    if (path.empty()) {
      std::cerr << "troupe up: " << name << " not found next to this troupe (" << self_dir()
                << ") nor in $PATH; build the whole project (cmake --build build)\n";
      missing = true;
    }
  }
  if (missing) return 1;

  std::string why;
  for (int i = 0; i < servers; ++i) {
    for (int port : {o.port + i, o.port + 2000 + i, o.leaf_port > 0 ? o.leaf_port + i : 0}) {
      if (port == 0 || (servers == 1 && port == o.port + 2000)) continue;  // no routes, no leaf
      if (port_free(port, &why)) continue;
      std::cerr << "troupe up: port " << port << " on 127.0.0.1 is already in use (" << why
                << "): another nats-server or `troupe up` is running there. Stop it, or use "
                   "--port N (then pass --nats nats://127.0.0.1:N to troupe).\n";
      return 1;
    }
  }

  // Identities (docs/security.md): one per demo team, node, the scheduler and
  // an admin, signed into $TROUPE_HOME/auth; the server serves TLS with a CA
  // made there. Kept across runs (creds handed out stay valid).
  bus::ConnectOptions admin;
  admin.url = url;
  admin.name = "troupe-up";
  const std::string marker = home + "/" + kInsecureMarker;
  if (o.insecure) {
    std::cerr << "troupe up: WARNING: --insecure: NATS without identities or TLS. Any process "
                 "on this machine can submit, read and cancel as any team, and act as a node "
                 "or the scheduler.\n";
    std::ofstream(marker) << "troupe up --insecure\n";
  } else {
    fs::remove(marker, ec);
    std::string aerr = auth::init(auth_dir);
    for (const char* team : kUpTeams)
      if (aerr.empty()) aerr = auth::add_team(auth_dir, team);
    for (int i = 1; i <= o.nodes && aerr.empty(); ++i)
      aerr = auth::add_node(auth_dir, up_node_name(i));
    if (aerr.empty()) aerr = auth::add_admin(auth_dir, "admin");
    if (aerr.empty()) aerr = auth::add_gateway(auth_dir);
    if (aerr.empty() && o.leaf_port > 0) aerr = auth::add_dispatch(auth_dir);
    if (!aerr.empty()) {
      std::cerr << "troupe up: cannot make the cluster's identities in " << auth_dir << ": " << aerr
                << "\n";
      return 1;
    }
    admin.creds_file = auth::creds_path(auth_dir, "admin-admin");
    admin.tls_ca = auth_dir + "/" + auth::kCaCertFile;
  }
  const IdentityArgs identity_args = identity_args_in(o.insecure, auth_dir, admin.tls_ca);

  std::cout << "Starting a local Troupe cluster in " << home
            << (o.insecure ? " (INSECURE: no identities, no TLS)"
                           : " (secured: an identity per party, TLS; see " + auth_dir + ")")
            << "\n";
  Cluster cluster;
  auto failed = [&](const std::string& what) {
    std::cerr << "troupe up: " << what << "\n";
    cluster.stop();
    return 1;
  };
  auto ended = [&](Wait w, const std::string& what) {
    if (w == Wait::signal) {
      cluster.stop();
      return 130;
    }
    if (w == Wait::child_died) {
      Child* d = cluster.dead();
      return failed(d != nullptr ? describe_death(*d) : what);
    }
    return failed(what);
  };

  // One server, or a cluster: each with its config, store and log.
  std::vector<int> route_ports;
  for (int i = 0; servers > 1 && i < servers; ++i) route_ports.push_back(o.port + 2000 + i);
  for (int i = 0; i < servers; ++i) {
    const std::string name = servers == 1 ? "nats-server" : "nats-s" + std::to_string(i);
    const std::string store = servers == 1 ? home + "/nats" : home + "/nats/s" + std::to_string(i);
    fs::create_directories(store, ec);
    const std::string conf = home + "/" + name + ".conf";
    bus::ServerConfig c;
    c.comment = "written by troupe up";
    c.port = o.port + i;
    c.store_dir = store;
    c.cluster_name = "troupe";
    c.route_ports = route_ports;
    c.index = static_cast<size_t>(i);
    if (o.leaf_port > 0) {  // a front door's links (docs/clusters.md)
      c.leaf_port = o.leaf_port + i;
      if (!o.insecure) {
        c.tls_cert = auth_dir + "/" + auth::kServerCertFile;
        c.tls_key = auth_dir + "/" + auth::kServerKeyFile;
      }
    }
    // (relative to this file's folder, as nats-server reads an include)
    if (!o.insecure) c.include = std::string("auth/") + auth::kServerConfigFile;
    std::ofstream(conf) << bus::server_config(c);
    if (!cluster.start(name, {nats, "-c", conf}, logs)) return failed("cannot start " + name);
  }
  ClientPtr client;
  std::string err;
  if (auto w = connect_nats(admin, sig, cluster, &client, &err); w != Wait::ok)
    return ended(w, "NATS at " + url + " did not answer within " +
                        std::to_string(kNatsDeadline.count()) + " s (" + err + "); see " + logs +
                        "/nats-*.log");

  std::vector<std::string> scheduler_argv = {scheduler, "--nats", url};
  if (servers >= 3) {  // every stream and bucket on three servers: one may be lost
    scheduler_argv.push_back("--replicas");
    scheduler_argv.push_back("3");
  }
  for (auto& a : identity_args(std::string(subjects::kSchedulerIdentity)))
    scheduler_argv.push_back(a);
  if (!config.empty()) {
    scheduler_argv.push_back("--config");
    scheduler_argv.push_back(config);
    std::cout << "  cluster config " << config << " (kill -HUP the scheduler to reload it)\n";
  }
  if (!cluster.start("scheduler", scheduler_argv, logs))
    return failed("cannot start troupe-scheduler");
  std::vector<std::string> node_logs;
  for (int i = 1; i <= o.nodes; ++i) {
    std::string name = up_node_name(i);
    std::string state_dir = home + "/nodes/" + name;
    fs::create_directories(state_dir, ec);
    std::vector<std::string> argv = {node,
                                     "--nats",
                                     url,
                                     "--name",
                                     name,
                                     "--gpus",
                                     std::to_string(o.gpus_per_node),
                                     "--gpu-type",
                                     o.gpu_type,
                                     "--state-dir",
                                     state_dir};
    for (auto& a : identity_args(std::string(subjects::kNodeIdentityPrefix) + name))
      argv.push_back(a);
    if (!cluster.start(name, argv, logs)) return failed("cannot start troupe-node " + name);
    node_logs.push_back(logs + "/" + name + ".log");
  }
  std::string last;
  if (auto w = wait_for_nodes(*client, o.nodes, sig, cluster, &last); w != Wait::ok) {
    std::string files = logs + "/scheduler.log";
    for (const auto& f : node_logs) files += ", " + f;
    return ended(w, "the cluster did not come up within " + std::to_string(kNodesDeadline.count()) +
                        " s: troupe.sys.nodes did not show " + std::to_string(o.nodes) +
                        " alive nodes (last: " + last + "). See " + files);
  }
  std::cout << "Cluster up: NATS " << url
            << (servers > 1 ? " (" + std::to_string(servers) + " servers, JetStream R" +
                                  std::to_string(servers >= 3 ? 3 : 1) + ")"
                            : std::string())
            << ", " << o.nodes << " nodes x " << o.gpus_per_node << " " << o.gpu_type << " GPUs\n";
  std::string console_url;
  if (o.http) {
    if (auto w =
            start_gateway(o, gateway, url, home, identity_args, sig, cluster, &console_url, &err);
        w != Wait::ok)
      return ended(w, "troupe-gateway did not start: " + err + "; see " + logs + "/gateway.log");
    std::string token;
    if (auto terr = make_token(url, home, std::string(), "console", &token); terr.empty())
      std::cout << "Console and HTTP API: " << console_url << "  (log in with the token " << token
                << ")\n";
    else
      std::cout << "Console and HTTP API: " << console_url << "  (no token was made: " << terr
                << ")\n";
  }
  std::cout << "\n";
  pb::NodeList nodes;
  if (client->nodes(&nodes).empty()) std::cout << nodes_table(nodes, now_ms());

  int demo_rc = 0;
  if (o.demo) {
    demo_rc = run_demo(*client, o, sig, cluster, o.insecure ? std::string() : auth_dir, admin);
    if (demo_rc == 130) {
      client.reset();
      cluster.stop();
      return 130;
    }
  }
  if (o.exit_after_demo) {
    client.reset();
    cluster.stop();
    return demo_rc;
  }

  const std::string self = self_dir() + "/troupe";
  std::cout << "\nThe cluster is running. From another terminal:\n"
            << "  export TROUPE_NATS=" << url << " TROUPE_HOME=" << home << "\n"
            << "  " << self << " nodes\n"
            << "  " << self << " jobs\n"
            << "  " << self << " submit --team demo --kind training --gpus 1 --gpu-type "
            << o.gpu_type << " -- sh -c 'echo hello from $TROUPE_JOB_ID; sleep 5'\n"
            << "  " << self << " status <job-id>      " << self << " logs -f <job-id>\n"
            << "  (or pass --nats " << url << " to each command)\n"
            << (console_url.empty()
                    ? std::string()
                    : "  curl -H \"Authorization: Bearer $(" + self +
                          " auth add-token --team demo)\" " + console_url + "v1/jobs\n")
            << "Logs of the cluster's processes: " << logs << "/\n"
            << "Press Ctrl-C to stop.\n";
  std::cout.flush();
  int rc = 0;
  std::set<std::string> reported;
  while (sig.wait(milliseconds(500)) == 0) {
    if (Child* d = cluster.dead(reported)) {
      reported.insert(d->name());
      std::cerr << "troupe up: " << describe_death(*d);
      // One server is the cluster; one of a NATS cluster is not.
      if (d->name() == "nats-server") {
        rc = 1;
        break;
      }
    }
  }
  client.reset();
  cluster.stop();
  return rc;
}

namespace {

// GPU types of the clusters of `troupe up --clusters N`: c1 a100, c2 h100, ...
constexpr const char* kClusterTypes[] = {"a100", "h100", "l40s", "v100"};

// Polls the front door's troupe.sys.clusters until every cluster is reachable
// with GPUs counted; `last` is its last reply (or error).
Wait wait_for_clusters(Client& front, size_t want, SignalWatch& sig, Cluster& procs,
                       std::string* last) {
  auto deadline = Clock::now() + kNodesDeadline;
  while (Clock::now() < deadline) {
    std::string raw;
    *last = front.clusters(&raw);
    if (last->empty()) {
      *last = raw;
      auto j = json_text::parse(raw);
      size_t ready = 0;
      if (j.is_object() && j.contains("clusters") && j["clusters"].is_array())
        for (const auto& c : j["clusters"])
          ready +=
              c.is_object() && c.value("state", "") == "reachable" && c.value("gpus_total", 0) > 0
                  ? 1
                  : 0;
      if (ready == want) return Wait::ok;
    }
    if (procs.dead() != nullptr) return Wait::child_died;
    if (sig.wait(milliseconds(250)) != 0) return Wait::signal;
  }
  return Wait::timeout;
}

// The demo of `troupe up --clusters`: a job of each cluster's GPU type and an
// any-type job, submitted to the front door; each must end succeeded.
int run_clusters_demo(Client& front, size_t clusters, SignalWatch& sig) {
  std::vector<pb::JobSpec> jobs;
  for (size_t i = 0; i <= clusters; ++i) {
    pb::JobSpec s;
    s.set_team("demo");
    s.set_kind("evaluation");
    s.add_command("sh");
    s.add_command("-c");
    s.add_command("echo hello from $TROUPE_JOB_ID; sleep 1");
    s.mutable_resources()->set_gpus(1);
    if (i < clusters) {
      s.set_name(std::string("on-") + kClusterTypes[i]);
      s.mutable_resources()->set_gpu_type(kClusterTypes[i]);
    } else {
      s.set_name("any-type");
      for (size_t k = 0; k < clusters; ++k) s.mutable_resources()->add_gpu_types(kClusterTypes[k]);
    }
    jobs.push_back(std::move(s));
  }
  std::cout << "\nDemo: " << jobs.size() << " jobs through the front door\n";
  std::vector<std::string> ids;
  int rc = 0;
  for (const auto& j : jobs) {
    std::string id;
    if (auto err = front.submit(j, &id); !err.empty()) {
      std::cerr << "troupe up: submitting " << j.name() << " failed: " << err << "\n";
      rc = 1;
    }
    ids.push_back(id);
  }
  auto deadline = Clock::now() + kDemoDeadline;
  std::map<std::string, std::pair<std::string, std::string>> ended;  // id -> state, cluster
  const size_t submitted = ids.size() - static_cast<size_t>(std::count(ids.begin(), ids.end(), ""));
  while (ended.size() < submitted && Clock::now() < deadline) {
    for (const auto& id : ids) {
      pb::JobView v;
      std::string raw;
      if (!id.empty() && ended.count(id) == 0 && front.status("demo", id, &v, &raw).empty() &&
          names::is_terminal(v.state())) {
        auto j = json_text::parse(raw);
        ended[id] = {v.state(), j.is_object() ? j.value("cluster", "?") : "?"};
      }
    }
    if (sig.wait(milliseconds(250)) != 0) return 130;
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = ended.find(ids[i]);
    std::string state = it == ended.end() ? "not ended in time" : it->second.first;
    std::cout << "  " << ids[i] << "  " << jobs[i].name() << " ran in cluster "
              << (it == ended.end() ? "?" : it->second.second) << ": " << state << "\n";
    if (state != names::kSucceeded) rc = 1;
  }
  std::cout << (rc == 0 ? "Demo passed" : "Demo FAILED")
            << ": each job went to a cluster of its GPU type\n";
  return rc;
}

}  // namespace

int run_up_clusters(const UpOptions& o) {
  SignalWatch sig;  // before any thread exists
  bus::Library lib;
  const size_t n = static_cast<size_t>(o.clusters);
  if (n < 2 || n > std::size(kClusterTypes) || o.port < 1 || o.port + 10 * o.clusters > 65535) {
    std::cerr << "troupe up: --clusters must be 2..4, with --port + 10 x N below 65536\n";
    return 2;
  }
  const std::string home = home_dir(o);
  const std::string logs = home + "/logs";
  std::error_code ec;
  fs::create_directories(logs, ec);
  fs::create_directories(home + "/nats", ec);
  const std::string nats =
      find_binary("nats-server", {"/usr/sbin", "/usr/local/sbin", "/usr/local/bin", "/usr/bin"});
  const std::string dispatch = find_binary("troupe-dispatch");
  const std::string self = self_dir() + "/troupe";
  const std::string gateway = o.http ? find_binary("troupe-gateway") : std::string();
  if (nats.empty() || dispatch.empty() || (o.http && gateway.empty())) {
    std::cerr << "troupe up: nats-server, troupe-dispatch or troupe-gateway not found; build the "
                 "whole project\n";
    return 1;
  }
  std::string why;
  if (!port_free(o.port, &why)) {
    std::cerr << "troupe up: port " << o.port << " is in use (" << why << "); use --port N\n";
    return 1;
  }
  // The front door's NATS: its own identities (teams, an admin, the
  // scheduler identity troupe-dispatch serves with), TLS.
  const std::string auth_dir = auth::auth_dir_of(home);
  std::vector<std::string> link_accounts;  // c<i>'s link account (public key)
  bus::ConnectOptions admin;
  admin.url = "nats://127.0.0.1:" + std::to_string(o.port);
  admin.name = "troupe-up";
  if (!o.insecure) {
    std::string aerr = auth::init(auth_dir);
    for (const char* team : kUpTeams)
      if (aerr.empty()) aerr = auth::add_team(auth_dir, team);
    if (aerr.empty()) aerr = auth::add_admin(auth_dir, "admin");
    if (aerr.empty() && o.http) aerr = auth::add_gateway(auth_dir);
    // A link account per cluster: its leaf node link is bound to it.
    for (size_t i = 1; i <= n && aerr.empty(); ++i)
      aerr = auth::add_link(auth_dir, "c" + std::to_string(i), false, nullptr,
                            &link_accounts.emplace_back());
    if (!aerr.empty()) {
      std::cerr << "troupe up: cannot make the front door's identities: " << aerr << "\n";
      return 1;
    }
    admin.creds_file = auth::creds_path(auth_dir, "admin-admin");
    admin.tls_ca = auth_dir + "/" + auth::kCaCertFile;
  }
  std::cout << "Starting " << n << " local Troupe clusters behind one front door in " << home
            << "\n";
  Cluster procs;
  auto failed = [&](const std::string& what) {
    std::cerr << "troupe up: " << what << "\n";
    procs.stop();
    return 1;
  };
  auto ended = [&](Wait w, const std::string& what) {
    if (w == Wait::signal) {
      procs.stop();
      return 130;
    }
    Child* d = procs.dead();
    return failed(w == Wait::child_died && d != nullptr ? describe_death(*d) : what);
  };
  // Each cluster: a whole `troupe up` of its own (NATS on --port + 10 i),
  // which accepts the front NATS's leaf node link on --port + 10 i + 5. The
  // front NATS binds each link to the cluster's own link account, and
  // troupe-dispatch reaches c<i> through the front NATS as link-c<i>
  // (docs/clusters.md). --insecure: no accounts to keep the clusters'
  // subjects apart, so troupe-dispatch connects to each cluster's NATS.
  std::string config = "name: front\nspill_after_s: 60\nclusters:\n";
  std::vector<bus::LeafRemote> remotes;
  std::vector<std::pair<std::string, std::string>> members;  // name, NATS URL
  for (size_t i = 1; i <= n; ++i) {
    const std::string name = "c" + std::to_string(i);
    const std::string chome = home + "/" + name;
    const int cport = o.port + 10 * static_cast<int>(i);
    const std::string url = "nats://127.0.0.1:" + std::to_string(cport);
    std::vector<std::string> argv = {self,         "up",
                                     "--home",     chome,
                                     "--port",     std::to_string(cport),
                                     "--no-demo",  "--no-http",
                                     "--gpu-type", kClusterTypes[i - 1]};
    if (o.insecure) {
      argv.emplace_back("--insecure");
      config += "  - {name: " + name + ", nats: \"" + url + "\"}\n";
    } else {
      argv.insert(argv.end(), {"--leaf-port", std::to_string(cport + 5)});
      const std::string cauth = auth::auth_dir_of(chome);
      config += "  - {name: " + name + ", nats: \"" + admin.url + "\", creds: \"" +
                auth::creds_path(auth_dir, "link-" + name) + "\", tls_ca: \"" + admin.tls_ca +
                "\"}\n";
      remotes.push_back({"tls://127.0.0.1:" + std::to_string(cport + 5), link_accounts[i - 1],
                         auth::creds_path(cauth, std::string(subjects::kDispatchIdentity)),
                         cauth + "/" + auth::kCaCertFile});
    }
    if (!procs.start(name, argv, logs)) return failed("cannot start cluster " + name);
    members.emplace_back(name, url);
  }
  // Every cluster's agents up (through its own admin identity); the front
  // NATS after them (its links sign in with what their `troupe up` made).
  std::string err;
  for (size_t i = 0; i < n; ++i) {
    bus::ConnectOptions id;
    id.url = members[i].second;
    id.name = "troupe-up";
    if (!o.insecure) {
      const std::string cauth = auth::auth_dir_of(home + "/" + members[i].first);
      id.creds_file = auth::creds_path(cauth, "admin-admin");
      id.tls_ca = cauth + "/" + auth::kCaCertFile;
    }
    ClientPtr member;
    std::string last;
    // (its `troupe up` makes the identities first: wait for them too)
    auto w = connect_nats(id, sig, procs, &member, &err);
    if (w == Wait::ok) w = wait_for_nodes(*member, o.nodes, sig, procs, &last);
    if (w != Wait::ok)
      return ended(w, "cluster " + members[i].first + " did not come up (" + err + last +
                          "); see " + logs + "/" + members[i].first + ".log");
  }
  {
    bus::ServerConfig c;
    c.comment = "written by troupe up --clusters";
    c.port = o.port;
    c.store_dir = home + "/nats";
    if (!o.insecure) {
      c.include = std::string("auth/") + auth::kServerConfigFile;
      c.leaf_remotes = remotes;  // a leaf node link to each cluster, bound to its link account
    }
    std::ofstream(home + "/front-nats.conf") << bus::server_config(c);
  }
  if (!procs.start("front-nats", {nats, "-c", home + "/front-nats.conf"}, logs))
    return failed("cannot start the front door's nats-server");
  ClientPtr front;
  if (auto w = connect_nats(admin, sig, procs, &front, &err); w != Wait::ok)
    return ended(w, "the front door's NATS did not answer: " + err);
  {
    std::ofstream f(home + "/dispatch.yaml");
    f << config;
  }
  std::vector<std::string> dargv = {dispatch, "--config", home + "/dispatch.yaml", "--nats",
                                    admin.url};
  if (o.insecure) dargv.emplace_back("--insecure");
  for (auto& a : identity_args_in(o.insecure, auth_dir,
                                  admin.tls_ca)(std::string(subjects::kSchedulerIdentity)))
    dargv.push_back(a);
  if (!procs.start("dispatch", dargv, logs)) return failed("cannot start troupe-dispatch");
  std::string last;
  if (auto w = wait_for_clusters(*front, n, sig, procs, &last); w != Wait::ok)
    return ended(w, "the front door did not see every cluster (" + last + "); see " + logs +
                        "/dispatch.log");
  // The HTTP API and the web console over the front door, as over one
  // cluster (docs/clusters.md "HTTP API and console").
  if (o.http) {
    std::string console_url;
    if (auto w = start_gateway(o, gateway, admin.url, home,
                               identity_args_in(o.insecure, auth_dir, admin.tls_ca), sig, procs,
                               &console_url, &err);
        w != Wait::ok)
      return ended(w, "troupe-gateway did not start: " + err + "; see " + logs + "/gateway.log");
    std::string token;
    if (auto terr = make_token(admin.url, home, std::string(), "console", &token); terr.empty())
      std::cout << "Console and HTTP API (every cluster): " << console_url
                << "  (log in with the token " << token << ")\n";
    else
      std::cout << "Console and HTTP API (every cluster): " << console_url
                << "  (no token was made: " << terr << ")\n";
  }
  std::string raw;
  if (front->clusters(&raw).empty()) std::cout << "\n" << clusters_table(raw, &err);
  int rc = o.demo ? run_clusters_demo(*front, n, sig) : 0;
  if (rc == 130 || o.exit_after_demo) {
    front.reset();
    procs.stop();
    return rc;
  }
  std::cout << "\nThe front door is running. From another terminal:\n"
            << "  export TROUPE_NATS=" << admin.url << " TROUPE_HOME=" << home << "\n"
            << "  " << self << " clusters\n"
            << "  " << self << " submit --team demo --kind training --gpus 1 --gpu-type h100 -- "
            << "sh -c 'echo hello'\n"
            << "Logs: " << logs << "/ (each cluster's own under " << home << "/c<N>/logs/)\n"
            << "Press Ctrl-C to stop.\n";
  std::cout.flush();
  while (sig.wait(milliseconds(500)) == 0) {
  }
  front.reset();
  procs.stop();
  return 0;
}

}  // namespace troupe::gateway

// Owns troupe-load's self-hosted cluster: the free port, finding
// nats-server, starting it and the scheduler, and their readiness waits
// (the port and the wait for nats-server are shared with the integration
// harness).
#include "load/host.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "bus/nats.hpp"
#include "messages/json_text.hpp"

namespace troupe::load {

namespace {
using Clock = std::chrono::steady_clock;

bool executable(const std::string& p) {
  return !p.empty() && ::access(p.c_str(), X_OK) == 0;
}
}  // namespace

int free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  int port = 0;
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

bus::ConnectionPtr connect_when_up(const bus::ConnectOptions& opts,
                                   std::chrono::milliseconds timeout,
                                   const std::function<bool()>& alive, std::string* error) {
  const auto until = Clock::now() + timeout;
  while (Clock::now() < until && alive()) {
    std::string why;
    if (auto conn = bus::Connection::open(opts, &why)) return conn;
    if (error != nullptr) *error = why;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return nullptr;
}

std::string find_nats_server(const std::string& explicit_path) {
  if (!explicit_path.empty()) return executable(explicit_path) ? explicit_path : std::string();
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    for (std::string d; std::getline(ss, d, ':');)
      if (!d.empty()) dirs.push_back(d);
  }
  for (const char* d : {"/usr/sbin", "/usr/local/sbin", "/usr/local/bin", "/usr/bin"})
    dirs.emplace_back(d);
  for (const auto& d : dirs)
    if (executable(d + "/nats-server")) return d + "/nats-server";
  return {};
}

std::string tail_of(const std::string& path, size_t max_lines) {
  std::ifstream f(path);
  if (!f) return {};
  std::deque<std::string> lines;
  for (std::string line; std::getline(f, line);) {
    lines.push_back(line);
    if (lines.size() > max_lines) lines.pop_front();
  }
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

std::unique_ptr<SelfHost> SelfHost::start(const HostOptions& opt, std::string* error) {
  auto fail = [&](const std::string& why) -> std::unique_ptr<SelfHost> {
    if (error != nullptr) *error = why;
    return nullptr;
  };
  const std::string nats = find_nats_server(opt.nats_server);
  if (nats.empty())
    return fail(opt.nats_server.empty() ? "nats-server not found (in $PATH or /usr/sbin)"
                                        : "cannot execute " + opt.nats_server);
  const std::string scheduler =
      opt.scheduler.empty() ? own_dir() + "/troupe-scheduler" : opt.scheduler;
  if (!executable(scheduler)) return fail("cannot execute " + scheduler);

  std::unique_ptr<SelfHost> h(new SelfHost());
  h->dir_ = std::make_unique<TempDir>("troupe-load-host", memory_temp_base());
  const std::string dir = h->dir_->path();
  if (dir.empty()) return fail("cannot create a temporary folder");

  // nats-server on a free port; another port when it was taken meanwhile.
  std::string last;
  for (int attempt = 1; attempt <= 5 && h->url_.empty(); ++attempt) {
    int port = free_loopback_port();
    if (port == 0) continue;
    std::string store = dir + "/nats-" + std::to_string(attempt);
    std::filesystem::create_directories(store);
    h->nats_ =
        std::make_unique<Child>(std::vector<std::string>{nats, "-js", "-a", "127.0.0.1", "-p",
                                                         std::to_string(port), "-sd", store},
                                dir + "/nats-server.log");
    if (h->nats_->pid() == 0) return fail(h->nats_->error());
    bus::ConnectOptions o;
    o.url = "nats://127.0.0.1:" + std::to_string(port);
    o.name = "troupe-load-probe";
    o.timeout_ms = 1000;
    Child* nats_child = h->nats_.get();
    if (connect_when_up(
            o, std::chrono::seconds(10), [nats_child] { return nats_child->running(); }, &last))
      h->url_ = o.url;
    else
      h->nats_->stop(std::chrono::seconds(2));
  }
  if (h->url_.empty())
    return fail("nats-server did not start (" + last +
                "); log: " + tail_of(dir + "/nats-server.log"));

  std::vector<std::string> argv = {scheduler,           "--nats",   h->url_,
                                   "--policy",          opt.policy, "--checkpoint-root",
                                   dir + "/checkpoints"};
  if (!opt.config.empty()) argv.insert(argv.end(), {"--config", opt.config});
  h->scheduler_ = std::make_unique<Child>(argv, dir + "/scheduler.log");
  if (h->scheduler_->pid() == 0) return fail(h->scheduler_->error());

  // Ready when troupe.sys.queues answers (the arbiter runs).
  bus::ConnectOptions o;
  o.url = h->url_;
  o.name = "troupe-load-host";
  auto conn = bus::Connection::open(o, &last);
  if (!conn) return fail("cannot connect to " + h->url_ + ": " + last);
  auto until = Clock::now() + std::chrono::seconds(30);
  while (true) {
    if (!h->scheduler_->running())
      return fail("troupe-scheduler exited at start; its log:\n" + tail_of(dir + "/scheduler.log"));
    if (auto r = conn->request("troupe.sys.queues", std::string("{}"), 1000)) {
      auto j = json_text::parse(r->begin(), r->end());
      if (j.is_object() && j.contains("policy") && j["policy"].is_string()) {
        h->reported_policy_ = j["policy"].get<std::string>();
        break;
      }
    }
    if (Clock::now() > until)
      return fail("troupe-scheduler did not answer troupe.sys.queues within 30 s; its log:\n" +
                  tail_of(dir + "/scheduler.log"));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return h;
}

SelfHost::~SelfHost() {
  stop();
}

void SelfHost::stop() {
  if (scheduler_) scheduler_->stop(std::chrono::seconds(10));
  if (nats_) nats_->stop(std::chrono::seconds(5));
}

}  // namespace troupe::load

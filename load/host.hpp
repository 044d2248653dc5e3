// A cluster that troupe-load hosts itself for a replay: its own
// `nats-server -js` on a free loopback port and its own
// `troupe-scheduler --policy P` (the sibling binary), both in a temporary
// folder, stopped (scheduler first) when the object goes away. Used by
// `troupe-load replay --compare` (one host per policy) and `--self-host`.
// The helpers before SelfHost are shared with the integration harness
// (tests/integration/harness.cpp), which starts its own nats-server the same way.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bus/nats.hpp"
#include "load/child.hpp"

namespace troupe::load {

// A TCP port on 127.0.0.1 that was free a moment ago (0 when none).
int free_loopback_port();

// A connection with `opts` to a nats-server that is starting: tried again
// every 50 ms until one opens, `timeout` has passed, or `alive()` says the
// server is gone. nullptr and `error` (the last refusal) when none opened.
bus::ConnectionPtr connect_when_up(const bus::ConnectOptions& opts,
                                   std::chrono::milliseconds timeout,
                                   const std::function<bool()>& alive, std::string* error);

// The nats-server to start: `explicit_path` when given, else the first
// executable `nats-server` in $PATH, /usr/sbin, /usr/local/sbin,
// /usr/local/bin, /usr/bin. "" when none.
std::string find_nats_server(const std::string& explicit_path = {});

// The last `max_lines` lines of a file ("" when it cannot be read).
std::string tail_of(const std::string& path, size_t max_lines = 20);

struct HostOptions {
  std::string policy = "troupe";  // troupe-scheduler --policy
  std::string nats_server;        // path; "" finds it
  std::string scheduler;          // path; "" is troupe-scheduler next to troupe-load
  std::string config;             // troupe-scheduler --config FILE, when set
};

class SelfHost {
 public:
  // Starts nats-server (retrying other ports if one was taken), waits until
  // it accepts a client, starts the scheduler and waits until
  // troupe.sys.queues answers. nullptr and `error` when something failed.
  static std::unique_ptr<SelfHost> start(const HostOptions& opt, std::string* error);
  ~SelfHost();  // stop()
  SelfHost(const SelfHost&) = delete;
  SelfHost& operator=(const SelfHost&) = delete;

  const std::string& url() const { return url_; }
  pid_t scheduler_pid() const { return scheduler_ ? scheduler_->pid() : 0; }
  // The policy troupe.sys.queues reported once the scheduler answered.
  const std::string& reported_policy() const { return reported_policy_; }
  bool scheduler_running() { return scheduler_ && scheduler_->running(); }
  std::string scheduler_log_tail() const { return tail_of(dir_->path() + "/scheduler.log"); }
  // Scheduler (SIGTERM, 10 s grace), then nats-server. Idempotent.
  void stop();

 private:
  SelfHost() = default;
  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<Child> nats_, scheduler_;
  std::string url_, reported_policy_;
};

}  // namespace troupe::load

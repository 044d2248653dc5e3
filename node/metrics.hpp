// A node agent's own /metrics (troupe-node --metrics HOST:PORT): counters the
// agent bumps (workers launched and exited, heartbeats sent), the running
// workers gauge, which GPUs workers hold (from the Launch, Exited and
// Heartbeat messages passed to observe()), and per-GPU utilisation and memory
// read from nvidia-smi every few seconds, on the exporter's polling thread,
// when it is installed. Self-contained: the agent only
// calls the methods below; the series are node_series() in
// actors/metrics/model.hpp, documented in docs/metrics.md, served on the
// shared exporter loop (actors/metrics/exporter.hpp; no CAF, no NATS).
//
//   auto m = NodeMetrics::start({"0.0.0.0:9465", "node-1"}, &err);   // nullptr + err on failure
//   m->worker_launched();   m->set_running(n);   m->heartbeat_sent();
//   m->worker_exited(exit_code, signal, reason);
//   m->observe(data, size);   // every envelope the agent receives or publishes
//   m->count_from([&] { return named(agent.counters()); });   // read every gpu_poll_ms
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace troupe::metrics {

// ---- pure parts (unit-tested) ----

struct GpuUse {
  std::string gpu;                    // nvidia-smi index, digits only
  std::optional<double> utilization;  // 0..1
  std::optional<double> memory_used_bytes;
  std::optional<double> memory_total_bytes;
};

// Parses `nvidia-smi --query-gpu=index,utilization.gpu,memory.used,memory.total
// --format=csv,noheader,nounits` (utilisation in %, memory in MiB). A field
// that is not a finite number in range ("[N/A]", "[Not Supported]", garbage)
// is left empty; a line without four fields or whose index is not a number
// (blank lines, error messages, a header) is skipped.
std::vector<GpuUse> parse_nvidia_smi(const std::string& csv);

// One worker as the agent's messages name it.
struct WorkerId {
  std::string job_id;
  int attempt = 0;
  int rank = 0;
  bool operator<(const WorkerId& o) const {
    return std::tie(job_id, attempt, rank) < std::tie(o.job_id, o.attempt, o.rank);
  }
};

// Which of the node's GPUs workers hold: a worker's Launch holds its GPUs,
// its Exited frees them, and a worker that two heartbeats in a row do not
// list as running is forgotten (its Exited was lost, or the agent refused the
// Launch). A GPU shared by several workers is held while one of them is. Not
// thread-safe (NodeMetrics locks around it).
class GpuHolders {
 public:
  void launched(const WorkerId& w, const std::vector<int>& gpus);
  void exited(const WorkerId& w);
  void heartbeat(const std::vector<WorkerId>& running);
  std::set<int> held() const;
  size_t workers() const { return holds_.size(); }

 private:
  struct Hold {
    std::vector<int> gpus;
    int missed = 0;  // heartbeats in a row that did not list the worker
  };
  std::map<WorkerId, Hold> holds_;
};

// The bounded cause label of one worker's exit as the agent reports it:
// succeeded, exit_code, signal, max_runtime, log_limit, disk_limit, stopped, launch_failed, other.
std::string worker_exit_cause(int exit_code, int signal, const std::string& reason);

// ---- the exporter ----

class NodeMetrics {
 public:
  struct Options {
    std::string bind;                       // HOST:PORT; port 0 picks a free one
    std::string node;                       // the "node" label of every series
    std::string nvidia_smi = "nvidia-smi";  // looked up on PATH; absent: no GPU series
    int gpu_poll_ms = 5000;                 // also how often count_from's source is read
    // The node's GPU indices: their troupe_node_gpu_allocated rows exist from
    // the start (0 while free). A GPU a Launch names is added.
    std::vector<int> gpus = {};
  };

  static std::unique_ptr<NodeMetrics> start(const Options& opts, std::string* error);
  ~NodeMetrics();
  NodeMetrics(const NodeMetrics&) = delete;
  NodeMetrics& operator=(const NodeMetrics&) = delete;

  // Thread-safe.
  void worker_launched();
  void worker_exited(int exit_code, int signal, const std::string& reason);
  void set_running(int workers);
  void heartbeat_sent();
  // An envelope (messages/wire.hpp) the agent received or published: Launch,
  // Exited and Heartbeat update troupe_node_gpu_allocated; anything else, or
  // bytes that are no envelope, are ignored. Counts nothing else.
  void observe(const void* data, size_t size);
  // What the agent counted itself (AgentCounters, by name), read on the
  // polling thread into troupe_node_agent_events_total{event}: a total that
  // grew is added, one that did not is left. nullptr stops the reads (before
  // the source goes).
  using Counts = std::vector<std::pair<std::string, uint64_t>>;
  void count_from(std::function<Counts()> source);

  int port() const;
  std::string url() const;

  struct Impl;  // defined in node/metrics.cpp; only start() can make one
  explicit NodeMetrics(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::metrics

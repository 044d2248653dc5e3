// A node agent's own /metrics (troupe-node --metrics HOST:PORT): counters the
// agent bumps (workers launched and exited, heartbeats sent), the running
// workers gauge, and per-GPU utilisation and memory read from nvidia-smi
// every few seconds when it is installed. Self-contained: the agent only
// calls the methods below; the series are node_series() in
// actors/metrics/model.hpp, documented in docs/metrics.md, served on the
// shared exporter loop (actors/metrics/exporter.hpp; no CAF, no NATS).
//
//   auto m = NodeMetrics::start({"0.0.0.0:9465", "node-1"}, &err);   // nullptr + err on failure
//   m->worker_launched();   m->set_running(n);   m->heartbeat_sent();
//   m->worker_exited(exit_code, signal, reason);
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace troupe::metrics {

// ---- pure parts (unit-tested) ----

struct GpuUse {
  std::string gpu;         // nvidia-smi index
  double utilization = 0;  // 0..1
  double memory_used_bytes = 0;
  double memory_total_bytes = 0;
};

// Parses `nvidia-smi --query-gpu=index,utilization.gpu,memory.used,memory.total
// --format=csv,noheader,nounits` (memory in MiB); rows that do not parse
// ("[N/A]", short rows) are skipped.
std::vector<GpuUse> parse_nvidia_smi(const std::string& csv);

// The bounded cause label of one worker's exit as the agent reports it:
// succeeded, exit_code, signal, max_runtime, stopped, launch_failed, other.
std::string worker_exit_cause(int exit_code, int signal, const std::string& reason);

// ---- the exporter ----

class NodeMetrics {
 public:
  struct Options {
    std::string bind;                       // HOST:PORT; port 0 picks a free one
    std::string node;                       // the "node" label of every series
    std::string nvidia_smi = "nvidia-smi";  // looked up on PATH; absent: no GPU series
    int gpu_poll_ms = 5000;
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

  int port() const;
  std::string url() const;

  struct Impl;  // defined in node/metrics.cpp; only start() can make one
  explicit NodeMetrics(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::metrics

// The scheduler's /metrics: a MetricsCollector runs inside troupe-scheduler
// (troupe-scheduler --metrics HOST:PORT) with its own NATS connection. It is a
// projection: it subscribes to every job event (troupe.*.events.>) and polls
// troupe.sys.nodes, troupe.sys.queues and troupe.sys.stats about once a
// second, and serves what it learns with prometheus-cpp. It never talks to
// the actors directly. The series: model.hpp scheduler_series(), documented
// in docs/metrics.md; the endpoint and polling thread: exporter.hpp.
#pragma once

#include <memory>
#include <string>

namespace troupe::metrics {

class MetricsCollector {
 public:
  struct Options {
    std::string nats_url = "nats://127.0.0.1:4222";
    std::string creds_file;  // its identity ("" none)
    std::string tls_ca;
    std::string bind = "127.0.0.1:9464";  // HOST:PORT; port 0 picks a free one
    int poll_ms = 1000;
    int request_timeout_ms = 1000;
  };

  // Connects, subscribes, binds the HTTP endpoint and starts polling; nullptr
  // (and `error`) when any of that fails.
  static std::unique_ptr<MetricsCollector> start(const Options& opts, std::string* error);
  ~MetricsCollector();  // stops polling, unsubscribes, closes the endpoint
  MetricsCollector(const MetricsCollector&) = delete;
  MetricsCollector& operator=(const MetricsCollector&) = delete;

  // The port actually bound (useful with port 0) and "http://HOST:PORT/metrics".
  int port() const;
  std::string url() const;

  struct Impl;  // defined in scheduler_metrics.cpp; only start() can make one
  explicit MetricsCollector(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::metrics

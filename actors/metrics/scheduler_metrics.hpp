// The scheduler's /metrics: a MetricsCollector runs inside troupe-scheduler
// (troupe-scheduler --metrics HOST:PORT). It is a projection of the
// scheduler's own state, read in-process, never over the bus: the job events
// as its job actors publish them (on_event), and about once a second the
// views of nodes, queues and counters its actors serve (Source::ask, the
// answers troupe.sys.nodes, troupe.sys.queues and troupe.sys.stats give). It
// serves what it learns with prometheus-cpp. The series: model.hpp
// scheduler_series(), documented in docs/metrics.md; the endpoint and polling
// thread: exporter.hpp; the source: actors/shell/local_view.hpp.
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace troupe::metrics {

// Where the collector reads the scheduler's views.
class Source {
 public:
  virtual ~Source() = default;
  // The JSON text the scheduler answers to an empty request on `subject`
  // (troupe.sys.nodes, troupe.sys.queues, troupe.sys.stats, troupe.sys.jobs);
  // nullopt when it did not answer within `timeout_ms` (a standby has no
  // actors to answer).
  virtual std::optional<std::string> ask(const std::string& subject, int timeout_ms) = 0;
};

class MetricsCollector {
 public:
  struct Options {
    std::shared_ptr<Source> source;
    std::string bind = "127.0.0.1:9464";  // HOST:PORT; port 0 picks a free one
    int poll_ms = 1000;
    int request_timeout_ms = 1000;
  };

  // Binds the HTTP endpoint and starts polling; nullptr (and `error`) when
  // that fails.
  static std::unique_ptr<MetricsCollector> start(const Options& opts, std::string* error);
  ~MetricsCollector();  // stops polling, closes the endpoint

  // A job event (troupe.<team>.events.<job_id>, JobEvent JSON) as a job actor
  // publishes it. Thread-safe.
  void on_event(const std::string& subject, const std::string& json);
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

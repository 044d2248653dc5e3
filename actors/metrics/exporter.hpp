// The one exporter loop both /metrics endpoints run on (the scheduler's
// MetricsCollector, actors/metrics/scheduler_metrics.hpp, and the node
// agent's NodeMetrics, node/metrics.hpp): a prometheus-cpp Registry served
// over HTTP on HOST:PORT by civetweb (not prometheus-cpp's Exposer, whose own
// unprefixed exposer_* families, one a Summary that reads NaN before its first
// observation, would be served beside ours: a scrape holds only troupe_*
// series), families registered from the series
// tables of model.hpp, and one polling thread that samples every interval and
// removes the gauge rows a sample no longer sets (a pool emptied, a GPU gone).
// No NATS and no CAF here: what a sample reads is the caller's business.
//
//   auto ex = Exporter::start("127.0.0.1:0", 1, &err);       // nullptr + err on failure
//   auto& g = ex->gauge(*find_series(node_series(), "..."));
//   ex->poll_every(std::chrono::seconds(5), [&](GaugeRows& rows) {
//     rows.set(g, {{"gpu", "0"}}, 0.5);                      // rows not set again go
//     return true;                                           // false: keep the last rows
//   });
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "actors/metrics/model.hpp"

class CivetServer;  // civetweb

namespace troupe::metrics {

// Splits "HOST:PORT" (HOST may be empty or a [v6] literal); false when malformed.
bool split_host_port(const std::string& addr, std::string* host, int* port);

// The labelled gauge rows one sample sets. When a sample ends, the rows the
// sample before set and this one did not are removed from their families.
class GaugeRows {
 public:
  // family{labels} = value, and the row counts as set by this sample.
  void set(prometheus::Family<prometheus::Gauge>& family, const prometheus::Labels& labels,
           double value);
  // Ends a sample: `complete` (it measured everything) removes the rows it did
  // not set again; otherwise the rows of both samples stay.
  void end_sample(bool complete);

 private:
  using Rows = std::map<prometheus::Family<prometheus::Gauge>*, std::set<prometheus::Labels>>;
  Rows last_, now_;
};

class Exporter {
  struct Key {};  // only start() makes an Exporter

 public:
  // One sample: sets gauges (labelled ones through `rows`); returns false when
  // it could not measure (then no row is removed).
  using Sampler = std::function<bool(GaugeRows& rows)>;

  // Serves a new registry on http://`bind`/metrics with `threads` HTTP
  // threads: the registry's families and nothing else. nullptr and `error` when `bind` is malformed
  // or cannot be bound.
  static std::unique_ptr<Exporter> start(const std::string& bind, size_t threads,
                                         std::string* error);
  explicit Exporter(Key);  // out of line: Handler and CivetServer are incomplete here
  ~Exporter();             // stop_polling(), then the endpoint closes
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  // Families registered from a series table row (name and help).
  prometheus::Family<prometheus::Gauge>& gauge(const SeriesInfo& s);
  prometheus::Family<prometheus::Counter>& counter(const SeriesInfo& s);
  prometheus::Family<prometheus::Histogram>& histogram(const SeriesInfo& s);
  prometheus::Registry& registry() { return *registry_; }

  // Starts the polling thread: `sample` now, then every `interval` until
  // stop_polling(). At most one polling thread per exporter.
  void poll_every(std::chrono::milliseconds interval, Sampler sample);
  // Wakes and joins the polling thread (a sample under way finishes first).
  // Idempotent; afterwards `sample` is never called again.
  void stop_polling();

  // The port actually bound (useful with port 0) and "http://HOST:PORT/metrics".
  int port() const;
  std::string url() const;

 private:
  void run(std::chrono::milliseconds interval, const Sampler& sample);

  std::string host_;
  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  struct Handler;  // GET /metrics: the registry in the text format
  std::unique_ptr<Handler> handler_;
  std::unique_ptr<CivetServer> server_;  // closed before handler_ goes
  std::mutex mu_;                        // guards stopping_
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread poller_;
};

}  // namespace troupe::metrics

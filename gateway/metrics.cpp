// MetricsCollector (see metrics.hpp): owns its NATS connection and event
// subscription, the prometheus-cpp registry and HTTP exposer, and the polling
// thread. The decisions (what an event means, what a reply says) are in
// metrics_model.cpp; this file only carries them out.
#include "gateway/metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

#include "bus/nats.hpp"
#include "bus/subjects.hpp"
#include "gateway/metrics_model.hpp"
#include "messages/names.hpp"

namespace troupe::metrics {

using prometheus::Labels;

std::unique_ptr<prometheus::Exposer> serve_registry(const std::string& bind, size_t threads,
                                                    std::shared_ptr<prometheus::Registry> registry,
                                                    std::string* host, std::string* error) {
  int port = 0;
  if (!split_host_port(bind, host, &port)) {
    if (error) *error = "--metrics wants HOST:PORT, got '" + bind + "'";
    return nullptr;
  }
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(bind, threads);
  } catch (const std::exception& e) {
    if (error) *error = "cannot serve metrics on " + bind + ": " + e.what();
    return nullptr;
  }
  exposer->RegisterCollectable(registry);
  return exposer;
}

bool split_host_port(const std::string& addr, std::string* host, int* port) {
  auto colon = addr.rfind(':');
  if (colon == std::string::npos || colon + 1 >= addr.size()) return false;
  std::string h = addr.substr(0, colon);
  if (!h.empty() && h.front() == '[' && h.back() != ']') return false;
  const std::string p = addr.substr(colon + 1);
  for (char c : p)
    if (c < '0' || c > '9') return false;
  if (p.size() > 5) return false;
  int v = std::atoi(p.c_str());
  if (v > 65535) return false;
  *host = h;
  *port = v;
  return true;
}

struct MetricsCollector::Impl {
  Options opts;
  std::string host;
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::map<std::string, prometheus::Family<prometheus::Gauge>*> gauges;
  std::map<std::string, prometheus::Family<prometheus::Counter>*> counters;
  std::map<std::string, prometheus::Family<prometheus::Histogram>*> histograms;

  std::mutex mu;  // guards the fields below (events arrive on a NATS thread)
  EventTracker tracker;
  std::map<std::string, CounterMirror> mirrors;    // by series + labels
  std::map<std::string, std::set<Labels>> live;    // gauge label sets the last poll set
  int64_t succeeded = 0, failed = 0;
  bool stopping = false;
  std::condition_variable cv;

  bus::ConnectionPtr conn;
  bus::SubscriptionPtr sub;
  std::unique_ptr<prometheus::Exposer> exposer;
  std::thread poller;

  ~Impl() {
    {
      std::lock_guard<std::mutex> l(mu);
      stopping = true;
    }
    cv.notify_all();
    if (poller.joinable()) poller.join();
    sub.reset();
    conn.reset();
    exposer.reset();
  }

  void build_families() {
    for (const auto& s : scheduler_series()) {
      switch (s.type) {
        case Type::kGauge:
          gauges[s.name] = &prometheus::BuildGauge().Name(s.name).Help(s.help).Register(*registry);
          break;
        case Type::kCounter:
          counters[s.name] =
              &prometheus::BuildCounter().Name(s.name).Help(s.help).Register(*registry);
          break;
        case Type::kHistogram:
          histograms[s.name] =
              &prometheus::BuildHistogram().Name(s.name).Help(s.help).Register(*registry);
          break;
      }
    }
    // Series that exist from the start, at 0.
    for (const auto& c : cumulative_values(Json::object(), Json::object()))
      counters.at(c.series)->Add(c.labels);
    for (const char* r : {"ok", "malformed"}) counters.at("troupe_metrics_events_total")->Add({{"result", r}});
    for (const char* s : {"nodes", "queues", "stats", "jobs"})
      counters.at("troupe_metrics_poll_errors_total")->Add({{"subject", s}});
    gauges.at("troupe_gpu_allocation_ratio")->Add({});
    gauges.at("troupe_workers_running")->Add({});
    for (const char* s : {"alive", "dead"}) gauges.at("troupe_nodes")->Add({{"state", s}});
  }

  prometheus::Counter& counter(const std::string& name, const Labels& l) {
    return counters.at(name)->Add(l);
  }
  prometheus::Histogram& histogram(const std::string& name, const Labels& l) {
    const auto* info = find_series(scheduler_series(), name);
    return histograms.at(name)->Add(l, prometheus::Histogram::BucketBoundaries(info->buckets));
  }

  // ---- events ----
  void on_event(Inbound&& in) {
    std::string_view body(reinterpret_cast<const char*>(in.data.data()), in.data.size());
    auto ev = parse_event(body);
    if (!ev) {
      counter("troupe_metrics_events_total", {{"result", "malformed"}}).Increment();
      return;
    }
    counter("troupe_metrics_events_total", {{"result", "ok"}}).Increment();
    std::string team = label_or_none(ev->team);
    const auto& kinds = names::kKinds;
    std::string kind = std::find(kinds.begin(), kinds.end(), ev->kind) != kinds.end() ? ev->kind
                                                                                      : "other";
    Observations o;
    std::optional<double> ratio;
    {
      std::lock_guard<std::mutex> l(mu);
      o = tracker.on_event(*ev);
      if (o.finished && o.finished->state == names::kSucceeded) ++succeeded;
      if (o.finished && o.finished->state == names::kFailed) ++failed;
      if (o.finished && succeeded + failed > 0)
        ratio = static_cast<double>(succeeded) / static_cast<double>(succeeded + failed);
    }
    if (o.queue_wait_s)
      histogram("troupe_queue_wait_seconds", {{"team", team}, {"kind", kind}}).Observe(*o.queue_wait_s);
    if (o.placement_latency_s)
      histogram("troupe_placement_latency_seconds", {{"kind", kind}}).Observe(*o.placement_latency_s);
    if (o.finished)
      counter("troupe_jobs_finished_total", {{"team", team},
                                             {"kind", kind},
                                             {"state", o.finished->state},
                                             {"cause", o.finished->cause}})
          .Increment();
    if (ratio) gauges.at("troupe_job_success_ratio")->Add({}).Set(*ratio);
    if (o.attempt_ended)
      counter("troupe_job_attempts_ended_total", {{"team", team}, {"cause", *o.attempt_ended}})
          .Increment();
  }

  // ---- polling ----
  std::optional<Json> ask(const std::string& subject, const char* label) {
    std::string err;
    auto reply = conn->request(subject, std::string("{}"), opts.request_timeout_ms, &err);
    if (reply) {
      Json j = Json::parse(reply->begin(), reply->end(), nullptr, false);
      if (!j.is_discarded() && j.is_object() && !j.contains("error")) return j;
    }
    counter("troupe_metrics_poll_errors_total", {{"subject", label}}).Increment();
    return std::nullopt;
  }

  void poll() {
    auto nodes = ask(subjects::kSysNodes, "nodes");
    auto queues = ask(subjects::kSysQueues, "queues");
    auto stats = ask(subjects::kSysStats, "stats");
    if (nodes && queues) {
      std::vector<PendingShape> pending;
      if (auto shapes = shapes_from_queues(*queues)) {
        pending = std::move(*shapes);
      } else if (any_pending(*queues)) {
        // Until troupe.sys.queues lists pending shapes: read the queued jobs.
        if (auto jobs = ask(subjects::team_jobs(names::kSysToken), "jobs"))
          pending = shapes_from_jobs(*jobs);
      }
      set_gauges(build_sample(*nodes, *queues, pending));
    }
    if (stats && queues) {
      std::lock_guard<std::mutex> l(mu);
      for (const auto& c : cumulative_values(*stats, *queues)) {
        std::string key = c.series;
        for (const auto& [k, v] : c.labels) key += "," + k + "=" + v;
        double d = mirrors[key].delta(c.value);
        counters.at(c.series)->Add(c.labels).Increment(d);
      }
    }
  }

  void set_gauges(const Sample& s) {
    std::map<std::string, std::set<Labels>> now;
    auto set = [&](const std::string& name, const Labels& l, double v) {
      gauges.at(name)->Add(l).Set(v);
      now[name].insert(l);
    };
    for (const auto& r : s.gpus) {
      Labels l{{"pool", r.pool}, {"gpu_type", r.gpu_type}};
      set("troupe_gpus_capacity", l, r.total);
      set("troupe_gpus_allocated", l, r.allocated);
      set("troupe_gpus_reserved", l, r.reserved);
      set("troupe_gpus_free", l, r.free);
      set("troupe_gpus_held_idle", l, r.held_idle);
      set("troupe_gpus_fragmented", l, r.fragmented);
    }
    for (const auto& t : s.teams) {
      Labels l{{"team", t.team}, {"pool", t.pool}};
      set("troupe_queue_jobs", l, t.pending_jobs);
      set("troupe_queue_pending_gpus", l, t.pending_gpus);
      set("troupe_team_gpus_in_use", l, t.in_use);
      set("troupe_team_gpus_borrowed", l, t.borrowed);
      set("troupe_team_gpus_guaranteed", l, t.guaranteed);
      set("troupe_team_weight", l, t.weight);
      set("troupe_team_dominant_share", l, t.dominant_share);
      set("troupe_team_weighted_share", l, t.weighted_share);
    }
    gauges.at("troupe_gpu_allocation_ratio")->Add({}).Set(s.allocation_ratio);
    gauges.at("troupe_workers_running")->Add({}).Set(s.workers_running);
    gauges.at("troupe_nodes")->Add({{"state", "alive"}}).Set(s.nodes_alive);
    gauges.at("troupe_nodes")->Add({{"state", "dead"}}).Set(s.nodes_dead);
    // Rows that are gone (a pool emptied, a team no longer listed) disappear.
    std::lock_guard<std::mutex> l(mu);
    for (const auto& [name, sets] : live)
      for (const auto& labels : sets)
        if (now[name].count(labels) == 0) {
          auto* fam = gauges.at(name);
          fam->Remove(&fam->Add(labels));
        }
    live = std::move(now);
  }

  void run() {
    std::unique_lock<std::mutex> l(mu);
    while (!stopping) {
      l.unlock();
      poll();
      l.lock();
      cv.wait_for(l, std::chrono::milliseconds(opts.poll_ms), [&] { return stopping; });
    }
  }
};

MetricsCollector::MetricsCollector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsCollector::~MetricsCollector() = default;

std::unique_ptr<MetricsCollector> MetricsCollector::start(const Options& opts, std::string* error) {
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  impl->build_families();
  impl->exposer = serve_registry(opts.bind, 2, impl->registry, &impl->host, error);
  if (!impl->exposer) return nullptr;

  bus::ConnectOptions co;
  co.url = opts.nats_url;
  co.creds_file = opts.creds_file;
  co.tls_ca = opts.tls_ca;
  co.name = "troupe-scheduler-metrics";
  std::string err;
  impl->conn = bus::Connection::open(co, &err);
  if (!impl->conn) {
    if (error) *error = "metrics: " + err;
    return nullptr;
  }
  Impl* raw = impl.get();
  impl->sub = impl->conn->subscribe(subjects::kAllEvents,
                                    [raw](Inbound&& in) { raw->on_event(std::move(in)); });
  if (!impl->sub) {
    if (error) *error = std::string("metrics: cannot subscribe to ") + subjects::kAllEvents;
    return nullptr;
  }
  impl->conn->flush();
  impl->poller = std::thread([raw] { raw->run(); });
  return std::make_unique<MetricsCollector>(std::move(impl));
}

int MetricsCollector::port() const {
  auto ports = impl_->exposer->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

std::string MetricsCollector::url() const {
  std::string host = impl_->host.empty() ? "0.0.0.0" : impl_->host;
  return "http://" + host + ":" + std::to_string(port()) + "/metrics";
}

}  // namespace troupe::metrics

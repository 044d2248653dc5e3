// MetricsCollector (see scheduler_metrics.hpp): takes the scheduler's job
// events, and samples its views through its Source on the shared exporter loop
// (exporter.hpp: registry, HTTP endpoint, polling thread, stale rows). The
// decisions (what an event means, what a reply says) are in model.cpp; this
// file only carries them out.
#include "actors/metrics/scheduler_metrics.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>

#include "actors/metrics/exporter.hpp"
#include "actors/metrics/model.hpp"
#include "bus/subjects.hpp"
#include "messages/json_text.hpp"
#include "messages/names.hpp"

namespace troupe::metrics {

using prometheus::Labels;

struct MetricsCollector::Impl {
  Options opts;
  std::unique_ptr<Exporter> exporter;
  std::map<std::string, prometheus::Family<prometheus::Gauge>*> gauges;
  std::map<std::string, prometheus::Family<prometheus::Counter>*> counters;
  std::map<std::string, prometheus::Family<prometheus::Histogram>*> histograms;

  std::mutex mu;  // guards the fields below (events arrive on a NATS thread)
  EventTracker tracker;
  std::map<std::string, CounterMirror> mirrors;            // by series + labels
  std::map<std::string, HistogramMirror> restore_mirrors;  // by team/pool
  int64_t succeeded = 0, failed = 0;

  ~Impl() {
    // The sampler uses the source and the families: polling stops first, the
    // endpoint (and the registry) goes last.
    if (exporter) exporter->stop_polling();
    exporter.reset();
  }

  void build_families() {
    for (const auto& s : scheduler_series()) {
      switch (s.type) {
        case Type::kGauge:
          gauges[s.name] = &exporter->gauge(s);
          break;
        case Type::kCounter:
          counters[s.name] = &exporter->counter(s);
          break;
        case Type::kHistogram:
          histograms[s.name] = &exporter->histogram(s);
          break;
      }
    }
    // Series that exist from the start, at 0.
    for (const auto& c : cumulative_values(Json::object(), Json::object()))
      counters.at(c.series)->Add(c.labels);
    for (const char* r : {"ok", "malformed"})
      counters.at("troupe_metrics_events_total")->Add({{"result", r}});
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
  void on_event(std::string_view body) {
    auto ev = parse_event(body);
    if (!ev) {
      counter("troupe_metrics_events_total", {{"result", "malformed"}}).Increment();
      return;
    }
    counter("troupe_metrics_events_total", {{"result", "ok"}}).Increment();
    std::string team = label_or_none(ev->team);
    const auto& kinds = names::kKinds;
    std::string kind =
        std::find(kinds.begin(), kinds.end(), ev->kind) != kinds.end() ? ev->kind : "other";
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
      histogram("troupe_queue_wait_seconds", {{"team", team}, {"kind", kind}})
          .Observe(*o.queue_wait_s);
    if (o.placement_latency_s)
      histogram("troupe_placement_latency_seconds", {{"kind", kind}})
          .Observe(*o.placement_latency_s);
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
    auto reply = opts.source ? opts.source->ask(subject, opts.request_timeout_ms) : std::nullopt;
    if (reply) {
      Json j = json_text::parse<Json>(reply->begin(), reply->end());
      if (!j.is_discarded() && j.is_object() && !j.contains("error")) return j;
    }
    counter("troupe_metrics_poll_errors_total", {{"subject", label}}).Increment();
    return std::nullopt;
  }

  // One sample on the exporter's polling thread; false when the gauges could
  // not be read (their rows then stay as the last sample left them).
  bool poll(GaugeRows& rows) {
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
      set_gauges(build_sample(*nodes, *queues, pending), rows);
    }
    if (stats && queues) {
      std::lock_guard<std::mutex> l(mu);
      for (const auto& c : cumulative_values(*stats, *queues)) {
        double d = mirrors[key_of(c)].delta(c.value);
        counters.at(c.series)->Add(c.labels).Increment(d);
      }
    }
    if (queues) {
      std::lock_guard<std::mutex> l(mu);
      for (const auto& h : restore_increments(*queues, restore_mirrors))
        histogram("troupe_guarantee_restore_seconds", {{"team", h.team}, {"pool", h.pool}})
            .ObserveMultiple(h.buckets, h.sum);
    }
    // Rows that are gone (a pool emptied, a team no longer listed) disappear.
    return nodes && queues;
  }

  void set_gauges(const Sample& s, GaugeRows& rows) {
    auto set = [&](const std::string& name, const Labels& l, double v) {
      rows.set(*gauges.at(name), l, v);
    };
    for (const auto& r : s.gpus) {
      Labels l{{"pool", r.pool}, {"gpu_type", r.gpu_type}};
      set("troupe_gpus_capacity", l, r.total);
      set("troupe_gpus_allocated", l, r.allocated);
      set("troupe_gpus_reserved", l, r.reserved);
      set("troupe_gpus_free", l, r.free);
      set("troupe_gpus_held_idle", l, r.held_idle);
      set("troupe_gpus_fragmented", l, r.fragmented);
      // MB (MiB) as the scheduler counts them, exported in bytes (base units).
      constexpr double kMiB = 1024.0 * 1024.0;
      set("troupe_gpu_memory_allocated_bytes", l, static_cast<double>(r.memory_shared_mb) * kMiB);
      set("troupe_gpu_memory_stranded_bytes", l, static_cast<double>(r.memory_stranded_mb) * kMiB);
    }
    for (const auto& t : s.teams) {
      Labels l{{"team", t.team}, {"pool", t.pool}};
      set("troupe_queue_jobs", l, t.pending_jobs);
      set("troupe_queue_pending_gpus", l, t.pending_gpus);
      set("troupe_queue_flexible_jobs", l, t.pending_flexible);
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
  }
};

MetricsCollector::MetricsCollector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsCollector::~MetricsCollector() = default;

std::unique_ptr<MetricsCollector> MetricsCollector::start(const Options& opts, std::string* error) {
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  impl->exporter = Exporter::start(opts.bind, 2, error);
  if (!impl->exporter) return nullptr;
  impl->build_families();
  Impl* raw = impl.get();
  impl->exporter->poll_every(std::chrono::milliseconds(opts.poll_ms),
                             [raw](GaugeRows& rows) { return raw->poll(rows); });
  return std::make_unique<MetricsCollector>(std::move(impl));
}

void MetricsCollector::on_event(const std::string&, const std::string& json) {
  impl_->on_event(json);
}

int MetricsCollector::port() const {
  return impl_->exporter->port();
}

std::string MetricsCollector::url() const {
  return impl_->exporter->url();
}

}  // namespace troupe::metrics

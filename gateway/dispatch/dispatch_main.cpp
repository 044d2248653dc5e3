// troupe-dispatch's entry point: the front door in front of several clusters
// (docs/clusters.md). Parses flags and the dispatch config, finds its
// identity on the front NATS (the scheduler's of a `troupe up` home unless
// given), then ticks (capacity, spill-over) until SIGTERM/SIGINT. With
// --metrics HOST:PORT it serves /metrics (actors/metrics: dispatch_series).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "actors/metrics/exporter.hpp"
#include "actors/metrics/model.hpp"
#include "bus/lease.hpp"
#include "bus/log.hpp"
#include "bus/nats.hpp"
#include "bus/subjects.hpp"
#include "gateway/auth/store.hpp"
#include "gateway/client.hpp"
#include "gateway/dispatch/front.hpp"
#include "gateway/process.hpp"

namespace {

// troupe-dispatch --metrics: the front door's clusters and counters
// (metrics::dispatch_sample of its troupe.sys.clusters view) every `every`.
std::unique_ptr<troupe::metrics::Exporter> start_metrics(const std::string& bind,
                                                         troupe::dispatch::Front& front,
                                                         std::chrono::milliseconds every,
                                                         std::string* error) {
  namespace m = troupe::metrics;
  auto ex = m::Exporter::start(bind, 1, error);
  if (!ex) return nullptr;
  std::map<std::string, prometheus::Family<prometheus::Gauge>*> gauges;
  std::map<std::string, prometheus::Family<prometheus::Counter>*> counters;
  for (const auto& s : m::dispatch_series()) {
    if (s.type == m::Type::kGauge) gauges[s.name] = &ex->gauge(s);
    if (s.type == m::Type::kCounter) counters[s.name] = &ex->counter(s);
  }
  auto mirrors = std::make_shared<std::map<std::string, m::CounterMirror>>();
  ex->poll_every(every, [&front, gauges, counters, mirrors](m::GaugeRows& rows) {
    auto sample = m::dispatch_sample(front.clusters_view());
    for (const auto& g : sample.gauges) {
      auto f = gauges.find(g.series);
      if (f != gauges.end()) rows.set(*f->second, g.labels, g.value);
    }
    for (const auto& c : sample.counters) {
      auto f = counters.find(c.series);
      if (f == counters.end()) continue;
      f->second->Add(c.labels).Increment((*mirrors)[m::key_of(c)].delta(c.value));
    }
    return true;
  });
  return ex;
}

}  // namespace

int main(int argc, char** argv) {
  namespace gw = troupe::gateway;
  namespace dp = troupe::dispatch;
  CLI::App app{"troupe-dispatch: one front door in front of several Troupe clusters"};
  app.set_version_flag("--version", TROUPE_VERSION);
  std::string config_path, nats_url = gw::kDefaultNatsUrl, creds, tls_ca, home;
  bool insecure = false;
  int timeout_ms = 5000;
  app.add_option("--config", config_path, "the dispatch config (YAML): clusters, teams")
      ->required()
      ->envname("TROUPE_DISPATCH_CONFIG");
  app.add_option("--nats", nats_url, "the front NATS URL(s), comma-separated")
      ->envname("TROUPE_NATS")
      ->capture_default_str();
  app.add_option(
      "--creds", creds,
      "the front door's identity on the front NATS (default: HOME/auth/scheduler.creds)");
  app.add_option("--tls-ca", tls_ca, "CA of the front NATS server (default: HOME/auth/ca.pem)");
  app.add_option("--home", home, "a `troupe up` home to find the identity in");
  app.add_flag("--insecure", insecure, "connect to the front NATS without identity or TLS");
  app.add_option("--request-timeout-ms", timeout_ms, "how long a cluster may take to answer")
      ->capture_default_str()
      ->check(CLI::Range(100, 60000));
  int replicas = 1;
  app.add_option("--replicas", replicas,
                 "copies of the TROUPE_DISPATCH bucket (3 on a 3-server front NATS)")
      ->envname("TROUPE_REPLICAS")
      ->capture_default_str()
      ->check(CLI::Range(1, 5));
  int lease_ttl_ms = 3000;
  auto* ttl_opt = app.add_option("--lease-ttl-ms", lease_ttl_ms,
                                 "several front doors: a standby takes over after this long "
                                 "without a renewal (at least 3 x the config's poll_ms; "
                                 "default 3000, or 3 x poll_ms when that is more)")
                      ->check(CLI::Range(300, 600000));
  std::string metrics_addr;
  app.add_option("--metrics", metrics_addr,
                 "serve Prometheus metrics on HOST:PORT (/metrics; port 0: a free one)")
      ->envname("TROUPE_DISPATCH_METRICS");
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|critical|off")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (!troupe::bus::use_daemon_log("troupe-dispatch", log_level)) {
    std::cerr << "troupe-dispatch: --log-level " << log_level << " is not a level\n";
    return 2;
  }

  std::ifstream in(config_path);
  if (!in) {
    std::cerr << "troupe-dispatch: cannot read " << config_path << "\n";
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string error;
  auto cfg = dp::parse_config(text.str(), &error);
  if (!cfg) {
    std::cerr << "troupe-dispatch: " << config_path << ": " << error << "\n";
    return 2;
  }
  if (ttl_opt->count() == 0)
    lease_ttl_ms = static_cast<int>(std::max<int64_t>(lease_ttl_ms, 3 * cfg->poll_ms));
  if (lease_ttl_ms < 3 * cfg->poll_ms) {
    std::cerr << "troupe-dispatch: --lease-ttl-ms " << lease_ttl_ms << " is less than 3 x poll_ms ("
              << cfg->poll_ms << "): the lease is renewed once per poll\n";
    return 2;
  }
  dp::FrontOptions o;
  o.config = *cfg;
  o.request_timeout_ms = timeout_ms;
  o.lease_ttl_ms = lease_ttl_ms;
  o.replicas = replicas;
  o.holder = troupe::bus::holder_id();
  o.front.url = nats_url;
  o.front.name = "troupe-dispatch";
  o.front.max_reconnect = -1;
  if (!insecure) {
    std::string why;
    if (!troupe::auth::daemon_identity(home, std::string(troupe::subjects::kSchedulerIdentity),
                                       &creds, &tls_ca, &why)) {
      std::cerr << "troupe-dispatch: " << why
                << " (--creds, or --insecure for an open front NATS)\n";
      return 2;
    }
    o.front.creds_file = creds;
    o.front.tls_ca = tls_ca;
  }

  gw::SignalWatch signals;  // before any thread
  troupe::bus::Library lib;
  auto front = dp::Front::open(
      o, &error, [&signals](int ms) { return signals.wait(std::chrono::milliseconds(ms)) != 0; });
  if (!front) {
    if (error.empty()) return 0;  // stopped while a standby
    std::cerr << "troupe-dispatch: " << error << "\n";
    return 1;
  }
  std::cout << "troupe-dispatch: serving " << cfg->clusters.size() << " clusters" << std::endl;
  std::unique_ptr<troupe::metrics::Exporter> metrics;
  if (!metrics_addr.empty()) {
    metrics =
        start_metrics(metrics_addr, *front,
                      std::chrono::milliseconds(std::max<int64_t>(cfg->poll_ms, 1000)), &error);
    if (!metrics) {
      std::cerr << "troupe-dispatch: --metrics " << metrics_addr << ": " << error << "\n";
      return 2;
    }
    std::cout << "troupe-dispatch: metrics on " << metrics->url() << std::endl;
  }
  while (signals.wait(std::chrono::milliseconds(cfg->poll_ms)) == 0)
    if (!front->tick()) return 3;  // deposed: exits without giving the lease up
  metrics.reset();                 // (its sampler reads the front door)
  front.reset();
  return 0;
}

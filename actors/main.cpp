// troupe-scheduler: runs the actor system and binds it to NATS.
//   troupe-scheduler --nats URL [--config FILE] [--metrics HOST:PORT]
// Several may run: one takes the leader lease and schedules, the others wait
// as standbys (docs/recovery.md); or, with --shard / --pools, several act at
// once, each owning some pools (a lease per pool). A leader restores its actors from the KV
// bucket and the streams, then asks the agents what runs. Stops cleanly on
// SIGTERM / SIGINT, reloads its config on SIGHUP; exits with code 3 when it
// finds itself deposed. The process shell lives in actors/shell/: bootstrap
// (options, signals, the bus), the standby's front door, leadership, restore,
// serve.
#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "actors/metrics/scheduler_metrics.hpp"
#include "actors/shell/serve.hpp"

namespace {

// --metrics: the collector (actors/metrics/scheduler_metrics.hpp), reading
// the actors through `view`. Null without --metrics, and on an error (then
// `err` says why).
std::unique_ptr<troupe::metrics::MetricsCollector> start_metrics(
    const troupe::shell::Options& o, const std::shared_ptr<troupe::shell::LocalView>& view,
    std::string* err) {
  if (o.metrics_addr.empty()) return nullptr;
  troupe::metrics::MetricsCollector::Options mo;
  mo.source = view;
  mo.bind = o.metrics_addr;
  auto m = troupe::metrics::MetricsCollector::start(mo, err);
  if (!m) return nullptr;
  view->listen([m = m.get()](const std::string& s, const std::string& j) { m->on_event(s, j); });
  spdlog::info("metrics on {}", m->url());
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace troupe::shell;
  Options o;
  if (int rc = parse_options(argc, argv, o); rc >= 0) return rc;
  StopSignals signals;  // blocked in every thread from here on
  std::string err;
  auto bus = Bus::open(o, &err);
  if (!bus) return spdlog::error("{}", err), 1;
  auto view = std::make_shared<LocalView>();  // the metrics' in-process view of the actors
  err.clear();
  auto metrics = start_metrics(o, view, &err);
  if (!err.empty()) return spdlog::error("{}", err), 1;
  // Submissions are recorded while no leader answers (shell/standby.hpp):
  // from now until this process's router hears them itself.
  // (Not a shard's: a pool nobody serves is taken by a shard within the ttl.)
  std::unique_ptr<StandbyFront> front;
  if (!o.shard) front = std::make_unique<StandbyFront>(*bus, o);
  Leadership lead(*bus, o.lease_ttl_ms, o);  // lead, or wait as a standby
  if (!lead.acquire(signals)) return 0;
  for (;;) {
    if (lead.sharded())
      spdlog::info("shard: holding pools {} (epoch {}); restoring", fmt::join(lead.pools(), ","),
                   lead.epoch());
    else
      spdlog::info("holding the leader lease (epoch {}); restoring", lead.epoch());
    auto start = restore(*bus, lead, o, &err);
    if (!start) return spdlog::error("{}", err), 1;
    // A shard that took more pools, or is asked to hand one back, stops its
    // actors (its leases kept) and starts them again from the store, with its
    // pools now: a pool handed back is given up only once its actors stopped.
    if (int rc = serve(*bus, lead, *start, o, signals, *view, front);
        rc != Leadership::kPoolsChanged)
      return rc;
    lead.hand_back();
    if (lead.pools().empty() && !lead.acquire(signals)) return 0;
  }
}

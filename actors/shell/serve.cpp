#include "actors/shell/serve.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <random>
#include <thread>

#include "actors/bridge.hpp"
#include "actors/scheduler.hpp"
#include "actors/shell/bus_ports.hpp"
#include "actors/shell/shard_views.hpp"
#include "bus/subjects.hpp"
#include "messages/ids.hpp"

namespace troupe::shell {

namespace {

// What the router answers (it hands each to the actor concerned), all on
// one connection, whose subscriptions the server takes in order:
// troupe.sys.stats last, so a client answered there (a test's "is it
// serving?") is sure every other one is subscribed too.
constexpr const char* kRouterSubjects[] = {
    subjects::kAllSubmit,     subjects::kAllStatus,     subjects::kAllCancel,
    subjects::kAllLogs,       subjects::kAllJobs,       subjects::kSysNodes,
    subjects::kAllAgents,     subjects::kAllWhy,        subjects::kSysQueues,
    subjects::kSysCordon,     subjects::kSysUncordon,   subjects::kSysDrain,
    subjects::kSysRemoveNode, subjects::kSysDebugCrash, subjects::kAllHistory,
    subjects::kSysFind,       subjects::kAllPipeline,   subjects::kAllUsage,
    subjects::kAllSchedule,   subjects::kSysShardPart,  subjects::kSysStats};

// SIGHUP: a bad new config is refused and the old one stays. The teams'
// logs streams take the new retention.
void reload(const Wiring& w, const Options& o, LogStreams* logs) {
  std::string text, err;
  if (o.config.empty()) {
    spdlog::warn("SIGHUP without --config: nothing to reload");
  } else if (!read_config(o.config, text, err)) {
    spdlog::error("config reload refused, keeping the old one: {}", err);
  } else {
    apply_config(w, text);
    policy::ClusterConfig cfg;
    if (logs != nullptr && policy::load_config(text, cfg).empty()) logs->configure(cfg);
    spdlog::info("config reloaded from {}", o.config);
  }
}

}  // namespace

int serve(Bus& bus, Leadership& lead, Restore& start, Options& o, const StopSignals& signals,
          LocalView& local, std::unique_ptr<StandbyFront>& front) {
  start.complete(o, lead, bus);
  int rc = 0;
  {
    caf::actor_system_config cfg;
    configure(cfg, o.threads);
    caf::actor_system sys{cfg};
    auto out = std::make_shared<BusOutbox>(lead.gate(), local, bus.logs.get());
    auto intake = std::make_shared<StreamIntake>(*bus.js, lead.gate());
    auto history = std::make_shared<StreamHistory>(*bus.js);
    o.scheduler.history = history;
    if (bus.logs_stream) o.scheduler.logs = std::make_shared<StreamLogs>(*bus.js);
    auto dispatch = std::make_shared<BusDispatchGate>(*bus.out);
    o.scheduler.dispatch = dispatch;
    // A shard hears its own nodes' agents only (and every register).
    std::shared_ptr<BusAgentWatch> agents;
    if (bus.sharded) agents = std::make_shared<BusAgentWatch>(*bus.in);
    o.scheduler.agents = agents;
    // A shard: where the owners of other pools answer what it hands them
    // off the enqueue consumer (this process's own subject).
    if (lead.sharded()) {
      std::string reader;
      ids::append_base36(reader, static_cast<uint64_t>(system_now_ms()), 8);
      ids::append_base36(reader, std::random_device{}(), 7);
      o.scheduler.shard_answers = subjects::shard_answers(reader);
      o.scheduler.shard_id = reader;
    }
    auto w = start_scheduler(sys, out, intake, o.scheduler);
    if (agents) {
      agents->serve(w.router);
      // The restored nodes' agents are listened to before they are asked to
      // register again (below); the node supervisor's watch is then a no-op.
      std::vector<std::string> restored;
      for (const auto& [node, rec] : start.read.state.nodes) restored.push_back(node);
      agents->watch(restored);
    }
    apply_config(w, o.config_text);
    local.serve(w.router);
    seed(w, start);
    report(start, lead.epoch());

    std::vector<bus::SubscriptionPtr> subs;
    // Shards: one of them reads each submission (a queue group) and hands
    // one of another's pool to its owner, which listens for its pools here.
    const bool sharded = o.scheduler.shards.sharded();
    // A submission addressed to a pool (troupe.<team>.submit.<pool>) is
    // read by its owner: every pool's with one scheduler.
    std::vector<std::string> own;
    for (const auto& pool : o.scheduler.shards.pools)
      for (const auto& subject :
           {subjects::shard_submit(pool, "*"), subjects::shard_read(pool, "*"),
            subjects::team_submit_to("*", pool), subjects::shard_key(pool, "*")})
        own.push_back(subject);
    if (!sharded) own = {subjects::kAllPoolSubmit};
    for (const auto& subject : own) {
      auto sub = bus::subscribe_actor(*bus.in, subject, w.router);
      if (!sub) {
        spdlog::error("cannot subscribe to {}", subject);
        rc = 1;
      }
      subs.push_back(std::move(sub));
    }
    if (agents) subs.push_back(agents->registers(*bus.in));
    // (On the connection the router publishes on: the server tells "no
    // responders" only to a reply subject its publisher subscribed to.)
    if (!o.scheduler.shard_answers.empty())
      subs.push_back(bus::subscribe_actor(*bus.out, o.scheduler.shard_answers + ".*", w.router));
    // Shards: what the others admitted per rate-limited team (intake readers).
    if (sharded) subs.push_back(bus::subscribe_actor(*bus.in, subjects::kShardRate, w.router));
    for (const char* s : kRouterSubjects) {
      if (agents && std::string_view(s) == subjects::kAllAgents) continue;
      const bool queue = sharded && std::string_view(s) == subjects::kAllSubmit;
      auto sub = bus::subscribe_actor(*bus.in, s, w.router, queue ? subjects::kShardQueue : "");
      if (!sub) {
        spdlog::error("cannot subscribe to {}", s);
        rc = 1;
      }
      subs.push_back(std::move(sub));
    }
    // Shards: the coordinator puts the views that span pools together.
    std::unique_ptr<ShardViews> views;
    if (o.scheduler.shards.sharded()) {
      policy::ClusterConfig cfg;
      policy::load_config_or_open(o.config_text, cfg);
      if (o.scheduler.shards.coordinator(cfg)) {
        std::vector<std::string> pools;
        for (const auto& p : cfg.pools) pools.push_back(p.name);
        views = std::make_unique<ShardViews>(*bus.in, *bus.out, std::move(pools));
        if (!views->ok()) rc = 1;
      }
    }
    // This process's front door (shell/standby.hpp) hands over to the router;
    // from now on, a standby asking whether a leader answers hears this one
    // (while its lease gate is open), on the NATS thread: however busy the
    // router, what the leader heard before the question reaches it.
    if (front) {
      front->handover();
      front.reset();
    }
    if (!lead.sharded())
      subs.push_back(bus.in->subscribe(
          subjects::kSysLeaderAlive,
          [&lead, out = bus.out.get(),
           alive = "{\"epoch\":" + std::to_string(lead.epoch()) + "}"](Inbound&& in) {
            if (!in.reply.empty() && lead.gate().open()) out->publish(in.reply, alive);
          }));
    // A durable consumer of the intake stream handing what it delivers to the router.
    // A NATS cluster's JetStream may not answer in time just after its
    // servers started or one was lost (a timeout): asked again for up to 30 s.
    auto open_consumer = [&](const std::string& durable, const std::string& filter) {
      std::string err;
      bus::ConsumerPtr c;
      const auto since = std::chrono::steady_clock::now();
      for (;;) {
        c = bus::Consumer::open(
            *bus.js, subjects::kIntakeStream, durable, filter,
            [router = w.router](Inbound&& in) { caf::anon_send(router, std::move(in)); }, &err);
        const bool transient = err.find("imeout") != std::string::npos ||
                               err.find("No responders") != std::string::npos ||
                               err.find("unavailable") != std::string::npos;
        if (c || !transient || std::chrono::steady_clock::now() - since >= std::chrono::seconds(30))
          break;
        spdlog::warn("{}; asking again", err);
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
      }
      if (!c) {
        spdlog::error("{}", err);
        rc = 1;
      }
      return c;
    };
    // Submissions published with JetStream (troupe.<team>.enqueue), also
    // those stored while no scheduler ran; and the records a standby made
    // while no leader answered (shell/standby.hpp), this process's own front
    // door's among them.
    // Shards share the enqueue consumer (each message to one of them, which
    // hands one of another's pool over). A shard takes, for each pool it
    // holds, the records another shard made for that pool while it did not
    // answer (router.cpp, hand_over); a standby's records are not a shard's
    // (docs/recovery.md "Shards" says what is left).
    bus::ConsumerPtr consumer;
    std::vector<bus::ConsumerPtr> handoffs;
    consumer = open_consumer(subjects::kEnqueueConsumer, subjects::kAllEnqueue);
    if (!lead.sharded()) {
      handoffs.push_back(open_consumer(subjects::kHandoffConsumer, subjects::kAllHandoff));
    } else {
      for (const auto& pool : lead.pools())
        handoffs.push_back(
            open_consumer(subjects::pool_handoff_consumer(pool), subjects::pool_handoffs(pool)));
    }
    intake->consumer = consumer.get();
    {
      std::vector<bus::Consumer*> taken;
      for (const auto& c : handoffs)
        if (c) taken.push_back(c.get());
      intake->set_handoffs(std::move(taken));
    }
    bus.in->flush();
    lead.hello();  // agents that started before us register again (and learn our epoch)
    spdlog::info("serving on {}", bus::redact_url(o.url));

    if (rc == 0) rc = lead.serve(signals, [&] { reload(w, o, bus.logs.get()); });
    local.serve({});
    intake->consumer = nullptr;
    intake->set_handoffs({});
    // (all told at once: a shard holds one per pool, and its leases are not
    // renewed while it stops)
    if (consumer) consumer->stop_soon();
    for (auto& c : handoffs)
      if (c) c->stop_soon();
    consumer.reset();
    handoffs.clear();
    views.reset();
    subs.clear();
    stop_scheduler(w);
    sys.await_all_actors_done();
    o.scheduler.history.reset();
    history.reset();  // (before the JetStream context: its thread reads with it)
    o.scheduler.dispatch.reset();
    dispatch.reset();  // (its threads ask on the connection)
    o.scheduler.agents.reset();
    agents.reset();
  }
  // The store's last owner is the restore (its writer needs the KV bucket).
  o.scheduler.store.reset();
  o.scheduler.extra_stats = nullptr;
  return rc;
}

}  // namespace troupe::shell

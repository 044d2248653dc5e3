#include "actors/scheduler.hpp"

#include <algorithm>

#include "actors/arbiter_front.hpp"
#include "actors/node_actor.hpp"
#include "actors/router.hpp"
#include "actors/schedule_keeper.hpp"
#include "actors/supervisors.hpp"

namespace troupe {

void configure(caf::actor_system_config& cfg, int threads) {
  cfg.add_message_types<caf::id_block::troupe>();
  // (1 to 64: TROUPE_THREADS is not checked by the command line parser)
  cfg.set("scheduler.max-threads", static_cast<size_t>(std::clamp(threads, 1, 64)));
  // Work sharing wakes an idle worker at once (a condition variable); work
  // stealing lets idle workers sleep up to 10 ms between polls, which put a
  // wake-up latency on every hop of the placement negotiation.
  cfg.set("scheduler.policy", caf::atom("sharing"));
  cfg.set("logger.verbosity", caf::atom("quiet"));
}

Wiring start_scheduler(caf::actor_system& sys, OutboxPtr out, IntakePtr intake,
                       SchedulerOptions opts) {
  Wiring w;
  auto baseline = opts.baseline;
  int64_t round_gap_us = opts.round_gap_us;
  auto store = opts.store;
  int64_t retention_ms = opts.job_retention_ms;
  auto logs = opts.logs;
  auto shards = opts.shards;
  auto agents = opts.agents;
  w.epoch = opts.epoch;
  if (retention_ms > 0) w.linger_ms = std::min<int64_t>(w.linger_ms, retention_ms);
  w.clock = opts.clock ? opts.clock : std::make_shared<SystemClock>();
  w.dispatch = opts.dispatch;
  opts.clock = w.clock;  // the router's intake readers take it at spawn
  w.router = spawn_router(sys, out, std::move(intake), std::move(opts));
  w.jobs = spawn_job_supervisor(sys, out, store, retention_ms, std::move(logs));
  w.queues = spawn_queue_supervisor(sys);
  NodeOptions node_opts;
  node_opts.hold_check_ms = opts.hold_check_ms;
  w.nodes = spawn_node_supervisor(sys, out, store, node_opts, std::move(shards), std::move(agents));
  w.gangs = spawn_gang_supervisor(sys);
  w.arbiter = spawn_arbiter_front(sys, out, baseline, round_gap_us);
  w.schedules = spawn_schedule_keeper(sys, out, store);
  caf::anon_send(w.router, w);
  caf::anon_send(w.jobs, w);
  caf::anon_send(w.queues, w);
  caf::anon_send(w.nodes, w);
  caf::anon_send(w.gangs, w);
  caf::anon_send(w.arbiter, w);
  caf::anon_send(w.schedules, w);
  return w;
}

void apply_config(const Wiring& w, const std::string& text) {
  using namespace troupe::atoms;
  caf::anon_send(w.router, config_atom_v, text);
  caf::anon_send(w.arbiter, config_atom_v, text);
  caf::anon_send(w.nodes, config_atom_v, text);  // the node roster
}

void stop_scheduler(const Wiring& w) {
  auto stop = [](const auto& a) { caf::anon_send_exit(a, caf::exit_reason::user_shutdown); };
  stop(w.router);
  stop(w.jobs);
  stop(w.queues);
  stop(w.nodes);
  stop(w.gangs);
  stop(w.arbiter);
  stop(w.schedules);
}

}  // namespace troupe

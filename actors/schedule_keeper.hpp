// ScheduleKeeper — every team's recurring schedules (troupe schedule ...;
// docs/api.md "Schedules"), one per scheduler, alive only where the
// scheduler leads (a standby runs none, so one process fires each tick).
// Owns: the ScheduleRecords (KV keys sched.<team>.<name>, through the
//   SnapshotStore), when each fires (policy/schedule.hpp: cron or @every in
//   its time zone, missed ticks run_once|skip, concurrency
//   forbid|replace|allow), and each tick's run: submitted through the router
//   as the team's job with the idempotency key run_id(team, name, tick), so a
//   tick fired again after a kill -9 or failover is the same job, never a
//   second one; the tick is recorded as fired only once the router answered.
// Interface: ScheduleKeeperActor (actors/protocol.hpp).
// Accepts: Wiring; (schedule_atom, team, request JSON, reply) from the
//   router: create|list|show|delete|suspend|resume, answered on `reply`;
//   (restore_atom, records) after a (re)start, before it fires anything;
//   (fired_atom, team, name, tick, job, error) from the router; (tick_atom),
//   its own, each second.
// Sends: (fire_atom, team, name, tick, spec) to the router; (state_atom, job)
//   requests and (cancel_atom, job, team, "", false) (concurrency replace) to the job
//   supervisor.
#pragma once

#include "actors/ports.hpp"
#include "actors/protocol.hpp"

namespace troupe {

ScheduleKeeperActor spawn_schedule_keeper(caf::actor_system& sys, OutboxPtr out,
                                          SnapshotStorePtr store);

// The KV key of a schedule's record.
inline std::string schedule_key(const std::string& team, const std::string& name) {
  return "sched." + team + "." + name;
}

}  // namespace troupe

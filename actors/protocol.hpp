// The scheduler's actor protocol, in one place: every atom, every message
// struct, and each actor kind as a CAF typed_actor — the messages it accepts
// and what it answers. Every send between the actors goes to one of these
// typed handles, so the compiler checks it: a message an actor does not
// accept does not build. The types that travel are registered with CAF at
// the end of this file (configure() in actors/scheduler.cpp adds them).
//
// Conventions:
//   - reacts_to<...>: a one-way message; replies_to<...>::with<...>: a
//     request and its answer.
//   - A supervisor routes by id: it accepts each message meant for one of its
//     children with the child's id in it, and passes it on typed (or answers
//     for a child that is gone). No message is forwarded type-erased.
//   - Timers and coalescing triggers an actor sends itself (tick, round,
//     lease, retry, restop, done) are part of its interface: CAF 0.17 has no
//     private messages.
//   - A new message goes at the end of its interface: inserting one in the
//     middle of TeamQueueActor's list once made every message that carries a
//     TeamQueueActor handle unmatched at its receiver (sec::unexpected_message,
//     with CAF 0.17.6 as Debian ships it), though it built.
//   - A NodeActor answers every Envelope (Accept|Reject for Reserve and
//     Commit, an empty Envelope otherwise): one-way Envelopes (an agent's
//     reports; Launch, Stop, Release) are sent with anon_send, so that no
//     answer goes back.
#pragma once

#include <caf/all.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/policy/placement.hpp"
#include "actors/ports.hpp"
#include "actors/views.hpp"
#include "bus/inbound.hpp"

// --- atoms ------------------------------------------------------------------

// Supervision and routing.
CAF_ADD_ATOM(troupe, troupe::atoms, route_atom, "route")
CAF_ADD_ATOM(troupe, troupe::atoms, snapshot_atom, "snapshot")
CAF_ADD_ATOM(troupe, troupe::atoms, crash_atom, "crash")
CAF_ADD_ATOM(troupe, troupe::atoms, spawn_atom, "spawn")
CAF_ADD_ATOM(troupe, troupe::atoms, list_atom, "list")
// Timers.
CAF_ADD_ATOM(troupe, troupe::atoms, tick_atom, "tick")
CAF_ADD_ATOM(troupe, troupe::atoms, lease_atom, "lease")
CAF_ADD_ATOM(troupe, troupe::atoms, retry_atom, "retry")
// Placement between queues, the pool arbiter, gangs and jobs.
CAF_ADD_ATOM(troupe, troupe::atoms, enqueue_atom, "enqueue")
CAF_ADD_ATOM(troupe, troupe::atoms, dequeue_atom, "dequeue")
CAF_ADD_ATOM(troupe, troupe::atoms, capacity_atom, "capacity")
CAF_ADD_ATOM(troupe, troupe::atoms, placed_atom, "placed")
CAF_ADD_ATOM(troupe, troupe::atoms, unplaced_atom, "unplaced")
CAF_ADD_ATOM(troupe, troupe::atoms, done_atom, "done")
CAF_ADD_ATOM(troupe, troupe::atoms, cancel_atom, "cancel")
CAF_ADD_ATOM(troupe, troupe::atoms, status_atom, "status")
CAF_ADD_ATOM(troupe, troupe::atoms, logs_atom, "logs")
CAF_ADD_ATOM(troupe, troupe::atoms, intake_atom, "intake")
CAF_ADD_ATOM(troupe, troupe::atoms, stats_atom, "stats")
CAF_ADD_ATOM(troupe, troupe::atoms, requeue_atom, "requeue")
// Admission (router): a node's shape on every register (node supervisor), a
// job that left `queued` for good (job supervisor).
CAF_ADD_ATOM(troupe, troupe::atoms, shape_atom, "shape")
CAF_ADD_ATOM(troupe, troupe::atoms, unqueued_atom, "unqueued")
// troupe.sys.find and troupe.<team>.history (router <-> job supervisor).
CAF_ADD_ATOM(troupe, troupe::atoms, find_atom, "find")
CAF_ADD_ATOM(troupe, troupe::atoms, history_atom, "history")
// Scheduling policy: queues <-> pool arbiter.
CAF_ADD_ATOM(troupe, troupe::atoms, demand_atom, "demand")
// (granted_atom, jobs): the arbiter granted these (a gang reservation places
// them): the queue leaves them out of its demand until placed or unplaced.
CAF_ADD_ATOM(troupe, troupe::atoms, granted_atom, "granted")
CAF_ADD_ATOM(troupe, troupe::atoms, round_atom, "round")
CAF_ADD_ATOM(troupe, troupe::atoms, why_atom, "why")
CAF_ADD_ATOM(troupe, troupe::atoms, queues_atom, "queues")
CAF_ADD_ATOM(troupe, troupe::atoms, config_atom, "config")
// Preemption, retries, node operations.
CAF_ADD_ATOM(troupe, troupe::atoms, preempt_atom, "preempt")
CAF_ADD_ATOM(troupe, troupe::atoms, checkpoint_atom, "checkpt")
CAF_ADD_ATOM(troupe, troupe::atoms, retried_atom, "retried")
CAF_ADD_ATOM(troupe, troupe::atoms, cordon_atom, "cordon")
CAF_ADD_ATOM(troupe, troupe::atoms, remove_atom, "remove")
CAF_ADD_ATOM(troupe, troupe::atoms, restore_atom, "restore")
// Holds that wait too long (node -> job) and a restarted job's resync (job -> node).
CAF_ADD_ATOM(troupe, troupe::atoms, hold_atom, "hold")
CAF_ADD_ATOM(troupe, troupe::atoms, sync_atom, "sync")
CAF_ADD_ATOM(troupe, troupe::atoms, restop_atom, "restop")
// An event is in the events stream (Outbox::publish_event -> job): a Launch waits for it.
CAF_ADD_ATOM(troupe, troupe::atoms, stored_atom, "stored")
// (distrust_atom, what): a message refused because its sender may not say it
// (an unlisted node, a capacity change with work held): counted by the router.
CAF_ADD_ATOM(troupe, troupe::atoms, distrust_atom, "distrust")
// (heard_atom, count): a shard's node supervisor heard an agent's message
// (not a register) of a node of another shard's pool: how many so far.
CAF_ADD_ATOM(troupe, troupe::atoms, heard_atom, "heard")
// (purged_atom, team/key, job): an ended job was forgotten after its
// retention (job supervisor -> router): its idempotency key goes too.
CAF_ADD_ATOM(troupe, troupe::atoms, purged_atom, "purged")
// (handoff_atom, job, record) -> taken: a job a standby recorded while no
// leader answered (router -> job supervisor); false when the job is known.
CAF_ADD_ATOM(troupe, troupe::atoms, handoff_atom, "handoff")
// (promote_atom, job): a job of an `order: las` team has waited long enough
// to go to band 0 (team queue -> itself; policy/las.hpp).
CAF_ADD_ATOM(troupe, troupe::atoms, promote_atom, "promote")
// (ended_atom, job): the job's end event is stored (job -> job supervisor):
// the jobs blocked on it are judged again (policy/dependencies.hpp).
CAF_ADD_ATOM(troupe, troupe::atoms, ended_atom, "ended")
// (deps_atom, team, jobs) -> error: whether each job a new submission's
// depends_on names is a job of its team the job supervisor knows (router ->
// job supervisor); "" when all are.
CAF_ADD_ATOM(troupe, troupe::atoms, deps_atom, "deps")
// (schedule_atom, team, request, reply): a troupe.<team>.schedule request
// (router -> schedule keeper).
CAF_ADD_ATOM(troupe, troupe::atoms, schedule_atom, "schedule")
// (fire_atom, team, name, tick, spec): a schedule's run, submitted as the
// team's job (schedule keeper -> router); (fired_atom, team, name, tick,
// job, error): its answer (router -> schedule keeper).
CAF_ADD_ATOM(troupe, troupe::atoms, fire_atom, "fire")
CAF_ADD_ATOM(troupe, troupe::atoms, fired_atom, "fired")
// (state_atom, job) -> state: a job's state, "" when not known (schedule
// keeper -> job supervisor).
CAF_ADD_ATOM(troupe, troupe::atoms, state_atom, "state")
// (dispatch_atom, claim, granted, withdrawn, reason): a front door's answer
// to a job's claim to start (actors/ports.hpp DispatchGate; gate -> job).
CAF_ADD_ATOM(troupe, troupe::atoms, dispatch_atom, "dispatch")
// (debit_atom, team, tokens): submissions of the team another shard admitted
// (troupe.sys.shard.rate; router -> intake reader).
CAF_ADD_ATOM(troupe, troupe::atoms, debit_atom, "debit")
// (room_atom, pool, free GPUs, largest free on a node, GPUs waiting, GPUs): a
// pool's room (policy::PoolRoom; pool arbiter -> router when it changed,
// router -> intake readers, a shard's own pools and the others' reports).
CAF_ADD_ATOM(troupe, troupe::atoms, room_atom, "room")
// (report_atom): a shard's router reports its queued jobs at once, a team
// with max_queued_jobs having queued more (router -> itself).
CAF_ADD_ATOM(troupe, troupe::atoms, report_atom, "report")

namespace troupe {

// --- message structs --------------------------------------------------------

// Inbound (bus/inbound.hpp): one message from the bus (or an actor).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Inbound& x) {
  return f(caf::meta::type_name("Inbound"), x.subject, x.reply, x.data, x.msg_id, x.stream_seq,
           x.no_responders);
}

// A FlatBuffers Envelope passed between actors inside the scheduler.
struct Envelope {
  std::vector<uint8_t> bytes;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Envelope& x) {
  return f(caf::meta::type_name("Envelope"), x.bytes);
}

// A pending job as its team queue sees it.
struct JobTicket {
  std::string job_id;
  std::string team;
  int32_t attempt = 1;
  int32_t priority = 50;
  uint64_t seq = 0;
  int64_t max_runtime_s = 0;
  bool preemptible = true;
  policy::PlacementRequest req;
  // `order: las` (policy/las.hpp; empty thresholds: fifo): GPU-seconds of its
  // ended attempts, the band thresholds, its band in line and when it is
  // promoted to band 0 (0: never).
  double attained_gpu_s = 0;
  std::vector<double> las_thresholds;
  int32_t band = 0;
  int64_t promote_at_ms = 0;
  bool las() const { return !las_thresholds.empty(); }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, JobTicket& x) {
  return f(caf::meta::type_name("JobTicket"), x.job_id, x.team, x.attempt, x.priority, x.seq,
           x.max_runtime_s, x.preemptible, x.req, x.attained_gpu_s, x.las_thresholds, x.band,
           x.promote_at_ms);
}

// Where each rank of one attempt was committed.
struct Assignment {
  std::string job_id;
  int32_t attempt = 1;
  std::vector<std::string> nodes;          // by rank
  std::vector<std::string> hosts;          // by rank
  std::vector<std::vector<int32_t>> gpus;  // by rank
  std::string pool;                        // whose arbiter granted it
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Assignment& x) {
  return f(caf::meta::type_name("Assignment"), x.job_id, x.attempt, x.nodes, x.hosts, x.gpus,
           x.pool);
}

struct Wiring;
struct CandidateList;
struct Grant;

// The atoms by their names here (the actors' .cpp files say `using namespace
// troupe::atoms` too).
using namespace atoms;
using caf::reacts_to;
using caf::replies_to;
using Strings = std::vector<std::string>;

// --- the actor kinds --------------------------------------------------------
// Each handle names what the actor accepts; the comment says who sends it.

// GangReservationActor (actors/gang_reservation_actor.hpp): it sends its
// requests and reports; it accepts only the debug crash. The answers to its
// requests (Accept|Reject Envelopes) come back as responses.
using GangActor = caf::typed_actor<reacts_to<crash_atom>, reacts_to<lease_atom>>;

// NodeActor (actors/node_actor.hpp), one per machine.
using NodeActor = caf::typed_actor<
    // Reserve, Commit (gang reservations, requests): Accept|Reject. Anything
    // else (anon_send, via the node supervisor or from a gang): NodeRegister,
    // Heartbeat, Started, Exited, Checkpointed from the agent; Launch, Stop,
    // Release from jobs and gangs; answered with an empty Envelope.
    replies_to<Envelope>::with<Envelope>,
    reacts_to<sync_atom, std::string /*job*/, int32_t /*attempt*/, int32_t /*rank*/>,
    reacts_to<cordon_atom, bool /*on*/, bool /*drain*/, std::string /*reason*/,
              std::string /*reply*/>,
    // The node supervisor: may it be removed (troupe.sys.remove_node)? Code ""
    // (it quits) and the checkpoint dirs of the Forgets it held, else a
    // refusal's code and text.
    replies_to<remove_atom>::with<std::string /*code*/, std::string /*text*/, Strings /*dirs*/>,
    reacts_to<lease_atom>,  // itself: a lease may have expired
    reacts_to<tick_atom>,   // itself: liveness, hold check, snapshot
    reacts_to<crash_atom>>;

// TeamQueueActor (actors/team_queue_actor.hpp), one per team.
using TeamQueueActor =
    caf::typed_actor<reacts_to<enqueue_atom, JobTicket>,  // job (via the queue supervisor)
                     reacts_to<dequeue_atom, std::string /*job*/>,  // job (via the queue
                                                                    // supervisor)
                     reacts_to<placed_atom, Assignment>,            // gang reservation
                     reacts_to<unplaced_atom, std::string /*job*/, std::string /*pool*/,
                               std::string /*reason*/>,  // gang reservation, arbiter
                     reacts_to<why_atom, std::string /*job*/, std::string /*reply*/>,  // arbiter
                     reacts_to<tick_atom>,  // itself: one demand per burst
                     reacts_to<granted_atom, std::string /*pool*/,
                               std::vector<std::string> /*jobs*/>,   // arbiter (before the grants)
                     reacts_to<promote_atom, std::string /*job*/>>;  // itself: las starvation guard

// JobActor (actors/job_actor.hpp), one per job.
using JobActor = caf::typed_actor<
    reacts_to<placed_atom, Assignment>,  // its queue (via the job supervisor)
    reacts_to<Envelope>,                 // Started|Exited|Checkpointed from its nodes
    reacts_to<cancel_atom, std::string /*reply*/, bool /*if_queued*/>,
    reacts_to<preempt_atom, std::string /*why*/>,  // arbiter
    reacts_to<requeue_atom>,                       // job supervisor (a queue restarted)
    reacts_to<hold_atom, std::string /*node*/, std::string /*hold*/, int32_t /*attempt*/,
              int32_t /*rank*/, bool /*launched*/>,                // a node's hold check
    reacts_to<stored_atom, int32_t /*attempt*/, int64_t /*seq*/>,  // the events stream
    reacts_to<retry_atom>,                                         // itself: back-off over
    reacts_to<restop_atom, int32_t>,  // itself: send an unanswered stop again
    reacts_to<done_atom>,             // itself: linger over
    reacts_to<crash_atom>,
    reacts_to<dispatch_atom, int64_t /*claim*/, bool /*granted*/, bool /*withdrawn*/,
              std::string /*reason*/>>;  // its front door's verdict (DispatchGate)

// What every supervisor accepts (the skeleton of actors/supervisors.cpp): the
// Wiring, and (stats_atom) -> how many children it restarted.
using SupervisorActor = caf::typed_actor<reacts_to<Wiring>, replies_to<stats_atom>::with<int64_t>>;

// Job supervisor: JobActors by job id; answers for ended jobs from their snapshots.
using JobSupervisorActor = SupervisorActor::extend<
    reacts_to<spawn_atom, std::string /*id*/, std::string /*record*/>,  // router
    reacts_to<snapshot_atom, std::string, std::string>,                 // its jobs
    reacts_to<restore_atom, Strings /*records*/>,                       // restore
    // Routed to job <id> (a late placement or hold check of a job that is
    // gone is handed back):
    reacts_to<placed_atom, Assignment>,                    // team queue
    reacts_to<route_atom, std::string /*job*/, Envelope>,  // node: Started|Exited|Checkpointed
    reacts_to<hold_atom, std::string /*job*/, std::string /*node*/, std::string /*hold*/,
              int32_t /*attempt*/, int32_t /*rank*/, bool /*launched*/>,  // node
    reacts_to<preempt_atom, std::string /*job*/, std::string /*why*/>,    // arbiter
    // The verbs (router): id, team, reply.
    reacts_to<status_atom, std::string, std::string, std::string>,
    reacts_to<cancel_atom, std::string, std::string, std::string, bool /*if_queued*/>,
    reacts_to<why_atom, std::string, std::string, std::string>,
    reacts_to<history_atom, std::string, std::string, std::string>,
    reacts_to<logs_atom, std::string /*id*/, std::string /*team*/, int32_t /*rank*/,
              int64_t /*offset*/, int64_t /*max*/, std::string /*reply*/>,
    reacts_to<list_atom, std::string /*team*/, int64_t /*limit*/, std::string /*after*/,
              std::string /*state*/, std::string /*label k=v*/, std::string /*reply*/>,
    // The same, only the jobs whose id names `pool` (policy::pool_of_job_id
    // over `pools`, the config's; "": of no pool): a shard's part of a list.
    reacts_to<list_atom, std::string /*team*/, int64_t /*limit*/, std::string /*after*/,
              std::string /*state*/, std::string /*label k=v*/, std::string /*pool*/,
              Strings /*pools*/, std::string /*reply*/>,
    reacts_to<find_atom, std::string /*id*/, std::string /*reply*/>,
    reacts_to<requeue_atom, std::string /*team*/>,  // queue supervisor
    reacts_to<crash_atom, std::string /*id*/>,
    reacts_to<tick_atom>,  // itself: forget jobs ended longer ago than the retention
    reacts_to<ended_atom, std::string /*job*/>,  // its jobs: the end event is stored
    reacts_to<done_atom, std::string /*job*/>,   // its jobs: ended (it sends done_atom
                                                 // back once Wiring::linger_ms passed)
    replies_to<deps_atom, std::string /*team*/, Strings /*jobs*/>::with<std::string>,  // router
    replies_to<state_atom, std::string /*job*/>::with<std::string>,  // schedule keeper
    replies_to<handoff_atom, std::string /*id*/, std::string /*record*/>::with<bool>>;  // router

// Queue supervisor: TeamQueueActors by team, created on first use.
using QueueSupervisorActor = SupervisorActor::extend<
    reacts_to<enqueue_atom, JobTicket>,  // job: to the queue of ticket.team
    reacts_to<dequeue_atom, std::string /*team*/, std::string /*job*/>,  // job
    reacts_to<crash_atom, std::string /*team*/>>;

// Node supervisor: NodeActors by node name, created when an agent speaks.
using NodeSupervisorActor = SupervisorActor::extend<
    // To node <name>: an agent's message (router), or Launch|Stop|Release (jobs).
    reacts_to<route_atom, std::string /*node*/, Envelope>,
    reacts_to<sync_atom, std::string /*node*/, std::string /*job*/, int32_t, int32_t>,  // job
    reacts_to<snapshot_atom, std::string, std::string>,                                 // its nodes
    reacts_to<config_atom, std::string /*text*/>,  // its roster
    reacts_to<cordon_atom, std::string /*node*/, bool /*on*/, bool /*drain*/,
              std::string /*reason*/, std::string /*reply*/>,
    reacts_to<remove_atom, std::string /*node*/, std::string /*reply*/>,  // router
    reacts_to<restore_atom, Strings /*records*/>,                         // restore
    reacts_to<crash_atom, std::string /*node*/>>;

// Gang supervisor: GangReservationActors by job id/attempt.
using GangSupervisorActor =
    SupervisorActor::extend<reacts_to<spawn_atom, std::vector<Grant>>,  // a pool arbiter: one
                                                                        // round's grants
                            reacts_to<tick_atom>>;  // itself: the gangs past their deadline

// ArbiterActor: the pool arbiters' interface. The scheduler's one arbiter
// front (actors/arbiter_front.hpp) accepts it from the other actors and hands
// each message to the arbiter of its pool (actors/pool_arbiter.hpp), one per
// pool, which accepts the same interface: pools plan in parallel.
using ArbiterActor = caf::typed_actor<
    reacts_to<Wiring>,                                          // start_scheduler
    reacts_to<capacity_atom, policy::NodeCapacity, NodeActor>,  // node actors
    reacts_to<remove_atom, std::string /*node*/>,               // node supervisor: a node removed
    // A queue's first jobs for one pool as changes (policy/demand.hpp): the
    // tickets added, the ids removed, and whether the list starts afresh.
    reacts_to<demand_atom, std::string /*team*/, std::string /*pool*/,
              std::vector<JobTicket> /*added*/, Strings /*removed*/, bool /*full*/,
              int32_t /*pending jobs*/, int32_t /*pending GPUs*/, int32_t /*of them any-type*/,
              TeamQueueActor>,                                            // queues
    reacts_to<placed_atom, std::string /*team*/, Assignment>,             // queues
    reacts_to<unplaced_atom, std::string /*team*/, std::string /*pool*/,  // queues ("": any)
              std::string /*job*/>,
    reacts_to<done_atom, std::string /*job*/, std::string /*pool*/>,                        // jobs
    reacts_to<checkpoint_atom, std::string /*job*/, std::string /*pool*/, int64_t /*ts*/>,  // jobs
    reacts_to<retried_atom, std::string /*cause*/, std::string /*kind*/>,                   // jobs
    reacts_to<config_atom, std::string /*text*/>,
    reacts_to<why_atom, std::string /*job*/, std::string /*team*/, std::string /*pool*/,
              std::string /*reply*/>,               // job supervisor
    reacts_to<queues_atom, std::string /*reply*/>,  // router
    reacts_to<list_atom, std::string /*reply*/>,    // router
    reacts_to<round_atom>,                          // itself: plan now
    reacts_to<tick_atom>,                           // itself: expire grants, plan
    replies_to<queues_atom>::with<views::Queues>,   // the front: a pool's rows
    // The front, for an any-type job: this pool's reason (code "" when it has
    // none), with the pool named.
    replies_to<why_atom, std::string /*job*/, std::string /*team*/,
               std::string /*pool*/>::with<std::string /*code*/, std::string /*text*/>>;

// What a bus subscription delivers to (actors/bridge.hpp): the router, seen
// from the bus.
using InboundActor = caf::typed_actor<reacts_to<Inbound>>;

namespace submission {
struct Checked;  // actors/submission.hpp
}

// A submission an intake reader (actors/intake_reader.hpp) read and checked,
// for the router: the bus message and what reading it found. Process-local:
// `checked` is not in inspect() (it is never serialized).
struct ReadSubmission {
  Inbound in;
  std::shared_ptr<submission::Checked> checked;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ReadSubmission& x) {
  return f(caf::meta::type_name("ReadSubmission"), x.in);
}

// Router (actors/router.hpp), the scheduler's edge: one per scheduler.
using RouterActor = caf::typed_actor<
    reacts_to<Wiring>,
    reacts_to<Inbound>,  // every bus subscription (actors/bridge.hpp)
    reacts_to<config_atom, std::string /*text*/>,
    reacts_to<restore_atom, Strings /*keys*/, uint64_t /*next seq*/, Strings /*fingerprints*/,
              Strings /*queued teams*/>,
    reacts_to<intake_atom, std::string /*job*/, bool /*ok*/, bool /*duplicate*/,
              std::string /*error*/, std::string /*original*/>,         // itself
    reacts_to<shape_atom, policy::NodeCapacity>,                        // node supervisor
    reacts_to<remove_atom, std::string /*node*/>,                       // node supervisor
    reacts_to<unqueued_atom, std::string /*team*/>,                     // job supervisor
    reacts_to<stats_atom, std::string /*kind*/, int64_t /*restarts*/>,  // supervisors
    reacts_to<distrust_atom, std::string /*what*/>,                     // node supervisor, nodes
    reacts_to<heard_atom, int64_t /*other pools' agent messages*/>,     // node supervisor
    reacts_to<tick_atom>,    // itself, a shard: its queued jobs reported to the others
    reacts_to<report_atom>,  // itself, a shard: the same soon after a limited team queued more
    reacts_to<room_atom, std::string /*pool*/, int32_t /*free*/, int32_t /*largest free*/,
              int32_t /*waiting*/, int32_t /*total*/>,  // pool arbiters: their pool's room (a shard
                                                        // reports it)
    reacts_to<why_atom, std::string /*reply*/, std::string /*body*/>,  // team queues
    reacts_to<history_atom, std::string /*id*/, std::string /*team*/,
              std::string /*reply*/>,  // job supervisor
    // A job the job supervisor no longer holds (purged after its retention):
    // its status is rebuilt from its stored events.
    reacts_to<status_atom, std::string /*id*/, std::string /*team*/, std::string /*reply*/>,
    reacts_to<purged_atom, std::string /*team/key*/, std::string /*job*/>,  // job supervisor
    // The history of a job the job supervisor no longer holds: no stored
    // events means no job (of this team).
    reacts_to<history_atom, std::string /*id*/, std::string /*team*/, std::string /*reply*/,
              bool /*must exist*/>,
    // A schedule's run to submit as the team's job (schedule keeper).
    reacts_to<fire_atom, std::string /*team*/, std::string /*name*/, int64_t /*tick*/,
              std::string /*spec JSON*/>,
    reacts_to<ReadSubmission>>;  // an intake reader: a submission read and checked

// ScheduleKeeper (actors/schedule_keeper.hpp): every team's schedules, one
// per scheduler; fires each due tick as a job through the router.
using ScheduleKeeperActor = caf::typed_actor<
    reacts_to<Wiring>,
    reacts_to<schedule_atom, std::string /*team*/, std::string /*request*/,
              std::string /*reply*/>,                      // router
    reacts_to<restore_atom, Strings /*ScheduleRecords*/>,  // restore
    reacts_to<fired_atom, std::string /*team*/, std::string /*name*/, int64_t /*tick*/,
              std::string /*job*/, std::string /*error*/>,  // router
    reacts_to<tick_atom>>;                                  // itself: each second

// IntakeReader (actors/intake_reader.hpp): reads the submissions of the
// teams hashed to it, off the router.
using IntakeReaderActor =
    caf::typed_actor<reacts_to<Inbound>,  // a troupe.<team>.submit|enqueue, from the router
                     reacts_to<config_atom, std::string /*text*/>,                    // the router
                     reacts_to<debit_atom, std::string /*team*/, double /*tokens*/>,  // router
                     // a pool's room, here or in another shard (router)
                     reacts_to<room_atom, std::string /*pool*/, int32_t /*free*/,
                               int32_t /*largest free*/, int32_t /*waiting*/, int32_t /*total*/>,
                     reacts_to<tick_atom>>;  // itself (a shard: reports what it took)

// The pool arbiter's answer to a candidate search: the granted node per rank.
struct CandidateList {
  std::vector<std::string> names;
  std::vector<std::string> hosts;
  std::vector<NodeActor> actors;
  std::string reason;  // set when empty
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, CandidateList& x) {
  return f(caf::meta::type_name("CandidateList"), x.names, x.hosts, x.actors, x.reason);
}

// One grant of a round: the job, its nodes by rank, and the queue that hears
// whether it was placed.
struct Grant {
  JobTicket ticket;
  CandidateList nodes;
  TeamQueueActor queue;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Grant& x) {
  return f(caf::meta::type_name("Grant"), x.ticket, x.nodes, x.queue);
}

// The well-known actors of one scheduler, handed to each at spawn.
struct Wiring {
  RouterActor router;
  JobSupervisorActor jobs;      // job supervisor (routes by job id)
  QueueSupervisorActor queues;  // team queue supervisor (routes by team)
  NodeSupervisorActor nodes;    // node supervisor (routes by node name)
  GangSupervisorActor gangs;    // gang reservation supervisor
  ArbiterActor arbiter;
  ScheduleKeeperActor schedules;  // every team's recurring schedules
  uint64_t epoch = 0;             // leader lease revision: stamped on Launch and Stop (fencing)
  // How long an ended job's actor lingers to answer late messages (its
  // supervisor answers for it after): 30 s, or the job retention when shorter.
  int64_t linger_ms = 30000;
  // The actors' time (actors/ports.hpp). Process-local: not in inspect(),
  // never serialized; null (before the Wiring arrives): the system clock.
  ClockPtr clock;
  // The front doors' leave to start their jobs (actors/ports.hpp), process-
  // local like the clock; null: every claim is granted.
  DispatchGatePtr dispatch;
  int64_t now_ms() const { return clock ? clock->now_ms() : system_now_ms(); }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Wiring& x) {
  return f(caf::meta::type_name("Wiring"), x.router, x.jobs, x.queues, x.nodes, x.gangs, x.arbiter,
           x.schedules, x.epoch, x.linger_ms);
}

namespace views {
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Hold& x) {
  return f(caf::meta::type_name("views::Hold"), x.job_id, x.nodes, x.start_ms, x.idle_gpus);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PoolRow& x) {
  return f(caf::meta::type_name("views::PoolRow"), x.pool, x.gpus_total, x.gpus_free, x.has_hold,
           x.hold);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Shape& x) {
  return f(caf::meta::type_name("views::Shape"), x.gpus, x.gpu_type, x.pool);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TeamRow& x) {
  return f(caf::meta::type_name("views::TeamRow"), x.team, x.pool, x.pending_shapes, x.weight,
           x.borrow, x.guaranteed, x.limit, x.in_use, x.borrowed, x.pending_jobs, x.pending_gpus,
           x.pending_flexible, x.dominant_share, x.weighted_share, x.restore_buckets,
           x.restore_sum_s, x.restore_count);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Queues& x) {
  return f(caf::meta::type_name("views::Queues"), x.policy, x.pools, x.teams,
           x.reserved_idle_gpu_seconds, x.grants, x.preemptions, x.gpu_seconds_lost, x.retries,
           x.reclaims);
}
}  // namespace views

namespace policy {
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PlacementRequest& x) {
  return f(caf::meta::type_name("PlacementRequest"), x.pool, x.gpus, x.gpu_type, x.cpus,
           x.memory_mb, x.workers, x.image, x.pools, x.gpu_memory_mb, x.share_key);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SharedGpu& x) {
  return f(caf::meta::type_name("SharedGpu"), x.index, x.used_mb, x.key);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, NodeCapacity& x) {
  return f(caf::meta::type_name("NodeCapacity"), x.name, x.host, x.gpu_type, x.pool, x.rack,
           x.runtime, x.schedulable, x.gpus_total, x.gpus_free, x.gpus_reserved, x.gpus_allocated,
           x.cpus_total, x.cpus_free, x.memory_total_mb, x.memory_free_mb, x.alive,
           x.last_heartbeat_ms, x.running, x.holds, x.gpu_memory_mb, x.shared, x.draining,
           x.reason);
}
}  // namespace policy

}  // namespace troupe

// --- registration -----------------------------------------------------------

CAF_BEGIN_TYPE_ID_BLOCK(troupe, caf::first_custom_type_id)

CAF_ADD_TYPE_ID(troupe, (troupe::Inbound))
CAF_ADD_TYPE_ID(troupe, (troupe::Envelope))
CAF_ADD_TYPE_ID(troupe, (std::vector<uint8_t>))
CAF_ADD_TYPE_ID(troupe, (std::vector<std::string>))
CAF_ADD_TYPE_ID(troupe, (troupe::JobTicket))
CAF_ADD_TYPE_ID(troupe, (std::vector<troupe::JobTicket>))
CAF_ADD_TYPE_ID(troupe, (troupe::Assignment))
CAF_ADD_TYPE_ID(troupe, (troupe::CandidateList))
CAF_ADD_TYPE_ID(troupe, (troupe::Wiring))
CAF_ADD_TYPE_ID(troupe, (troupe::policy::PlacementRequest))
CAF_ADD_TYPE_ID(troupe, (troupe::policy::NodeCapacity))
CAF_ADD_TYPE_ID(troupe, (troupe::NodeActor))
CAF_ADD_TYPE_ID(troupe, (troupe::TeamQueueActor))
CAF_ADD_TYPE_ID(troupe, (troupe::views::Queues))
CAF_ADD_TYPE_ID(troupe, (std::vector<troupe::Grant>))
CAF_ADD_TYPE_ID(troupe, (troupe::ReadSubmission))

CAF_END_TYPE_ID_BLOCK(troupe)

// The process shell of troupe-scheduler: a standby's front door for
// submissions, so that a service is never refused through a failover
// (docs/recovery.md, "Submissions through a failover").
//
// It hears every troupe.<team>.submit the leader hears. Every few
// milliseconds, when it has heard some, it asks troupe.sys.leader.alive: when
// a leader answers, what it heard before asking was the leader's; it keeps it
// until the next question (50 ms at most) and drops it when the same leader
// (its epoch) answers that too, else records it as below (that leader may
// have died before it replied). When none answers (the leader killed, the lease not taken yet, the new
// leader still restoring), it records each submission itself: read and
// checked against the cluster config as the router would
// (actors/submission.hpp), appended to the intake stream under
// troupe.sys.intake.<team>.handoff, and answered with its job id once stored.
// The leader's handoff consumer makes those records jobs. The stream's
// message id (the idempotency key, else the request's reply subject and a
// digest of its body: actors/submission.hpp) keeps a submission that a leader
// and a standby, or two standbys, recorded one job.
//
// Not checked here, as it needs the leader's state: the team's rate,
// max_queued_jobs, idempotency keys older than the stream's duplicate window,
// and whether a registered node could ever hold the job. No actor here.
#pragma once

#include <memory>

#include "actors/shell/bootstrap.hpp"

namespace troupe::shell {

class StandbyFront {
 public:
  // Starts hearing at once (subscribes on bus.in).
  StandbyFront(Bus& bus, const Options& o);
  // Stops hearing; what it heard and has not handled yet is recorded (after
  // handover), or asked about.
  ~StandbyFront();
  StandbyFront(const StandbyFront&) = delete;
  StandbyFront& operator=(const StandbyFront&) = delete;

  // This process leads and its router hears the submit subjects (subscribed):
  // a marker goes out on troupe.sys.submit on the router's connection; what
  // the front heard before it is recorded (the router may not have heard it),
  // what comes after is left to the router. Returns once the marker came back
  // (2 s at most).
  void handover();

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace troupe::shell

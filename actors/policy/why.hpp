// Reason codes: why a job is not running, as `troupe why`, the queue views
// and the counters name them (docs/scheduling.md). Defined here only; every
// actor and policy function that gives a reason uses these.
#pragma once

namespace troupe::policy::why {

// A pending job the round did not grant (policy/round.cpp).
inline constexpr const char* kOverLimit = "over_hard_limit";
inline constexpr const char* kNoBorrow = "no_borrowing";
inline constexpr const char* kFairShare = "waiting_for_fair_share";
inline constexpr const char* kNoNodeOfType = "no_node_of_type";
inline constexpr const char* kNoRuntime = "no_runtime";  // an image, and no node runs images
inline constexpr const char* kFitsNowhere = "fits_nowhere";
inline constexpr const char* kReservation = "waiting_for_reservation";
inline constexpr const char* kHeldForOther = "held_for_another_job";
inline constexpr const char* kBehind = "behind_other_jobs";
// An any-type job fits now in a pool it prefers: it is placed there, not here.
inline constexpr const char* kPreferred = "fits_in_preferred_pool";
// Granted, its reservation on its node(s) under way (the pool arbiter).
inline constexpr const char* kNegotiating = "placing";
// Lower-priority or borrowed work is being stopped to make room for it.
inline constexpr const char* kPreempting = "preempting";
// Its team is below its guarantee: GPUs other teams borrowed are being taken
// back for it (the text: how many, from which teams, by when).
inline constexpr const char* kReclaiming = "reclaiming";
// Submitted, and no round has looked at it yet.
inline constexpr const char* kNotYetConsidered = "not_yet_considered";
// Queued, but not in its team queue's line at that moment: a grant is being
// carried out, or it has just ended (the team queue).
inline constexpr const char* kNotInQueue = "not_in_queue";
// Blocked: waiting for the jobs of its depends_on to end (the text names
// each with its state; policy/dependencies.hpp).
inline constexpr const char* kBlocked = "waiting_for_dependencies";
// An array or sweep: its tasks wait for a free slot of its parallelism, or
// for their own placement (the text counts them; `troupe why TASK` asks one).
inline constexpr const char* kArrayTasks = "array_tasks";
// Not pending at all: running, starting, or ended (the job supervisor).
inline constexpr const char* kNotPending = "not_pending";

}  // namespace troupe::policy::why

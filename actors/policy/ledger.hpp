// A node's ledger: which GPU (by index), CPUs and memory are free, reserved
// under a lease, or allocated to a worker. Pure code over plain values: the
// NodeActor owns one and is the only place a GPU is handed out. Mirrors
// nomad's evaluateNodePlan: re-check at the owner, return fit or a reason.
// Unit tests: tests/unit/policy_ledger_test.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "actors/policy/placement.hpp"

namespace troupe::policy {

struct Hold {
  std::string job_id;
  int attempt = 0;
  int rank = 0;
  std::vector<int> gpus;
  int cpus = 0;
  int64_t memory_mb = 0;
  int64_t expires_ms = 0;  // lease end while reserved
  bool committed = false;  // allocated: the lease no longer applies
  bool launched = false;   // the agent was told to start it
  bool started = false;    // the agent reported the worker started
  bool exited = false;     // the agent reported its end; freed on release
  // How the worker ended (kept until the hold is released, to tell its job again).
  int exit_code = 0;
  int signal = 0;
  std::string exit_reason;
  int64_t changed_ms = 0;  // last commit / launch / exit: how long it has waited
  int64_t checked_ms = 0;  // last time its job was asked about it
  // A shared worker: this much of its one GPU's memory (0: whole GPUs), on a
  // GPU only holds of the same share key use (a team, or "*").
  int64_t gpu_memory_mb = 0;
  std::string share_key;
};

// Reservation / hold id: one per worker of one attempt.
std::string hold_id(const std::string& job_id, int attempt, int rank);
// Splits a hold id; false when it is not <job>/<attempt>/<rank>.
bool parse_hold_id(const std::string& id, std::string* job_id, int* attempt, int* rank);

// GPU indices are below this (a node record or event naming another is not
// to be believed).
inline constexpr int kMaxGpuIndex = 4096;

struct Ledger {
  int gpus_total = 0;
  int cpus_total = 0;
  int64_t memory_total_mb = 0;
  std::vector<std::string> gpu_owner;  // by GPU index: "" free, else hold id
  std::map<std::string, Hold> holds;   // by hold id
  // Shared GPUs: each GPU's memory (from the agent; 0: unknown, no sharing),
  // and by GPU index the memory shared holds take and their share key. A GPU
  // is free (no owner, nothing shared), a whole hold's, or shared.
  int64_t gpu_memory_mb = 0;
  std::vector<int64_t> shared_mb;
  std::vector<std::string> shared_key;

  void resize(int gpus, int cpus, int64_t memory_mb);
  int gpus_free() const;
  int gpus_reserved() const;
  int gpus_allocated() const;
  int cpus_free() const;
  int64_t memory_free_mb() const;
  // GPUs shared holds use part of, as the arbiter sees them.
  std::vector<SharedGpu> shared_gpus() const;
};

// Records hold `h` under `id` and marks its GPUs (whole: owned; shared: its
// memory on its GPU). For reserve and for a ledger rebuilt from a snapshot.
void claim(Ledger& l, const std::string& id, Hold h);

struct Verdict {
  bool ok = false;
  std::string reason;     // why not, when !ok
  std::vector<int> gpus;  // the indices held, when ok
};

// Reserves for one worker under a lease. A shared worker (want.gpu_memory_mb
// > 0, one GPU) joins the shared GPU of its key that its memory fills best,
// else takes a free GPU; a whole-GPU worker takes only free GPUs. A reserve for an id that is
// already reserved (not committed) replaces it; one already committed is refused.
Verdict reserve(Ledger& l, const std::string& id, const Hold& want, int64_t now_ms,
                int64_t lease_ms);
// Turns a live reservation into an allocation. Fails when it expired or is unknown.
Verdict commit(Ledger& l, const std::string& id, int64_t now_ms);
// Frees a hold (reserved or allocated). Idempotent; returns whether it existed.
bool release(Ledger& l, const std::string& id);
// Frees reservations whose lease ended; returns their ids.
std::vector<std::string> expire(Ledger& l, int64_t now_ms);
// Empty when the ledger is consistent, else what is broken.
std::string check_invariants(const Ledger& l);

// --- holds that wait too long -------------------------------------------------
// A hold committed but never launched, or exited but never released, for
// longer than kHoldCheckMs means a message was lost when an actor crashed (a
// Launch, a Release, a placement, an Exited: an actor's mailbox dies with
// it). The node asks the hold's job, which answers from its own record.
constexpr int64_t kHoldCheckMs = 10000;

// Whether the node should ask about `h` now (and then again every `check_ms`).
bool hold_needs_check(const Hold& h, int64_t now_ms, int64_t check_ms = kHoldCheckMs);

// What the job knows about one of its ranks.
struct JobSide {
  std::string state;         // the job's state (messages/names.hpp)
  int attempt = 0;           // its current attempt
  std::string node_of_rank;  // where its current attempt placed that rank ("" if nowhere)
  bool rank_started = false;
};
// What the node asks about.
struct HoldSide {
  std::string node;
  int attempt = 0;
  bool launched = false;
};
enum class HoldAnswer {
  keep,      // in use by the current attempt (an exited rank waits for the others)
  release,   // no longer the job's: an orphan of a placement that never reached
             // the job, or of an attempt that ended
  relaunch,  // the current attempt's, never launched: its Launch was lost
};
HoldAnswer judge_hold(const JobSide& job, const HoldSide& hold);

}  // namespace troupe::policy

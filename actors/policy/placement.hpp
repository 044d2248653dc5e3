// What placement works on: a node's capacity, a job's request, and whether a
// node may run it at all (eligible), now (fits) or ever (could_fit). Pure;
// the choice of nodes is policy/fit.hpp, the round policy/round.hpp. Unit
// tests: tests/unit/policy_placement_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::policy {

// A GPU that shared jobs hold part of: its index (-1: taken in a round's
// overlay, the node picks the index), the memory they hold, and whose jobs
// may join (share_key: a team, or "*" where the pool shares across teams).
struct SharedGpu {
  int index = -1;
  int64_t used_mb = 0;
  std::string key;
  bool operator==(const SharedGpu& o) const {
    return index == o.index && used_mb == o.used_mb && key == o.key;
  }
};

// What the pool arbiter knows of one node (its node actor reports it).
struct NodeCapacity {
  std::string name;
  std::string host;
  std::string gpu_type;
  std::string pool;         // the pool it belongs to ("" = none: nothing is placed there)
  std::string rack;         // topology label
  std::string runtime;      // its agent's container runtime (--runtime podman); "": runs no image
  bool schedulable = true;  // false: cordoned / draining
  bool draining = false;    // of those, draining (its running work goes on, then it is drained)
  std::string reason;       // why it was cordoned or drained (troupe drain --reason)
  int gpus_total = 0;
  int gpus_free = 0;
  int gpus_reserved = 0;
  int gpus_allocated = 0;
  int cpus_total = 0;
  int cpus_free = 0;
  int64_t memory_total_mb = 0;
  int64_t memory_free_mb = 0;
  bool alive = true;
  // Removed by an operator (troupe.sys.remove_node): kept by an arbiter as
  // a place with nothing free, never listed; its agent registering again
  // makes it a node as any other.
  bool removed = false;
  int64_t last_heartbeat_ms = 0;
  int running = 0;
  // Shared GPUs (issue 16, item 3): each GPU's memory as its agent declared
  // it (0: unknown, the node takes no shared job), and the GPUs that shared
  // jobs hold part of (never counted in gpus_free; a whole-GPU job never
  // lands on one).
  int64_t gpu_memory_mb = 0;
  std::vector<SharedGpu> shared;
  // In a node actor's report: its ledger's hold ids (reserved or allocated),
  // so the arbiter knows which of its grants the report counts already
  // (policy::GrantOverlay). Empty elsewhere.
  std::vector<std::string> holds;
};

// One worker's needs, and how many workers (a gang when > 1).
struct PlacementRequest {
  std::string pool;  // empty: any pool
  int gpus = 0;
  std::string gpu_type;  // empty: any type
  int cpus = 0;
  int64_t memory_mb = 0;
  int workers = 1;
  std::string image;  // the spec's image: only a node with a container runtime runs it
  // An any-type job's candidate pools in the order tried (`pool` is the one
  // this request is planned in); empty: only `pool`.
  std::vector<std::string> pools;
  // A shared job (resources.gpu_memory_mb): part of one GPU (gpus 1, one
  // worker); it may join a GPU whose share key is `share_key`.
  int64_t gpu_memory_mb = 0;
  std::string share_key;
  bool needs_runtime() const { return !image.empty(); }
  bool shared() const { return gpu_memory_mb > 0; }
  bool flexible() const { return pools.size() > 1; }
};

// Whether `n` is of a kind that may run `req` at all, whatever its load: its
// GPU type (when the job names one and uses GPUs), and a container runtime
// when the job names an image (never run on the host instead). Every fit
// below, and everything built on them, goes through this one check.
bool eligible(const NodeCapacity& n, const PlacementRequest& req);
// Whether one worker of `req` fits on `n` now (alive, eligible, free GPUs/CPUs/memory).
bool fits(const NodeCapacity& n, const PlacementRequest& req);
// Whether one worker of `req` could ever fit on `n` (eligible, and totals).
bool could_fit(const NodeCapacity& n, const PlacementRequest& req);
// --- shared GPUs ---------------------------------------------------------------
// What a shared worker of `mem_mb` costs in quota and fair share on a GPU of
// `gpu_mb`: mem/gpu of a GPU, in thousandths, rounded up (1000 when unknown).
int64_t shared_milli(int64_t mem_mb, int64_t gpu_mb);
// The shared GPU of `n` that `req` joins: the one its memory fills best
// (least left over: fractions are packed, whole GPUs stay whole); -1 when
// none has room (it then needs a whole free GPU). Only for req.shared().
int join_shared(const NodeCapacity& n, const PlacementRequest& req);
// Memory of `n`'s shared GPUs that no one holds (stranded: a whole-GPU job
// cannot use it), and held by shared jobs.
int64_t stranded_mb(const NodeCapacity& n);
int64_t shared_used_mb(const NodeCapacity& n);

// Whether two reports of a node say the same, but for the heartbeat time.
bool same_report(const NodeCapacity& a, const NodeCapacity& b);

}  // namespace troupe::policy

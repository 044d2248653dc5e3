// What placement works on: a node's capacity, a job's request, and whether a
// node may run it at all (eligible), now (fits) or ever (could_fit). Pure;
// the choice of nodes is policy/fit.hpp, the round policy/round.hpp. Unit
// tests: tests/unit/policy_placement_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::policy {

// What the pool arbiter knows of one node (its node actor reports it).
struct NodeCapacity {
  std::string name;
  std::string host;
  std::string gpu_type;
  std::string pool;         // the pool it belongs to ("" = none: nothing is placed there)
  std::string rack;         // topology label
  std::string runtime;      // its agent's container runtime (--runtime podman); "": runs no image
  bool schedulable = true;  // false: cordoned / draining
  int gpus_total = 0;
  int gpus_free = 0;
  int gpus_reserved = 0;
  int gpus_allocated = 0;
  int cpus_total = 0;
  int cpus_free = 0;
  int64_t memory_total_mb = 0;
  int64_t memory_free_mb = 0;
  bool alive = true;
  int64_t last_heartbeat_ms = 0;
  int running = 0;
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
  bool needs_runtime() const { return !image.empty(); }
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
// Whether two reports of a node say the same, but for the heartbeat time.
bool same_report(const NodeCapacity& a, const NodeCapacity& b);

}  // namespace troupe::policy

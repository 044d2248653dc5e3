// Candidate choice for placement: pure functions over a capacity snapshot.
// First fit (the fair-share / packing policy is a later issue). No CAF, NATS
// or clocks here; unit tests: tests/unit/policy_placement_test.cpp.
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
  bool needs_runtime() const { return !image.empty(); }
};

// Named reasons (counted and shown to users).
inline constexpr const char* kNoNodes = "no node has registered";
inline constexpr const char* kNoNodeOfType = "no node of the requested GPU type";
inline constexpr const char* kNoRuntime = "no node of its kind runs images (no container runtime)";
inline constexpr const char* kNoFreeCapacity = "no node has enough free capacity now";
inline constexpr const char* kGangDoesNotFit = "the gang does not fit on the free capacity now";

struct Candidates {
  // Single worker: nodes that fit, best first. Gang: one node per rank
  // (ranks may share a node); empty when the whole gang does not fit.
  std::vector<size_t> nodes;
  const char* reason = nullptr;  // set when `nodes` is empty
  bool ok() const { return !nodes.empty(); }
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

// Up to `max_candidates` nodes for a single worker, first fit in index order.
Candidates single_candidates(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req,
                             size_t max_candidates);

// A node per rank for a gang, all or nothing, first fit (several ranks may
// share a node when it has room for them).
Candidates gang_assignment(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req);

// Why nothing fits (used when a search comes back empty).
const char* no_fit_reason(const std::vector<NodeCapacity>& nodes, const PlacementRequest& req);

}  // namespace troupe::policy

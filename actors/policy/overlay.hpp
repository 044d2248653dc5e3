// Grants the pool arbiter made that a node's capacity reports do not count
// yet. A grant is taken from the arbiter's copy of the node's capacity at
// once (the round's overlay), but the node hears of it only when its gang
// reservation asks (a few messages later). A report the node sends in
// between (another job's reserve, commit or end) would put the room back,
// and the next round would grant it a second time: a Reserve refused, the
// job planned again (issue 15 measured a third more grants than jobs). So
// each grant's share of a node stays here until a report lists its hold
// (the node has it: its reports count it from then on) or the grant is
// answered (placed, unplaced, expired); a report is read as what the node
// said minus the shares it does not list yet. Pure; the pool arbiter owns
// one. Unit tests: tests/unit/policy_overlay_test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/policy/placement.hpp"

namespace troupe::policy {

class GrantOverlay {
 public:
  // One rank of a grant on one node.
  struct Share {
    std::string hold_id;  // policy::hold_id(job, attempt, rank): what the node's ledger calls it
    std::string job_id;
    int gpus = 0;
    int cpus = 0;
    int64_t memory_mb = 0;
    int64_t gpu_memory_mb = 0;  // a shared worker's part of a GPU
    std::string share_key;
  };

  // Rank `rank` of `job_id`'s attempt `attempt` was granted `node` (one
  // worker of `req`).
  void add(size_t node, const std::string& job_id, int attempt, int rank,
           const PlacementRequest& req);
  // A report from `node` whose ledger holds `holds` (hold ids): shares it
  // lists are dropped (counted by the node from now on); the others are
  // taken from `report`'s free figures (never below zero).
  void apply(size_t node, const std::vector<std::string>& holds, NodeCapacity& report);
  // The grant of `job_id` was answered: its shares go.
  void forget(const std::string& job_id);
  // Shares not yet counted by their node.
  size_t size() const { return shares_; }

 private:
  std::unordered_map<size_t, std::vector<Share>> by_node_;
  std::unordered_map<std::string, std::vector<size_t>> nodes_of_;  // job -> nodes with a share
  size_t shares_ = 0;
};

}  // namespace troupe::policy

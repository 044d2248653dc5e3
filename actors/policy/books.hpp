// The pool arbiter's books: every job it granted (in flight: a gang
// reservation is placing it) or that runs, by job id, and each (team, pool)'s
// usage kept up to date as they change, so a round reads a team's standing in
// O(1) instead of recounting every running job (issue 15). Pure; the pool
// arbiter owns one and reports every grant, placement, unplaced grant and end.
// Unit tests (with a randomized run checked against a full recount after
// every event): tests/unit/policy_books_test.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

#include "actors/policy/fair_share.hpp"
#include "actors/policy/placement.hpp"

namespace troupe::policy {

class Books {
 public:
  struct Entry {
    std::string team;
    std::string pool;
    int gpus = 0;  // per worker
    int cpus = 0;
    int64_t memory_mb = 0;
    int workers = 1;
    bool borrowed = false;     // beyond its team's guarantee (reclaimable)
    bool running = false;      // placed; else in flight
    int64_t shared_milli = 0;  // a shared worker: its part of a GPU (gpus not counted)
  };
  struct Account {
    Usage used;             // in flight and running
    int borrowed_gpus = 0;  // of those, placed beyond the guarantee (running only)
  };

  // A grant went out. False (and nothing changes) when the job is known.
  // A shared worker is charged `shared_milli` (policy::shared_milli).
  bool grant(const std::string& job_id, const std::string& team, const PlacementRequest& req,
             bool borrowed, int64_t shared_milli = 0);
  // Its gang reservation placed it. False when it is not in flight.
  bool placed(const std::string& job_id);
  // A grant came back unplaced, expired, or died with its queue. Only an
  // in-flight entry is dropped; false otherwise.
  bool unplaced(const std::string& job_id);
  // A running job ended. Only a running entry is dropped; false otherwise.
  bool ended(const std::string& job_id);

  const Entry* find(const std::string& job_id) const;
  bool in_flight(const std::string& job_id) const;
  // What (team, pool) holds now: in flight and running.
  Account account(const std::string& team, const std::string& pool) const;
  // The same, counted from the entries (what the kept figures must equal).
  Account recount(const std::string& team, const std::string& pool) const;
  size_t size() const { return entries_.size(); }
  const std::unordered_map<std::string, Entry>& entries() const { return entries_; }

 private:
  void apply(const Entry& e, int sign);
  std::unordered_map<std::string, Entry> entries_;
  std::map<std::pair<std::string, std::string>, Account> accounts_;  // (team, pool)
};

}  // namespace troupe::policy

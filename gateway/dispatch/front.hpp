// troupe-dispatch's shell: the front door in front of several clusters
// (docs/clusters.md). Owns its connection to the front NATS, one connection
// per cluster, the KV bucket TROUPE_DISPATCH (where each job went) and the
// clusters' last reported capacity. Every decision is policy.hpp's.
// Handles, on the front NATS: troupe.<team>.submit (sent to a cluster, the
// reply carries the front door's job id), troupe.<team>.status|cancel|logs|
// why|history (sent to the job's cluster, its ids put back to the front
// door's), troupe.sys.clusters (each cluster's capacity and state). From each
// cluster: troupe.<team>.events.<id> of the jobs it sent, published again on
// the front NATS under the front door's id. Each tick asks every cluster for
// its capacity and moves a job queued too long to another cluster (spill-over:
// withdrawn with a conditional cancel, if_queued, before it is sent on).
#pragma once

#include <memory>
#include <string>

#include "bus/nats.hpp"
#include "gateway/dispatch/policy.hpp"

namespace troupe::dispatch {

struct FrontOptions {
  bus::ConnectOptions front;  // the front NATS (JetStream): users submit here
  Config config;
  int request_timeout_ms = 5000;
};

class Front {
 public:
  // Connects to the front NATS (required) and to each cluster (one not
  // reachable now is tried again at every tick), reads the stored places and
  // subscribes. nullptr and `error` when the front NATS or its bucket fail.
  static std::unique_ptr<Front> open(const FrontOptions& opts, std::string* error);
  ~Front();
  Front(const Front&) = delete;
  Front& operator=(const Front&) = delete;

  // One round: every cluster's capacity asked for, jobs due moved on.
  void tick();

  struct Impl;
  explicit Front(std::unique_ptr<Impl> impl);  // by open()

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::dispatch

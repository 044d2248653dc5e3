// troupe-dispatch's shell: the front door in front of several clusters
// (docs/clusters.md). Owns its connection to the front NATS, one connection
// per cluster, the KV bucket TROUPE_DISPATCH (where each job went) and the
// clusters' last reported capacity. Every decision is policy.hpp's.
// Handles, on the front NATS: troupe.<team>.submit (sent to a cluster, the
// reply carries the front door's job id), troupe.<team>.enqueue (stored in
// TROUPE_FRONT_INTAKE, read by the durable consumer troupe-dispatch, sent
// on the same way and acknowledged once sent or refused for good),
// troupe.<team>.status|cancel|logs| why|history (sent to the job's cluster, its ids put back to the
// front door's), troupe.sys.clusters (each cluster's capacity and state), troupe.sys.nodes and
// troupe.sys.queues (every cluster's, as last polled, each row with its cluster), troupe.sys.find
// (a job's team and cluster), troupe.sys.cordon|uncordon|drain (handed on to the node's cluster),
// troupe.<team>.usage (from TROUPE_FRONT_EVENTS, the events it publishes). From each cluster:
// troupe.<team>.events.<id> of the jobs it sent, published again on the front NATS under the front
// door's id. Each tick asks every cluster for its capacity and moves a job queued too long to
// another cluster (spill-over: withdrawn with a conditional cancel, if_queued, before it is sent
// on). Several may run: the one holding the lease `front` in TROUPE_DISPATCH serves; the others
// wait as standbys and take over once it has not renewed it for the ttl. The holder answers only
// while its lease is known valid (a front door cut off from its NATS, or paused, goes silent: no
// grant of a claim, no job sent), and exits once it finds the lease taken.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "bus/nats.hpp"
#include "gateway/dispatch/policy.hpp"

namespace troupe::dispatch {

struct FrontOptions {
  bus::ConnectOptions front;  // the front NATS (JetStream): users submit here
  Config config;
  int request_timeout_ms = 5000;
  // The lease (bus/lease.hpp): renewed at every tick (config poll_ms, at
  // most a third of it), taken over after this long without a renewal.
  int lease_ttl_ms = 3000;
  std::string holder;  // its name in the lease (bus::holder_id())
  int replicas = 1;    // of the TROUPE_DISPATCH bucket, when this makes it
};

class Front {
 public:
  // Connects to the front NATS (required), waits as a standby until it
  // holds the lease (`wait(ms)` sleeps between tries and says whether to
  // stop), then connects to each cluster (one not reachable now is tried
  // again at every tick), reads the stored places and subscribes. nullptr
  // and `error` when the front NATS or its bucket fail; nullptr and no
  // error when told to stop first.
  static std::unique_ptr<Front> open(const FrontOptions& opts, std::string* error,
                                     const std::function<bool(int ms)>& wait);
  ~Front();
  Front(const Front&) = delete;
  Front& operator=(const Front&) = delete;

  // One round: the lease renewed, every cluster's capacity asked for, jobs
  // due moved on. False once the lease is another's (the process ends).
  bool tick();

  // What troupe.sys.clusters answers now: {"clusters":[...],"counters":{...}}
  // (thread-safe; troupe-dispatch --metrics samples it).
  nlohmann::json clusters_view();

  struct Impl;
  explicit Front(std::unique_ptr<Impl> impl);  // by open()

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::dispatch

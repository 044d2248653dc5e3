// The process shell of troupe-scheduler, for shards (actors/policy/shards.hpp):
// the views that span pools. The coordinator (the shard owning the config's
// first pool) answers troupe.sys.nodes, troupe.sys.queues and
// troupe.<team>.jobs / troupe.sys.jobs itself: it asks each pool's owner for
// its part (troupe.sys.shard.part, answered by the router of that pool's
// shard) and puts the parts together, as one scheduler would answer. A pool
// whose owner does not answer (gone, not yet taken over) is named under
// "missing_pools". No actor here; the gathering runs on a thread of its own,
// one view at a time, at most kMaxWaiting waiting.
#pragma once

#include <string>
#include <vector>

#include "bus/inbound.hpp"
#include "bus/nats.hpp"
#include "bus/serial_queue.hpp"

namespace troupe::shell {

class ShardViews {
 public:
  // `pools`: the config's, in order. Subscribes on `in`, asks and answers on `out`.
  ShardViews(bus::Connection& in, bus::Connection& out, std::vector<std::string> pools,
             int part_timeout_ms = 1000);
  ~ShardViews();
  ShardViews(const ShardViews&) = delete;
  ShardViews& operator=(const ShardViews&) = delete;
  bool ok() const { return ok_; }  // every subscription was made

 private:
  static constexpr size_t kMaxWaiting = 64;
  void run(Inbound& in);
  // The part of `pool` ("" : job ids of no pool), or null when none came.
  std::string part(const std::string& subject, const std::string& pool, const std::string& request);
  bus::Connection& out_;
  std::vector<std::string> pools_;
  int part_timeout_ms_;
  bool ok_ = true;
  std::vector<bus::SubscriptionPtr> subs_;
  bus::SerialQueue<Inbound> work_{kMaxWaiting, [this](Inbound& in) { run(in); }};
};

}  // namespace troupe::shell

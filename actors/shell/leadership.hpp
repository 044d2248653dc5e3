// The process shell of troupe-scheduler: leadership. The leader lease (KV
// bucket TROUPE_LEADER, fenced by revision), the lease gate every publish of
// the actors passes (plain messages and job events, each on its own path),
// and the loop that renews the lease, reloads the config on SIGHUP and exits
// when the process finds itself deposed. Several schedulers may run: one
// leads, the others wait as standbys (docs/recovery.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/shell/bootstrap.hpp"
#include "bus/lease.hpp"
#include "bus/nats.hpp"
#include "bus/subjects.hpp"

namespace troupe::shell {

// The leader lease: key "leader" holding this process's id (bus/lease.hpp).
// The revision at which it was taken is this leader's epoch. A shard's lease
// on a pool is the same under key pool.<pool>.
using LeaderLease = bus::Lease;

// Self-fencing by time: the leader may speak only while its lease is known
// to be valid — until `ttl` after the start of its last successful renewal
// (a standby needs at least `ttl` of silence to take over). While it is not
// known valid (NATS away, or the process was paused), what it publishes is
// held back in order, and let out after the next renewal; a deposed leader
// exits with it unsent.
class LeaseGate {
 public:
  using Send = std::function<void(const std::string& subject, const void* data, size_t size,
                                  const std::string& reply)>;
  // A job event (Outbox::publish_event): `stored` (may be empty) runs once kept.
  using SendEvent = std::function<void(const std::string& subject, const void* data, size_t size,
                                       std::function<void()> stored)>;
  LeaseGate(Send send, SendEvent send_event)
      : send_(std::move(send)), send_event_(std::move(send_event)) {}
  // Valid until `until_ms` (steady clock); lets out what was held.
  void extend(int64_t until_ms);
  bool open() const { return steady_ms() < valid_until_.load(); }
  void publish(const std::string& subject, const void* data, size_t size, const std::string& reply);
  void publish_event(const std::string& subject, const void* data, size_t size,
                     std::function<void()> stored);
  static int64_t steady_ms() { return bus::steady_ms(); }

 private:
  struct Held {
    bool event = false;
    std::string subject, data, reply;
    std::function<void()> stored;
  };
  void let_out(Held& h);
  Send send_;
  SendEvent send_event_;
  std::atomic<int64_t> valid_until_{0};
  mutable std::mutex mu_;
  std::vector<Held> held_;
};

// This process's leadership: the lease and its gate over the bus (plain
// publishes on the publishing connection, job events through the event
// publisher). Gives the lease up when destroyed (a clean stop).
//
// A shard (--pools or --shard; actors/policy/shards.hpp) holds a lease per
// pool instead: at once the pools it names (`Options::pools`), and any
// other pool whose holder went silent for the ttl, or that nobody held
// since 10 ttl after this process started (its own shard did not come). Its
// epoch is the newest revision it took: a pool's agents only ever hear its
// owner, and any newer owner of a pool took it at a newer revision. A pool
// it took that another shard names goes back to that shard once it asks
// (it came back): its actors stop first, then the lease is given up, and it
// is not taken again while free for kHandBackTtls ttl.
class Leadership {
 public:
  Leadership(Bus& bus, int ttl_ms, const Options& o);
  ~Leadership();
  // Waits as a standby until this process leads (a shard: holds a pool);
  // false when told to stop first.
  bool acquire(const StopSignals& signals);
  // What serve() returns when this shard took more pools, or is asked to
  // hand some back: its actors are stopped, then (hand_back()) restored
  // again with its pools now.
  static constexpr int kPoolsChanged = -1;
  // A pool handed back is not taken again while free for this many ttl
  // (its shard takes it within a fraction of one).
  static constexpr int kHandBackTtls = 3;
  // After serve() returned kPoolsChanged (its actors stopped): gives up the
  // leases of the pools asked back. Then the shard may hold none: acquire().
  void hand_back();
  // A pool nobody holds is taken this many ttl after the start (its own
  // shard, started a little later, takes it first).
  static constexpr int kFreeGraceTtls = 10;
  // Serves while leading: renews the lease(s) every ttl/3, says hello again
  // after `bus` reconnected, runs `reload` on SIGHUP. Returns on SIGTERM or
  // SIGINT (0), or kPoolsChanged. A lost lease, or a snapshot write that found another
  // scheduler's revision (SIGUSR2), ends the process at once with code 3.
  int serve(const StopSignals& signals, const std::function<void()>& reload);
  // troupe.sys.hello: agents that started before us register again and
  // learn our epoch (not a shard's: it is not for other pools' agents).
  void hello();
  // Every lease this process holds still names it (thread-safe: reads the bucket).
  bool still_ours();
  uint64_t epoch() const;
  bool sharded() const { return sharded_; }
  // A shard's pools, in the config's order.
  std::vector<std::string> pools() const;
  LeaseGate& gate() { return gate_; }

 private:
  // A shard: one attempt at every pool not held; true when it took one.
  bool take_pools();
  // A shard: asks for each pool it names and another holds (every ttl/3).
  void want_named();
  // A shard: marks the pools it holds, does not name, and their shard asked
  // for within 2 ttl; true when any.
  bool asked_back();
  Bus& bus_;
  int ttl_ms_;
  bool sharded_;
  LeaderLease lease_;
  // A shard's: every pool of the config, in its order, with whether it is
  // held and whether this process names it.
  struct Pool {
    std::string name;
    bool named = false, held = false;
    bool hand_back = false;  // asked back: given up after the actors stopped
    int64_t handed_ms = -1;  // when it was handed back (steady clock)
    std::unique_ptr<LeaderLease> lease;
  };
  int64_t wanted_ms_ = -1;  // the last want_named() writes
  std::vector<Pool> pools_;
  int64_t started_ms_;
  LeaseGate gate_;
};

using bus::holder_id;

}  // namespace troupe::shell

// A fenced lease in a KV bucket: one holder at a time, taken over from a
// holder that stopped renewing. The scheduler's leader lease and its shards'
// pool leases (actors/shell/leadership.hpp), and the front door's
// (gateway/dispatch) are each one of these.
#pragma once

#include <cstdint>
#include <string>

#include "bus/nats.hpp"

namespace troupe::bus {

// Key `key` holding the holder's name. Taken when absent, or when its
// revision has not moved for `ttl_ms` (its holder stopped renewing); renewed
// by compare-and-set on its revision. The revision at which it was taken is
// the holder's epoch.
class Lease {
 public:
  Lease(KeyValue& kv, std::string holder, int ttl_ms, std::string key)
      : kv_(kv), holder_(std::move(holder)), ttl_ms_(ttl_ms), key_(std::move(key)) {}
  // One attempt; true when this process now holds it (epoch() is set).
  // `take_free`: also when nobody holds it (else only from a holder silent
  // for the ttl).
  bool try_acquire(bool take_free = true);
  enum class Renewal { renewed, unreachable, lost };
  Renewal renew();
  // Gives the lease up (a clean stop): a standby takes it at once.
  void release();
  // The lease key names this process (thread-safe: reads the bucket).
  bool still_ours();
  uint64_t epoch() const { return epoch_; }
  const std::string& holder() const { return holder_; }

 private:
  KeyValue& kv_;
  std::string holder_;
  int ttl_ms_;
  std::string key_;
  uint64_t epoch_ = 0;
  uint64_t revision_ = 0;
  uint64_t seen_revision_ = 0;  // another holder's revision, and since when it stood still
  int64_t seen_since_ms_ = 0;
};

// Milliseconds on this process's monotonic clock: what a lease's silence and
// validity are measured in.
int64_t steady_ms();

// host:pid:ms-since-epoch: a lease holder's name, this process's.
std::string holder_id();

}  // namespace troupe::bus

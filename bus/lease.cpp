#include "bus/lease.hpp"

#include <unistd.h>

#include <chrono>

namespace troupe::bus {

int64_t steady_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

bool Lease::try_acquire(bool take_free) {
  bool failed = false;
  auto e = kv_.get(key_, &failed);
  if (failed) {
    // Cannot see the lease (NATS away): whatever silence follows starts now.
    seen_since_ms_ = steady_ms();
    return false;
  }
  uint64_t expected = 0;
  if (e) {
    bool stale = false;
    if (e->value == holder_ || (e->value.empty() && take_free)) {
      stale = true;  // ours (from before a reconnect), or given up
    } else if (e->revision != seen_revision_) {
      seen_revision_ = e->revision;
      seen_since_ms_ = steady_ms();
    } else {
      stale = steady_ms() - seen_since_ms_ >= ttl_ms_;
    }
    if (!stale) return false;
    expected = e->revision;
  } else {
    if (!take_free) return false;
    // None, or given up (release() leaves a purge marker, which get() does
    // not show): the update must expect the marker's revision.
    expected = kv_.last_revision(key_, &failed);
    if (failed) {
      seen_since_ms_ = steady_ms();
      return false;
    }
  }
  bool conflict = false;
  uint64_t rev = kv_.update(key_, holder_, expected, &conflict);
  if (rev == 0) return false;
  epoch_ = revision_ = rev;
  return true;
}

Lease::Renewal Lease::renew() {
  bool conflict = false;
  uint64_t rev = kv_.update(key_, holder_, revision_, &conflict);
  if (rev == 0 && conflict && still_ours()) {
    // nats-server lost our last renewal (killed before its file store
    // flushed it): the key still names us; renew on top of what it holds.
    if (auto e = kv_.get(key_)) rev = kv_.update(key_, holder_, e->revision, &conflict);
  }
  if (rev != 0) {
    revision_ = rev;
    return Renewal::renewed;
  }
  return conflict ? Renewal::lost : Renewal::unreachable;
}

bool Lease::still_ours() {
  auto e = kv_.get(key_);
  return e && e->value == holder_;
}

void Lease::release() {
  if (revision_ == 0) return;
  bool conflict = false;
  kv_.update(key_, "", revision_, &conflict);
}

std::string holder_id() {
  using namespace std::chrono;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return std::string(host) + ":" + std::to_string(getpid()) + ":" +
         std::to_string(
             duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count());
}

}  // namespace troupe::bus

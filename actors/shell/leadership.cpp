#include "actors/shell/leadership.hpp"

#include <malloc.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "bus/subjects.hpp"

namespace troupe::shell {

namespace {
// How often a serving leader hands freed heap back to the system.
constexpr int64_t kTrimEveryMs = 10000;
}  // namespace

// --- lease gate -------------------------------------------------------------------

void LeaseGate::let_out(Held& h) {
  if (h.event)
    send_event_(h.subject, h.data.data(), h.data.size(), std::move(h.stored));
  else
    send_(h.subject, h.data.data(), h.data.size(), h.reply);
}

void LeaseGate::extend(int64_t until_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  valid_until_ = until_ms;
  if (!open()) return;
  for (auto& h : held_) let_out(h);
  held_.clear();
}

// The common case, the lease valid and nothing held, sends at once without a
// copy; only what must wait for the lease is copied. (Under the lock: what
// was held goes out before anything newer.)
void LeaseGate::publish(const std::string& subject, const void* data, size_t size,
                        const std::string& reply) {
  std::lock_guard<std::mutex> lock(mu_);
  if (held_.empty() && open())
    send_(subject, data, size, reply);
  else
    held_.push_back(
        Held{false, subject, std::string(static_cast<const char*>(data), size), reply, {}});
}

void LeaseGate::publish_event(const std::string& subject, const void* data, size_t size,
                              std::function<void()> stored) {
  std::lock_guard<std::mutex> lock(mu_);
  if (held_.empty() && open())
    send_event_(subject, data, size, std::move(stored));
  else
    held_.push_back(Held{
        true, subject, std::string(static_cast<const char*>(data), size), {}, std::move(stored)});
}

// --- leadership -------------------------------------------------------------------

Leadership::Leadership(Bus& bus, int ttl_ms, const Options& o)
    : bus_(bus),
      ttl_ms_(ttl_ms),
      sharded_(o.shard),
      lease_(*bus.leader_kv, holder_id(), ttl_ms, subjects::kLeaderKey),
      started_ms_(LeaseGate::steady_ms()),
      gate_([&bus](const std::string& subject, const void* data, size_t size,
                   const std::string& reply) { bus.out->publish(subject, data, size, reply); },
            [&bus](const std::string& subject, const void* data, size_t size,
                   std::function<void()> stored) {
              // kept by TROUPE_EVENTS: acknowledged, retried
              bus.events->publish(subject, data, size, std::move(stored));
            }) {
  if (!sharded_) return;
  policy::ClusterConfig cfg;
  policy::load_config_or_open(o.config_text, cfg);  // checked by parse_options
  for (const auto& p : cfg.pools) {
    Pool x;
    x.name = p.name;
    x.named = std::find(o.pools.begin(), o.pools.end(), p.name) != o.pools.end();
    x.lease = std::make_unique<LeaderLease>(*bus.leader_kv, lease_.holder(), ttl_ms,
                                            subjects::pool_lease_key(p.name));
    pools_.push_back(std::move(x));
  }
}

Leadership::~Leadership() {
  if (!sharded_) lease_.release();
  for (auto& p : pools_)
    if (p.held) p.lease->release();
}

bool Leadership::take_pools() {
  const int64_t now = LeaseGate::steady_ms();
  const bool grace_over = now - started_ms_ >= kFreeGraceTtls * int64_t{ttl_ms_};
  bool took = false;
  for (auto& p : pools_) {
    const bool handed = p.handed_ms >= 0 && now - p.handed_ms < kHandBackTtls * int64_t{ttl_ms_};
    if (p.held || !p.lease->try_acquire(p.named || (grace_over && !handed))) continue;
    p.held = took = true;
    spdlog::info("shard: took pool {} (epoch {})", p.name, p.lease->epoch());
  }
  return took;
}

namespace {
int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

void Leadership::want_named() {
  const int64_t now = LeaseGate::steady_ms();
  if (wanted_ms_ >= 0 && now - wanted_ms_ < ttl_ms_ / 3) return;
  wanted_ms_ = now;
  for (auto& p : pools_) {
    if (!p.named || p.held) continue;
    const std::string key = subjects::pool_want_key(p.name);
    bool failed = false;
    const uint64_t rev = bus_.leader_kv->last_revision(key, &failed);
    bool conflict = false;  // (another asker wrote first: asked all the same)
    if (!failed)
      bus_.leader_kv->update(key, lease_.holder() + " " + std::to_string(wall_ms()), rev,
                             &conflict);
  }
}

bool Leadership::asked_back() {
  bool any = false;
  for (auto& p : pools_) {
    if (!p.held || p.named) continue;
    auto e = bus_.leader_kv->get(subjects::pool_want_key(p.name));
    if (!e) continue;
    const auto space = e->value.rfind(' ');
    if (space == std::string::npos || e->value.substr(0, space) == lease_.holder()) continue;
    char* end = nullptr;
    const long long at = std::strtoll(e->value.c_str() + space + 1, &end, 10);
    if (end == nullptr || *end != '\0' || std::llabs(wall_ms() - at) > 2LL * ttl_ms_) continue;
    spdlog::info("shard: pool {} asked back by {}", p.name, e->value.substr(0, space));
    p.hand_back = any = true;
  }
  return any;
}

void Leadership::hand_back() {
  for (auto& p : pools_) {
    if (!p.hand_back) continue;
    p.lease->release();
    p.held = p.hand_back = false;
    p.handed_ms = LeaseGate::steady_ms();
    spdlog::info("shard: handed pool {} back", p.name);
  }
}

std::vector<std::string> Leadership::pools() const {
  std::vector<std::string> v;
  for (const auto& p : pools_)
    if (p.held) v.push_back(p.name);
  return v;
}

uint64_t Leadership::epoch() const {
  if (!sharded_) return lease_.epoch();
  uint64_t e = 0;
  for (const auto& p : pools_)
    if (p.held) e = std::max(e, p.lease->epoch());
  return e;
}

bool Leadership::still_ours() {
  if (!sharded_) return lease_.still_ours();
  for (auto& p : pools_)
    if (p.held && !p.lease->still_ours()) return false;
  return true;
}

bool Leadership::acquire(const StopSignals& signals) {
  for (bool told = false;;) {
    int64_t asked = LeaseGate::steady_ms();
    if (sharded_ ? take_pools() : lease_.try_acquire()) {
      gate_.extend(asked + ttl_ms_);
      return true;
    }
    if (sharded_) want_named();
    if (!told)
      spdlog::info(sharded_ ? "shard: every pool is held by another shard; waiting"
                            : "standby: another scheduler holds the leader lease");
    told = true;
    int sig = signals.wait(200);
    if (sig == SIGTERM || sig == SIGINT) return false;
  }
}

void Leadership::hello() {
  std::string text =
      sharded_ ? std::string("{}") : "{\"epoch\":" + std::to_string(lease_.epoch()) + "}";
  gate_.publish(subjects::kSysHello, text.data(), text.size(), {});
}

int Leadership::serve(const StopSignals& signals, const std::function<void()>& reload) {
  int64_t trimmed_ms = LeaseGate::steady_ms();
  for (;;) {
    int sig = signals.wait(std::max(100, ttl_ms_ / 3));
    if (bus_.reconnected.exchange(false)) hello();
    // What the actors freed (ended jobs past their retention, a burst's
    // messages) goes back to the system: glibc keeps freed heap otherwise,
    // and the RSS would stay at its peak.
    if (int64_t now = LeaseGate::steady_ms(); now - trimmed_ms >= kTrimEveryMs) {
      malloc_trim(0);
      trimmed_ms = now;
    }
    if (sig == 0 || sig == SIGUSR2) {
      if (sig == 0) {
        int64_t asked = LeaseGate::steady_ms();
        auto r = LeaderLease::Renewal::renewed;
        if (!sharded_) r = lease_.renew();
        for (auto& p : pools_) {
          if (!p.held) continue;
          auto pr = p.lease->renew();
          if (pr == LeaderLease::Renewal::lost) spdlog::error("shard: lost pool {}", p.name);
          if (pr != LeaderLease::Renewal::renewed && r != LeaderLease::Renewal::lost) r = pr;
        }
        if (r == LeaderLease::Renewal::renewed) gate_.extend(asked + ttl_ms_);
        // A shard takes the pools whose holder went silent, asks for those it
        // names that another holds, and hands back those asked for.
        if (r == LeaderLease::Renewal::renewed && sharded_) {
          want_named();
          if (asked_back() || take_pools()) return kPoolsChanged;
        }
        if (r != LeaderLease::Renewal::lost) continue;
      }
      // Deposed: another scheduler leads. Stop acting at once (no clean
      // shutdown: that would publish and write as if still leading).
      spdlog::error("deposed: {}; exiting",
                    sig == SIGUSR2 ? "a snapshot write found another scheduler's revision"
                                   : "another scheduler holds the leader lease");
      spdlog::default_logger()->flush();
      std::_Exit(3);
    }
    if (sig != SIGHUP) {
      spdlog::info("stopping (signal {})", sig);
      return 0;
    }
    reload();
  }
}

}  // namespace troupe::shell

// What every supervisor shares: its children by id, their last snapshots, and
// restarting a child that crashed from its last snapshot (with an escalation
// limit). The one owner of a supervisor's live children: the supervisors of
// actors/supervisors.cpp keep no map of their own and walk them with
// for_each. `Handle`: the children's handle type (a typed_actor of
// actors/protocol.hpp; caf::actor in tests).
#pragma once

#include <spdlog/spdlog.h>

#include <caf/all.hpp>
#include <functional>
#include <string>
#include <unordered_map>

#include "actors/shrink.hpp"

namespace troupe {

template <class Handle>
class Children {
 public:
  using Factory = std::function<Handle(const std::string& id, const std::string& snapshot)>;

  // `keep_snapshots`: keep a child's snapshot after it ended normally (jobs
  // are answered for from their snapshot once their actor is gone).
  Children(std::string kind, bool keep_snapshots) : kind_(std::move(kind)), keep_(keep_snapshots) {}

  Handle find(const std::string& id) const {
    auto it = live_.find(id);
    return it == live_.end() ? Handle{} : it->second;
  }

  // Calls f(id, actor) for every live child.
  template <class F>
  void for_each(F f) const {
    for (const auto& [id, a] : live_) f(id, a);
  }

  template <class Self>
  Handle start(Self* self, const std::string& id, const std::string& snapshot,
               const Factory& make) {
    if (auto a = find(id)) return a;
    auto a = make(id, snapshot);
    self->monitor(a);
    live_[id] = a;
    ids_[a.address()] = id;
    if (!snapshot.empty()) snaps_[id] = snapshot;
    return a;
  }

  void snapshot(const std::string& id, std::string bytes) { snaps_[id] = std::move(bytes); }

  const std::string* snapshot_of(const std::string& id) const {
    auto it = snaps_.find(id);
    return it == snaps_.end() ? nullptr : &it->second;
  }
  const std::unordered_map<std::string, std::string>& snapshots() const { return snaps_; }
  // An ended child is forgotten for good (its snapshot, its restart count).
  void forget(const std::string& id) {
    snaps_.erase(id);
    restarts_.erase(id);
    shrink_if_sparse(snaps_);
    shrink_if_sparse(restarts_);
  }

  // Handles a child's down message: a normal end forgets the child; a crash
  // restarts it from its snapshot, up to `max_restarts` times per id within
  // `restart_window_ms` of the supervisor's clock (`now_ms`: Wiring::now_ms).
  // Returns the id of the child concerned ("" when unknown).
  template <class Self>
  std::string on_down(Self* self, const caf::down_msg& dm, const Factory& make, int64_t now_ms,
                      bool* restarted) {
    *restarted = false;
    auto it = ids_.find(dm.source);
    if (it == ids_.end()) return {};
    std::string id = it->second;
    ids_.erase(it);
    live_.erase(id);
    shrink_if_sparse(ids_);
    shrink_if_sparse(live_);
    bool normal = !dm.reason || dm.reason == caf::exit_reason::normal;
    if (normal) {
      if (!keep_) {
        snaps_.erase(id);
        shrink_if_sparse(snaps_);
      }
      return id;
    }
    // Restart intensity, as in OTP: at most max_restarts within restart_window_ms.
    spdlog::warn("{} {} crashed: {}", kind_, id, caf::to_string(dm.reason));
    auto& r = restarts_[id];
    if (now_ms - r.since_ms > restart_window_ms || now_ms < r.since_ms) r = {now_ms, 0};
    if (++r.count > max_restarts) {
      spdlog::error("{} {} crashed {} times within {} s; not restarted", kind_, id, r.count,
                    restart_window_ms / 1000);
      return id;
    }
    ++total_restarts_;
    auto snap = snaps_.count(id) ? snaps_[id] : std::string();
    start(self, id, snap, make);
    *restarted = true;
    return id;
  }

  size_t total_restarts() const { return total_restarts_; }
  size_t live() const { return live_.size(); }
  const std::string& kind() const { return kind_; }

  static constexpr int max_restarts = 5;
  static constexpr int64_t restart_window_ms = 30000;

 private:
  std::string kind_;
  bool keep_;
  std::unordered_map<std::string, Handle> live_;
  std::unordered_map<caf::actor_addr, std::string> ids_;
  std::unordered_map<std::string, std::string> snaps_;
  struct Restarts {
    int64_t since_ms = 0;
    int count = 0;
  };
  std::unordered_map<std::string, Restarts> restarts_;
  size_t total_restarts_ = 0;
};

}  // namespace troupe

// The HTTP API's long-lived responses (SSE event streams, followed logs):
// how many are open, per team and in all. Each holds one of troupe-gateway's
// threads until it ends, so without a bound one team could take every thread
// and stall the API for every other team. A team past its share, or a
// gateway past its whole, is answered 429 too_many_streams (docs/http.md).
// Thread-safe; a Slot gives its place back when the last copy is destroyed.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace troupe::gateway::http {

class StreamSlots {
  struct State {
    State(int k, int t) : per_key(k), total(t) {}
    const int per_key;
    const int total;
    mutable std::mutex mu;
    std::map<std::string, int> open;
    int total_open = 0;
  };

 public:
  // per_key: the most one team (or one admin) may hold open; total: the most
  // in all. Below 1: 1.
  StreamSlots(int per_key, int total)
      : state_(std::make_shared<State>(per_key < 1 ? 1 : per_key, total < 1 ? 1 : total)) {}

  // One stream's place: given back when destroyed (the last copy of the
  // pointer take returns; the counts outlive this object while it lives).
  class Slot {
   public:
    Slot(std::shared_ptr<State> state, std::string key)
        : state_(std::move(state)), key_(std::move(key)) {}
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() {
      std::lock_guard<std::mutex> lock(state_->mu);
      auto it = state_->open.find(key_);
      if (it != state_->open.end() && --it->second <= 0) state_->open.erase(it);
      --state_->total_open;
    }

   private:
    std::shared_ptr<State> state_;
    std::string key_;
  };

  // A place for one more stream of `key`; nullptr, and why, when the key or
  // the server holds all it may.
  std::shared_ptr<const Slot> take(const std::string& key, std::string* why) {
    std::lock_guard<std::mutex> lock(state_->mu);
    int& mine = state_->open[key];
    if (mine >= state_->per_key || state_->total_open >= state_->total) {
      if (why != nullptr)
        *why = mine >= state_->per_key
                   ? std::to_string(mine) +
                         " event streams and followed logs are open for it, the most one team "
                         "may hold; close one, or retry later"
                   : "the gateway holds " + std::to_string(state_->total_open) +
                         " event streams and followed logs, all it serves at once; retry later";
      if (mine == 0) state_->open.erase(key);
      return nullptr;
    }
    ++mine;
    ++state_->total_open;
    return std::make_shared<const Slot>(state_, key);
  }

  int open(const std::string& key) const {
    std::lock_guard<std::mutex> lock(state_->mu);
    auto it = state_->open.find(key);
    return it == state_->open.end() ? 0 : it->second;
  }
  int open() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->total_open;
  }

 private:
  std::shared_ptr<State> state_;
};

}  // namespace troupe::gateway::http

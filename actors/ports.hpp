// What the actors need from the world, as interfaces: publishing on the bus and
// the durable intake log. The scheduler binds them to NATS (actors/main.cpp);
// tests bind fakes. Actors never include NATS headers.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace troupe {

class Outbox {
 public:
  virtual ~Outbox() = default;
  // Thread-safe; fire and forget.
  void publish(const std::string& subject, const void* data, size_t size, const std::string& reply) {
    published_.fetch_add(1, std::memory_order_relaxed);
    send(subject, data, size, reply);
  }
  void publish(const std::string& subject, const std::string& data, const std::string& reply = {}) {
    publish(subject, data.data(), data.size(), reply);
  }
  void publish(const std::string& subject, const std::vector<uint8_t>& data,
               const std::string& reply = {}) {
    publish(subject, data.data(), data.size(), reply);
  }
  // Messages published so far (troupe.sys.stats: bus_messages_out).
  int64_t published() const { return published_.load(std::memory_order_relaxed); }

 protected:
  virtual void send(const std::string& subject, const void* data, size_t size,
                    const std::string& reply) = 0;

 private:
  std::atomic<int64_t> published_{0};
};
using OutboxPtr = std::shared_ptr<Outbox>;

class Intake {
 public:
  virtual ~Intake() = default;
  using Done = std::function<void(bool ok, bool duplicate, const std::string& error)>;
  // Appends an accepted submission durably; `done` runs (on any thread) once
  // it is stored. `msg_id` de-duplicates.
  virtual void append(const std::string& subject, std::vector<uint8_t> bytes,
                      const std::string& msg_id, Done done) = 0;
};
using IntakePtr = std::shared_ptr<Intake>;

// Settings of one scheduler process.
struct SchedulerOptions {
  std::string checkpoint_root;  // jobs get <root>/<job id> as TROUPE_CHECKPOINT_DIR ("" = none)
  bool fifo = false;            // --policy fifo: the strict-FIFO baseline for comparisons
  bool debug_crash = false;     // --debug-crash: troupe.sys.debug.crash crashes a chosen actor (tests)
};

inline int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace troupe

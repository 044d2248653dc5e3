// bus::Requester (see requester.hpp).
#include "bus/requester.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string_view>
#include <thread>
#include <unordered_map>

namespace troupe::bus {
namespace {

using Clock = std::chrono::steady_clock;
// "no responders" in a NATS cluster: asked again after this, within this.
constexpr auto kNoRespondersPause = std::chrono::milliseconds(100);
constexpr auto kNoRespondersFor = std::chrono::milliseconds(5000);

}  // namespace

struct Requester::State {
  Connection* conn = nullptr;
  std::string prefix;  // a request's reply subject: this and its number

  std::mutex mu;  // everything below
  std::condition_variable cv;
  bool stop = false;
  int calling = 0;  // reply callbacks running now (the destructor waits for them)
  uint64_t next = 0;
  // When a request is due: its deadline, or (`again`) to be sent again.
  struct Due {
    uint64_t id = 0;
    bool again = false;
  };
  using DueMap = std::multimap<Clock::time_point, Due>;
  DueMap due;
  struct Pending {
    std::string subject;
    std::shared_ptr<const std::string> data;
    Clock::time_point start;
    Clock::time_point deadline;
    DueMap::iterator deadline_at;
    Done done;
  };
  std::unordered_map<uint64_t, Pending> pending;
  std::thread timer;

  std::string reply_of(uint64_t id) const { return prefix + std::to_string(id); }

  // Under `mu`: the request's callback, taken out with the request.
  Done take(std::unordered_map<uint64_t, Pending>::iterator it) {
    Done done = std::move(it->second.done);
    due.erase(it->second.deadline_at);
    pending.erase(it);
    return done;
  }

  void on_reply(Inbound&& in) {
    std::string_view tail(in.subject);
    if (tail.size() <= prefix.size()) return;
    tail.remove_prefix(prefix.size());
    uint64_t id = 0;
    auto [end, ec] = std::from_chars(tail.data(), tail.data() + tail.size(), id);
    if (ec != std::errc() || end != tail.data() + tail.size()) return;
    Done done;
    std::string error;
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = pending.find(id);
      if (stop || it == pending.end()) return;  // answered or timed out already
      if (in.no_responders) {
        const auto now = Clock::now();
        const auto until = std::min(it->second.deadline, it->second.start + kNoRespondersFor);
        if (now + kNoRespondersPause < until && conn->in_cluster()) {
          due.emplace(now + kNoRespondersPause, Due{id, true});
          cv.notify_one();
          return;
        }
        error = request_failure(it->second.subject, true, "");
      }
      done = take(it);
      ++calling;
    }
    if (in.no_responders)
      done(std::nullopt, error);
    else
      done(std::move(in.data), "");
    std::lock_guard<std::mutex> lock(mu);
    if (--calling == 0) cv.notify_all();
  }

  // The timer thread: deadlines and requests to send again.
  void run() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stop) {
      if (due.empty()) {
        cv.wait(lock);
        continue;
      }
      const auto at = due.begin()->first;
      if (Clock::now() < at) {
        cv.wait_until(lock, at);
        continue;
      }
      const Due d = due.begin()->second;
      if (d.again) due.erase(due.begin());
      auto it = pending.find(d.id);
      if (it == pending.end()) continue;  // (a send again of one answered since)
      if (d.again) {
        const std::string subject = it->second.subject;
        const auto data = it->second.data;
        lock.unlock();
        conn->publish(subject, *data, reply_of(d.id));  // (if not sent, its deadline answers)
        lock.lock();
        continue;
      }
      const std::string subject = it->second.subject;
      Done done = take(it);
      lock.unlock();
      done(std::nullopt, request_failure(subject, false, conn->last_async_error()));
      lock.lock();
    }
  }
};

std::unique_ptr<Requester> Requester::open(Connection& conn, std::string* error) {
  std::unique_ptr<Requester> r(new Requester());
  r->state_ = std::make_shared<State>();
  r->state_->conn = &conn;
  r->state_->prefix = conn.new_inbox() + ".";
  r->replies_ = conn.subscribe(r->state_->prefix + "*", [state = r->state_](Inbound&& in) {
    state->on_reply(std::move(in));
  });
  if (!r->replies_) {
    if (error != nullptr) *error = "cannot subscribe to " + r->state_->prefix + "*";
    return nullptr;
  }
  r->state_->timer = std::thread([state = r->state_.get()] { state->run(); });
  return r;
}

Requester::~Requester() {
  if (!state_) return;
  {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->stop = true;
    state_->cv.notify_all();
    state_->cv.wait(lock, [this] { return state_->calling == 0; });
    state_->pending.clear();
    state_->due.clear();
  }
  if (state_->timer.joinable()) state_->timer.join();
  replies_.reset();  // (a reply delivered after this finds nothing pending)
}

void Requester::request(const std::string& subject, std::string data, int timeout_ms, Done done) {
  auto& s = *state_;
  auto body = std::make_shared<const std::string>(std::move(data));
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    id = ++s.next;
    const auto now = Clock::now();
    auto& p = s.pending[id];
    p.subject = subject;
    p.data = body;
    p.start = now;
    p.deadline = now + std::chrono::milliseconds(std::max(1, timeout_ms));
    p.done = std::move(done);
    p.deadline_at = s.due.emplace(p.deadline, State::Due{id, false});
    if (p.deadline_at == s.due.begin()) s.cv.notify_one();
  }
  if (s.conn->publish(subject, *body, s.reply_of(id))) return;
  Done failed;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (auto it = s.pending.find(id); it != s.pending.end()) failed = s.take(it);
  }
  if (failed) failed(std::nullopt, "request on " + subject + ": the connection is closed");
}

size_t Requester::out() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->pending.size();
}

}  // namespace troupe::bus

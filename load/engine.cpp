// Owns troupe-load's connections, the submission table and the event
// bookkeeping that joins replies and events by job id.
#include "load/engine.hpp"

#include <cstdlib>

#include "bus/subjects.hpp"
#include "load/scan.hpp"
#include "messages/names.hpp"

namespace troupe::load {

std::unique_ptr<Engine> Engine::open(const std::string& url, std::string* error) {
  std::unique_ptr<Engine> e(new Engine());
  bus::ConnectOptions o;
  o.url = url;
  // Its identity: $TROUPE_NATS_CREDS / $TROUPE_NATS_CA (--creds / --tls-ca
  // set them): an admin's, or the one team's it submits as.
  if (const char* c = std::getenv("TROUPE_NATS_CREDS")) o.creds_file = c;
  if (const char* c = std::getenv("TROUPE_NATS_CA")) o.tls_ca = c;
  o.name = "troupe-load-pub";
  e->pub_ = bus::Connection::open(o, error);
  if (!e->pub_) return nullptr;
  o.name = "troupe-load-replies";
  e->reply_conn_ = bus::Connection::open(o, error);
  if (!e->reply_conn_) return nullptr;
  o.name = "troupe-load-events";
  e->event_conn_ = bus::Connection::open(o, error);
  if (!e->event_conn_) return nullptr;
  o.name = "troupe-load-requests";
  e->req_ = bus::Connection::open(o, error);
  if (!e->req_) return nullptr;

  Engine* self = e.get();
  e->inbox_ = e->reply_conn_->new_inbox();
  e->reply_sub_ =
      e->reply_conn_->subscribe(e->inbox_ + ".*", [self](Inbound&& in) { self->on_reply(std::move(in)); });
  e->event_sub_ = e->event_conn_->subscribe(subjects::kAllEvents,
                                            [self](Inbound&& in) { self->on_event(std::move(in)); });
  if (!e->reply_sub_ || !e->event_sub_) {
    if (error != nullptr) *error = "cannot subscribe on " + url;
    return nullptr;
  }
  // The subscriptions must be in place on the server before the first submit.
  if (!e->reply_conn_->flush(5000) || !e->event_conn_->flush(5000)) {
    if (error != nullptr) *error = "cannot flush the subscriptions to " + url;
    return nullptr;
  }
  return e;
}

Engine::~Engine() {
  event_sub_.reset();
  reply_sub_.reset();
}

int64_t Engine::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - origin_).count();
}

int64_t Engine::dropped() const {
  return (reply_sub_ ? reply_sub_->dropped() : 0) + (event_sub_ ? event_sub_->dropped() : 0);
}

size_t Engine::submit(const std::string& team, const std::string& body, int gpus, bool* ok) {
  size_t index;
  {
    std::lock_guard<std::mutex> lock(mu_);
    index = jobs_.size();
    JobResult r;
    r.team = team;
    r.gpus = gpus;
    r.sent_ns = now_ns();
    jobs_.push_back(std::move(r));
  }
  bool sent = pub_->publish(subjects::team_submit(team), body, inbox_ + "." + std::to_string(index));
  if (!sent) {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_[index].error = "the NATS client refused the publish";
    jobs_[index].acked_ns = -1;
    ++answered_;
    ++rejected_;
    cv_.notify_all();
  }
  if (ok != nullptr) *ok = sent;
  return index;
}

void Engine::on_reply(Inbound&& in) {
  int64_t t = now_ns();
  std::string_view tok = last_token(in.subject);
  size_t index = 0;
  for (char c : tok) {
    if (c < '0' || c > '9') return;
    index = index * 10 + static_cast<size_t>(c - '0');
  }
  std::string_view body(reinterpret_cast<const char*>(in.data.data()), in.data.size());
  std::string_view id = json_string_field(body, "job_id");
  std::lock_guard<std::mutex> lock(mu_);
  if (index >= jobs_.size()) return;
  JobResult& r = jobs_[index];
  if (r.acked_ns >= 0 || !r.error.empty()) return;  // answered already
  ++answered_;
  if (id.empty()) {
    std::string_view err = json_string_field(body, "error");
    r.error = err.empty() ? "unexpected reply: " + std::string(body.substr(0, 200)) : std::string(err);
    if (in.data.empty()) r.error = "empty reply (no responders?)";
    ++rejected_;
  } else {
    r.acked_ns = t;
    r.job_id = std::string(id);
    by_id_.emplace(r.job_id, index);
    auto e = events_.find(r.job_id);
    if (e != events_.end()) {
      if (e->second.placed_ns >= 0) ++placed_;
      if (e->second.ended_ns >= 0) ++terminal_;
    }
  }
  cv_.notify_all();
}

void Engine::on_event(Inbound&& in) {
  int64_t t = now_ns();
  std::string_view id = last_token(in.subject);
  std::string_view body(reinterpret_cast<const char*>(in.data.data()), in.data.size());
  std::string_view state = json_string_field(body, "state");
  bool placing = state == names::kStarting || state == names::kRunning;
  bool running = state == names::kRunning;
  bool terminal = names::is_terminal(state);
  if (!placing && !terminal) return;
  std::lock_guard<std::mutex> lock(mu_);
  EventTimes& e = events_[std::string(id)];
  bool newly_placed = false, newly_ended = false;
  if (placing && e.placed_ns < 0) {
    e.placed_ns = t;
    newly_placed = true;
  }
  if (running && e.running_ns < 0) e.running_ns = t;
  if (terminal && e.ended_ns < 0) {
    e.ended_ns = t;
    e.final_state = std::string(state);
    newly_ended = true;
  }
  if ((newly_placed || newly_ended) && by_id_.count(std::string(id)) != 0) {
    if (newly_placed) ++placed_;
    if (newly_ended) ++terminal_;
    cv_.notify_all();
  }
}

bool Engine::done_locked() const {
  return answered_ == jobs_.size() && terminal_ == answered_ - rejected_;
}

bool Engine::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_locked();
}

bool Engine::wait_inflight_below(size_t max, Clock::time_point until) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_until(lock, until, [&] { return jobs_.size() - answered_ < max; });
}

bool Engine::wait_done(Clock::time_point until) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_until(lock, until, [&] { return done_locked(); });
}

Progress Engine::progress() const {
  std::lock_guard<std::mutex> lock(mu_);
  Progress p;
  p.sent = jobs_.size();
  p.acked = answered_ - rejected_;
  p.rejected = rejected_;
  p.placed = placed_;
  p.terminal = terminal_;
  return p;
}

std::vector<JobResult> Engine::results() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<JobResult> out = jobs_;
  for (auto& r : out) {
    if (r.job_id.empty()) continue;
    auto e = events_.find(r.job_id);
    if (e == events_.end()) continue;
    r.placed_ns = e->second.placed_ns;
    r.running_ns = e->second.running_ns;
    r.ended_ns = e->second.ended_ns;
    r.final_state = e->second.final_state;
  }
  return out;
}

}  // namespace troupe::load

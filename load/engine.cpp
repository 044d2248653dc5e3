// Owns troupe-load's connections, the submission table and the event
// bookkeeping that joins replies and events by job id.
#include "load/engine.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "bus/subjects.hpp"
#include "load/scan.hpp"
#include "messages/names.hpp"

namespace troupe::load {

namespace {
bool is_file(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}
}  // namespace

bool Engine::open_lane(Lane& lane, const bus::ConnectOptions& base, const std::string& label,
                       const std::string& events, std::string* error) {
  bus::ConnectOptions o = base;
  std::string url = bus::redact_url(o.url);
  // A refused publish or subscription means replies or events that will
  // never come: the waits end at once (refused()).
  o.on_error = [this](const std::string& text) {
    std::fprintf(stderr, "nats: %s\n", text.c_str());
    if (text.find("ermission") == std::string::npos) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (refused_.empty()) refused_ = text;
    cv_.notify_all();
  };
  o.name = "troupe-load-pub" + label;
  o.send_asap =
      false;  // submissions at full speed: let the client batch writes (fewer TLS records)
  lane.pub = bus::Connection::open(o, error);
  if (!lane.pub) return false;
  o.send_asap = base.send_asap;
  o.name = "troupe-load-replies" + label;
  lane.reply_conn = bus::Connection::open(o, error);
  if (!lane.reply_conn) return false;
  o.name = "troupe-load-events" + label;
  lane.event_conn = bus::Connection::open(o, error);
  if (!lane.event_conn) return false;

  lane.inbox = lane.reply_conn->new_inbox();
  lane.reply_sub = lane.reply_conn->subscribe(lane.inbox + ".*",
                                              [this](Inbound&& in) { on_reply(std::move(in)); });
  lane.event_sub =
      lane.event_conn->subscribe(events, [this](Inbound&& in) { on_event(std::move(in)); });
  lane.pool_inbox = lane.pub->new_inbox();
  lane.pool_sub = lane.pub->subscribe(lane.pool_inbox + ".*",
                                      [this](Inbound&& in) { on_reply(std::move(in)); });
  if (!lane.reply_sub || !lane.event_sub || !lane.pool_sub) {
    if (error != nullptr) *error = "cannot subscribe on " + url;
    return false;
  }
  // The subscriptions must be in place on the server before the first submit.
  if (!lane.reply_conn->flush(5000) || !lane.event_conn->flush(5000) || !lane.pub->flush(5000)) {
    if (error != nullptr) *error = "cannot flush the subscriptions to " + url;
    return false;
  }
  // A refused subscription is reported asynchronously, often by now: then
  // say so before submitting anything (otherwise the waits end when it comes).
  if (std::string why = refused(); !why.empty()) {
    if (error != nullptr)
      *error = refusal_text(why, events == subjects::kAllEvents && !o.creds_file.empty());
    return false;
  }
  return true;
}

std::unique_ptr<Engine> Engine::open(const EngineOptions& opts, std::string* error) {
  std::unique_ptr<Engine> e(new Engine());
  const IdentityOptions& id = opts.identity;
  bus::ConnectOptions base;
  base.url = opts.url;
  base.tls_ca = effective_tls_ca(id, is_file);
  e->per_team_ = !id.creds_dir.empty();
  e->anonymous_ = !e->per_team_ && id.creds.empty();

  if (e->per_team_) {
    // Every team's identity is there before anything connects.
    std::vector<std::string> missing;
    for (const auto& t : opts.teams)
      if (!is_file(team_creds_path(id.creds_dir, t)))
        missing.push_back(team_creds_path(id.creds_dir, t));
    if (!missing.empty()) {
      if (error != nullptr) {
        *error = "--creds-dir: no credentials for ";
        for (size_t i = 0; i < missing.size(); ++i) *error += (i > 0 ? ", " : "") + missing[i];
        *error +=
            " (troupe-load submits as each team with its own team-<t>.creds; make one "
            "with `troupe auth add-team <t>`)";
      }
      return nullptr;
    }
    std::vector<std::string> teams;
    for (const auto& t : opts.teams)
      if (std::find(teams.begin(), teams.end(), t) == teams.end()) teams.push_back(t);
    if (teams.empty()) {
      if (error != nullptr) *error = "--creds-dir: no team to submit as";
      return nullptr;
    }
    e->lanes_.resize(teams.size());
    for (size_t i = 0; i < teams.size(); ++i) {
      const std::string& t = teams[i];
      bus::ConnectOptions o = base;
      o.creds_file = team_creds_path(id.creds_dir, t);
      std::string why;
      if (!e->open_lane(e->lanes_[i], o, "-" + t, subjects::team_verb(t, subjects::kEvents) + ".>",
                        &why)) {
        if (error != nullptr) *error = "as team " + t + " (" + o.creds_file + "): " + why;
        return nullptr;
      }
      e->lane_of_.emplace(t, i);
    }
  } else {
    // One identity (an admin's, or the one team's it submits as) or none.
    bus::ConnectOptions o = base;
    o.creds_file = id.creds;
    e->lanes_.resize(1);
    if (!e->open_lane(e->lanes_[0], o, "", subjects::kAllEvents, error)) return nullptr;
  }
  if (opts.admin_requests && (!e->per_team_ || !id.creds.empty())) {
    bus::ConnectOptions o = base;
    o.creds_file = id.creds;
    o.name = "troupe-load-requests";
    e->req_ = bus::Connection::open(o, error);
    if (!e->req_) return nullptr;
  }
  return e;
}

std::string Engine::refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

std::string Engine::refusal_text(const std::string& why, bool one_identity) {
  return "the server refused: " + why +
         (one_identity ? " (one team's identity may use only its own subjects and watch only its "
                         "own events: give --creds-dir DIR with team-<t>.creds, or an admin's "
                         "--creds)"
                       : "");
}

const char* Engine::identity_mode() const {
  if (per_team_) return "one per team";
  return anonymous_ ? "none" : "one identity";
}

Engine::~Engine() {
  // Subscriptions first (no callback after this), then the connections.
  for (auto& l : lanes_) {
    l.event_sub.reset();
    l.reply_sub.reset();
    l.pool_sub.reset();
  }
}

int64_t Engine::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - origin_).count();
}

int64_t Engine::dropped() const {
  int64_t n = 0;
  for (const auto& l : lanes_)
    n += (l.reply_sub ? l.reply_sub->dropped() : 0) + (l.event_sub ? l.event_sub->dropped() : 0) +
         (l.pool_sub ? l.pool_sub->dropped() : 0);
  return n;
}

size_t Engine::submit(const std::string& team, const std::string& body, int gpus, bool* ok,
                      const std::string& pool) {
  size_t index;
  {
    std::lock_guard<std::mutex> lock(mu_);
    index = jobs_.size();
    JobResult r;
    r.team = team;
    r.gpus = gpus;
    r.sent_ns = now_ns();
    jobs_.push_back(std::move(r));
    if (!pool.empty()) pool_bodies_.emplace(index, body);
  }
  // lane_of_ and lanes_ do not change after open(): no lock needed.
  const Lane* lane = lane_for(team);
  bool sent =
      lane != nullptr &&
      lane->pub->publish(
          pool.empty() ? subjects::team_submit(team) : subjects::team_submit_to(team, pool), body,
          (pool.empty() ? lane->inbox : lane->pool_inbox) + "." + std::to_string(index));
  if (!sent) {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_[index].error = lane == nullptr ? "no identity for team " + team + " (not in --teams)"
                                         : "the NATS client refused the publish";
    jobs_[index].acked_ns = -1;
    ++answered_;
    ++rejected_;
    cv_.notify_all();
  }
  if (ok != nullptr) *ok = sent;
  return index;
}

int64_t Engine::rerouted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rerouted_;
}

const Engine::Lane* Engine::lane_for(const std::string& team) const {
  if (!per_team_) return &lanes_[0];
  auto l = lane_of_.find(team);
  return l == lane_of_.end() ? nullptr : &lanes_[l->second];
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
  std::unique_lock<std::mutex> lock(mu_);
  if (index >= jobs_.size()) return;
  JobResult& r = jobs_[index];
  if (r.acked_ns >= 0 || !r.error.empty()) return;  // answered already
  if (auto b = pool_bodies_.find(index); b != pool_bodies_.end()) {
    std::string again = std::move(b->second);
    pool_bodies_.erase(b);
    if (in.data.empty()) {  // no responders for the pool: to any scheduler
      ++rerouted_;
      const std::string team = r.team;
      lock.unlock();
      const Lane* lane = lane_for(team);
      if (lane != nullptr && lane->pub->publish(subjects::team_submit(team), again, in.subject))
        return;
      lock.lock();
    }
  }
  ++answered_;
  if (id.empty()) {
    std::string_view err = json_string_field(body, "error");
    r.error =
        err.empty() ? "unexpected reply: " + std::string(body.substr(0, 200)) : std::string(err);
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
  bool preempted = state == "preempted";
  if (!placing && !terminal && !preempted) return;
  std::lock_guard<std::mutex> lock(mu_);
  EventTimes& e = events_[std::string(id)];
  bool newly_placed = false, newly_ended = false;
  if (placing && e.placed_ns < 0) {
    e.placed_ns = t;
    newly_placed = true;
  }
  if (running && e.running_ns < 0) e.running_ns = t;
  if (running && e.attempt_running_ns < 0) e.attempt_running_ns = e.last_running_ns = t;
  if (preempted) {
    if (e.attempt_running_ns >= 0) e.preempted_ns.emplace_back(e.attempt_running_ns, t);
    e.last_running_ns = -1;
  }
  if (preempted || terminal) e.attempt_running_ns = -1;
  if (terminal && e.ended_ns < 0) {
    e.ended_ns = t;
    e.final_state = std::string(state);
    e.end_reason = std::string(json_string_field(body, "reason"));
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
  cv_.wait_until(lock, until, [&] { return jobs_.size() - answered_ < max || !refused_.empty(); });
  return jobs_.size() - answered_ < max && refused_.empty();
}

bool Engine::wait_done(Clock::time_point until) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_until(lock, until, [&] { return done_locked() || !refused_.empty(); });
  return done_locked();
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
    r.end_reason = e->second.end_reason;
    r.preempted_ns = e->second.preempted_ns;
    r.last_running_ns = e->second.last_running_ns;
  }
  return out;
}

}  // namespace troupe::load

#include "actors/shell/bus_ports.hpp"

#include <spdlog/spdlog.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "actors/bridge.hpp"
#include "bus/subjects.hpp"
#include "messages/json_text.hpp"
#include "messages/log_chunks.hpp"

namespace troupe::shell {

void StreamIntake::append(const std::string& subject, std::vector<uint8_t> bytes,
                          const std::string& msg_id, Done done) {
  if (!gate_.open()) {  // not known to lead right now: nothing may be accepted
    done({false, false, "this scheduler's leader lease is unconfirmed", {}});
    return;
  }
  js_.publish_unique(subject, bytes.data(), bytes.size(), msg_id,
                     [done = std::move(done)](bus::JetStream::Unique u) {
                       done({u.ok, u.duplicate, std::move(u.error),
                             std::string(u.original.begin(), u.original.end())});
                     });
}

StreamHistory::~StreamHistory() {
  reads_.close();  // (reads still waiting are dropped)
}

void StreamHistory::read(const std::string& team, const std::string& job_id, Done done) {
  Read r{team, job_id, std::move(done), 0, {}, {}};
  if (!reads_.post(r)) r.done({}, "too many history reads waiting; retry");
}

void StreamHistory::scan(const std::string& filter, int64_t since_ms, Each each, Scanned done) {
  Read r{filter, {}, {}, since_ms, std::move(each), std::move(done)};
  if (!reads_.post(r)) r.scanned("too many history reads waiting; retry");
}

void StreamHistory::run(Read& r) {
  if (r.each) {
    bool complete =
        js_.read_each(subjects::kEventsStream, r.team, 5000, r.since_ms,
                      [&](std::string_view, std::string_view data, uint64_t) { r.each(data); });
    r.scanned(complete ? std::string() : "the events stream did not answer in full; retry");
    return;
  }
  // A read stops short when the newest event it aimed at went meanwhile
  // (--events-max-age): the next read starts from what is stored now.
  bool complete = false;
  std::vector<Inbound> msgs;
  for (int tries = 0; tries < 3 && !complete; ++tries)
    msgs = js_.read_all(subjects::kEventsStream, subjects::job_events(r.team, r.job_id), 2000, 0,
                        &complete);
  std::vector<std::string> events;
  events.reserve(msgs.size());
  for (auto& m : msgs) events.emplace_back(m.data.begin(), m.data.end());
  r.done(std::move(events),
         complete ? std::string() : "the events stream did not answer in full; retry");
}

StreamLogs::~StreamLogs() {
  reads_.close();
}

void StreamLogs::read(const std::string& subject, Done done) {
  Read r{subject, std::move(done)};
  if (!reads_.post(r)) r.done(false, {}, "too many log reads waiting; retry");
}

void StreamLogs::run(Read& r) {
  const std::string_view team = subjects::team_of_log_chunks(r.subject);
  if (!names::valid_team(team)) {
    r.done(false, {}, "not a subject of workers' output: " + r.subject);
    return;
  }
  logchunks::Assembler log;
  bool complete =
      js_.read_each(subjects::logs_stream(team), r.subject, 2000, 0,
                    [&](std::string_view, std::string_view data, uint64_t) { log.add(data); });
  r.done(log.chunks() > 0, log.log(),
         complete ? std::string() : "the logs stream did not answer in full");
}

BusDispatchGate::BusDispatchGate(bus::Connection& conn) : conn_(conn) {
  for (size_t i = 0; i < kLanes; ++i)
    lanes_.push_back(
        std::make_unique<bus::SerialQueue<Claim>>(kMaxWaiting, [this](Claim& c) { run(c); }));
}

BusDispatchGate::~BusDispatchGate() {
  for (auto& lane : lanes_) lane->close();  // (claims still waiting are dropped)
}

void BusDispatchGate::claim(const std::string& team, const std::string& job_id,
                            const std::string& dispatch, int64_t submitted_ms, Done done) {
  Claim c{team, job_id, dispatch, submitted_ms, std::move(done)};
  auto& lane = *lanes_[std::hash<std::string>{}(job_id) % kLanes];
  if (!lane.post(c)) c.done({false, false, "too many claims waiting"});
}

void BusDispatchGate::run(Claim& c) {
  nlohmann::json body{{"job_id", c.job_id},
                      {"team", c.team},
                      {"dispatch", c.dispatch},
                      {"submitted_ms", c.submitted_ms}};
  std::string err;
  auto reply = conn_.request_via(subjects::kSysDispatchClaim, body.dump(),
                                 subjects::kSysDispatchAnswer, kTimeoutMs, &err);
  if (!reply) {  // no front door there, or it did not answer: asked again later
    c.done({false, false, err.empty() ? "no answer" : err});
    return;
  }
  auto j = json_text::parse(reply->begin(), reply->end());
  if (!j.is_object() || !j.contains("granted") || !j["granted"].is_boolean()) {
    spdlog::warn("front door {}: unreadable answer to the claim of job {}", c.dispatch, c.job_id);
    c.done({false, false, "unreadable answer"});
    return;
  }
  Verdict v;
  v.granted = j["granted"].get<bool>();
  if (auto w = j.find("withdrawn"); !v.granted && w != j.end() && w->is_boolean())
    v.withdrawn = w->get<bool>();
  if (auto r = j.find("reason"); r != j.end() && r->is_string()) v.reason = r->get<std::string>();
  c.done(std::move(v));
}

void BusAgentWatch::watch(const std::string& node) {
  watch(std::vector<std::string>{node});
}

void BusAgentWatch::watch(const std::vector<std::string>& nodes) {
  // Listening before they count as watched: a register in between may come
  // twice (harmless: an agent registers again at will), none is lost. One
  // round trip to the server for all of them.
  std::vector<std::pair<std::string, bus::SubscriptionPtr>> added;
  for (const auto& node : nodes) {
    if (watching(node)) continue;
    auto sub = bus::subscribe_actor(conn_, subjects::agent_to_scheduler(node, ">"), router_);
    if (sub)
      added.emplace_back(node, std::move(sub));
    else
      spdlog::error("cannot listen to the agent of node {}: only its registers are heard", node);
  }
  if (added.empty()) return;
  if (!conn_.flush())
    spdlog::warn("listening to the agents of {} nodes is not confirmed yet", added.size());
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [node, sub] : added) subs_.emplace(node, std::move(sub));
}

bool BusAgentWatch::watching(const std::string& node) const {
  std::lock_guard<std::mutex> lock(mu_);
  return subs_.count(node) != 0;
}

bus::SubscriptionPtr BusAgentWatch::registers(bus::Connection& in) {
  return in.subscribe(subjects::kAllAgentRegisters, [this](Inbound&& msg) {
    if (!watching(std::string(subjects::token(msg.subject, subjects::kAgentNodeToken))))
      caf::anon_send(router_, std::move(msg));
  });
}

}  // namespace troupe::shell

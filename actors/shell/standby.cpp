#include "actors/shell/standby.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "actors/submission.hpp"
#include "bus/subjects.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"

namespace troupe::shell {

namespace {

// How often the front asks whether a leader answers while it hears
// submissions, how long it waits for the answer, and how much it keeps
// waiting to be asked about (more is dropped: a leader would answer it).
constexpr auto kAskEvery = std::chrono::milliseconds(5);
// What the last answering leader heard is asked about once more this long
// after (when nothing else is heard meanwhile).
constexpr auto kAskAgain = std::chrono::milliseconds(50);
constexpr int kAnswerWithinMs = 1000;
constexpr size_t kMaxHeard = 65536;

}  // namespace

struct StandbyFront::Impl : std::enable_shared_from_this<StandbyFront::Impl> {
  Impl(Bus& b, const Options& o) : bus(b), checkpoint_root(o.scheduler.checkpoint_root) {
    if (!o.config_text.empty()) {
      if (auto err = policy::load_config(o.config_text, cfg); !err.empty())
        spdlog::error("standby: config refused: {}", err);  // (checked at start: not seen)
    }
    limits.priority_classes = cfg.class_names();
    id_prefix = submission::job_id_prefix(system_now_ms());
    // Its job numbers start at a random point of 2^40: two processes that
    // start in the same millisecond share a prefix, and two standbys'
    // fronts (or a front and a leader) must still never hand out one id.
    std::random_device rd;
    id_base = ((uint64_t{rd()} << 32) | rd()) & ((uint64_t{1} << 40) - 1);
  }

  Bus& bus;
  policy::ClusterConfig cfg = policy::open_config();
  spec::Limits limits;
  std::string checkpoint_root;
  std::string id_prefix;
  uint64_t next_seq = 0;  // the worker's only
  uint64_t id_base = 0;   // job ids: id_prefix + (id_base + next_seq), base 36

  std::mutex mu;
  std::condition_variable cv;
  std::deque<Inbound> heard;
  // What was heard before the last leader that answered did (`kept_by`, its
  // answer): recorded too when the next question is answered by another
  // leader or by none, since that leader may have died before it replied.
  // A submission it had recorded is the same job then (the intake stream's
  // message id), answered with its id. The worker's only.
  std::deque<Inbound> kept;
  std::string kept_by;
  // Handover: the marker this process published after its router subscribed.
  // What the front hears before it is recorded (the router may have missed
  // it); what comes after it, the router hears.
  std::string marker;
  bool marker_heard = false;
  bool stopping = false;
  int64_t dropped = 0, recorded = 0;
  bus::SubscriptionPtr sub;
  std::thread worker;

  void hear(Inbound&& in) {
    std::lock_guard<std::mutex> lock(mu);
    if (!marker.empty()) {
      if (marker_heard) return;
      if (in.subject == subjects::team_submit(names::kSysToken) &&
          std::string(in.data.begin(), in.data.end()) == marker) {
        marker_heard = true;
        cv.notify_all();
        return;
      }
    }
    if (heard.size() >= kMaxHeard) {
      ++dropped;
      return;
    }
    heard.push_back(std::move(in));
    cv.notify_all();
  }

  // The answer of a leader (this process's own router included: it names
  // its epoch); none when no leader answers.
  std::optional<std::string> leader_answer() {
    std::string err;
    auto r = bus.out->request(subjects::kSysLeaderAlive, std::string("{}"), kAnswerWithinMs, &err);
    if (!r) return std::nullopt;
    return std::string(r->begin(), r->end());
  }

  void answer(const std::string& reply, bool flatbuffers, const std::string& job_id,
              const std::string& error, policy::Refusal code = policy::Refusal::none) {
    if (!reply.empty())
      bus.out->publish(reply, submission::reply(flatbuffers, job_id, error, code));
  }

  void record(const Inbound& in) {
    auto opened = submission::open(in.subject, in.data);
    const bool fb = opened.flatbuffers;
    if (!opened.verdict.ok()) {
      answer(in.reply, fb, {}, opened.verdict.error, opened.verdict.code);
      return;
    }
    auto read = submission::read(opened, in.data, cfg, limits);
    if (!read.verdict.ok()) {
      answer(in.reply, fb, {}, read.verdict.error, read.verdict.code);
      return;
    }
    const std::string& team = opened.team;
    auto& s = read.spec;
    if (auto v =
            policy::check_job_gpus(cfg.limits_of(team), team, s.workers(), s.resources().gpus());
        !v.ok()) {
      answer(in.reply, fb, {}, v.error, v.code);
      return;
    }
    std::string key = submission::key_of(team, s);
    std::string idem = s.idempotency_key();
    std::string fp = key.empty() ? std::string() : spec::fingerprint(s);
    std::string job_id = submission::job_id(id_prefix, id_base + ++next_seq);
    auto rec = submission::make_record(std::move(s), read.adm, cfg, checkpoint_root, job_id,
                                       next_seq, system_now_ms());
    std::string bytes;
    rec.SerializeToString(&bytes);
    bus.js->publish_unique(
        subjects::handoff(team), bytes.data(), bytes.size(),
        submission::intake_msg_id(team, key, in.reply, in.data, job_id),
        [self = shared_from_this(), reply = in.reply, fb, job_id, idem,
         fp](bus::JetStream::Unique u) {
          if (!reply.empty())
            self->bus.out->publish(
                reply, submission::appended_reply(fb, job_id, u.ok, u.duplicate, u.error,
                                                  std::string(u.original.begin(), u.original.end()),
                                                  idem, fp));
        });
    if (++recorded == 1 || recorded % 1000 == 0)
      spdlog::warn("standby: no leader answers; {} submission(s) recorded for the next one",
                   recorded);
  }

  void run() {
    auto asked = std::chrono::steady_clock::now() - kAskEvery;
    for (;;) {
      std::deque<Inbound> batch;
      bool handing_over = false;
      {
        std::unique_lock<std::mutex> lock(mu);
        auto ready = [&] { return stopping || !heard.empty(); };
        if (kept.empty())
          cv.wait(lock, ready);
        else
          cv.wait_until(lock, asked + kAskAgain, ready);
        if (stopping && heard.empty()) return;  // nothing left
        if (marker.empty() && !stopping && !heard.empty())
          cv.wait_until(lock, asked + kAskEvery, [&] { return stopping || !marker.empty(); });
        batch.swap(heard);
        handing_over = !marker.empty();
      }
      // What was heard before the question was the leader's too: it has it
      // when it answers. (Handing over, nothing is asked: what is heard
      // before the marker is recorded.)
      if (!handing_over) {
        asked = std::chrono::steady_clock::now();
        auto who = leader_answer();
        if (who && *who == kept_by) kept.clear();  // the same leader lives: it answered them
        if (who) {
          for (const auto& in : kept) record(in);  // another leader: the one that had them is gone
          kept.swap(batch);
          kept_by = *who;
          continue;
        }
      }
      for (const auto& in : kept) record(in);
      kept.clear();
      for (const auto& in : batch) record(in);
    }
  }
};

StandbyFront::StandbyFront(Bus& bus, const Options& o) : impl_(std::make_shared<Impl>(bus, o)) {
  auto* impl = impl_.get();
  impl_->worker = std::thread([impl] { impl->run(); });
  impl_->sub =
      bus.in->subscribe(subjects::kAllSubmit, [impl](Inbound&& in) { impl->hear(std::move(in)); });
  if (!impl_->sub) spdlog::error("standby: cannot subscribe to {}", subjects::kAllSubmit);
}

void StandbyFront::handover() {
  auto& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.marker = "troupe-handover-" + std::to_string(system_now_ms()) + "-" +
               std::to_string(reinterpret_cast<uintptr_t>(impl_.get()));
    m.cv.notify_all();
  }
  // On the connection the router subscribed on, after its subscriptions: the
  // server delivers the marker after whatever it gave the front alone. (The
  // router ignores a troupe.sys.submit without a reply.)
  m.bus.in->publish(subjects::team_submit(names::kSysToken), m.marker);
  m.bus.in->flush();
  std::unique_lock<std::mutex> lock(m.mu);
  if (!m.cv.wait_for(lock, std::chrono::seconds(2), [&] { return m.marker_heard; }))
    spdlog::warn("standby: the handover marker did not come back within 2 s");
}

StandbyFront::~StandbyFront() {
  impl_->sub.reset();
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
    impl_->cv.notify_one();
  }
  if (impl_->worker.joinable()) impl_->worker.join();
  if (impl_->recorded > 0 || impl_->dropped > 0)
    spdlog::info("standby: {} submission(s) recorded while no leader answered, {} dropped",
                 impl_->recorded, impl_->dropped);
}

}  // namespace troupe::shell

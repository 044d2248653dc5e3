// troupe-dispatch's shell (see front.hpp).
#include "gateway/dispatch/front.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "actors/policy/config.hpp"
#include "actors/policy/schedule_book.hpp"
#include "actors/policy/usage.hpp"
#include "bus/lease.hpp"
#include "bus/requester.hpp"
#include "bus/serial_queue.hpp"
#include "bus/subjects.hpp"
#include "messages/event_json.hpp"
#include "messages/json_text.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"
#include "messages/wire.hpp"

namespace troupe::dispatch {
namespace {

using Json = nlohmann::json;
namespace sj = troupe::subjects;
namespace sch = troupe::policy::schedule;
namespace usage = troupe::policy::usage;

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

Json error_json(const std::string& error, const std::string& code) {
  return Json{{"error", error}, {"code", code}};
}

// An event of a job the front door had not learnt yet (its cluster's reply
// to the submission comes after the job's first event), kept for a while.
struct Early {
  int64_t at_ms = 0;
  std::string team;
  std::string json;
};
constexpr int64_t kEarlyKeepMs = 30000;
constexpr size_t kMaxEarly = 100000;
constexpr int64_t kClaimWaitMs = 1000;

// The verbs sent on to the job's cluster.
constexpr std::string_view kForwarded[] = {sj::kStatus, sj::kCancel, sj::kLogs, sj::kWhy,
                                           sj::kHistory};

}  // namespace

// One cluster behind the front door.
struct Remote {
  ClusterEntry entry;
  std::shared_ptr<bus::Connection> conn;  // null until it could be opened (under Impl::mu)
  // Submissions' requests to it, many out at once (with `conn`; under
  // Impl::mu; declared after it: it goes first).
  std::shared_ptr<bus::Requester> requests;
  bus::SubscriptionPtr events;
  bus::SubscriptionPtr claims;
  ClusterState state;
};

struct Front::Impl {
  FrontOptions opts;
  bus::ConnectionPtr front;
  std::unique_ptr<bus::JetStream> js;
  std::unique_ptr<bus::KeyValue> kv;
  std::unique_ptr<bus::Lease> lease;
  // The lease is known valid until then (steady clock): the start of its
  // last renewal plus the ttl (a standby waits the ttl of silence first).
  std::atomic<int64_t> valid_until{0};
  bool serving() const { return bus::steady_ms() < valid_until.load(); }
  bool silent = false;  // (the ticks') whether it last found the lease not known valid
  std::vector<bus::SubscriptionPtr> subs;
  bus::ConsumerPtr enqueued;  // troupe.*.enqueue off TROUPE_FRONT_INTAKE (null: not served)
  std::vector<std::unique_ptr<Remote>> remotes;
  int64_t started_ms = now_ms();
  std::atomic<uint64_t> next{0};
  // Submissions are parsed, checked and sent on in kSubmitLanes lanes (a
  // thread each, round robin); none waits there for its cluster's answer
  // (bus::Requester): up to kMaxOut are out at once, then a lane waits for
  // one to end. Under `mu`: the GPUs of submissions being sent, per team and
  // cluster, held against the team's quota meanwhile. (Until 2026-12-06
  // each of 128 lanes waited for its submission's answer: about 1,400
  // submissions/s on the 2-core VM, docs/performance.md "The front door".
  // At most 32,768 wait in the lanes in all.)
  static constexpr size_t kSubmitLanes = 4;
  static constexpr size_t kMaxWaitingSubmits = 32768 / kSubmitLanes;
  static constexpr size_t kMaxOut = 8192;
  std::mutex out_mu;  // out, closing
  std::condition_variable out_cv;
  size_t out = 0;
  bool closing = false;
  std::vector<std::unique_ptr<bus::SerialQueue<troupe::Inbound>>> submit_lanes;
  std::atomic<uint64_t> next_lane{0};
  // The requests that wait for a cluster's answer (status, cancel, logs,
  // why, history, pipeline, jobs) are handled in lanes of their own too, so
  // that a cluster slow to answer holds up one lane's requests, not every
  // request of that verb (a subscription's delivery thread is one thread).
  struct Request {
    troupe::Inbound in;
    const bus::Handler* handle = nullptr;  // one of request_handlers
  };
  static constexpr size_t kRequestLanes = 16;
  static constexpr size_t kMaxWaitingRequests = 256;
  std::vector<std::unique_ptr<bus::SerialQueue<Request>>> request_lanes;
  std::atomic<uint64_t> next_request_lane{0};
  std::deque<bus::Handler> request_handlers;  // (a deque: each stays put)
  // troupe.<team>.usage: read off TROUPE_FRONT_EVENTS (false: it could not be
  // made; usage is then not served) on a thread of its own, one
  // report at a time; at most kMaxWaitingUsage wait, more are refused.
  bool events_kept = false;
  static constexpr size_t kMaxWaitingUsage = 16;
  std::unique_ptr<bus::SerialQueue<troupe::Inbound>> usage_reads;
  // Idempotency keys of submissions being sent (under `mu`): a second
  // submission with one waits in key_waiters until the first is recorded or
  // refused (then it is a duplicate, or sent).
  std::set<std::string> sending_keys;
  std::map<std::string, std::vector<std::function<void()>>> key_waiters;
  std::map<std::string, std::map<std::string, int64_t>> in_flight;

  std::mutex mu;  // everything below
  struct Held {
    JobPlace place;
    uint64_t revision = 0;
    TeamUse::Counted counted;  // what it counts in `use` now: recount()
  };
  std::map<std::string, Held> places;  // front id -> where it is
  // Jobs being spilled over or re-dispatched now: a submission that waits
  // for one of them is answered unavailable (sent again, it finds the copy
  // that stays).
  std::set<std::string> moving;
  std::map<std::string, std::string> by_remote_id;  // cluster/id -> front id
  // A pipeline's idempotency key (team/pipeline/key) -> the cluster it went
  // to: sent again, it goes there again (the cluster answers its first reply).
  // Restored from its members' places (JobPlace::pipeline_key); forgotten
  // with them.
  std::map<std::string, std::string> pipeline_keys;
  std::map<std::string, Json> last_events;  // front id -> its last event mirrored
  // Every team's schedules kept at the front door (troupe.<team>.schedule,
  // the same requests as a cluster's): each tick's run is submitted here as
  // any job is, so it goes to a cluster by the same rules. Stored in
  // TROUPE_DISPATCH under sched.<team>.<name> (the record's bytes), with the
  // revision each was last written at.
  sch::Book schedules;
  std::map<sch::Key, uint64_t> schedule_revisions;
  // The ids of the jobs not known ended (sent or started), by team: what
  // choose_for, spill and redispatch look at, not every job ever sent (a
  // submission's quota check was linear in the front door's history).
  // Pruned as their jobs end. Under `mu`.
  // Each points into `places` (a std::map: it stays put until erased, and
  // forget_old erases it here too), so a walk looks nothing up.
  std::map<std::string, std::map<std::string, Held*>> live;

  void add_live(Held& h) {
    if (is_live(h.place)) live[h.place.team][h.place.job_id] = &h;
    recount(h);
  }
  // The GPUs of the live jobs, by team and cluster. Under `mu`.
  TeamUse use;
  // Under `mu`: after a change of a place's state or cluster, and before it
  // is erased (`gone`).
  void recount(Held& h, bool gone = false) { use.recount(h.place, &h.counted, gone); }
  // f(Held&) for each live job of `team` (every team's when null). Under `mu`.
  template <class F>
  void each_live(const std::string* team, F f) {
    auto visit = [&](std::map<std::string, Held*>& ids) {
      for (auto it = ids.begin(); it != ids.end();) {
        if (!is_live(it->second->place)) {
          it = ids.erase(it);
          continue;
        }
        f(*it->second);
        ++it;
      }
    };
    if (team == nullptr) {
      for (auto& [t, ids] : live) visit(ids);
    } else if (auto t = live.find(*team); t != live.end()) {
      visit(t->second);
    }
  }
  std::map<std::string, std::string> withdrawn;  // a copy left behind: cluster/id -> front id
  // Claims of copies not learnt yet (the claim came before the cluster's
  // reply to the submission): answered once learnt, or refused after a while.
  struct Claim {
    std::string cluster, id, reply;
    int64_t at_ms = 0;
    int64_t submitted_ms = 0;  // when its cluster took the copy (0: not said)
  };
  std::map<std::string, Claim> waiting_claims;      // cluster/id ->
  std::map<std::string, std::string> keys;          // team/idempotency key -> front id
  std::map<std::string, std::vector<Early>> early;  // cluster/id -> its events so far
  size_t early_count = 0;
  std::map<std::string, int64_t> counters;

  static std::string remote_key(const std::string& cluster, const std::string& id) {
    return cluster + "/" + id;
  }

  void count(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    ++counters[what];
  }

  // A handler that lets no exception out (a message no check foresaw): it is
  // counted malformed, logged, and answered with an error when `answer` and
  // it asked for a reply on the front NATS.
  template <typename F>
  bus::Handler guard(std::string what, bool answer, F f) {
    return [this, what = std::move(what), answer, f = std::move(f)](troupe::Inbound&& in) {
      const std::string reply_to = in.reply;
      if (!serving()) {  // its lease not known valid: silent (asked again, or the standby answers)
        count("not_serving");
        return;
      }
      try {
        f(std::move(in));
      } catch (const std::exception& e) {
        count("malformed");
        spdlog::warn("dispatch: a message on {} could not be handled: {}", what, e.what());
        if (answer && !reply_to.empty())
          front->publish(reply_to,
                         dump_json(error_json(std::string("cannot handle the request: ") + e.what(),
                                              "malformed")));
      }
    };
  }

  void reply(const troupe::Inbound& in, const Json& j) {
    if (!in.reply.empty()) front->publish(in.reply, dump_json(j));
  }

  Remote* remote(const std::string& name) {
    for (auto& r : remotes)
      if (r->entry.name == name) return r.get();
    return nullptr;
  }

  std::shared_ptr<bus::Connection> conn_of(const std::string& cluster) {
    std::lock_guard<std::mutex> lock(mu);
    auto* r = remote(cluster);
    return r != nullptr && r->state.reachable ? r->conn : nullptr;
  }

  std::shared_ptr<bus::Requester> requester_of(const std::string& cluster) {
    std::lock_guard<std::mutex> lock(mu);
    auto* r = remote(cluster);
    return r != nullptr && r->state.reachable ? r->requests : nullptr;
  }

  static std::string unreachable(const std::string& cluster) {
    return "cluster " + cluster + " is unreachable";
  }

  // A cluster's answer as JSON; nullopt (and `error`) when none came or it
  // is not JSON.
  static std::optional<Json> answer_of(const std::string& cluster,
                                       const std::optional<std::vector<uint8_t>>& r,
                                       std::string* error) {
    if (!r) {
      *error = "cluster " + cluster + ": " + *error;
      return std::nullopt;
    }
    Json j = json_text::parse<Json>(r->begin(), r->end());
    if (j.is_discarded()) {
      *error = "cluster " + cluster + " answered with something not JSON";
      return std::nullopt;
    }
    return j;
  }

  // A JSON request to a cluster; nullopt (and `error`) when none answered.
  std::optional<Json> ask(const std::string& cluster, const std::string& subject,
                          const std::string& body, std::string* error) {
    auto c = conn_of(cluster);
    if (!c) {
      *error = unreachable(cluster);
      return std::nullopt;
    }
    return answer_of(cluster, c->request(subject, body, opts.request_timeout_ms, error), error);
  }

  // Places are written behind their changes: store() marks a place dirty
  // and the writer thread writes every dirty place's newest record, many at
  // once (KeyValue::write_all, compare-and-set on the revision it last
  // wrote), so no KV round trip is made under `mu` and the lanes' writes
  // share their round trips. A place's writes are in order (one batch at a
  // time; a place changed while its write is out is written again after).
  // Under `mu`: the dirty places, each with what to call once written (with
  // the revision written, 0: not), and those being written now.
  using Written = std::function<void(uint64_t revision)>;
  std::map<std::string, std::vector<Written>> dirty;  // front id ->
  std::set<std::string> writing;
  std::condition_variable dirty_cv;
  // What a `done` left to run once `mu` is released (the writer runs them).
  std::vector<std::function<void()>> after_write;
  bool writer_stop = false;
  std::thread writer;
  static constexpr size_t kWriteBatch = 512;

  // Under `mu`: `h` (in `places`) is written behind; `done`, if any, is
  // called under `mu` once it is.
  void store(const Held& h, Written done = {}) {
    auto& d = dirty[h.place.job_id];
    if (done) d.push_back(std::move(done));
    dirty_cv.notify_one();
  }
  // Under `mu`: the same, and the revision written (0: not) to wait for once
  // `mu` is released (an acknowledged submission is stored).
  std::future<uint64_t> store_waited(const Held& h) {
    auto written = std::make_shared<std::promise<uint64_t>>();
    auto f = written->get_future();
    store(h, [written](uint64_t rev) { written->set_value(rev); });
    return f;
  }

  // The writer thread: until stopped and nothing is dirty.
  void write_places() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      dirty_cv.wait(lock, [this] { return writer_stop || !dirty.empty(); });
      if (dirty.empty()) return;  // (stopped)
      std::vector<std::string> ids;
      std::vector<bus::KeyValue::Write> writes;
      std::vector<std::vector<Written>> dones;
      for (auto it = dirty.begin(); it != dirty.end() && writes.size() < kWriteBatch;) {
        auto p = places.find(it->first);
        if (p == places.end()) {  // forgotten meanwhile: nothing to write
          for (auto& done : it->second) done(0);
          it = dirty.erase(it);
          continue;
        }
        ids.push_back(it->first);
        writes.push_back({place_key(it->first), to_json(p->second.place), p->second.revision});
        dones.push_back(std::move(it->second));
        writing.insert(it->first);
        it = dirty.erase(it);
      }
      if (writes.empty()) {
        run_after_write(lock);
        continue;
      }
      lock.unlock();
      auto results = kv->write_all(writes, opts.request_timeout_ms);
      lock.lock();
      for (size_t i = 0; i < ids.size(); ++i) {
        writing.erase(ids[i]);
        const auto r = i < results.size() ? results[i] : bus::KeyValue::Result{};
        if (r.revision == 0)
          spdlog::error("dispatch: {} not stored ({})", ids[i],
                        r.conflict ? "another front door wrote it" : r.error);
        else if (auto p = places.find(ids[i]); p != places.end())
          p->second.revision = r.revision;
        for (auto& done : dones[i]) done(r.revision);
      }
      run_after_write(lock);
    }
  }
  void run_after_write(std::unique_lock<std::mutex>& lock) {
    if (after_write.empty()) return;
    auto due = std::move(after_write);
    after_write.clear();
    lock.unlock();
    for (auto& f : due) f();
    lock.lock();
  }

  // --- schedules --------------------------------------------------------------

  static std::string schedule_kv_key(const sch::Key& k) {
    return "sched." + k.first + "." + k.second;
  }
  // Writes a schedule's record over what it last wrote (over a deleted one's
  // marker, for a name made again). Under `mu`.
  void store_schedule(const pb::ScheduleRecord& r) {
    const sch::Key k{r.team(), r.name()};
    const std::string key = schedule_kv_key(k);
    auto known = schedule_revisions.find(k);
    uint64_t expected = known != schedule_revisions.end() ? known->second : kv->last_revision(key);
    bool conflict = false;
    std::string err;
    auto rev = kv->update(key, r.SerializeAsString(), expected, &conflict, &err);
    if (rev == 0) {
      spdlog::error("dispatch: schedule {}/{} not stored ({})", k.first, k.second,
                    conflict ? "another front door wrote it" : err);
      return;
    }
    schedule_revisions[k] = rev;
  }
  void purge_schedule(const sch::Key& k) {
    auto known = schedule_revisions.find(k);
    uint64_t expected = known != schedule_revisions.end() ? known->second : 0;
    schedule_revisions.erase(k);
    auto done = kv->write_all({{schedule_kv_key(k), "", expected}}, opts.request_timeout_ms);
    if (done.empty() || done.front().revision == 0)
      spdlog::error("dispatch: schedule {}/{} not purged from {}", k.first, k.second,
                    sj::kDispatchBucket);
  }

  void on_schedule(troupe::Inbound&& in) {
    std::string team;
    if (!team_of(in, &team)) return;
    sch::Book::Answer a;
    {
      std::lock_guard<std::mutex> lock(mu);
      a = schedules.request(team, std::string(in.data.begin(), in.data.end()), now_ms());
      if (a.put) store_schedule(*a.put);
      if (a.purged) purge_schedule(*a.purged);
    }
    if (a.fault != sch::Book::Fault::none) {
      count("malformed");
      return reply(in, error_json(a.error, a.fault == sch::Book::Fault::not_found ? "not_found"
                                                                                  : "bad_request"));
    }
    reply(in, a.reply);
  }

  // Each tick: the schedules' due ticks. A run goes out as a submission of
  // its team (its tick's idempotency key: fired again after a restart, it
  // gets the same job); concurrency forbid/replace looks at the last run's
  // place. The record is written once the run is.
  void fire_schedules() {
    const int64_t now = now_ms();
    struct Run {
      pb::ScheduleRecord r;
      sch::Due d;
      std::string cancel;  // replace: the last run, canceled first
    };
    std::vector<Run> runs;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (auto& [k, r] : schedules.records()) {
        auto d = sch::due_now(r, now);
        if (d.fire_tick_ms < 0) {
          if (!r.suspended() && d.latest_tick_ms > r.last_tick_ms()) {
            sch::pass_over(r, d, false);
            store_schedule(r);
          }
          continue;
        }
        auto conc = sch::parse_concurrency(r.concurrency()).value_or(sch::Concurrency::allow);
        auto last = places.find(r.last_run());
        bool active = last != places.end() && is_live(last->second.place);
        auto action = sch::on_tick(conc, active);
        if (action == sch::Action::skip) {
          sch::pass_over(r, d, true);
          store_schedule(r);
          continue;
        }
        runs.push_back(
            {r, d, action == sch::Action::replace_then_start ? r.last_run() : std::string()});
      }
    }
    for (auto& run : runs) {
      const std::string& team = run.r.team();
      if (!run.cancel.empty()) cancel_run(team, run.cancel);
      pb::JobSpec job = sch::run_spec(run.r, run.d.fire_tick_ms);
      Json res =
          submit(team, job, spec::to_json(job),
                 {{std::string(names::kScheduleLabel), run.r.name()},
                  {std::string(names::kScheduleTickLabel), std::to_string(run.d.fire_tick_ms)}});
      count("schedule_runs");
      std::lock_guard<std::mutex> lock(mu);
      auto* r = schedules.find({team, run.r.name()});
      if (r == nullptr) continue;  // deleted meanwhile
      sch::record_run(*r, run.d.fire_tick_ms, run.d.missed, string_of(res, "job_id"),
                      string_of(res, "error"));
      if (!string_of(res, "error").empty())
        spdlog::warn("dispatch: schedule {}/{}: the run of tick {} was refused: {}", team,
                     run.r.name(), run.d.fire_tick_ms, string_of(res, "error"));
      store_schedule(*r);
    }
  }

  // A schedule's last run canceled (concurrency replace) in its cluster.
  void cancel_run(const std::string& team, const std::string& id) {
    std::optional<JobPlace> p;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (auto it = places.find(id); it != places.end()) p = it->second.place;
    }
    if (!p || p->cluster.empty()) return;
    std::string err;
    if (!ask(p->cluster, sj::team_verb(team, sj::kCancel),
             Json{{"job_id", p->cluster_job_id}}.dump(), &err))
      spdlog::warn("dispatch: the last run {} of a schedule was not canceled: {}", id, err);
  }

  // A job's place learnt: its events from now on (and those that came
  // early) are published under the front door's id. Under `mu`.
  void learn(const JobPlace& p) {
    auto k = remote_key(p.cluster, p.cluster_job_id);
    by_remote_id[k] = p.job_id;
    if (auto c = waiting_claims.find(k); c != waiting_claims.end()) {
      auto claim = std::move(c->second);
      waiting_claims.erase(c);
      answer(claim.cluster, claim.id, claim.reply, claim.submitted_ms);
    }
    auto e = early.find(k);
    if (e == early.end()) return;
    for (auto& ev : e->second) mirror(p, ev.json);
    early_count -= e->second.size();
    early.erase(e);
  }

  // An event of a cluster's job, published on the front NATS under the
  // front door's id; the place follows the job's state. Under `mu`.
  void mirror(const JobPlace& p, const std::string& json) {
    Json e = json_text::parse<Json>(json);
    if (!e.is_object()) {
      ++counters["malformed_events"];
      return;
    }
    e["job_id"] = p.job_id;
    e["cluster"] = p.cluster;
    front->publish(sj::job_events(p.team, p.job_id), dump_json(e));
    ++counters["events_mirrored"];
    auto state = string_of(e, "state");
    auto it = places.find(p.job_id);
    if (it == places.end()) return;
    auto& h = it->second;
    if (!state.empty() && h.place.state != "ended") h.place.last_state = state;
    if (state == names::kRunning)
      if (int64_t at = event_ms(e); at > 0) h.place.started_ms = at;
    last_events[p.job_id] = std::move(e);
    std::string next = h.place.state;
    if (names::is_terminal(state))
      next = "ended";
    else if (state == names::kStarting || state == names::kRunning)
      next = "started";
    if (next != h.place.state && h.place.state != "ended") {
      h.place.state = next;
      if (next == "ended") h.place.ended_ms = now_ms();
      recount(h);
      store(h);
    }
  }

  // A cluster's scheduler asks leave to start its copy of a job: granted
  // only to the copy the job's place names, once; a copy left behind is
  // answered withdrawn (policy::answer_claim).
  void on_claim(const std::string& cluster, troupe::Inbound&& in) {
    Json body = json_text::parse<Json>(in.data.begin(), in.data.end());
    std::string id = string_of(body, "job_id");
    int64_t submitted_ms = 0;
    if (auto s = body.is_object() ? body.find("submitted_ms") : body.end();
        s != body.end() && s->is_number_integer())
      submitted_ms = s->get<int64_t>();
    std::lock_guard<std::mutex> lock(mu);
    const auto k = remote_key(cluster, id);
    if (!by_remote_id.count(k) && !withdrawn.count(k) && !id.empty() &&
        waiting_claims.size() < kMaxEarly) {
      waiting_claims[k] = Claim{cluster, id, in.reply, now_ms(), submitted_ms};
      return;
    }
    answer(cluster, id, in.reply, submitted_ms);
  }

  // Under `mu`. `submitted_ms`: when the cluster took its copy (0: not said).
  void answer(const std::string& cluster, const std::string& id, const std::string& reply,
              int64_t submitted_ms) {
    const auto k = remote_key(cluster, id);
    Held* h = nullptr;
    for (const auto* m : {&by_remote_id, &withdrawn})
      if (auto f = m->find(k); f != m->end() && h == nullptr)
        if (auto p = places.find(f->second); p != places.end()) h = &p->second;
    auto a = answer_claim(h ? &h->place : nullptr, cluster, id,
                          submitted_ms > 0 ? now_ms() - submitted_ms : -1,
                          opts.config.job_retention_s * 1000);
    // Granted once the grant is stored: not stored, not granted (asked again
    // later). A claim asked again while its grant is still being written
    // waits for that write too (not granted before it is stored).
    const std::string& job = h != nullptr ? h->place.job_id : id;
    if (a.granted &&
        (h->place.state == "sent" || dirty.count(job) != 0 || writing.count(job) != 0)) {
      h->place.state = "started";
      store(*h, [this, cluster, reply, a, job_id = h->place.job_id](uint64_t rev) mutable {
        if (rev == 0) {
          if (auto p = places.find(job_id); p != places.end() && p->second.place.state == "started")
            p->second.place.state = "sent";
          a.granted = false;
          a.reason = "the front door could not store the grant";
        }
        answered(cluster, reply, a);
      });
      return;
    }
    answered(cluster, reply, a);
  }
  // (under `mu`)
  void answered(const std::string& cluster, const std::string& reply, const ClaimAnswer& a) {
    ++counters[a.granted ? "claims_granted" : a.withdrawn ? "claims_withdrawn" : "claims_refused"];
    if (reply.empty()) return;
    if (auto c = remote(cluster)->conn)
      c->publish(reply,
                 dump_json(Json{
                     {"granted", a.granted}, {"withdrawn", a.withdrawn}, {"reason", a.reason}}));
  }

  // The job's copy in its cluster is left behind for `moved` (sent
  // elsewhere): its events are no longer the job's, its claim is answered
  // withdrawn. Under `mu`.
  void move(Held& h, const JobPlace& moved) {
    const auto old = remote_key(h.place.cluster, h.place.cluster_job_id);
    by_remote_id.erase(old);
    withdrawn[old] = h.place.job_id;
    h.place.withdrawn.push_back(old);
    h.place.tried.push_back(h.place.cluster);
    h.place.cluster = moved.cluster;
    h.place.cluster_job_id = moved.cluster_job_id;
    h.place.sent_ms = moved.sent_ms;
    h.place.state = "sent";
    add_live(h);
    store(h);
    learn(h.place);
  }

  void on_event(const std::string& cluster, troupe::Inbound&& in) {
    std::string team(sj::token(in.subject, sj::kTeamToken));
    std::string id(sj::token(in.subject, 3));
    std::string json(in.data.begin(), in.data.end());
    std::lock_guard<std::mutex> lock(mu);
    auto k = remote_key(cluster, id);
    auto f = by_remote_id.find(k);
    if (f != by_remote_id.end()) {
      auto p = places.find(f->second);
      if (p != places.end()) mirror(p->second.place, json);
      return;
    }
    if (early_count >= kMaxEarly) return;  // a cluster's own jobs: not ours to mirror
    early[k].push_back(Early{now_ms(), team, std::move(json)});
    ++early_count;
  }

  // A stored place's entry in `keys` ("" when its spec has no idempotency key).
  static std::string key_of(const JobPlace& p) {
    auto parsed = spec::from_text(p.spec_json);
    return parsed.ok && !parsed.spec.idempotency_key().empty()
               ? p.team + "/" + parsed.spec.idempotency_key()
               : std::string();
  }

  // Jobs past the retention (policy past_retention): forgotten, at most
  // kPurgeBatch a tick, their keys purged from TROUPE_DISPATCH (a purge lost
  // now is done again after a restart: the place comes back past it).
  // Every place is looked at, so not at every tick: at most every minute (a
  // short retention: every half of it).
  static constexpr size_t kPurgeBatch = 1000;
  int64_t next_forget_ms = 0;
  void forget_old() {
    const int64_t retention_ms = opts.config.job_retention_s * 1000;
    const int64_t now = now_ms();
    if (retention_ms <= 0 || now < next_forget_ms) return;
    std::vector<bus::KeyValue::Write> purges;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (auto it = places.begin(); it != places.end() && purges.size() < kPurgeBatch;) {
        const JobPlace& p = it->second.place;
        if (!past_retention(p, now, retention_ms) || dirty.count(p.job_id) ||
            writing.count(p.job_id)) {  // (one being written: at a later pass)
          ++it;
          continue;
        }
        if (!p.cluster.empty()) by_remote_id.erase(remote_key(p.cluster, p.cluster_job_id));
        for (const auto& w : p.withdrawn) withdrawn.erase(w);
        if (auto key = key_of(p); !key.empty()) keys.erase(key);
        if (!p.pipeline_key.empty()) pipeline_keys.erase(p.pipeline_key);
        if (auto l = live.find(p.team); l != live.end()) l->second.erase(p.job_id);
        recount(it->second, true);
        last_events.erase(p.job_id);
        purges.push_back({place_key(p.job_id), "", it->second.revision});
        it = places.erase(it);
      }
      counters["forgotten"] += static_cast<int64_t>(purges.size());
    }
    // (a full batch: the rest at the next tick)
    if (purges.size() < kPurgeBatch)
      next_forget_ms = now + std::min<int64_t>(60000, retention_ms / 2);
    if (!purges.empty()) {
      kv->write_all(purges, opts.request_timeout_ms);
      spdlog::info("dispatch: {} jobs past the retention ({} s) forgotten", purges.size(),
                   opts.config.job_retention_s);
    }
  }

  void prune_early() {
    std::lock_guard<std::mutex> lock(mu);
    // Claims of copies still unknown after a while: refused (asked again).
    for (auto it = waiting_claims.begin(); it != waiting_claims.end();) {
      if (it->second.at_ms < now_ms() - kClaimWaitMs) {
        auto claim = std::move(it->second);
        it = waiting_claims.erase(it);
        answer(claim.cluster, claim.id, claim.reply, claim.submitted_ms);
      } else {
        ++it;
      }
    }
    int64_t cut = now_ms() - kEarlyKeepMs;
    for (auto it = early.begin(); it != early.end();) {
      if (!it->second.empty() && it->second.back().at_ms < cut) {
        early_count -= it->second.size();
        it = early.erase(it);
      } else {
        ++it;
      }
    }
  }

  // --- submissions --------------------------------------------------------

  // Sends the spec to the clusters of `order` in turn until one takes it (a
  // cluster that refuses it for good ends the search): `done` gets the
  // place, or nullopt and the error reply, once, on a NATS thread (or this
  // one, when no cluster could be asked). Nothing waits meanwhile: many
  // submissions are out at once (bus::Requester).
  using Sent = std::function<void(std::optional<JobPlace>, const Json& refusal)>;
  struct Sending {
    std::string team, text, body, pool;
    std::vector<std::string> order;
    size_t at = 0;        // the cluster of `order` asked now
    bool to_pool = true;  // asked on the pool's subject there (else the team's)
    Json refusal = error_json("no cluster took the job", "unavailable");
    Sent done;
  };
  void send(const std::string& team, const std::string& text, std::vector<std::string> order,
            Sent done) {
    auto s = std::make_shared<Sending>();
    // Its cluster starts it only once this front door grants it (on_claim).
    Json spec = json_text::parse<Json>(text);
    if (!spec.is_object())
      return done(std::nullopt, error_json("the job spec is not a JSON object", "invalid_spec"));
    spec["dispatch"] = opts.config.name;
    s->team = team;
    s->text = text;
    s->body = spec.dump();
    // A spec naming its pool goes to the pool's subject (read by the shard
    // that owns the pool, nothing handed over), or to the team's where no
    // scheduler listens there; as `troupe submit` sends it (Client::submit).
    // A pool that is no subject token is the cluster's to refuse.
    s->pool = string_of(spec, "pool");
    s->order = std::move(order);
    s->done = std::move(done);
    send_next(std::move(s));
  }
  // Asks cluster `order[at]` (on the pool's subject unless `to_pool` was
  // cleared), or the next one reachable.
  void send_next(std::shared_ptr<Sending> s) {
    for (; s->at < s->order.size(); ++s->at, s->to_pool = true) {
      const std::string& cluster = s->order[s->at];
      auto requests = requester_of(cluster);
      if (!requests) {
        s->refusal = error_json(unreachable(cluster), "unavailable");
        continue;
      }
      const bool to_pool = s->to_pool && !s->pool.empty() && sj::check_token(s->pool).empty();
      s->to_pool = to_pool;
      requests->request(to_pool ? sj::team_submit_to(s->team, s->pool) : sj::team_submit(s->team),
                        s->body, static_cast<int>(opts.request_timeout_ms),
                        [this, s](std::optional<std::vector<uint8_t>> reply, std::string error) {
                          on_sent(s, reply, &error);
                        });
      return;
    }
    s->done(std::nullopt, s->refusal);
  }
  void on_sent(const std::shared_ptr<Sending>& s, const std::optional<std::vector<uint8_t>>& reply,
               std::string* error) {
    const std::string& cluster = s->order[s->at];
    if (!reply && s->to_pool && error->find("no responders") != std::string::npos) {
      s->to_pool = false;  // no shard listens on the pool's subject: the team's, there
      return send_next(s);
    }
    auto r = answer_of(cluster, reply, error);
    if (!r) {
      s->refusal = error_json(*error, "unavailable");
    } else if (r->contains("job_id") && (*r)["job_id"].is_string()) {
      JobPlace p;
      p.team = s->team;
      p.cluster = cluster;
      p.cluster_job_id = (*r)["job_id"].get<std::string>();
      p.spec_json = s->text;
      p.sent_ms = now_ms();
      return s->done(std::move(p), Json());
    } else {
      s->refusal =
          r->is_object() ? *r : error_json("cluster " + cluster + " refused", "unavailable");
      if (string_of(*r, "code") != "unavailable") return s->done(std::nullopt, s->refusal);
    }
    ++s->at;
    s->to_pool = true;
    send_next(s);
  }
  // The same, waited for (spill-over and re-dispatch, on the ticks' thread).
  std::optional<JobPlace> send(const std::string& team, const std::string& text,
                               const std::vector<std::string>& order, Json* refusal) {
    std::promise<std::pair<std::optional<JobPlace>, Json>> sent;
    auto f = sent.get_future();
    send(team, text, order, [&sent](std::optional<JobPlace> place, const Json& r) {
      sent.set_value({std::move(place), r});
    });
    auto [place, r] = f.get();
    *refusal = std::move(r);
    return place;
  }

  // `hold`: the job's GPUs are held against the team's quota in every
  // candidate until release() (a submission being sent).
  Choice choose_for(const Needs& needs, const std::set<std::string>& exclude, bool hold = false) {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<ClusterState> states;
    std::map<std::string, int64_t> used;
    team_view(needs.team, &states, &used);
    auto choice = choose(opts.config, states, needs, used, exclude);
    if (hold && !choice.order.empty())
      for (const auto& c : choice.order) in_flight[needs.team][c] += needs.gpus;
    return choice;
  }

  // The clusters' last reports, and the GPUs `team` uses in each: its
  // unended jobs' and those of its submissions being sent. Under `mu`.
  void team_view(const std::string& team, std::vector<ClusterState>* states,
                 std::map<std::string, int64_t>* used) {
    for (const auto& r : remotes) states->push_back(r->state);
    *used = use.of(team);
    if (auto held = in_flight.find(team); held != in_flight.end())
      for (const auto& [cluster, gpus] : held->second) (*used)[cluster] += gpus;
  }

  void release(const Needs& needs, const std::vector<std::string>& order) {
    std::lock_guard<std::mutex> lock(mu);
    release_held(needs, order);
  }
  // (under `mu`)
  void release_held(const Needs& needs, const std::vector<std::string>& order) {
    auto& held = in_flight[needs.team];
    for (const auto& c : order)
      if ((held[c] -= needs.gpus) <= 0) held.erase(c);
    if (held.empty()) in_flight.erase(needs.team);
  }

  // Hands a submission to a lane (round robin); a flood beyond what the
  // lanes hold is refused at once (unavailable: send again later).
  void post_submit(troupe::Inbound&& in) {
    if (!serving()) {
      count("not_serving");
      return;
    }
    auto& lane = *submit_lanes[next_lane++ % submit_lanes.size()];
    if (lane.post(in)) return;
    count("refused");
    if (in.stream_seq != 0) return;  // enqueued: delivered again after the ack wait
    reply(in, error_json("the front door is busy: submit again", "unavailable"));
  }

  // `handle` (a guard()ed handler), run on a request lane: what the
  // subscription hands on. `by_team`: a team's requests always on the same
  // lane, one after another (pipelines: a retry with the pipeline's key finds
  // where the first went); else the next lane. A flood beyond what the lanes
  // hold is refused at once (unavailable: ask again later).
  bus::Handler laned(bus::Handler handle, bool by_team = false) {
    const bus::Handler* h = &request_handlers.emplace_back(std::move(handle));
    return [this, h, by_team](troupe::Inbound&& in) {
      if (!serving()) {
        count("not_serving");
        return;
      }
      const size_t lane = by_team
                              ? std::hash<std::string_view>{}(sj::token(in.subject, sj::kTeamToken))
                              : static_cast<size_t>(next_request_lane++);
      Request r{std::move(in), h};
      if (request_lanes[lane % request_lanes.size()]->post(r)) return;
      count("refused");
      reply(r.in, error_json("the front door is busy: ask again", "unavailable"));
    };
  }

  // The subject's team; false (counted, answered) when it is no team's name.
  bool team_of(const troupe::Inbound& in, std::string* team) {
    *team = std::string(sj::token(in.subject, sj::kTeamToken));
    if (names::valid_team(*team)) return true;
    count("malformed");
    reply(in, error_json("not a team: " + *team, "invalid_team"));
    return false;
  }

  // A lane's submission: parsed, checked and sent on; answered when its
  // cluster took it and its place is stored (or refused). The lane takes the
  // next meanwhile; at most kMaxOut are out at once (a lane waits for one).
  void on_submit(troupe::Inbound&& in) {
    count("submitted");
    std::string team;
    if (!team_of(in, &team)) return;
    // A FlatBuffers SubmitRequest (services, troupe-load) is answered in
    // FlatBuffers (a SubmitReply) and sent on as JSON; else JSON or YAML.
    const wire::Envelope* env = wire::submit_request(in.data);
    const bool fb = env != nullptr && env->body_as_SubmitRequest() != nullptr;
    std::string text(in.data.begin(), in.data.end());
    auto parsed =
        fb ? spec::from_wire(env->body_as_SubmitRequest()->spec()) : spec::from_text(text);
    // Enqueued: the Nats-Msg-Id header is the idempotency key unless the spec has one.
    if (parsed.ok && in.stream_seq != 0 && parsed.spec.idempotency_key().empty() &&
        !in.msg_id.empty()) {
      parsed.spec.set_idempotency_key(in.msg_id);
      text = spec::to_json(parsed.spec);
    }
    {
      std::unique_lock<std::mutex> lock(out_mu);
      out_cv.wait(lock, [this] { return out < kMaxOut || closing; });
      if (closing) return;
      ++out;
    }
    std::vector<uint8_t>().swap(in.data);  // (read: not kept while it is out)
    auto answer = [this, in = std::move(in), fb](const Json& j) {
      {
        std::lock_guard<std::mutex> lock(out_mu);
        --out;
      }
      out_cv.notify_all();  // (a lane waiting for room, or the destructor)
      if (in.stream_seq != 0) return enqueue_done(in, j);
      if (!fb) return reply(in, j);
      if (in.reply.empty()) return;
      front->publish(in.reply, wire::submit_reply(string_of(j, "job_id"), string_of(j, "error"),
                                                  string_of(j, "code")));
    };
    if (!parsed.ok) {
      count("malformed");
      return answer(error_json("invalid job spec: " + parsed.error, "invalid_spec"));
    }
    if (fb || text.empty() || text.front() != '{') text = spec::to_json(parsed.spec);
    submit(team, std::move(parsed.spec), std::move(text), {}, std::move(answer));
  }

  // A job spec of `team` (`text`: it as JSON) sent on to a cluster, as a
  // submission is: `answer` gets the reply ({"job_id","cluster"} or an
  // error), once, on whichever thread ends it, never under `mu`.
  // `view_labels` are added to the front door's view of it only (a
  // schedule's run: the cluster refuses troupe.* labels at submit).
  using Answer = std::function<void(const Json&)>;
  void submit(const std::string& team, pb::JobSpec job, std::string text,
              std::map<std::string, std::string> view_labels, Answer answer) {
    const std::string key = job.idempotency_key().empty() ? "" : team + "/" + job.idempotency_key();
    if (!key.empty()) {
      std::unique_lock<std::mutex> lock(mu);
      if (sending_keys.count(key) != 0) {  // sent again once the first is recorded or refused
        key_waiters[key].push_back([this, team, job = std::move(job), text = std::move(text),
                                    view_labels = std::move(view_labels),
                                    answer = std::move(answer)]() mutable {
          submit(team, std::move(job), std::move(text), std::move(view_labels), std::move(answer));
        });
        return;
      }
      if (auto k = keys.find(key); k != keys.end()) {
        auto p = places.find(k->second);
        if (p != places.end()) {
          ++counters["duplicates"];
          Json j{{"job_id", k->second}, {"cluster", p->second.place.cluster}};
          lock.unlock();
          return answer(j);
        }
      }
      sending_keys.insert(key);
    }
    // The key is free again once this submission is recorded or refused:
    // the submissions that waited for it go on then.
    auto finish = [this, key, answer = std::move(answer)](const Json& j) {
      std::vector<std::function<void()>> waited;
      if (!key.empty()) {
        std::lock_guard<std::mutex> lock(mu);
        sending_keys.erase(key);
        if (auto w = key_waiters.find(key); w != key_waiters.end()) {
          waited = std::move(w->second);
          key_waiters.erase(w);
        }
      }
      answer(j);
      for (auto& w : waited) w();
    };
    auto needs = needs_of(team, job);
    // depends_on: the job goes to the cluster of its upstream jobs, with
    // their ids there; they and it stay there (pinned: never moved, so it
    // waits for the copy that runs).
    Upstreams ups;
    std::set<std::string> elsewhere;  // the clusters it may not go to
    if (job.depends_on_size() > 0) {
      std::lock_guard<std::mutex> lock(mu);
      ups = resolve_upstreams(team, job, [&](const std::string& id) -> const JobPlace* {
        auto it = places.find(id);
        return it == places.end() ? nullptr : &it->second.place;
      });
      for (const auto& id : ups.upstreams)
        if (moving.count(id)) {
          ups.code = "unavailable";
          ups.error = "depends_on: job " + id + " is being moved to another cluster: submit again";
        }
      if (ups.error.empty())
        for (const auto& id : ups.upstreams)
          if (auto& h = places[id]; !h.place.pinned) {
            h.place.pinned = true;
            store(h);
          }
      for (const auto& r : remotes)
        if (!ups.cluster.empty() && r->entry.name != ups.cluster) elsewhere.insert(r->entry.name);
    }
    if (!ups.error.empty()) {
      count("refused");
      return finish(error_json(ups.error, ups.code));
    }
    if (!ups.cluster.empty()) text = spec::to_json(job);  // (their ids there)
    auto choice = choose_for(needs, elsewhere, true);
    if (choice.order.empty()) {
      count("refused");
      if (!ups.cluster.empty())
        choice.error = "depends_on: its upstream jobs are in cluster " + ups.cluster +
                       (choice.error.empty() ? std::string(", which is not in the config")
                                             : ": " + choice.error);
      return finish(error_json(choice.error, choice.code.empty() ? "invalid_spec" : choice.code));
    }
    const bool pinned = !ups.cluster.empty();
    auto order = choice.order;
    send(team, text, std::move(order),
         [this, team, needs, order = choice.order, pinned, view_labels = std::move(view_labels),
          key, finish = std::move(finish)](std::optional<JobPlace> place, const Json& refusal) {
           if (!place) {
             release(needs, order);
             count("refused");
             return finish(refusal);
           }
           place->job_id = front_job_id(started_ms, ++next);
           place->gpus = needs.gpus;
           place->pinned = pinned;
           if (!view_labels.empty()) {
             Json view = json_text::parse<Json>(place->spec_json);
             if (view.is_object())
               for (const auto& [k, v] : view_labels) view["labels"][k] = v;
             place->spec_json = dump_json(view);
           }
           // Answered once stored (written behind, with other submissions'
           // writes; its claim's grant, written after it, waits for it too).
           std::lock_guard<std::mutex> lock(mu);
           auto& h = places[place->job_id];
           h.place = *place;
           add_live(h);
           if (!key.empty()) keys[key] = place->job_id;
           learn(h.place);
           ++counters["sent"];
           store(h, [this, needs, order, id = place->job_id, cluster = place->cluster,
                     remote_id = place->cluster_job_id, team, finish](uint64_t) {
             release_held(needs, order);  // (under `mu`, in the writer)
             after_write.push_back([id, cluster, remote_id, team, finish] {
               spdlog::info("dispatch: {} of team {} sent to cluster {} as {}", id, team, cluster,
                            remote_id);
               finish(Json{{"job_id", id}, {"cluster", cluster}});
             });
           });
         });
  }
  // The same, waited for (a schedule's run, on the ticks' thread).
  Json submit(const std::string& team, pb::JobSpec job, std::string text,
              std::map<std::string, std::string> view_labels) {
    std::promise<Json> answered;
    auto f = answered.get_future();
    submit(team, std::move(job), std::move(text), std::move(view_labels),
           [&answered](const Json& j) { answered.set_value(j); });
    return f.get();
  }

  // troupe.<team>.pipeline: the whole pipeline goes to one cluster, the
  // first (in the order its first job would go) that every member may go
  // to, and the cluster of the jobs its `job:` entries name when there are
  // any (their ids there). Atomic as on a cluster: the cluster makes every
  // member or none. Each member gets a front-door id and a place, pinned
  // (it waits for its siblings' copies there); the reply names them.
  void on_pipeline(troupe::Inbound&& in) {
    count("pipelines");
    std::string team;
    if (!team_of(in, &team)) return;
    Json body = json_text::parse<Json>(in.data.begin(), in.data.end());
    if (!body.is_object() || !body.contains("jobs") || !body["jobs"].is_array() ||
        body["jobs"].empty()) {
      count("malformed");
      return reply(in, error_json("a pipeline is a JSON object with a list of jobs", "malformed"));
    }
    // (the cluster holds it to its own bound; this one keeps the work here bounded)
    const auto max_jobs = static_cast<size_t>(spec::Limits{}.max_pipeline_jobs);
    if (body["jobs"].size() > max_jobs)
      return reply(in, error_json("a pipeline has at most " + std::to_string(max_jobs) + " jobs",
                                  "invalid_spec"));
    // Each member as its cluster reads it; its `job:` entries resolved.
    std::vector<pb::JobSpec> members;
    Upstreams ups;
    {
      std::lock_guard<std::mutex> lock(mu);
      auto place_of = [&](const std::string& id) -> const JobPlace* {
        auto it = places.find(id);
        return it == places.end() ? nullptr : &it->second.place;
      };
      for (size_t i = 0; i < body["jobs"].size(); ++i) {
        Json& m = body["jobs"][i];
        if (m.is_object() && !m.contains("team")) m["team"] = team;
        auto parsed = spec::from_text(dump_json(m));
        if (!parsed.ok)
          return reply(
              in, error_json("jobs[" + std::to_string(i) + "]: invalid job spec: " + parsed.error,
                             "invalid_spec"));
        auto u = resolve_upstreams(team, parsed.spec, place_of);
        if (u.error.empty() && !u.cluster.empty() && !ups.cluster.empty() &&
            u.cluster != ups.cluster)
          u = Upstreams{"",
                        {},
                        "invalid_spec",
                        "depends_on: jobs in clusters " + ups.cluster + " and " + u.cluster +
                            "; through the front door a pipeline waits only for jobs of one "
                            "cluster"};
        if (!u.error.empty()) {
          count("refused");
          return reply(in, error_json("jobs[" + std::to_string(i) + "]: " + u.error, u.code));
        }
        if (!u.cluster.empty()) ups.cluster = u.cluster;
        for (auto& id : u.upstreams) ups.upstreams.push_back(id);
        // (the ids there, in the body sent on)
        for (int d = 0;
             d < parsed.spec.depends_on_size() && m.contains("depends_on") &&
             m["depends_on"].is_array() && static_cast<size_t>(d) < m["depends_on"].size();
             ++d)
          if (!parsed.spec.depends_on(d).job().empty() && m["depends_on"][d].is_object())
            m["depends_on"][d]["job"] = parsed.spec.depends_on(d).job();
        m["dispatch"] = opts.config.name;
        members.push_back(std::move(parsed.spec));
      }
      for (const auto& id : ups.upstreams)
        if (moving.count(id))
          return reply(in, error_json("depends_on: job " + id +
                                          " is being moved to another cluster: submit again",
                                      "unavailable"));
      for (const auto& id : ups.upstreams)
        if (auto& h = places[id]; !h.place.pinned) {
          h.place.pinned = true;
          store(h);
        }
    }
    // Where: a retry (its idempotency key) where the first went; else the
    // first cluster of the first member's order that every member may go to.
    const std::string key = string_of(body, "idempotency_key").empty()
                                ? ""
                                : team + "/pipeline/" + string_of(body, "idempotency_key");
    std::string target;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (auto k = pipeline_keys.find(key); !key.empty() && k != pipeline_keys.end())
        target = k->second;
    }
    std::set<std::string> elsewhere;
    for (const auto& r : remotes)
      if (!ups.cluster.empty() && r->entry.name != ups.cluster) elsewhere.insert(r->entry.name);
    // All its GPUs are held against the team's quota there while it is sent
    // (as a submission's), until its members' places count them.
    Needs held;
    held.team = team;
    if (target.empty()) {
      std::vector<Needs> needs;
      for (const auto& m : members) {
        needs.push_back(needs_of(team, m));
        held.gpus += needs.back().gpus;
      }
      Choice pick;
      {
        std::lock_guard<std::mutex> lock(mu);
        std::vector<ClusterState> states;
        std::map<std::string, int64_t> used;
        team_view(team, &states, &used);
        pick = choose_for_pipeline(opts.config, states, needs, used, elsewhere);
        if (!pick.order.empty()) in_flight[team][pick.order.front()] += held.gpus;
      }
      if (pick.order.empty()) {
        count("refused");
        std::string why = pick.error;
        if (!ups.cluster.empty())
          why = "depends_on: its upstream jobs are in cluster " + ups.cluster + ": " + why;
        return reply(in, error_json(why, pick.code));
      }
      target = pick.order.front();
    }
    const std::vector<std::string> held_in = {target};  // (held.gpus 0 for a retry: nothing)
    std::string err;
    auto r = ask(target, sj::team_pipeline(team), body.dump(), &err);
    if (!r) {
      release(held, held_in);
      return reply(in, error_json(err, "unavailable"));
    }
    if (!r->contains("pipeline_id") || !(*r)["jobs"].is_array() ||
        (*r)["jobs"].size() != members.size()) {
      release(held, held_in);
      count("refused");
      return reply(in, *r);
    }
    const std::string pipeline_id = string_of(*r, "pipeline_id");
    std::vector<std::future<uint64_t>> written;  // (answered once its members are stored)
    std::unique_lock<std::mutex> lock(mu);
    release_held(held, held_in);  // (its members' places count them from here)
    if (!key.empty()) pipeline_keys[key] = target;
    for (auto& j : (*r)["jobs"]) {
      const std::string remote = string_of(j, "job_id");
      if (auto known = by_remote_id.find(remote_key(target, remote)); known != by_remote_id.end()) {
        j["job_id"] = known->second;  // a retry: the job made the first time
        continue;
      }
      // Its member: by name (members have distinct names).
      const pb::JobSpec* spec = nullptr;
      for (const auto& m : members)
        if (m.name() == string_of(j, "name")) spec = &m;
      if (spec == nullptr) continue;
      Json stored = json_text::parse<Json>(spec::to_json(*spec));
      stored["labels"][std::string(names::kPipelineLabel)] = pipeline_id;
      Held h;
      h.place.job_id = front_job_id(started_ms, ++next);
      h.place.team = team;
      h.place.cluster = target;
      h.place.cluster_job_id = remote;
      h.place.spec_json = dump_json(stored);
      h.place.sent_ms = now_ms();
      h.place.gpus = needs_of(team, *spec).gpus;
      h.place.pinned = true;
      h.place.pipeline_key = key;
      auto& placed = places[h.place.job_id];
      placed = std::move(h);
      add_live(placed);
      learn(placed.place);
      ++counters["sent"];
      written.push_back(store_waited(placed));
      j["job_id"] = placed.place.job_id;
      j["cluster_job_id"] = remote;
    }
    lock.unlock();
    for (auto& f : written) f.wait();
    (*r)["cluster"] = target;
    spdlog::info("dispatch: pipeline {} of team {} sent to cluster {}", pipeline_id, team, target);
    reply(in, *r);
  }

  // An enqueued submission's outcome: acknowledged once sent (or found sent
  // before: a duplicate) or refused for good; one no cluster could take now
  // (unavailable) is delivered again after the ack wait.
  void enqueue_done(const troupe::Inbound& in, const Json& j) {
    const std::string code = string_of(j, "code");
    bool later = code == "unavailable" || code == "no_cluster_reachable";
    if (code == "no_cluster_of_type") {  // the cluster with its type may be the one away
      std::lock_guard<std::mutex> lock(mu);
      for (const auto& r : remotes) later = later || !r->state.reachable;
    }
    if (later) {
      count("enqueued_later");
      return;
    }
    if (!j.contains("job_id")) {
      count("enqueued_refused");
      spdlog::warn("dispatch: enqueued submission {} on {} refused for good: {}", in.stream_seq,
                   in.subject, string_of(j, "error"));
    }
    if (enqueued) enqueued->ack(in.stream_seq);
  }

  // troupe.<team>.jobs (troupe.sys.jobs: every team's): the front door's own
  // view of its jobs, from where each is and its last event (policy
  // job_view, jobs_page), without asking the clusters.
  void on_jobs(troupe::Inbound&& in) {
    std::string team(sj::token(in.subject, sj::kTeamToken));
    Json body =
        in.data.empty() ? Json::object() : json_text::parse<Json>(in.data.begin(), in.data.end());
    std::vector<Json> rows;
    const std::string only = body.is_object() ? string_of(body, "cluster") : std::string();
    bool unknown = false;
    {
      std::lock_guard<std::mutex> lock(mu);
      unknown = !only.empty() && remote(only) == nullptr;
    }
    if (unknown) {  // (a cluster filter: troupe jobs --cluster)
      count("not_found");
      return reply(in, error_json("no cluster " + only.substr(0, 128), "not_found"));
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      std::set<std::string> unreachable;
      for (const auto& r : remotes)
        if (!r->state.reachable) unreachable.insert(r->entry.name);
      static const Json kNone;
      for (const auto& [id, h] : places) {
        if (team != names::kSysToken && h.place.team != team) continue;
        auto last = last_events.find(id);
        rows.push_back(job_view(h.place, last == last_events.end() ? kNone : last->second,
                                unreachable.count(h.place.cluster) == 0));
      }
    }
    Json page = jobs_page(rows, body);
    if (page.contains("error")) count("malformed");
    reply(in, page);
  }

  // The clusters' last reports (troupe.sys.nodes, troupe.sys.queues).
  std::vector<ClusterState> cluster_states() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<ClusterState> states;
    for (const auto& r : remotes) states.push_back(r->state);
    return states;
  }

  // troupe.sys.cordon|uncordon|drain|remove_node (admin): handed on to the node's
  // cluster, the one named ("cluster") or the one that has it.
  void on_node_op(const char* subject, troupe::Inbound&& in) {
    Json body = json_text::parse<Json>(in.data.begin(), in.data.end());
    if (!body.is_object()) {
      count("malformed");
      return reply(in, error_json("the request is not a JSON object", "malformed"));
    }
    const std::string node = string_of(body, "node");
    std::string cluster = string_of(body, "cluster");
    if (node.empty()) {
      count("malformed");
      return reply(in, error_json("node (a string) is required", "bad_request"));
    }
    if (cluster.empty()) {
      auto where = clusters_with_node(cluster_states(), node);
      if (where.empty()) {
        count("not_found");
        return reply(in, error_json("no node " + node + " in any reachable cluster", "not_found"));
      }
      if (where.size() > 1) {
        std::string names;
        for (const auto& c : where) names += (names.empty() ? "" : ", ") + c;
        count("malformed");
        std::string verb(sj::token(in.subject, 2));  // the CLI's verb: remove_node -> remove-node
        std::replace(verb.begin(), verb.end(), '_', '-');
        return reply(
            in, error_json("node " + node + " is in clusters " + names +
                               ": name its cluster (\"cluster\", troupe " + verb + " --cluster)",
                           "bad_request"));
      }
      cluster = where.front();
    } else {
      bool known = false;
      {
        std::lock_guard<std::mutex> lock(mu);
        known = remote(cluster) != nullptr;
      }
      if (!known) {
        count("not_found");
        return reply(in, error_json("no cluster " + cluster, "not_found"));
      }
    }
    body.erase("cluster");
    std::string err;
    auto r = ask(cluster, subject, body.dump(), &err);
    if (!r) {
      count("unreachable");
      return reply(in, error_json(err, "unavailable"));
    }
    if (r->is_object()) (*r)["cluster"] = cluster;
    count("forwarded");
    reply(in, *r);
  }

  // troupe.sys.find (admin): the team of a job, and where it went.
  void on_find(troupe::Inbound&& in) {
    Json body = json_text::parse<Json>(in.data.begin(), in.data.end());
    if (!body.is_object()) {
      count("malformed");
      return reply(in, error_json("the request is not a JSON object", "malformed"));
    }
    const std::string id = string_of(body, "job_id");
    Json row;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (auto it = places.find(id); it != places.end()) {
        const auto& p = it->second.place;
        const Remote* r = remote(p.cluster);
        auto last = last_events.find(id);
        row = job_view(p, last == last_events.end() ? Json() : last->second,
                       r == nullptr || r->state.reachable);
      }
    }
    if (row.is_null()) {
      count("not_found");
      return reply(in, error_json("no job " + id, "not_found"));
    }
    reply(in, find_reply(row));
  }

  // troupe.<team>.usage (troupe.sys.usage: every team) at the front door: the
  // report of policy/usage.hpp over the events it published under its ids,
  // so a job that moved counts once, where it ran.
  void on_usage(troupe::Inbound&& in) {
    if (in.reply.empty()) return;
    const std::string team(sj::token(in.subject, sj::kTeamToken));
    Json body =
        in.data.empty() ? Json::object() : json_text::parse<Json>(in.data.begin(), in.data.end());
    usage::Query q;
    if (auto why = usage::parse_query(body, now_ms(), &q); !why.empty()) {
      count("malformed");
      return reply(in, error_json(why, "bad_request"));
    }
    usage::Counter counter(q);
    const std::string filter = team == names::kSysToken ? std::string(sj::kAllEvents)
                                                        : sj::team_verb(team, sj::kEvents) + ".>";
    pb::JobEvent e;
    const bool complete =
        js->read_each(sj::kDispatchEventsStream, filter, 5000, usage::scan_from_ms(q),
                      [&](std::string_view, std::string_view data, uint64_t) {
                        if (spec::read_event_json(data, &e)) counter.add(e);
                      });
    if (!complete)
      return reply(in,
                   error_json("the events stream did not answer in full; retry", "unavailable"));
    front->publish(in.reply, counter.json());
  }

  // --- requests about one job -----------------------------------------------

  // The job's cluster id put back to the front door's in a reply.
  static void rewrite(Json& j, const JobPlace& p) {
    if (!j.is_object()) return;
    if (j.contains("job_id") && j["job_id"] == p.cluster_job_id) {
      j["job_id"] = p.job_id;
      j["cluster"] = p.cluster;
      j["cluster_job_id"] = p.cluster_job_id;
    }
    if (j.contains("events") && j["events"].is_array())
      for (auto& e : j["events"])
        if (string_of(e, "job_id") == p.cluster_job_id) e["job_id"] = p.job_id;
  }

  // A job sent with depends_on names its upstream jobs by their ids in its
  // cluster (`depends_on`, why's text): those ids put back to the front
  // door's everywhere in a reply (policy::put_back_ids).
  void upstream_ids(Json& j, const JobPlace& p) {
    auto parsed = spec::from_text(p.spec_json);
    if (!parsed.ok || parsed.spec.depends_on_size() == 0) return;
    std::map<std::string, std::string> ids;  // cluster id -> front id
    {
      std::lock_guard<std::mutex> lock(mu);
      for (const auto& d : parsed.spec.depends_on())
        if (auto it = by_remote_id.find(remote_key(p.cluster, d.job())); it != by_remote_id.end())
          ids[d.job()] = it->second;
    }
    put_back_ids(j, ids);
  }

  void on_job_request(std::string_view verb, troupe::Inbound&& in) {
    std::string team(sj::token(in.subject, sj::kTeamToken));
    Json body = json_text::parse<Json>(in.data.begin(), in.data.end());
    if (!body.is_object()) {
      count("malformed");
      return reply(in, error_json("the request is not a JSON object", "malformed"));
    }
    std::string id = string_of(body, "job_id");
    if (id.empty()) id = string_of(body, "jobId");
    std::optional<JobPlace> place;
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = places.find(id);
      if (it != places.end() && it->second.place.team == team) place = it->second.place;
    }
    if (!place) {
      count("not_found");
      return reply(in, error_json("no job " + id + " in team " + team, "not_found"));
    }
    if (verb == sj::kHistory && !place->withdrawn.empty())
      return reply(in, history_of(team, *place));
    if (place->cluster.empty())
      return reply(in, error_json("job " + id + " is nowhere", "not_found"));
    body.erase("jobId");
    body["job_id"] = place->cluster_job_id;
    std::string err;
    auto r = ask(place->cluster, sj::team_verb(team, verb), body.dump(), &err);
    if (!r) {
      count("unreachable");
      if (verb == sj::kStatus)  // what the front door knows of it
        return reply(in, Json{{"job_id", id},
                              {"team", team},
                              {"cluster", place->cluster},
                              {"state", "unreachable"},
                              {"reason", err}});
      return reply(in, error_json(err, "unavailable"));
    }
    rewrite(*r, *place);
    if (place->pinned) upstream_ids(*r, *place);
    count("forwarded");
    reply(in, *r);
  }

  // A job that moved: the history of every copy it had, from each cluster
  // (policy merge_history). The clusters are asked at once: one that does
  // not answer costs one request timeout, not one per copy.
  Json history_of(const std::string& team, const JobPlace& p) {
    std::vector<HistoryPart> parts;
    for (const auto& copy : p.withdrawn) parts.push_back({copy, std::nullopt});
    if (!p.cluster.empty())  // (else withdrawn and taken nowhere)
      parts.push_back({remote_key(p.cluster, p.cluster_job_id), std::nullopt});
    std::vector<std::future<std::optional<Json>>> asked(parts.size());
    for (size_t i = 0; i < parts.size(); ++i) {
      const auto& copy = parts[i].copy;
      const auto slash = copy.find('/');
      if (slash == std::string::npos) continue;
      asked[i] =
          std::async(std::launch::async, [this, cluster = copy.substr(0, slash),
                                          subject = sj::team_verb(team, sj::kHistory),
                                          body = Json{{"job_id", copy.substr(slash + 1)}}.dump()] {
            std::string err;
            return ask(cluster, subject, body, &err);
          });
    }
    for (size_t i = 0; i < parts.size(); ++i)
      if (asked[i].valid()) parts[i].reply = asked[i].get();
    count("forwarded");
    return merge_history(p.job_id, parts);
  }

  Json clusters_view() {
    std::lock_guard<std::mutex> lock(mu);
    Json list = Json::array();
    for (const auto& r : remotes) {
      const auto& s = r->state;
      Json types = Json::object();
      int64_t total = 0, free = 0;
      for (const auto& [type, cap] : s.types) {
        types[type] = Json{{"total", cap.total}, {"free", cap.free}};
        total += cap.total;
        free += cap.free;
      }
      list.push_back(Json{{"name", r->entry.name},
                          {"region", r->entry.region},
                          {"state", s.reachable ? "reachable" : "unreachable"},
                          {"gpu_types", types},
                          {"gpus_total", total},
                          {"gpus_free", free},
                          {"queued", s.queued},
                          {"running", s.running},
                          {"answered_ms", s.answered_ms}});
    }
    return Json{{"clusters", list}, {"counters", counters}};
  }

  // --- each tick ---------------------------------------------------------------

  void connect(Remote& r) {
    bus::ConnectOptions o;
    o.url = r.entry.nats;
    o.creds_file = r.entry.creds;
    o.tls_ca = r.entry.tls_ca;
    o.name = "troupe-dispatch:" + r.entry.name;
    o.timeout_ms = 1000;
    o.max_reconnect = -1;
    std::string err;
    auto c = bus::Connection::open(o, &err);
    if (!c) {
      spdlog::warn("dispatch: cluster {} not reachable: {}", r.entry.name, err);
      return;
    }
    std::shared_ptr<bus::Connection> conn(std::move(c));
    const std::string name = r.entry.name;
    auto sub = conn->subscribe(sj::kAllEvents,
                               guard(name + " events", false, [this, name](troupe::Inbound&& in) {
                                 on_event(name, std::move(in));
                               }));
    auto claims = conn->subscribe(
        sj::kSysDispatchClaim, guard(name + " claims", false, [this, name](troupe::Inbound&& in) {
          on_claim(name, std::move(in));
        }));
    std::shared_ptr<bus::Requester> requests = bus::Requester::open(*conn, &err);
    if (!requests) {
      spdlog::warn("dispatch: cluster {} not reachable: {}", r.entry.name, err);
      return;
    }
    std::lock_guard<std::mutex> lock(mu);
    r.events = std::move(sub);
    r.claims = std::move(claims);
    r.conn = std::move(conn);
    r.requests = std::move(requests);
  }

  void poll(Remote& r) {
    std::shared_ptr<bus::Connection> conn;
    {
      std::lock_guard<std::mutex> lock(mu);
      conn = r.conn;
    }
    if (!conn) {
      connect(r);
      std::lock_guard<std::mutex> lock(mu);
      conn = r.conn;
    }
    ClusterState s;
    bool ok = false;
    std::string err;
    if (conn) {
      int t = static_cast<int>(std::min<int64_t>(opts.request_timeout_ms, 2 * opts.config.poll_ms));
      auto nodes = conn->request(sj::kSysNodes, "{}", t, &err);
      auto queues = nodes ? conn->request(sj::kSysQueues, "{}", t, &err) : std::nullopt;
      if (queues)
        ok = read_capacity(std::string(nodes->begin(), nodes->end()),
                           std::string(queues->begin(), queues->end()), &s, &err);
    }
    std::lock_guard<std::mutex> lock(mu);
    int64_t now = now_ms();
    if (ok) {
      s.name = r.state.name;
      s.region = r.state.region;
      s.reachable = true;
      s.answered_ms = now;
      if (!r.state.reachable) spdlog::info("dispatch: cluster {} reachable", r.entry.name);
      r.state = std::move(s);
    } else if (r.state.reachable && now - r.state.answered_ms >= opts.config.unreachable_after_ms) {
      spdlog::warn("dispatch: cluster {} unreachable: {}", r.entry.name, err);
      r.state.reachable = false;
    }
  }

  // Jobs sent long enough ago and not started: each goes to the best other
  // allowed cluster where it fits now, once withdrawn from where it waits.
  void spill() {
    std::vector<JobPlace> due;
    {
      std::lock_guard<std::mutex> lock(mu);
      int64_t now = now_ms();
      each_live(nullptr, [&](Held& h) {
        if (h.place.state == "sent" && !h.place.pinned &&
            should_spill(opts.config, h.place.sent_ms, now) && moving.insert(h.place.job_id).second)
          due.push_back(h.place);
      });
    }
    for (const auto& p : due) {
      spill_one(p);
      std::lock_guard<std::mutex> lock(mu);
      moving.erase(p.job_id);
    }
  }

  // Under `moving` (spill()).
  void spill_one(const JobPlace& p) {
    auto parsed = spec::from_text(p.spec_json);
    if (!parsed.ok) return;
    auto needs = needs_of(p.team, parsed.spec);
    std::set<std::string> exclude(p.tried.begin(), p.tried.end());
    exclude.insert(p.cluster);
    auto choice = choose_for(needs, exclude);
    if (choice.order.empty()) return;
    const std::string target = choice.order.front();
    {
      std::lock_guard<std::mutex> lock(mu);
      auto* r = remote(target);
      int64_t free = 0;
      for (const auto& [type, cap] : r->state.types)
        if (needs.types.empty() ||
            std::find(needs.types.begin(), needs.types.end(), type) != needs.types.end())
          free += cap.free;
      if (free < needs.gpus) return;              // nowhere better now
      if (places[p.job_id].place.pinned) return;  // a job came meanwhile that waits for it
      by_remote_id.erase(remote_key(p.cluster, p.cluster_job_id));  // its cancel is not news
    }
    // Withdrawn only if it has not started: one step in the job's actor.
    std::string err;
    auto r = ask(p.cluster, sj::team_cancel(p.team),
                 Json{{"job_id", p.cluster_job_id}, {"if_queued", true}}.dump(), &err);
    if (!r || r->value("state", std::string()) != names::kCanceled || r->contains("error")) {
      std::lock_guard<std::mutex> lock(mu);
      learn(p);  // it stays (started, or no answer: its events tell)
      return;
    }
    Json refusal;
    auto moved = send(p.team, p.spec_json, {target}, &refusal);
    if (!moved) moved = send(p.team, p.spec_json, {p.cluster}, &refusal);  // back where it was
    std::lock_guard<std::mutex> lock(mu);
    auto& h = places[p.job_id];
    if (!moved) {
      spdlog::error("dispatch: {} withdrawn from {} and taken nowhere: {}", p.job_id, p.cluster,
                    refusal.dump());
      h.place.state = "withdrawn";
      h.place.ended_ms = now_ms();
      h.place.cluster.clear();
      recount(h);
      store(h);
      return;
    }
    h.place.cluster = p.cluster;  // as withdrawn
    h.place.cluster_job_id = p.cluster_job_id;
    move(h, *moved);
    ++counters["spilled"];
    spdlog::info("dispatch: {} spilled over from {} to {} as {}", p.job_id, p.cluster,
                 moved->cluster, moved->cluster_job_id);
  }

  // The jobs sent to a cluster that has not answered for
  // unreachable_after_ms and not granted leave to start there: each goes to
  // another allowed cluster (gated there too). The switch is one step under
  // `mu`, after the other cluster took it: a claim that came meanwhile (the
  // cluster is back) keeps the job where it was, and the new copy is
  // withdrawn instead.
  void redispatch() {
    std::vector<JobPlace> due;
    {
      std::lock_guard<std::mutex> lock(mu);
      each_live(nullptr, [&](Held& h) {
        if (h.place.state != "sent" || h.place.cluster.empty() || h.place.pinned) return;
        auto* r = remote(h.place.cluster);
        if (r != nullptr && !r->state.reachable && moving.insert(h.place.job_id).second)
          due.push_back(h.place);
      });
    }
    struct Moved {  // (each job of `due` is no longer moving once handled)
      Impl* self;
      const std::vector<JobPlace>& due;
      ~Moved() {
        std::lock_guard<std::mutex> lock(self->mu);
        for (const auto& p : due) self->moving.erase(p.job_id);
      }
    } moved_all{this, due};
    for (const auto& p : due) {
      auto parsed = spec::from_text(p.spec_json);
      if (!parsed.ok) continue;
      std::set<std::string> exclude(p.tried.begin(), p.tried.end());
      exclude.insert(p.cluster);
      auto choice = choose_for(needs_of(p.team, parsed.spec), exclude);
      if (choice.order.empty()) continue;  // nowhere else: it waits for its cluster
      Json refusal;
      auto moved = send(p.team, p.spec_json, choice.order, &refusal);
      if (!moved) continue;
      bool switched = false;
      {
        std::lock_guard<std::mutex> lock(mu);
        auto& h = places[p.job_id];
        if (h.place.state == "sent" && h.place.cluster == p.cluster &&
            h.place.cluster_job_id == p.cluster_job_id) {
          move(h, *moved);
          ++counters["redispatched"];
          switched = true;
        }
      }
      if (switched) {
        spdlog::warn("dispatch: {} re-dispatched from unreachable cluster {} to {} as {}", p.job_id,
                     p.cluster, moved->cluster, moved->cluster_job_id);
        continue;
      }
      // Started meanwhile where it was: the new copy goes (it cannot have
      // started: its claim names no place).
      std::string err;
      ask(moved->cluster, sj::team_cancel(p.team),
          Json{{"job_id", moved->cluster_job_id}, {"if_queued", true}}.dump(), &err);
    }
  }

  bool restore(std::string* error) {
    bool complete = false;
    auto entries = kv->read_all(5000, &complete);
    if (!complete) {
      *error = std::string("the bucket ") + sj::kDispatchBucket + " could not be read whole";
      return false;
    }
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& e : entries) {
      if (e.value.empty()) continue;
      if (e.key.rfind("sched.", 0) == 0) {
        pb::ScheduleRecord r;
        if (r.ParseFromString(e.value) && schedules.restore(r))
          schedule_revisions[{r.team(), r.name()}] = e.revision;
        else
          spdlog::warn("dispatch: an unreadable stored schedule ({}) was skipped", e.key);
        continue;
      }
      auto p = place_from_json(e.value);
      if (!p) continue;
      auto& h = places[p->job_id];
      h.place = *p;
      h.revision = e.revision;
      add_live(h);
      if (!p->cluster.empty()) by_remote_id[remote_key(p->cluster, p->cluster_job_id)] = p->job_id;
      for (const auto& w : p->withdrawn) withdrawn[w] = p->job_id;
      if (auto key = key_of(*p); !key.empty()) keys[key] = p->job_id;
      if (!p->pipeline_key.empty() && !p->cluster.empty())
        pipeline_keys[p->pipeline_key] = p->cluster;
    }
    spdlog::info("dispatch: {} jobs and {} schedules restored from {}", places.size(),
                 schedules.records().size(), sj::kDispatchBucket);
    return true;
  }
};

std::unique_ptr<Front> Front::open(const FrontOptions& opts, std::string* error,
                                   const std::function<bool(int ms)>& wait) {
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  impl->front = bus::Connection::open(opts.front, error);
  if (!impl->front) return nullptr;
  impl->js = bus::JetStream::open(*impl->front, error);
  if (!impl->js) return nullptr;
  impl->kv = bus::KeyValue::open(*impl->js, sj::kDispatchBucket, error, opts.replicas);
  if (!impl->kv) return nullptr;
  impl->lease = std::make_unique<bus::Lease>(*impl->kv, opts.holder, opts.lease_ttl_ms,
                                             sj::kDispatchLeaseKey);
  for (bool told = false;;) {
    const int64_t asked = bus::steady_ms();
    if (impl->lease->try_acquire()) {
      impl->valid_until = asked + opts.lease_ttl_ms;
      break;
    }
    if (!told) spdlog::info("dispatch: another front door serves; waiting as a standby");
    told = true;
    if (wait(std::max(1, opts.lease_ttl_ms / 3))) return nullptr;
  }
  spdlog::info("dispatch: serving (lease epoch {})", impl->lease->epoch());
  if (!impl->restore(error)) return nullptr;
  impl->writer = std::thread([self = impl.get()] { self->write_places(); });
  for (const auto& c : opts.config.clusters) {
    auto r = std::make_unique<Remote>();
    r->entry = c;
    r->state.name = c.name;
    r->state.region = c.region;
    impl->remotes.push_back(std::move(r));
  }
  // Every cluster's capacity known before the first submission is heard.
  for (auto& r : impl->remotes) impl->poll(*r);
  auto* self = impl.get();
  for (size_t i = 0; i < Impl::kSubmitLanes; ++i)
    impl->submit_lanes.push_back(std::make_unique<bus::SerialQueue<troupe::Inbound>>(
        Impl::kMaxWaitingSubmits,
        [self, handle = self->guard("submit", true, [self](troupe::Inbound&& in) {
          self->on_submit(std::move(in));
        })](troupe::Inbound& in) { handle(std::move(in)); }));
  for (size_t i = 0; i < Impl::kRequestLanes; ++i)
    impl->request_lanes.push_back(std::make_unique<bus::SerialQueue<Impl::Request>>(
        Impl::kMaxWaitingRequests, [](Impl::Request& r) { (*r.handle)(std::move(r.in)); }));
  impl->subs.push_back(impl->front->subscribe(
      sj::kAllSubmit, [self](troupe::Inbound&& in) { self->post_submit(std::move(in)); }));
  for (auto verb : kForwarded)
    impl->subs.push_back(impl->front->subscribe(
        sj::team_verb("*", verb),
        self->laned(self->guard(std::string(verb), true, [self, verb](troupe::Inbound&& in) {
          self->on_job_request(verb, std::move(in));
        }))));
  impl->subs.push_back(impl->front->subscribe(
      sj::team_verb("*", sj::kPipeline),
      self->laned(self->guard("pipeline", true,
                              [self](troupe::Inbound&& in) { self->on_pipeline(std::move(in)); }),
                  true)));
  impl->subs.push_back(impl->front->subscribe(
      sj::team_verb("*", sj::kSchedule),
      self->laned(self->guard("schedule", true,
                              [self](troupe::Inbound&& in) { self->on_schedule(std::move(in)); }),
                  true)));
  impl->subs.push_back(impl->front->subscribe(
      sj::team_verb("*", sj::kJobs),
      self->laned(self->guard("jobs", true,
                              [self](troupe::Inbound&& in) { self->on_jobs(std::move(in)); }))));
  impl->subs.push_back(impl->front->subscribe(
      sj::kSysClusters, self->guard("clusters", true, [self](troupe::Inbound&& in) {
        self->reply(in, self->clusters_view());
      })));
  impl->subs.push_back(impl->front->subscribe(
      sj::kSysNodes, self->guard("nodes", true, [self](troupe::Inbound&& in) {
        self->reply(in, merge_nodes(self->cluster_states()));
      })));
  impl->subs.push_back(impl->front->subscribe(
      sj::kSysQueues, self->guard("queues", true, [self](troupe::Inbound&& in) {
        std::string code;
        Json reply = queues_reply(
            self->cluster_states(),
            std::string_view(reinterpret_cast<const char*>(in.data.data()), in.data.size()), &code);
        if (!code.empty()) self->count(code == "not_found" ? code : "malformed");
        self->reply(in, reply);
      })));
  for (const char* subject : {sj::kSysCordon, sj::kSysUncordon, sj::kSysDrain, sj::kSysRemoveNode})
    impl->subs.push_back(impl->front->subscribe(
        subject, self->laned(self->guard(subject, true, [self, subject](troupe::Inbound&& in) {
          self->on_node_op(subject, std::move(in));
        }))));
  impl->subs.push_back(impl->front->subscribe(
      sj::kSysFind,
      self->guard("find", true, [self](troupe::Inbound&& in) { self->on_find(std::move(in)); })));
  // What services enqueue with JetStream (troupe.<team>.enqueue): stored on
  // the front NATS and sent on like a submission. Without it (the stream
  // cannot be made, e.g. a scheduler's TROUPE_INTAKE holds the subjects on
  // this NATS) the rest is served.
  bus::StreamConfig intake{sj::kDispatchIntakeStream, {sj::kAllEnqueue}};
  intake.replicas = opts.replicas;
  std::string why;
  if (impl->js->ensure_stream(intake, &why))
    impl->enqueued = bus::Consumer::open(
        *impl->js, sj::kDispatchIntakeStream, sj::kDispatchConsumer, sj::kAllEnqueue,
        [self](troupe::Inbound&& in) { self->post_submit(std::move(in)); }, &why);
  if (!impl->enqueued) spdlog::error("dispatch: troupe.<team>.enqueue not served: {}", why);
  // The events it publishes, kept for troupe usage (bounded as a scheduler's
  // events stream). Without it (e.g. a scheduler's TROUPE_EVENTS holds the
  // subjects on this NATS) usage is not served; with keep_events: false it
  // is answered not_kept.
  const bool keep_events = opts.config.keep_events;
  if (!keep_events) {
    spdlog::info(
        "dispatch: events not kept (keep_events: false): troupe usage is answered "
        "not_kept here");
  } else {
    const auto& cfg = opts.config;
    int64_t bytes = cfg.events_max_bytes;
    if (bytes == 0) {
      std::error_code ec;
      auto space = std::filesystem::space(".", ec);
      bytes = policy::events_bytes_for(impl->js->storage_limit(),
                                       ec ? 0 : static_cast<int64_t>(space.available));
    }
    const int64_t age = cfg.events_max_age_s;
    bus::StreamConfig events{sj::kDispatchEventsStream,
                             {sj::kAllEvents},
                             age > 0 ? std::min<int64_t>(120000, age * 1000) : 120000,
                             age,
                             bytes};
    events.replicas = opts.replicas;
    impl->events_kept = impl->js->ensure_stream_fitting(events, cfg.events_max_bytes == 0,
                                                        64LL * 1024 * 1024, true, &why);
    if (impl->events_kept)
      spdlog::info("dispatch: events kept {} s and at most {} in {}", age,
                   events.max_bytes > 0 ? std::to_string(events.max_bytes >> 20) + " MiB"
                                        : std::string("any size"),
                   sj::kDispatchEventsStream);
    else
      spdlog::error("dispatch: troupe.<team>.usage not served: {}", why);
  }
  impl->usage_reads = std::make_unique<bus::SerialQueue<troupe::Inbound>>(
      Impl::kMaxWaitingUsage,
      [self, handle = self->guard("usage", true, [self](troupe::Inbound&& in) {
        self->on_usage(std::move(in));
      })](troupe::Inbound& in) { handle(std::move(in)); });
  if (impl->events_kept || !keep_events)  // (else a scheduler on this NATS may answer: not twice)
    impl->subs.push_back(
        impl->front->subscribe(sj::team_verb("*", sj::kUsage), [self](troupe::Inbound&& in) {
          if (!self->serving()) return self->count("not_serving");
          if (!self->events_kept)
            return self->reply(in, error_json("this front door keeps no events (keep_events: "
                                              "false in its config): ask each cluster for usage",
                                              "not_kept"));
          if (self->usage_reads->post(in)) return;
          self->count("refused");
          self->reply(in, error_json("too many usage reports waiting; retry", "unavailable"));
        }));
  return std::make_unique<Front>(std::move(impl));
}

Front::Front(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Front::~Front() {
  // Subscriptions first: no handler may run into a half-destroyed Impl;
  // then the submissions in hand finish (those still waiting are dropped).
  impl_->subs.clear();
  {
    std::lock_guard<std::mutex> lock(impl_->out_mu);
    impl_->closing = true;
  }
  impl_->out_cv.notify_all();
  for (auto& lane : impl_->submit_lanes) lane->close();
  for (auto& lane : impl_->request_lanes) lane->close();
  // The submissions out finish (their clusters answer, their places are
  // written, their clients answered), for a cluster's request time at most.
  {
    std::unique_lock<std::mutex> lock(impl_->out_mu);
    impl_->out_cv.wait_for(lock, std::chrono::milliseconds(impl_->opts.request_timeout_ms + 1000),
                           [&] { return impl_->out == 0; });
  }
  impl_->usage_reads->close();
  impl_->enqueued.reset();  // (after the lanes: they acknowledge)
  // Submissions still out are dropped: a copy a cluster took is unknown
  // here, its claim refused (it never starts).
  for (auto& r : impl_->remotes) {
    r->events.reset();
    r->claims.reset();
    std::shared_ptr<bus::Requester> requests;
    {
      std::lock_guard<std::mutex> lock(impl_->mu);
      requests = std::move(r->requests);
    }
    requests.reset();
  }
  // Every place changed so far is written before the lease goes.
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->writer_stop = true;
  }
  impl_->dirty_cv.notify_all();
  if (impl_->writer.joinable()) impl_->writer.join();
  impl_->valid_until = 0;
  impl_->lease->release();  // a clean stop: a standby takes over at once
}

nlohmann::json Front::clusters_view() {
  return impl_->clusters_view();
}

bool Front::tick() {
  const int64_t asked = bus::steady_ms();
  switch (impl_->lease->renew()) {
    case bus::Lease::Renewal::renewed:
      impl_->valid_until = asked + impl_->opts.lease_ttl_ms;
      break;
    case bus::Lease::Renewal::lost:
      impl_->valid_until = 0;
      spdlog::error("dispatch: another front door took the lease; stopping");
      return false;
    case bus::Lease::Renewal::unreachable:
      break;
  }
  if (impl_->serving() == impl_->silent) {
    impl_->silent = !impl_->silent;
    if (impl_->silent)
      spdlog::warn("dispatch: the lease could not be renewed; silent meanwhile");
    else
      spdlog::info("dispatch: the lease renewed; serving again");
  }
  for (auto& r : impl_->remotes) impl_->poll(*r);
  if (impl_->serving()) {
    impl_->fire_schedules();
    impl_->spill();
    impl_->redispatch();
    impl_->forget_old();
  }
  impl_->prune_early();
  return true;
}

}  // namespace troupe::dispatch

// Recovery on real processes (issue 5, points 1, 3, 4, 6, 7): the scheduler
// killed with SIGKILL and started again, actors crashed on request,
// submissions published with JetStream while no scheduler runs, and two
// schedulers sharing a leader lease. docs/recovery.md describes the design.
//
// Point 2 (events, troupe history) and 5 (NATS restart) are tested in
// recovery_events_test.cpp; point 6 (an agent restarted while its job runs)
// in preemption_test.cpp ("an agent restarted at once ..."); point 8 is the
// fault-injection suite in tests/fault/.
#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "bus/nats.hpp"
#include "bus/subjects.hpp"
#include "harness.hpp"

using namespace troupe;
using namespace troupe::it;

namespace {

// A job that appends "start <pid>" to `out`, waits for `release` to exist,
// appends "end" and exits with `code`.
Json gated_job(const std::string& team, const std::string& out, const std::string& release,
               int code = 0) {
  std::string script = "echo start $$ >> " + out + "; while [ ! -e " + release +
                       " ]; do sleep 0.05; done; echo end >> " + out + "; exit " +
                       std::to_string(code);
  return job_spec(team, {"/bin/sh", "-c", script}, 1);
}

size_t count_lines(const std::string& path, const std::string& prefix) {
  std::ifstream in(path);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n += line.rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

// Polls `pred` until it holds or `timeout` passes (for files and process
// output, which raise no event).
bool poll_until(const std::function<bool()>& pred, Clock::duration timeout) {
  auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

bool file_has(const std::string& path, const std::string& text) {
  return read_file(path).find(text) != std::string::npos;
}

void touch(const std::string& path) {
  std::ofstream(path) << "go\n";
}

// The job's state as its status reply gives it ("" when no scheduler answers).
std::string state_of(Cluster& c, const std::string& team, const std::string& id) {
  std::string err;
  auto r = c.request_raw(
      subjects::team_status(team),
      [&] {
        auto s = Json{{"job_id", id}}.dump();
        return std::vector<uint8_t>(s.begin(), s.end());
      }(),
      2s, &err);
  if (!r) return {};
  auto j = Json::parse(r->begin(), r->end(), nullptr, false);
  return j.is_object() ? j.value("state", std::string()) : std::string();
}

int attempt_in(const Json& status) {
  return status.value("attempt", 0);
}

// One more scheduler, once it waits as a standby.
Process& add_standby(Cluster& c) {
  Process& s = c.add_scheduler();
  REQUIRE(poll_until([&] { return file_has(s.err_path(), "standby:"); }, 20s));
  return s;
}

ClusterOptions with_args(std::vector<std::string> args) {
  ClusterOptions o;
  o.scheduler_args = std::move(args);
  return o;
}

}  // namespace

TEST_CASE(
    "scheduler kill -9: running jobs keep running, jobs that ended meanwhile get their real "
    "exit codes, queued jobs are scheduled",
    "[integration][recovery]") {
  Cluster c(ClusterOptions{}.node("n1", 2));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  const std::string keep_out = c.file("keep.out"), keep_go = c.file("keep.go");
  const std::string end_out = c.file("end.out"), end_go = c.file("end.go");
  const std::string queued_out = c.file("queued.out"), queued_go = c.file("queued.go");
  auto keep = c.submit_ok("t1", gated_job("t1", keep_out, keep_go, 0));
  auto ends = c.submit_ok("t1", gated_job("t1", end_out, end_go, 3));
  auto waits = c.submit_ok("t1", gated_job("t1", queued_out, queued_go, 0));  // no GPU left
  REQUIRE(c.events().wait_state(keep, "running", 20s));
  REQUIRE(c.events().wait_state(ends, "running", 20s));
  REQUIRE(poll_until([&] { return count_lines(keep_out, "start") == 1; }, 10s));

  c.kill_scheduler();
  // While no scheduler runs: one job ends with exit code 3.
  touch(end_go);
  REQUIRE(poll_until([&] { return count_lines(end_out, "end") == 1; }, 10s));

  c.restart_scheduler();
  REQUIRE(c.wait_scheduler_serving(20s));
  auto ended = c.wait_terminal(ends, 30s);
  INFO(c.events().describe());
  REQUIRE(ended);
  CHECK(ended->state == "failed");
  CHECK(ended->json.value("exit_code", -1) == 3);

  // The queued job got the GPU that was freed; the running one was not restarted.
  REQUIRE(c.events().wait_state(waits, "running", 30s));
  Json st = c.status("t1", keep);
  INFO("status " << st.dump());
  CHECK(st.value("state", std::string()) == "running");
  CHECK(attempt_in(st) == 1);
  touch(keep_go);
  touch(queued_go);
  auto kept = c.wait_terminal(keep, 30s);
  REQUIRE(kept);
  CHECK(kept->state == "succeeded");
  CHECK(count_lines(keep_out, "start") == 1);  // one process, never started twice
  auto q = c.wait_terminal(waits, 30s);
  REQUIRE(q);
  CHECK(q->state == "succeeded");
  CHECK(file_has(c.scheduler().err_path(), "restored 3 jobs"));
  CHECK(replay_gpus(c.events().all()).clashes.empty());
}

TEST_CASE(
    "a scheduler stopped cleanly gives its lease up: the next one leads at once and runs what "
    "was queued",
    "[integration][recovery]") {
  Cluster c(ClusterOptions{}.node("n1", 1, true));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  auto first = c.submit_ok("t1", job_spec("t1", {"sleep", "0.2"}));
  REQUIRE(c.wait_terminal(first, 30s));
  c.scheduler().stop(10s);  // SIGTERM: the lease is released (a purge marker)
  REQUIRE(file_has(c.scheduler().err_path(), "stopping"));
  c.restart_scheduler();
  // Taken at once, not after a lease's time: the key was given up. Before
  // the fix the new scheduler waited as a standby for ever ("another
  // scheduler holds the leader lease").
  REQUIRE(c.wait_scheduler_serving(20s));
  auto second = c.submit_ok("t1", job_spec("t1", {"true"}));
  auto done = c.wait_terminal(second, 30s);
  REQUIRE(done);
  CHECK(done->state == "succeeded");
  CHECK_FALSE(file_has(c.scheduler().err_path(), "another scheduler holds the leader lease"));
}

TEST_CASE("scheduler kill -9 right after acknowledging: every acknowledged job runs exactly once",
          "[integration][recovery]") {
  Cluster c(ClusterOptions{}.node("n1", 4, true).node("n2", 4, true));
  REQUIRE(c.wait_nodes_alive(2, 20s));
  std::vector<std::string> ids;
  for (int i = 0; i < 40; ++i) {
    Json spec = job_spec("t1", {"sleep", "0.3"}, 1);
    ids.push_back(c.submit_ok("t1", spec));
  }
  c.kill_scheduler();  // no time to write anything more
  c.restart_scheduler();
  REQUIRE(c.wait_scheduler_serving(20s));
  for (const auto& id : ids) {
    auto done = c.wait_terminal(id, 60s);
    INFO(id << "\n" << c.events().describe(id));
    REQUIRE(done);
    CHECK(done->state == "succeeded");
  }
  // Exactly one terminal state each, and no GPU held twice.
  for (const auto& id : ids) {
    std::set<std::string> terminal;
    for (const auto& e : c.events().of_job(id))
      if (e.state == "succeeded" || e.state == "failed" || e.state == "canceled")
        terminal.insert(e.state);
    CHECK(terminal.size() == 1);
  }
  CHECK(replay_gpus(c.events().all()).clashes.empty());
}

TEST_CASE(
    "a crashed job, node or queue actor is restarted from its snapshot, and the debug request "
    "is off unless asked for",
    "[integration][recovery]") {
  SECTION("off by default") {
    Cluster c(ClusterOptions{}.node("n1", 1));
    REQUIRE(c.wait_scheduler_serving(20s));
    Json r = c.request(subjects::kSysDebugCrash, Json{{"kind", "job"}, {"id", "j-1"}});
    CHECK(r.value("error", std::string()).find("--debug-crash") != std::string::npos);
  }
  SECTION("with --debug-crash") {
    Cluster c(with_args({"--debug-crash"}).node("n1", 1));
    REQUIRE(c.wait_nodes_alive(1, 20s));
    const std::string a_out = c.file("a.out"), a_go = c.file("a.go");
    const std::string b_out = c.file("b.out"), b_go = c.file("b.go");
    auto a = c.submit_ok("t1", gated_job("t1", a_out, a_go, 0));
    REQUIRE(c.events().wait_state(a, "running", 20s));
    auto b = c.submit_ok("t1", gated_job("t1", b_out, b_go, 0));  // queued: one GPU

    CHECK(
        c.request(subjects::kSysDebugCrash, Json{{"kind", "job"}, {"id", a}}).contains("crashed"));
    CHECK(c.request(subjects::kSysDebugCrash, Json{{"kind", "node"}, {"id", "n1"}})
              .contains("crashed"));
    CHECK(c.request(subjects::kSysDebugCrash, Json{{"kind", "queue"}, {"id", "t1"}})
              .contains("crashed"));
    CHECK(c.request(subjects::kSysDebugCrash, Json{{"kind", "bogus"}, {"id", "x"}})
              .contains("error"));
    // The supervisors report the restarts.
    REQUIRE(poll_until(
        [&] {
          Json s = c.request(subjects::kSysStats, Json::object());
          auto r = s.value("restarts", Json::object());
          return r.value("job", 0) >= 1 && r.value("node", 0) >= 1 && r.value("queue", 0) >= 1;
        },
        10s));
    // The durability figures: this scheduler leads, and its snapshots reach KV.
    Json stats;
    CHECK(poll_until(
        [&] {
          stats = c.request(subjects::kSysStats, Json::object());
          return stats.value("snapshots", Json::object()).value("writes", 0) > 0;
        },
        10s));
    INFO(stats.dump());
    CHECK(stats.value("leader_epoch", 0) > 0);
    CHECK(stats.value("snapshots", Json::object()).value("conflicts", -1) == 0);
    // The restarted job actor still knows its running attempt.
    Json st = c.status("t1", a);
    CHECK(st.value("state", std::string()) == "running");
    CHECK(attempt_in(st) == 1);
    touch(a_go);
    auto da = c.wait_terminal(a, 30s);
    REQUIRE(da);
    CHECK(da->state == "succeeded");
    // The queued job (its queue was crashed and refilled) runs on the freed GPU.
    REQUIRE(c.events().wait_state(b, "running", 30s));
    touch(b_go);
    auto db = c.wait_terminal(b, 30s);
    REQUIRE(db);
    CHECK(db->state == "succeeded");
    CHECK(count_lines(a_out, "start") == 1);
    CHECK(replay_gpus(c.events().all()).clashes.empty());
  }
}

TEST_CASE(
    "intake: a submission is in the intake stream before its id is returned, and jobs "
    "published with JetStream while no scheduler runs are scheduled once, by Nats-Msg-Id",
    "[integration][recovery]") {
  Cluster c(ClusterOptions{}.node("n1", 2, true));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  std::string err;
  auto js = bus::JetStream::open(c.conn(), &err);
  REQUIRE(js);
  auto acked = c.submit_ok("t1", job_spec("t1", {"sleep", "0.1"}, 1));
  bool in_stream = false;
  for (const auto& m : js->read_all(subjects::kIntakeStream, subjects::kIntakeSubjects))
    in_stream |= std::string(m.data.begin(), m.data.end()).find(acked) != std::string::npos;
  CHECK(in_stream);

  c.kill_scheduler();
  auto publish = [&](const std::string& name, const std::string& msg_id) {
    Json spec = job_spec("t1", {"sleep", "0.1"}, 1);
    spec["name"] = name;
    auto body = spec.dump();
    return js->publish(subjects::team_verb("t1", subjects::kEnqueue), body.data(), body.size(),
                       msg_id);
  };
  CHECK(publish("first", "order-1") == "");
  CHECK(publish("first-again", "order-1") == "");  // a duplicate: the stream drops it
  CHECK(publish("second", "order-2") == "");
  CHECK(publish("third", "") == "");  // no id: scheduled once all the same

  c.restart_scheduler();
  REQUIRE(c.wait_scheduler_serving(20s));
  Json list;
  bool all_done = poll_until(
      [&] {
        list = c.request(subjects::team_jobs("t1"), Json::object());
        if (!list.contains("jobs")) return false;
        size_t done = 0;
        for (const auto& j : list["jobs"])
          done += j.value("state", std::string()) == "succeeded" ? 1 : 0;
        return done >= 4;
      },
      // Messages the killed scheduler had pulled and not acknowledged come
      // back only after the intake consumer's ack wait (30 s); under -j2 load
      // the rest can take more than 10 s on top.
      70s);
  INFO(list.dump());
  // None of them refused: a node known only from a restored job's placement
  // is no node with 0 GPUs to the admission check.
  Json stats = c.request(subjects::kSysStats, Json::object());
  INFO("scheduler stats: " << stats.dump());
  CHECK(stats.value("rejected", -1) == 0);
  REQUIRE(all_done);
  std::multiset<std::string> names;
  for (const auto& j : list["jobs"]) names.insert(j.value("name", std::string()));
  CHECK(list["jobs"].size() == 4);  // the acknowledged one and three published ones
  CHECK(names.count("first") == 1);
  CHECK(names.count("first-again") == 0);
  CHECK(names.count("second") == 1);
  CHECK(names.count("third") == 1);

  // Published again after the stream's own window would have forgotten it:
  // the scheduler still knows the key (restored from the jobs).
  c.kill_scheduler();
  c.restart_scheduler();
  REQUIRE(c.wait_scheduler_serving(20s));
  CHECK(publish("second-late", "order-2") == "");  // within the window: the stream drops it
  auto names_after = [&] {
    Json l = c.request(subjects::team_jobs("t1"), Json::object());
    return l.contains("jobs") ? l["jobs"].size() : size_t{0};
  };
  CHECK(names_after() == 4);
}

TEST_CASE(
    "active/standby: the standby takes over within 5 s of the leader's kill -9, running jobs "
    "go on, and a paused leader that comes back is deposed",
    "[integration][recovery]") {
  Cluster c(ClusterOptions{}.node("n1", 2));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  Process& standby = add_standby(c);
  const std::string out = c.file("long.out"), go = c.file("long.go");
  auto job = c.submit_ok("t1", gated_job("t1", out, go, 0));
  REQUIRE(c.events().wait_state(job, "running", 20s));

  auto killed_at = Clock::now();
  c.kill_scheduler();
  REQUIRE(poll_until([&] { return file_has(standby.err_path(), "serving on"); }, 10s));
  auto took = Clock::now() - killed_at;
  INFO("takeover after " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                         << " ms");
  CHECK(took < 5s);
  REQUIRE(c.wait_scheduler_serving(5s));
  CHECK(state_of(c, "t1", job) == "running");

  // Now the new leader is paused (SIGSTOP); a third scheduler takes over;
  // the paused one, resumed, must stop acting.
  Process& third = add_standby(c);
  REQUIRE(standby.signal(SIGSTOP));
  REQUIRE(poll_until([&] { return file_has(third.err_path(), "serving on"); }, 10s));
  auto second = c.submit_ok("t1", job_spec("t1", {"sleep", "0.2"}, 1));
  REQUIRE(standby.signal(SIGCONT));
  REQUIRE(standby.wait_exit(Clock::now() + 10s));
  CHECK(standby.exit_status() == 3);
  CHECK(file_has(standby.err_path(), "deposed"));

  auto d2 = c.wait_terminal(second, 30s);
  REQUIRE(d2);
  CHECK(d2->state == "succeeded");
  touch(go);
  auto d1 = c.wait_terminal(job, 30s);
  INFO(c.events().describe());
  REQUIRE(d1);
  CHECK(d1->state == "succeeded");
  CHECK(count_lines(out, "start") == 1);
  CHECK(replay_gpus(c.events().all()).clashes.empty());
}

TEST_CASE(
    "standby: submissions through the leader's kill -9 are all answered with a job id, and each "
    "is one job that runs (keyed ones too)",
    "[integration][recovery][failover]") {
  Cluster c(ClusterOptions{}.node("n1", 4));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  Process& standby = add_standby(c);

  // A service submitting one job after another, each a request of its own.
  std::mutex mu;
  std::vector<std::string> ids, failures;
  std::atomic<bool> stop{false};
  Clock::duration slowest{};
  auto submit = [&](const Json& spec) {
    auto body = spec.dump();
    std::string err;
    auto asked = Clock::now();
    auto r = c.request_raw(subjects::team_submit("t1"),
                           std::vector<uint8_t>(body.begin(), body.end()), 10s, &err);
    Json reply = r ? Json::parse(r->begin(), r->end(), nullptr, false) : Json();
    std::lock_guard<std::mutex> lock(mu);
    slowest = std::max(slowest, Clock::now() - asked);
    if (reply.is_object() && reply.contains("job_id")) return reply["job_id"].get<std::string>();
    failures.push_back(r ? std::string(r->begin(), r->end()) : "no reply: " + err);
    return std::string();
  };
  std::thread service([&] {
    for (int i = 0; !stop; ++i) {
      // One GPU each for 0.2 s on 4 GPUs: a line builds up, so jobs the
      // standby recorded wait in the queue beside the killed leader's.
      Json spec = job_spec("t1", {"sleep", "0.2"}, 1);
      spec["name"] = "s" + std::to_string(i);
      if (auto id = submit(spec); !id.empty()) {
        std::lock_guard<std::mutex> lock(mu);
        ids.push_back(id);
      }
      std::this_thread::sleep_for(20ms);  // (the service's pace: ~50 a second)
    }
  });
  auto acknowledged = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return ids.size();
  };
  REQUIRE(poll_until([&] { return acknowledged() >= 10; }, 20s));
  c.kill_scheduler();
  auto after_kill = acknowledged();
  // A keyed submission while no leader answers, and its retry: one job.
  Json keyed = job_spec("t1", {"true"}, 0);
  keyed["name"] = "keyed";
  keyed["idempotency_key"] = "failover-1";
  auto k1 = submit(keyed), k2 = submit(keyed);
  CHECK(!k1.empty());
  CHECK(k1 == k2);
  REQUIRE(poll_until([&] { return file_has(standby.err_path(), "serving on"); }, 20s));
  auto at_serving = acknowledged();
  REQUIRE(poll_until([&] { return acknowledged() >= at_serving + 10; }, 20s));
  stop = true;
  service.join();
  WARN("acknowledged " << ids.size() << " (" << after_kill << " before the kill, " << at_serving
                       << " when the standby served), slowest answer "
                       << std::chrono::duration_cast<std::chrono::milliseconds>(slowest).count()
                       << " ms");
  {
    std::string f;
    for (const auto& x : failures) f += x + "\n";
    INFO("failures:\n" << f);
    CHECK(failures.empty());
  }
  CHECK(at_serving > after_kill);  // some were answered while no leader served
  CHECK(file_has(standby.err_path(), "submission(s) recorded"));

  // Every acknowledged id is a job that runs, and there is no other job.
  ids.push_back(k1);
  for (const auto& id : ids) {
    auto d = c.wait_terminal(id, 60s);
    INFO(id);
    REQUIRE(d);
    CHECK(d->state == "succeeded");
  }
  Json list = c.request(subjects::team_jobs("t1"), Json{{"limit", 1000}});
  REQUIRE(list.contains("jobs"));
  std::set<std::string> listed;
  for (const auto& j : list["jobs"]) listed.insert(j.value("job_id", std::string()));
  std::set<std::string> acked(ids.begin(), ids.end());
  std::string extra, missing;
  for (const auto& id : listed)
    if (!acked.count(id)) extra += id + " ";
  for (const auto& id : acked)
    if (!listed.count(id)) missing += id + " ";
  INFO("jobs nobody was answered with: " << extra << "\nanswered ids not listed: " << missing);
  CHECK(listed == acked);
  CHECK(list["jobs"].size() == ids.size());
}

TEST_CASE(
    "an idle leader moves its flush marker on, so a restore reads the streams only from 15 s "
    "before now, not from its last busy moment",
    "[integration][recovery]") {
  Cluster c(ClusterOptions{}.node("n1", 1));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  Json spec = job_spec("t1", {"true"});
  auto id = c.submit_ok("t1", spec);
  REQUIRE(c.wait_terminal(id, 30s));

  auto bucket = open_state_bucket(c);
  auto marker = [&] {
    auto e = bucket.kv->get("meta.flushed_ms");
    return e ? std::atoll(e->value.c_str()) : 0LL;
  };
  // Nothing happens from here on: the job ended, the node is idle. The
  // marker still comes to stand for a time after this one.
  const long long idle_since = std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count();
  long long seen = 0;
  bool moved = poll_until(
      [&] {
        seen = marker();
        return seen > idle_since + 1000;
      },
      10s);
  INFO("marker " << seen << ", idle since " << idle_since);
  CHECK(moved);
}

TEST_CASE(
    "active/standby: after the leader's kill -9 the standby keeps a blocked job's dependency, an "
    "array's progress and a schedule's ticks, running none twice",
    "[integration][recovery][deps][arrays][schedules]") {
  Cluster c(ClusterOptions{}.node("n1", 4));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  Process& standby = add_standby(c);
  const std::string out = c.file("a.out"), go = c.file("a.go");
  auto upstream = c.submit_ok("t1", gated_job("t1", out, go, 0));
  Json down = job_spec("t1", {"true"}, 1);
  down["depends_on"] = Json::array({Json{{"job", upstream}}});
  auto blocked = c.submit_ok("t1", down);
  Json tasks = job_spec("t1", {"sleep", "1"}, 1);
  tasks["array"] = Json{{"count", 4}, {"parallelism", 1}};
  auto array = c.submit_ok("t1", tasks);
  Json made = c.request(subjects::team_verb("t1", subjects::kSchedule),
                        Json{{"op", "create"},
                             {"name", "beat"},
                             {"cron", "@every 2s"},
                             {"spec", {{"command", {"true"}}, {"resources", {{"gpus", 0}}}}}});
  REQUIRE(made.value("name", "") == "beat");
  auto beats = [](const std::vector<Event>& ev) {
    std::set<std::string> ended;
    for (const auto& e : ev)
      if (e.json.value("name", "") == "beat" && e.state == "succeeded") ended.insert(e.job_id);
    return ended.size();
  };
  REQUIRE(c.events().wait_state(upstream, "running", 20s));
  REQUIRE(c.events().wait_state(blocked, "blocked", 10s));
  REQUIRE(c.events().wait_state(array + "-0", "running", 20s));
  REQUIRE(c.events().wait_for([&](const std::vector<Event>& ev) { return beats(ev) >= 1; }, 20s));

  c.kill_scheduler();
  REQUIRE(poll_until([&] { return file_has(standby.err_path(), "serving on"); }, 10s));
  REQUIRE(c.wait_scheduler_serving(5s));
  const size_t beats_then = beats(c.events().all());
  touch(go);
  for (const auto& id : {upstream, blocked, array}) {
    auto end = c.wait_terminal(id, 60s);
    INFO(id << "\n" << c.events().describe());
    REQUIRE(end);
    CHECK(end->state == "succeeded");
  }
  for (int i = 0; i < 4; ++i) {
    int starts = 0;
    for (const auto& e : c.events().of_job(array + "-" + std::to_string(i)))
      starts += e.state == "starting" ? 1 : 0;
    CHECK(starts == 1);
  }
  REQUIRE(c.events().wait_for(
      [&](const std::vector<Event>& ev) { return beats(ev) >= beats_then + 2; }, 30s));
  Json runs = c.request(subjects::team_verb("t1", subjects::kJobs), Json{{"schedule", "beat"}});
  std::set<std::string> ticks;
  for (const auto& j : runs["jobs"]) ticks.insert(j["labels"].value("troupe.schedule.tick", ""));
  CHECK(ticks.size() == runs["jobs"].size());  // no tick ran twice across the takeover
}

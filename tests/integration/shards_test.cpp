// Scheduler shards (issue 19, part 2): several troupe-scheduler processes
// act at once, each owning some pools through a fenced lease per pool
// (KV TROUPE_LEADER, pool.<pool>). One shard reads each submission and
// hands one of another pool to its owner; requests about a job are answered
// by the owner of its pool (a shard's job ids name the pool); each shard
// hears its own nodes' agents only. A shard killed with SIGKILL: another
// takes its pools within the lease's ttl, restores their jobs and nodes, and
// its running jobs run on.
#include <httplib.h>

#include <catch2/catch.hpp>
#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "bus/nats.hpp"
#include "bus/subjects.hpp"
#include "harness.hpp"
#include "messages/names.hpp"
#include "records.pb.h"

using namespace troupe;
using namespace troupe::it;

namespace {

constexpr const char* kConfig = R"(
pools:
  - {name: a100, gpu_type: a100}
  - {name: h100, gpu_type: h100}
teams:
  - {name: ml, weight: 1, borrow: true}
)";

Json typed(const std::vector<std::string>& command, int gpus, const std::string& type) {
  Json j = job_spec("ml", command, gpus);
  j["resources"]["gpu_type"] = type;
  return j;
}

// A keyed submission as the CLI's client makes it (gateway::Client::submit):
// asked again with its key when no answer came. A shard killed with -9 may
// still be handed a message of the submit queue group before the server saw
// its connection close, and NATS core drops it: the client asks again.
Json submit_keyed(Cluster& c, const Json& spec) {
  REQUIRE_FALSE(spec.value("idempotency_key", "").empty());
  const std::string body = spec.dump();
  std::string err;
  for (int attempt = 0; attempt < 4; ++attempt) {
    auto r = c.request_raw(subjects::team_submit(spec.value("team", "")),
                           std::vector<uint8_t>(body.begin(), body.end()), 4s, &err);
    if (r) return Json::parse(r->begin(), r->end(), nullptr, false);
  }
  FAIL("no answer to a keyed submission asked 4 times: " << err);
  return Json();
}

// A simulated job of `type` that runs `seconds`.
Json sim_typed(const std::string& type, const char* seconds) {
  Json j = typed({"simulated-work"}, 1, type);
  j["env"] = {{"TROUPE_SIM_DURATION_S", seconds}};
  return j;
}

// Two pools (a100, h100) of one simulated node of `gpus` each, team ml with
// `limits`, and two shards: the a100 one (the coordinator), then the h100 one.
ClusterOptions two_shard_pools(const std::string& limits, int gpus) {
  ClusterOptions o;
  o.with_config(
       "pools:\n  - {name: a100, gpu_type: a100}\n  - {name: h100, gpu_type: h100}\n"
       "teams:\n  - {name: ml, weight: 1, borrow: true, limits: " +
       limits + "}\n")
      .node("na", gpus, true, "a100")
      .node("nh", gpus, true, "h100");
  o.scheduler_args = {"--pools", "a100"};
  return o;
}

// Who holds the lease on `pool` ("" when nobody).
std::string holder_of(Cluster& c, const std::string& pool) {
  std::string err;
  auto js = bus::JetStream::open(c.conn(), &err);
  REQUIRE(js);
  auto kv = bus::KeyValue::open(*js, subjects::kLeaderBucket, &err);
  REQUIRE(kv);
  auto e = kv->get(subjects::pool_lease_key(pool));
  return e ? e->value : std::string();
}

// The intake stream's last sequence (`subject` empty), or that of its last
// message on `subject`; 0 when none.
uint64_t intake_seq(Cluster& c, const std::string& subject = {}) {
  std::string err;
  const std::string stream = subjects::kIntakeStream;
  auto r = subject.empty()
               ? c.conn().request("$JS.API.STREAM.INFO." + stream, std::string("{}"), 5000, &err)
               : c.conn().request("$JS.API.STREAM.MSG.GET." + stream,
                                  Json{{"last_by_subj", subject}}.dump(), 5000, &err);
  Json j = r ? Json::parse(r->begin(), r->end(), nullptr, false) : Json();
  INFO("intake stream: " << err << j.dump());
  if (!j.is_object()) return 0;
  if (subject.empty()) return j.contains("state") ? j["state"].value("last_seq", uint64_t{0}) : 0;
  return j.contains("message") ? j["message"].value("seq", uint64_t{0}) : 0;
}

// Submits until the owner of the spec's pool (its GPU type here) answers:
// addressed to the pool (troupe.ml.submit.<pool>), which only its owner
// hears (on troupe.ml.submit another shard would record it for a pool
// nobody serves yet). The reply with a job id, or the last one.
Json submit_until_served(Cluster& c, Json spec, Clock::time_point until) {
  spec["idempotency_key"] = "served-" + std::to_string(Clock::now().time_since_epoch().count());
  const std::string pool = spec["resources"].value("gpu_type", "");
  spec["pool"] = pool;
  const std::string body = spec.dump();
  Json r;
  while (Clock::now() < until) {
    std::string err;
    auto raw = c.request_raw(subjects::team_submit_to("ml", pool),
                             std::vector<uint8_t>(body.begin(), body.end()), 500ms, &err);
    r = raw ? Json::parse(raw->begin(), raw->end(), nullptr, false) : Json{{"error", err}};
    if (r.is_object() && r.contains("job_id")) break;
  }
  return r;
}

// Starts the h100 shard beside the a100 one and waits until each serves
// its pool (each pool's first submission gets a job id).
void two_shards_serving(Cluster& c) {
  c.add_scheduler({{"--pools", "h100"}});
  REQUIRE(c.wait_scheduler_serving(30s));
  REQUIRE(submit_until_served(c, sim_typed("a100", "0.1"), Clock::now() + 30s).contains("job_id"));
  REQUIRE(submit_until_served(c, sim_typed("h100", "0.1"), Clock::now() + 30s).contains("job_id"));
}

}  // namespace

TEST_CASE(
    "two shards on two pools: each places its own pool's jobs, no GPU is held twice, and after a "
    "kill -9 "
    "of one the other serves its pool within 5 s and its running jobs keep running",
    "[integration][shards]") {
  ClusterOptions o;
  o.with_config(kConfig).node("na", 4, false, "a100").node("nh", 8, false, "h100");
  o.scheduler_args = {"--pools", "a100", "--lease-ttl-ms", "1500"};
  Cluster c(o);
  c.add_scheduler({{"--pools", "h100"}});
  Process* h_shard = c.schedulers().front();  // the added one (the first stays current)
  REQUIRE(h_shard != &c.scheduler());

  // Each pool's jobs: a long one and a few short ones; ids name the pool.
  // (The first of each pool once its shard serves.)
  REQUIRE(c.wait_scheduler_serving(30s));
  auto first_h = submit_until_served(c, typed({"true"}, 1, "h100"), Clock::now() + 30s);
  REQUIRE(first_h.contains("job_id"));
  auto long_a = c.submit_ok("ml", typed({"sleep", "300"}, 2, "a100"));
  auto long_h = c.submit_ok("ml", typed({"sleep", "300"}, 4, "h100"));
  CHECK(long_a.rfind("j-a100-", 0) == 0);
  CHECK(long_h.rfind("j-h100-", 0) == 0);
  std::vector<std::string> shorts;
  for (int i = 0; i < 6; ++i)
    shorts.push_back(c.submit_ok("ml", typed({"true"}, 1, i % 2 ? "h100" : "a100")));
  REQUIRE(c.events().wait_state(long_a, std::string(names::kRunning), 30s));
  REQUIRE(c.events().wait_state(long_h, std::string(names::kRunning), 30s));
  for (const auto& id : shorts) {
    auto end = c.wait_terminal(id, 30s);
    REQUIRE(end);
    CHECK(end->state == names::kSucceeded);
  }
  CHECK(holder_of(c, "a100") != holder_of(c, "h100"));
  CHECK_FALSE(holder_of(c, "h100").empty());

  // One shard of the queue group reads each submission and hands one of the
  // other's pool to its owner on troupe.sys.shard.submit.<pool>.<team>,
  // where only that owner listens: a submission handed there is that
  // shard's; one whose pool is not the owner's is answered unavailable (not
  // handed on again).
  Json handed = c.request(subjects::shard_submit("h100", "ml"), typed({"true"}, 1, "h100"));
  INFO("handed to the h100 shard: " << handed.dump());
  REQUIRE(handed.contains("job_id"));
  CHECK(handed["job_id"].get<std::string>().rfind("j-h100-", 0) == 0);
  shorts.push_back(handed["job_id"]);
  Json astray = c.request(subjects::shard_submit("h100", "ml"), typed({"true"}, 1, "a100"));
  INFO("an a100 job handed to the h100 shard: " << astray.dump());
  CHECK(astray.value("code", "") == "unavailable");
  CHECK(c.request(subjects::kSysStats, Json::object()).contains("handed_over"));
  auto handed_end = c.wait_terminal(shorts.back(), 30s);
  REQUIRE(handed_end);
  CHECK(handed_end->state == names::kSucceeded);

  // Each shard hears its own nodes' agents only (and every agent's
  // register): nothing the h100 node's agent said about its jobs (starts,
  // exits) or itself (heartbeats) reached the a100 shard, which answers
  // troupe.sys.stats (the coordinator: the config's first pool).
  Json stats = c.request(subjects::kSysStats, Json::object());
  INFO(stats.dump());
  CHECK(stats.value("other_pool_agent_messages", int64_t{-1}) == 0);
  CHECK(stats.value("bus_messages_in", int64_t{0}) > 0);

  // Requests about a job reach its shard, whichever pool.
  CHECK(c.status("ml", long_a).value("state", "") == names::kRunning);
  CHECK(c.status("ml", long_h).value("state", "") == names::kRunning);
  Json none = c.status("ml", "j-h100-nosuchjob00001");
  CHECK(none.contains("error"));
  Json nopool = c.status("ml", "j-nosuchjob00001");  // no pool: the coordinator answers
  CHECK(nopool.contains("error"));

  // The views span the shards: every node, every pool's queues, every job
  // (in pages that go on across pools, each job once).
  auto node_names = [&] {
    std::set<std::string> names;
    Json n = c.nodes();
    for (const auto& v : n.value("nodes", Json::array())) names.insert(v.value("node", ""));
    return names;
  };
  CHECK(node_names() == std::set<std::string>{"na", "nh"});
  Json q = c.queues();
  INFO(q.dump());
  std::map<std::string, int> totals;
  for (const auto& p : q.value("pools", Json::array()))
    totals[p.value("pool", "")] = p.value("gpus_total", 0);
  CHECK(totals == std::map<std::string, int>{{"a100", 4}, {"h100", 8}});
  CHECK_FALSE(q.contains("missing_pools"));
  std::vector<std::string> listed;
  std::string cursor;
  for (int pages = 0; pages < 20; ++pages) {
    Json req = {{"limit", 3}};
    if (!cursor.empty()) req["after"] = cursor;
    Json page = c.request("troupe.ml.jobs", req);
    INFO(page.dump());
    REQUIRE(page.contains("jobs"));
    CHECK(page["jobs"].size() <= 3);
    for (const auto& j : page["jobs"]) listed.push_back(j.value("job_id", ""));
    if (!page.contains("next")) break;
    cursor = page["next"];
  }
  std::set<std::string> expected(shorts.begin(), shorts.end());
  expected.insert({long_a, long_h, first_h["job_id"].get<std::string>()});
  CHECK(listed.size() == expected.size());  // each once
  CHECK(std::set<std::string>(listed.begin(), listed.end()) == expected);

  // Schedules are the coordinator's: a run for another shard's pool is
  // refused, and the schedule says why (not left waiting).
  Json made = c.request("troupe.ml.schedule", Json{{"op", "create"},
                                                   {"name", "every-h"},
                                                   {"cron", "@every 1s"},
                                                   {"spec", typed({"true"}, 1, "h100")}});
  INFO(made.dump());
  REQUIRE_FALSE(made.contains("error"));
  std::string last_error;
  for (auto until = Clock::now() + 15s; Clock::now() < until && last_error.empty();) {
    Json shown = c.request("troupe.ml.schedule", Json{{"op", "show"}, {"name", "every-h"}});
    last_error = shown.value("last_error", "");
    if (last_error.empty()) std::this_thread::sleep_for(200ms);
  }
  CHECK(last_error.find("another shard") != std::string::npos);
  c.request("troupe.ml.schedule", Json{{"op", "delete"}, {"name", "every-h"}});

  // Submissions enqueued with JetStream: the shards share the durable
  // consumer; the one that reads a job of the other's pool hands it over and
  // acknowledges it once the owner took it. Each job runs once, in its pool.
  {
    std::string err;
    auto js = bus::JetStream::open(c.conn(), &err);
    REQUIRE(js);
    std::map<std::string, std::string> types;  // name -> GPU type
    for (int i = 0; i < 6; ++i) {
      const std::string type = i % 2 ? "h100" : "a100";
      const std::string name = "enq-" + std::to_string(i);
      Json spec = typed({"true"}, 1, type);
      spec["name"] = name;
      types[name] = type;
      const std::string body = spec.dump();
      REQUIRE(js->publish(subjects::team_verb("ml", subjects::kEnqueue), body.data(), body.size(),
                          "enq-key-" + std::to_string(i)) == "");
    }
    // name -> the job ids its events carried, and which of them succeeded
    std::map<std::string, std::set<std::string>> ids, succeeded;
    bool done = c.events().wait_for(
        [&](const std::vector<Event>& events) {
          ids.clear();
          succeeded.clear();
          for (const auto& e : events) {
            const std::string name = e.json.value("name", "");
            if (types.count(name) == 0) continue;
            ids[name].insert(e.job_id);
            if (e.state == names::kSucceeded) succeeded[name].insert(e.job_id);
          }
          return succeeded.size() == types.size();
        },
        30s);
    INFO("enqueued jobs: " << Json(ids).dump() << " succeeded: " << Json(succeeded).dump());
    CHECK(done);
    for (const auto& [name, of_name] : ids) {
      INFO(name);
      CHECK(of_name.size() == 1);  // once
      for (const auto& id : of_name) CHECK(id.rfind("j-" + types[name] + "-", 0) == 0);
    }
    // All acknowledged: nothing left for the consumer to deliver again.
    Json stats = c.request(subjects::kSysStats, Json::object());
    CHECK(stats.value("malformed", int64_t{-1}) == 0);
  }

  // The h100 shard dies. A submission for its pool at once is not refused:
  // the a100 shard, which now reads every submission, hands it to the
  // pool's owner, hears that nobody answers, and records it for the pool
  // (troupe.sys.intake.ml.handoff.h100). Its pool is served again within
  // 5 s: taken over, and the job recorded for it runs.
  const std::string old_holder = holder_of(c, "h100");
  const uint64_t intake_before = intake_seq(c);
  REQUIRE(intake_before > 0);
  h_shard->kill_now();
  const auto killed = Clock::now();
  // One enqueued for the pool now (JetStream) is handed to nobody: the
  // server's "no responders" has it delivered again a second later (not
  // after the consumer's 30 s ack wait), until the pool's new owner takes it.
  {
    std::string err;
    auto js = bus::JetStream::open(c.conn(), &err);
    REQUIRE(js);
    Json enq = typed({"true"}, 1, "h100");
    enq["name"] = "enqueued-while-nobody-owns-h100";
    const std::string body = enq.dump();
    REQUIRE(js->publish(subjects::team_verb("ml", subjects::kEnqueue), body.data(), body.size(),
                        "enq-while-dead") == "");
  }
  Json spec = typed({"sleep", "300"}, 4, "h100");
  spec["idempotency_key"] = "while-nobody-owns-h100";
  Json r = submit_keyed(c, spec);
  INFO("submitted to the dead shard's pool: " << r.dump());
  REQUIRE(r.contains("job_id"));
  const std::string after = r["job_id"];
  CHECK(after.rfind("j-h100-", 0) == 0);
  // (asked again with its key while the pool has no owner: the same job)
  CHECK(submit_keyed(c, spec).value("job_id", "") == after);
  REQUIRE(c.events().wait_state(after, std::string(names::kRunning), 30s));
  const auto served_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed).count();
  INFO("h100 served again after " << served_ms << " ms");
  CHECK(served_ms <= 5000);
  CHECK(holder_of(c, "h100") == holder_of(c, "a100"));
  CHECK(holder_of(c, "h100") != old_holder);
  // (recorded by the a100 shard for the h100 pool after the kill)
  CHECK(intake_seq(c, subjects::handoff("ml", "h100")) > intake_before);
  const bool enqueued_taken = c.events().wait_for(
      [](const std::vector<Event>& events) {
        for (const auto& e : events)
          if (e.json.value("name", "") == "enqueued-while-nobody-owns-h100") return true;
        return false;
      },
      killed + 15s - Clock::now());
  INFO("the enqueued one's job appeared "
       << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed).count()
       << " ms after the kill");
  CHECK(enqueued_taken);

  // The h100 job that ran before the kill runs on, adopted: the same
  // attempt, never stopped or placed again.
  Json st = c.status("ml", long_h);
  INFO(st.dump() << "\n" << c.events().describe(long_h));
  CHECK(st.value("state", "") == names::kRunning);
  for (const auto& e : c.events().of_job(long_h)) {
    CHECK(e.state != "preempted");
    CHECK_FALSE(names::is_terminal(e.state));
    CHECK(e.json.value("attempt", 1) == 1);
  }
  CHECK(c.status("ml", long_a).value("state", "") == names::kRunning);
  CHECK(node_names() == std::set<std::string>{"na", "nh"});  // both now in one shard

  // The h100 shard comes back: it asks for its pool, the a100 shard hands
  // it back (its actors stopped first), and the h100 shard serves it again;
  // the running jobs are adopted again, still their first attempt.
  c.add_scheduler({{"--pools", "h100"}});
  const auto back = Clock::now();
  while (Clock::now() - back < 20s &&
         (holder_of(c, "h100").empty() || holder_of(c, "h100") == holder_of(c, "a100")))
    std::this_thread::sleep_for(100ms);  // polling the lease (another process's write)
  INFO("h100 held by " << holder_of(c, "h100") << ", a100 by " << holder_of(c, "a100"));
  REQUIRE_FALSE(holder_of(c, "h100").empty());
  REQUIRE(holder_of(c, "h100") != holder_of(c, "a100"));
  Json again = submit_until_served(c, typed({"true"}, 1, "h100"), Clock::now() + 20s);
  INFO("h100 served after the hand-back: " << again.dump());
  REQUIRE(again.contains("job_id"));
  // (the pool is full: `after` is canceled, by the shard that holds it now)
  CHECK(c.cancel("ml", after).value("job_id", "") == after);
  auto again_end = c.wait_terminal(again["job_id"], 30s);
  REQUIRE(again_end);
  CHECK(again_end->state == names::kSucceeded);
  for (const auto& id : {long_a, long_h}) {
    INFO(id << ": " << c.status("ml", id).dump() << "\n" << c.events().describe(id));
    CHECK(c.status("ml", id).value("state", "") == names::kRunning);
    for (const auto& e : c.events().of_job(id)) {
      CHECK_FALSE(names::is_terminal(e.state));
      CHECK(e.json.value("attempt", 1) == 1);
    }
  }

  // From the events: no GPU ever held by two jobs.
  auto replay = replay_gpus(c.events().all());
  INFO(replay.clashes.size() << " clashes; first: "
                             << (replay.clashes.empty() ? "" : replay.clashes.front()));
  CHECK(replay.clashes.empty());
  CHECK(replay.max_held >= 10);  // 2 + 4 + 4: both pools held at once
  CHECK(replay.max_held <= 12);  // (the nodes' 4 + 8 GPUs)
  c.cancel("ml", long_a);
  c.cancel("ml", long_h);
}

TEST_CASE(
    "two shards: a team whose jobs go to both shards' pools keeps to one submit_rate across them "
    "(each shard debits what the other admitted)",
    "[integration][shards]") {
  constexpr double kRate = 10, kBurst = 2;
  auto job = [](const std::string& type) { return sim_typed(type, "0.1"); };
  Cluster c(two_shard_pools("{submit_rate: 10, submit_burst: 2}", 8));
  c.add_scheduler({{"--pools", "h100"}});
  REQUIRE(c.wait_scheduler_serving(30s));
  // Both shards serve (each pool's first submission gets a job id), then the
  // buckets are full again.
  REQUIRE(submit_until_served(c, job("a100"), Clock::now() + 30s).contains("job_id"));
  REQUIRE(submit_until_served(c, job("h100"), Clock::now() + 30s).contains("job_id"));
  std::this_thread::sleep_for(
      std::chrono::milliseconds(static_cast<int>(1000 * kBurst / kRate) + 300));

  // 4 s of submissions as fast as the answers come, each pool in turn: each
  // shard owns one pool and counts its own; alone, each would admit its
  // burst and the rate (twice the team's rate together).
  std::map<std::string, int> codes;
  std::map<std::string, int> by_pool;
  const auto t0 = Clock::now();
  for (int i = 0; Clock::now() - t0 < 4s; ++i) {
    const std::string type = i % 2 ? "h100" : "a100";
    Json r = c.request(subjects::team_submit("ml"), job(type), 2s);
    if (r.contains("job_id")) {
      ++codes[""];
      ++by_pool[type];
    } else {
      ++codes[r.value("code", r.dump())];
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  INFO("in " << elapsed << " s: " << codes[""] << " accepted (a100 " << by_pool["a100"] << ", h100 "
             << by_pool["h100"] << "), " << codes["rate_limited"] << " rate_limited, "
             << codes.size() << " kinds of answer");
  CHECK(codes.size() == 2);  // accepted and rate_limited, nothing else
  CHECK(codes["rate_limited"] > 0);
  CHECK(by_pool["a100"] > 0);
  CHECK(by_pool["h100"] > 0);
  // One rate for both: each shard's burst, the rate for as long as it
  // lasted, one report's lag (250 ms) for each shard.
  CHECK(codes[""] <= static_cast<int>(2 * kBurst + kRate * (elapsed + 2 * 0.25)) + 2);
  CHECK(codes[""] >= static_cast<int>(kRate * elapsed * 0.6));
}

TEST_CASE(
    "two shards: a team's max_queued_jobs holds across them (each counts the jobs queued in the "
    "other's pools)",
    "[integration][shards]") {
  auto job = [](const std::string& type) { return sim_typed(type, "300"); };
  // The a100 shard is the coordinator: it answers troupe.sys.stats.
  Cluster c(two_shard_pools("{max_queued_jobs: 4}", 1));
  c.add_scheduler({{"--pools", "h100"}});
  REQUIRE(c.wait_scheduler_serving(30s));
  // Each pool's one GPU busy; then two jobs wait in each pool: 4 queued.
  std::vector<std::string> ids;
  for (const auto* type : {"a100", "h100"}) {
    auto r = submit_until_served(c, job(type), Clock::now() + 30s);
    REQUIRE(r.contains("job_id"));
    ids.push_back(r["job_id"]);
    REQUIRE(c.events().wait_state(ids.back(), std::string(names::kRunning), 30s));
  }
  // What each shard reports of its queued jobs (troupe.sys.shard.rate).
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, int64_t> reported;  // shard -> ml's queued jobs there
  auto sniff = c.conn().subscribe(subjects::kShardRate, [&](Inbound&& in) {
    pb::ShardRate r;
    if (!r.ParseFromArray(in.data.data(), static_cast<int>(in.data.size())) || !r.has_queued())
      return;
    std::lock_guard<std::mutex> g(mu);
    auto ml = r.queued().find("ml");
    reported[r.shard()] = ml == r.queued().end() ? 0 : ml->second;
    cv.notify_all();
  });
  REQUIRE(sniff);
  for (int i = 0; i < 4; ++i) ids.push_back(c.submit_ok("ml", job(i % 2 ? "h100" : "a100")));

  // Once both shards reported their two (a report reaches the other shard
  // before anything this test sends after it), each refuses a fifth queued
  // job: 2 here and 2 there.
  {
    std::unique_lock<std::mutex> g(mu);
    const bool both = cv.wait_for(g, 10s, [&] {
      return reported.size() == 2 && reported.begin()->second == 2 &&
             reported.rbegin()->second == 2;
    });
    REQUIRE(both);
  }
  Json stats = c.request(subjects::kSysStats, Json::object());
  INFO(stats.dump());
  REQUIRE(stats["queued_in_other_shards"].value("ml", int64_t{0}) == 2);
  Json refused = c.request(subjects::shard_submit("a100", "ml"), job("a100"));
  INFO("a fifth queued job, to the a100 shard: " << refused.dump());
  CHECK(refused.value("code", "") == "too_many_queued");
  // And the h100 shard counts the a100 shard's two (its own two, plus two).
  Json refused_h = c.request(subjects::shard_submit("h100", "ml"), job("h100"));
  INFO("a fifth queued job, to the h100 shard: " << refused_h.dump());
  CHECK(refused_h.value("code", "") == "too_many_queued");

  // One job leaves the queue (canceled): there is room for one again.
  c.cancel("ml", ids[2]);  // an a100 one
  const auto room = Clock::now() + 10s;
  Json r;
  while (Clock::now() < room) {
    r = c.request(subjects::shard_submit("h100", "ml"), job("h100"));
    if (r.contains("job_id")) break;
  }
  INFO("after a cancel, to the h100 shard: " << r.dump());
  CHECK(r.contains("job_id"));
  for (const auto& id : ids) c.cancel("ml", id);
  if (r.contains("job_id")) c.cancel("ml", r["job_id"].get<std::string>());
}

TEST_CASE(
    "two shards: a submission addressed to its pool (troupe.<team>.submit.<pool>) is read by that "
    "pool's shard and never handed over, one addressed astray is handed to its owner, and troupe "
    "submit and POST /v1/jobs of a spec naming its pool address it",
    "[integration][shards]") {
  Cluster c(two_shard_pools("{}", 8));
  two_shards_serving(c);

  // Every hand-over between the shards (troupe.sys.shard.read.<pool>.<team>).
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> handed;
  auto sniff =
      c.conn().subscribe(std::string(subjects::kShardReadPrefix) + ".>", [&](Inbound&& in) {
        std::lock_guard<std::mutex> g(mu);
        handed.push_back(in.subject);
        cv.notify_all();
      });
  REQUIRE(sniff);
  auto pooled = [](const std::string& pool) {
    Json j = sim_typed(pool, "0.1");
    j["pool"] = pool;
    return j;
  };
  std::vector<std::string> ids;
  for (int i = 0; i < 12; ++i) {
    const std::string pool = i % 2 ? "h100" : "a100";
    Json r = c.request(subjects::team_submit_to("ml", pool), pooled(pool));
    INFO("addressed to " << pool << ": " << r.dump());
    REQUIRE(r.contains("job_id"));
    CHECK(r["job_id"].get<std::string>().rfind("j-" + pool + "-", 0) == 0);
    ids.push_back(r["job_id"]);
  }
  // An a100 job addressed to the h100 shard: handed to the a100 shard. Once
  // its hand-over is heard, so would be any of the submissions before it.
  Json astray = c.request(subjects::team_submit_to("ml", "h100"), sim_typed("a100", "0.1"));
  INFO("an a100 job addressed to h100: " << astray.dump());
  REQUIRE(astray.contains("job_id"));
  CHECK(astray["job_id"].get<std::string>().rfind("j-a100-", 0) == 0);
  ids.push_back(astray["job_id"]);
  {
    std::unique_lock<std::mutex> g(mu);
    REQUIRE(cv.wait_for(g, 10s, [&] { return !handed.empty(); }));
    CHECK(handed == std::vector<std::string>{subjects::shard_read("a100", "ml")});
  }

  // troupe submit: a spec naming its pool goes to that pool's shard; one
  // naming a pool nobody serves is sent to any shard, which says why.
  auto write_spec = [&](const std::string& name, const Json& spec) {
    std::ofstream(c.file(name)) << spec.dump();
    return c.file(name);
  };
  RunResult sub = c.run_cli({"submit", write_spec("h.json", pooled("h100"))});
  INFO(describe(sub));
  REQUIRE(sub.exit_code == 0);
  CHECK(sub.out.find("j-h100-") != std::string::npos);
  Json nowhere = pooled("h100");
  nowhere["pool"] = "b200";
  RunResult bad = c.run_cli({"submit", write_spec("b.json", nowhere)});
  INFO(describe(bad));
  CHECK(bad.exit_code != 0);
  CHECK((bad.out + bad.err).find("b200") != std::string::npos);
  CHECK((bad.out + bad.err).find("no responders") == std::string::npos);

  // The HTTP API does the same: eight pooled specs, none handed over (each
  // sent to any shard would be handed over with even odds).
  httplib::Client http(c.start_gateway({"--token-cache-ms", "0"}));
  const httplib::Headers bearer{{"Authorization", "Bearer " + c.add_token("ml")}};
  for (int i = 0; i < 8; ++i) {
    const std::string pool = i % 2 ? "h100" : "a100";
    auto res = http.Post("/v1/jobs", bearer, pooled(pool).dump(), "application/json");
    REQUIRE(res);
    INFO("POST /v1/jobs of a spec for " << pool << ": " << res->status << " " << res->body);
    REQUIRE(res->status == 201);
    Json r = Json::parse(res->body, nullptr, false);
    REQUIRE(r.contains("job_id"));
    CHECK(r["job_id"].get<std::string>().rfind("j-" + pool + "-", 0) == 0);
    ids.push_back(r["job_id"]);
  }
  auto res = http.Post("/v1/jobs", bearer, nowhere.dump(), "application/json");
  REQUIRE(res);
  INFO("POST /v1/jobs of a spec for b200: " << res->status << " " << res->body);
  CHECK(res->status >= 400);
  CHECK(res->status < 500);
  CHECK(res->body.find("b200") != std::string::npos);
  // A pool that is no subject token (a wildcard) is not made into a subject:
  // the spec goes to any shard, which refuses it.
  for (const char* hostile : {"*", ">", "a100.x"}) {
    Json spec = pooled("a100");
    spec["pool"] = hostile;
    auto bad_pool = http.Post("/v1/jobs", bearer, spec.dump(), "application/json");
    REQUIRE(bad_pool);
    INFO("POST /v1/jobs of a spec for pool " << hostile << ": " << bad_pool->status << " "
                                             << bad_pool->body);
    CHECK(bad_pool->status >= 400);
    CHECK(bad_pool->status < 500);
  }
  {
    std::lock_guard<std::mutex> g(mu);
    CHECK(handed.size() == 1);
  }
  for (const auto& id : ids) {
    auto end = c.wait_terminal(id, 30s);
    REQUIRE(end);
    CHECK(end->state == names::kSucceeded);
  }
}

namespace {

// Counts the shards' reports (troupe.sys.shard.rate) that said a pool's free
// GPUs were `free`, from when it is made.
class RoomWatch {
 public:
  explicit RoomWatch(Cluster& c) {
    sub_ = c.conn().subscribe(subjects::kShardRate, [this](Inbound&& in) {
      pb::ShardRate r;
      if (!r.ParseFromArray(in.data.data(), static_cast<int>(in.data.size()))) return;
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [pool, room] : r.rooms()) {
        ++said_[{pool, room.free_gpus()}];
        ++waiting_[{pool, room.pending_gpus()}];
      }
      cv_.notify_all();
    });
    REQUIRE(sub_);
  }
  void reset() {
    std::lock_guard<std::mutex> lock(mu_);
    said_.clear();
    waiting_.clear();
  }
  // Two reports (so that the shards have heard the first one well before)
  // saying `pool` has `free` GPUs free.
  bool wait(const std::string& pool, int free, Clock::duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return said_[{pool, free}] >= 2; });
  }
  // The same for the GPUs waiting in `pool`.
  bool wait_waiting(const std::string& pool, int gpus, Clock::duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return waiting_[{pool, gpus}] >= 2; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<std::string, int>, int> said_, waiting_;
  std::unique_ptr<bus::Subscription> sub_;
};

}  // namespace

TEST_CASE(
    "two shards: an any-type job goes to the shard of a candidate pool with room for it now, where "
    "it would wait least when none has, and its idempotency key holds across the shards",
    "[integration][shards]") {
  Cluster c(two_shard_pools("{}", 2));
  two_shards_serving(c);
  RoomWatch rooms(c);

  // a100 full; h100 empty, as both shards have said.
  Json fill = typed({"simulated-work"}, 2, "a100");
  fill["env"] = {{"TROUPE_SIM_DURATION_S", "300"}};
  const std::string filler = c.submit_ok("ml", fill);
  REQUIRE(c.events().wait_state(filler, std::string(names::kRunning), 30s));
  rooms.reset();
  REQUIRE(rooms.wait("a100", 0, 15s));
  REQUIRE(rooms.wait("h100", 2, 15s));

  // Any-type jobs that prefer a100 go to h100 (the shard of the queue group
  // that reads each either hands it over or takes it): their ids name h100
  // and they run there.
  auto any_type = [](const char* key) {
    Json j = job_spec("ml", {"simulated-work"}, 1);
    j["resources"]["gpu_types"] = {"a100", "h100"};
    j["env"] = {{"TROUPE_SIM_DURATION_S", "300"}};
    if (key != nullptr) j["idempotency_key"] = key;
    return j;
  };
  // (The second with an idempotency key: keys hold across the shards.)
  std::vector<std::string> moved;
  moved.push_back(c.submit_ok("ml", any_type(nullptr)));
  moved.push_back(c.submit_ok("ml", any_type("any-type-key")));
  for (const auto& id : moved) {
    INFO(id);
    CHECK(id.rfind("j-h100-", 0) == 0);
    auto run = c.events().wait_state(id, std::string(names::kRunning), 30s);
    REQUIRE(run);
  }
  CHECK(c.status("ml", moved[0]).value("state", "") == names::kRunning);
  // The h100 shard answers for the key: it holds its job.
  Json asked = c.request(subjects::shard_key("h100", "ml"), {{"idempotency_key", "any-type-key"}});
  CHECK(asked.value("pool", "") == "h100");
  CHECK(asked.value("job_id", "") == moved[1]);
  CHECK(asked.value("fingerprint", "") != "");
  Json unknown = c.request(subjects::shard_key("h100", "ml"), {{"idempotency_key", "never-used"}});
  CHECK(unknown.value("pool", "") == "h100");
  CHECK_FALSE(unknown.contains("job_id"));
  // Hostile asks: a team may not ask at all (the server refuses its
  // publish); a malformed ask gets no answer and is counted malformed by the
  // shard asked, which keeps answering.
  {
    std::string err;
    auto team = c.connect_as("team-ml", &err);
    INFO(err);
    REQUIRE(team);
    const std::string subject = subjects::shard_key("h100", "ml");
    team->publish(subject, Json{{"idempotency_key", "any-type-key"}}.dump());
    team->flush(2000);
    CHECK(team->wait_async_error("Permissions Violation for Publish to \"" + subject, 3000));
    const int64_t before = c.request(subjects::kSysStats, Json::object()).value("malformed", 0);
    for (const char* bad : {"not json", R"({"idempotency_key": 5})", "[]"})
      for (const char* pool : {"a100", "h100"}) {
        INFO(pool << ": " << bad);
        CHECK_FALSE(c.conn().request(subjects::shard_key(pool, "ml"), bad, 500, &err));
      }
    // (each shard counted its own 3; troupe.sys.stats is one shard's)
    CHECK(c.request(subjects::kSysStats, Json::object()).value("malformed", 0) >= before + 3);
    CHECK(c.request(subject, {{"idempotency_key", "any-type-key"}}).value("job_id", "") ==
          moved[1]);
  }

  // Both full, as both shards have said, nothing waiting: the first
  // candidate (as short of room as the other, per GPU).
  rooms.reset();
  REQUIRE(rooms.wait("h100", 0, 15s));
  const std::string waits = c.submit_ok("ml", any_type(nullptr));
  CHECK(waits.rfind("j-a100-", 0) == 0);
  CHECK(c.status("ml", waits).value("state", "") == names::kQueued);
  // Now a GPU waits in a100: the next waits in h100, where it would wait
  // least.
  rooms.reset();
  REQUIRE(rooms.wait_waiting("a100", 1, 15s));
  const std::string waits_h = c.submit_ok("ml", any_type(nullptr));
  CHECK(waits_h.rfind("j-h100-", 0) == 0);
  CHECK(c.status("ml", waits_h).value("state", "") == names::kQueued);

  // a100 has room again (the filler cancelled, the waiting job placed): the
  // key, now read for a100, is still the h100 job. The a100 shard asked the
  // h100 one before recording it (troupe.sys.shard.key.h100.ml); a spec that
  // differs under the key is a conflict.
  c.cancel("ml", filler);
  REQUIRE(c.events().wait_state(waits, std::string(names::kRunning), 30s));
  rooms.reset();
  REQUIRE(rooms.wait("a100", 1, 15s));
  for (int i = 0; i < 3; ++i) CHECK(c.submit_ok("ml", any_type("any-type-key")) == moved[1]);
  Json other = any_type("any-type-key");
  other["env"]["TROUPE_SIM_DURATION_S"] = "5";
  CHECK(c.submit_json("ml", other).value("code", "") == "idempotency_conflict");
  Json stats = c.request(subjects::kSysStats, Json::object());  // the a100 shard's
  CHECK(stats.value("key_asks", 0) >= 3);
  CHECK(stats.value("key_ask_timeouts", -1) == 0);
  // And a job without a key goes to a100 now.
  const std::string last = c.submit_ok("ml", any_type(nullptr));
  CHECK(last.rfind("j-a100-", 0) == 0);
  CHECK(c.events().wait_state(last, std::string(names::kRunning), 30s));
}

TEST_CASE(
    "two shards: troupe-load --pool sends a submission nobody listens for (no such pool) again on "
    "troupe.<team>.submit, where it is refused with why",
    "[integration][shards][load]") {
  Cluster c(two_shard_pools("{}", 2));
  two_shards_serving(c);
  RunResult r = run_program(
      {bin_dir() + "/troupe-load", "--nats", c.url(), "--jobs", "3", "--teams", "ml", "--pool",
       "v100", "--duration-s", "0.05", "--deadline-s", "20", "--json", "--no-progress"},
      c.dir(), "troupe-load-pool", 60s, &c.dump(), c.client_env());
  INFO(describe(r));
  REQUIRE_FALSE(r.timed_out);
  Json j = Json::parse(r.out, nullptr, false);
  REQUIRE(j.is_object());
  CHECK(j.value("rerouted", -1) == 3);
  CHECK(j.value("rejected", -1) == 3);
  CHECK(j.value("unanswered", -1) == 0);
  CHECK_THAT(j["errors"].dump(), Catch::Contains("v100"));

  // Addressed to a pool its shard serves: read there, nothing sent again.
  r = run_program({bin_dir() + "/troupe-load", "--nats", c.url(), "--jobs", "3", "--teams", "ml",
                   "--pool", "h100", "--gpu-type", "h100", "--mix", "1gpu", "--duration-s", "0.05",
                   "--deadline-s", "30", "--json", "--no-progress"},
                  c.dir(), "troupe-load-h100", 60s, &c.dump(), c.client_env());
  INFO(describe(r));
  REQUIRE_FALSE(r.timed_out);
  j = Json::parse(r.out, nullptr, false);
  REQUIRE(j.is_object());
  CHECK(j.value("rerouted", -1) == 0);
  CHECK(j.value("acknowledged", -1) == 3);
  CHECK(j.value("terminal", -1) == 3);
}

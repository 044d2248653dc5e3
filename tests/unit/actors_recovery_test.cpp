// Unit tests for actors/recovery: rebuilding the scheduler's state from KV
// snapshots, the intake stream and job events after a restart.
#include <catch2/catch.hpp>
#include <initializer_list>

#include "actors/job_record.hpp"
#include "actors/recovery.hpp"
#include "messages/spec.hpp"

using namespace troupe;

namespace {

pb::JobRecord job(const std::string& id, const std::string& state, int attempt = 1) {
  pb::JobRecord r;
  r.set_job_id(id);
  r.mutable_spec()->set_team("t1");
  r.mutable_spec()->set_kind("training");
  r.mutable_spec()->set_priority("normal");
  r.mutable_spec()->add_command("true");
  r.mutable_spec()->mutable_resources()->set_gpus(2);
  r.mutable_spec()->mutable_resources()->set_cpus(4);
  r.mutable_spec()->mutable_resources()->set_memory_mb(1024);
  r.set_state(state);
  r.set_attempt(attempt);
  return r;
}

std::string bytes(const google::protobuf::Message& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

void place(pb::JobRecord& r, const std::string& node, std::vector<int> gpus, int rank = 0) {
  auto* p = r.add_placement();
  p->set_rank(rank);
  p->set_node(node);
  for (int g : gpus) p->add_gpus(g);
}

// The event the job actor would have published for `r` as its `seq`th.
std::string event_json(pb::JobRecord r, int64_t seq) {
  r.set_event_seq(seq);
  return spec::to_json(job_event(r, 1000 + seq));
}

}  // namespace

TEST_CASE("recovery reads job and node snapshots and counts unreadable ones", "[recovery]") {
  recovery::State s;
  CHECK(recovery::add_snapshot(s, "job.j1", bytes(job("j1", "queued"))));
  pb::NodeRecord n;
  n.set_node("n1");
  n.set_gpus(8);
  CHECK(recovery::add_snapshot(s, "node.n1", bytes(n)));
  CHECK_FALSE(recovery::add_snapshot(s, "job.j2", "\xff\xff not a record"));
  CHECK_FALSE(recovery::add_snapshot(s, "meta.flushed_ms", "123"));
  // A removed node's key (purged: a marker without value) is no node and
  // nothing unreadable.
  CHECK(recovery::add_snapshot(s, "node.n2", ""));
  CHECK(s.jobs.size() == 1);
  CHECK(s.nodes.at("n1").gpus() == 8);
  CHECK(s.nodes.count("n2") == 0);
  CHECK(s.bad == 1);
}

TEST_CASE("recovery adds accepted submissions no snapshot knows, once", "[recovery]") {
  recovery::State s;
  recovery::add_snapshot(s, "job.j1", bytes(job("j1", "running")));
  auto fresh = job("j2", "");
  CHECK(recovery::add_intake(s, bytes(fresh)));
  CHECK_FALSE(recovery::add_intake(s, bytes(fresh)));
  CHECK_FALSE(recovery::add_intake(s, bytes(job("j1", ""))));  // the snapshot wins
  CHECK(s.jobs.at("j1").state() == "running");
  CHECK(s.jobs.at("j2").state().empty());  // its actor starts it as a new job
  CHECK(s.changed == std::set<std::string>{"j2"});
}

TEST_CASE("recovery applies only events newer than the snapshot", "[recovery]") {
  recovery::State s;
  auto r = job("j1", "queued");
  r.set_event_seq(1);
  recovery::add_snapshot(s, "job.j1", bytes(r));

  auto starting = r;
  starting.set_state("starting");
  place(starting, "n1", {2, 3});
  auto running = starting;
  running.set_state("running");

  CHECK_FALSE(recovery::add_event(s, event_json(r, 1)));  // already in the snapshot
  CHECK(recovery::add_event(s, event_json(starting, 2)));
  CHECK(recovery::add_event(s, event_json(running, 3)));
  CHECK_FALSE(recovery::add_event(s, event_json(starting, 2)));  // older: ignored
  CHECK_FALSE(recovery::add_event(s, "{not json"));
  const auto& got = s.jobs.at("j1");
  CHECK(got.state() == "running");
  CHECK(got.event_seq() == 3);
  REQUIRE(got.placement_size() == 1);
  CHECK(got.placement(0).node() == "n1");
  CHECK(got.started_ranks_size() == 1);
  CHECK(s.bad == 1);

  // The attempt failed and the job was requeued: attempt 2, no placement.
  auto requeued = job("j1", "queued", 2);
  CHECK(recovery::add_event(s, event_json(requeued, 4)));
  CHECK(s.jobs.at("j1").attempt() == 2);
  CHECK(s.jobs.at("j1").placement_size() == 0);
  CHECK(s.jobs.at("j1").started_ranks_size() == 0);

  // Events of unknown jobs are not invented into jobs.
  CHECK_FALSE(recovery::add_event(s, event_json(job("zz", "running"), 5)));
  CHECK(s.jobs.count("zz") == 0);
}

TEST_CASE("recovery rebuilds an array task from its array's record and its events",
          "[recovery][arrays]") {
  // A scheduler killed right after an array's first tasks started: the array
  // is known from its intake record and events only, its tasks from their
  // events only (a task has no intake record). The tasks that ran must come
  // back as running, not be forgotten and started again.
  recovery::State s;
  auto array = job("j-a", "");
  array.mutable_spec()->mutable_array()->set_count(6);
  array.mutable_spec()->mutable_array()->set_parallelism(2);
  REQUIRE(recovery::add_intake(s, bytes(array)));
  auto queued = array;
  queued.set_state("queued");
  CHECK(recovery::add_event(s, event_json(queued, 1)));

  auto task = task_record(array, 1, 500);
  task.set_state("queued");
  auto starting = task;
  starting.set_state("starting");
  place(starting, "n1", {1, 2});
  auto running = starting;
  running.set_state("running");
  CHECK(recovery::add_event(s, event_json(task, 1)));
  CHECK(recovery::add_event(s, event_json(starting, 2)));
  CHECK(recovery::add_event(s, event_json(running, 3)));

  REQUIRE(s.jobs.count("j-a-1") == 1);
  const auto& got = s.jobs.at("j-a-1");
  CHECK(got.state() == "running");
  REQUIRE(got.placement_size() == 1);
  CHECK(got.placement(0).node() == "n1");
  CHECK(got.spec().env().at("TROUPE_ARRAY_INDEX") == "1");
  CHECK(got.spec().env().at("TROUPE_ARRAY_COUNT") == "6");
  CHECK_FALSE(got.spec().has_array());
  // The array got its tasks' bytes, all waiting (the supervisor catches up).
  CHECK(s.jobs.at("j-a").array_tasks() == "......");

  // Not invented: an index past the array's count, a task of an unknown
  // array, another team's "task", a bad placement.
  auto past = task_record(array, 1, 500);
  past.set_job_id("j-a-6");
  past.set_state("queued");
  CHECK_FALSE(recovery::add_event(s, event_json(past, 1)));
  auto stray = job("j-zz-0", "queued");
  CHECK_FALSE(recovery::add_event(s, event_json(stray, 1)));
  auto other = task_record(array, 2, 500);
  other.mutable_spec()->set_team("t2");
  other.set_state("queued");
  CHECK_FALSE(recovery::add_event(s, event_json(other, 1)));
  auto wide = task_record(array, 3, 500);
  wide.set_state("starting");
  place(wide, "n1", {0}, 0);
  place(wide, "n2", {0}, 1);  // two workers for a one-worker job
  CHECK_FALSE(recovery::add_event(s, event_json(wide, 1)));
  CHECK(s.jobs.count("j-a-6") == 0);
  CHECK(s.jobs.count("j-zz-0") == 0);
  CHECK(s.jobs.count("j-a-2") == 0);
  CHECK(s.jobs.count("j-a-3") == 0);
}

TEST_CASE("recovery keeps a terminal event's exit code", "[recovery]") {
  recovery::State s;
  auto r = job("j1", "running");
  r.set_event_seq(3);
  recovery::add_snapshot(s, "job.j1", bytes(r));
  auto failed = r;
  failed.set_state("failed");
  failed.set_exit_code(7);
  CHECK(recovery::add_event(s, event_json(failed, 4)));
  CHECK(s.jobs.at("j1").state() == "failed");
  REQUIRE(s.jobs.at("j1").has_exit_code());
  CHECK(s.jobs.at("j1").exit_code() == 7);
}

TEST_CASE("recovery derives node ledgers from the jobs that hold GPUs", "[recovery]") {
  recovery::State s;
  pb::NodeRecord n1;
  n1.set_node("n1");
  n1.set_gpus(8);
  auto* stale = n1.add_holds();  // a lease in flight when the scheduler died
  stale->set_id("old/1/0");
  stale->set_job_id("old");
  stale->add_gpus(7);
  recovery::add_snapshot(s, "node.n1", bytes(n1));

  auto running = job("j1", "running");
  place(running, "n1", {0, 1});
  auto gang = job("j2", "starting", 2);
  gang.mutable_spec()->set_workers(2);
  place(gang, "n1", {2, 3}, 0);
  place(gang, "n9", {0, 1}, 1);  // a node no snapshot knows yet
  auto queued = job("j3", "queued");
  auto done = job("j4", "succeeded");
  place(done, "n1", {4, 5});
  for (const auto& r : {running, gang, queued, done})
    recovery::add_snapshot(s, "job." + r.job_id(), bytes(r));

  recovery::derive_holds(s);
  const auto& a = s.nodes.at("n1");
  CHECK(a.restored());
  CHECK(a.gpus() == 8);
  REQUIRE(a.holds_size() == 2);
  std::set<std::string> ids;
  for (const auto& h : a.holds()) {
    ids.insert(h.id());
    CHECK(h.committed());
    CHECK(h.launched());
    CHECK(h.cpus() == 4);
  }
  CHECK(ids == std::set<std::string>{"j1/1/0", "j2/2/0"});
  const auto& b = s.nodes.at("n9");
  CHECK(b.restored());
  REQUIRE(b.holds_size() == 1);
  CHECK(b.holds(0).id() == "j2/2/1");
  CHECK(std::vector<int>(b.holds(0).gpus().begin(), b.holds(0).gpus().end()) ==
        std::vector<int>{0, 1});
  // n1's snapshot says what it holds; n9 is known only from the gang's
  // placement, so no admission check may take it for a node with no GPUs.
  CHECK(recovery::shape_known(a));
  CHECK_FALSE(recovery::shape_known(b));
}

TEST_CASE("a node's record goes to the store without its holds", "[recovery]") {
  pb::NodeRecord n;
  n.set_node("n1");
  n.set_gpus(8);
  n.set_gpu_type("a100");
  n.set_cordoned(true);
  auto durable_of = [](const pb::NodeRecord& r) {
    return recovery::durable_node_record(r.SerializeAsString());
  };
  std::string bare = durable_of(n);
  auto* h = n.add_holds();
  h->set_id("j1/1/0");
  h->set_job_id("j1");
  h->add_gpus(3);
  h->set_committed(true);
  // A hold more or less writes the same record (nothing to store) ...
  CHECK(durable_of(n) == bare);
  pb::NodeRecord back;
  REQUIRE(back.ParseFromString(bare));
  CHECK(back.node() == "n1");
  CHECK(back.gpus() == 8);
  CHECK(back.cordoned());
  CHECK(back.holds_size() == 0);
  // ... a change of the node itself does not.
  n.set_cordoned(false);
  CHECK(durable_of(n) != bare);
  CHECK(recovery::durable_node_record("\xff\xff not a record").empty());
}

TEST_CASE("recovery gives the router its idempotency keys and submit order back", "[recovery]") {
  recovery::State s;
  auto a = job("j1", "queued");
  a.mutable_spec()->set_idempotency_key("k1");
  a.set_seq(41);
  auto b = job("j2", "running");
  b.set_seq(7);
  recovery::add_snapshot(s, "job.j1", bytes(a));
  recovery::add_snapshot(s, "job.j2", bytes(b));
  CHECK(recovery::idempotency_keys(s) == std::vector<std::string>{"t1/k1", "j1"});
  CHECK(recovery::max_seq(s) == 41);
}

TEST_CASE("recovery announces again a record's last event the stream does not hold", "[recovery]") {
  recovery::State s;
  // j1: its snapshot says event 3 (running, at t=5000) went out; the stream
  // holds 1 and 2 only (3 was awaiting its acknowledgement at the kill).
  auto r = job("j1", "running");
  place(r, "n1", {0});
  r.set_event_seq(3);
  r.set_event_ts_ms(5000);
  r.set_event_cause("");
  recovery::add_snapshot(s, "job.j1", bytes(r));
  CHECK_FALSE(recovery::add_event(s, event_json(job("j1", "queued"), 1)));
  CHECK_FALSE(recovery::add_event(s, event_json(job("j1", "starting"), 2)));
  // j2: its last event is in the stream.
  auto done = job("j2", "succeeded");
  done.set_event_seq(4);
  done.set_event_ts_ms(6000);
  done.set_event_cause("succeeded");
  recovery::add_snapshot(s, "job.j2", bytes(done));
  CHECK_FALSE(recovery::add_event(s, event_json(done, 4)));
  // j3: its last event is older than the stream read: not judged.
  auto old = job("j3", "queued");
  old.set_event_seq(1);
  old.set_event_ts_ms(100);
  recovery::add_snapshot(s, "job.j3", bytes(old));

  auto again = recovery::unannounced(s, 1000);
  REQUIRE(again.size() == 1);
  CHECK(again[0].job_id() == "j1");
  CHECK(again[0].seq() == 3);
  CHECK(again[0].state() == "running");
  CHECK(again[0].ts_ms() == 5000);  // identical to the lost one: same time, same seq
  CHECK(spec::to_json(again[0]) == spec::to_json(last_event(r)));
  // A record brought forward by an event knows that event as its last.
  auto ended = r;
  ended.set_state("succeeded");
  CHECK(recovery::add_event(s, event_json(ended, 4)));
  CHECK(s.jobs.at("j1").event_ts_ms() == 1004);
  CHECK(recovery::unannounced(s, 1000).empty());
}

namespace {

// Events of job j1 read from the stream, by their seq.
void stored_events(recovery::State& s, std::initializer_list<int64_t> seqs) {
  for (int64_t seq : seqs) {
    pb::JobEvent e;
    e.set_job_id("j1");
    e.set_team("t1");
    e.set_state("running");
    e.set_seq(seq);
    recovery::add_event(s, spec::to_json(e));
  }
}

}  // namespace

TEST_CASE(
    "a record keeps its recent earlier events, and recovery announces again those the "
    "stream lacks",
    "[recovery]") {
  // A job's story, as its actor records it: each event, once set, is kept
  // in `earlier` as announced.
  auto r = job("j1", "queued");
  auto step = [](pb::JobRecord& rec, const std::string& state, int64_t at) {
    rec.set_state(state);
    rec.set_event_seq(rec.event_seq() + 1);
    rec.set_event_ts_ms(at);
    recovery::remember_announced(rec, at);
  };
  step(r, "queued", 100000);    // seq 1
  step(r, "starting", 101000);  // seq 2
  step(r, "running", 102000);   // seq 3
  step(r, "queued", 110000);    // seq 4 (a retry)
  step(r, "starting", 111000);  // seq 5: lost (nats-server restarting)
  step(r, "running", 112000);   // seq 6
  REQUIRE(r.earlier_size() == 6);
  CHECK(r.earlier(4).seq() == 5);
  CHECK(r.earlier(4).state() == "starting");
  CHECK(r.earlier(4).ts_ms() == 111000);
  CHECK(r.earlier(5).seq() == 6);
  // Past kEarlierEventsMs, older events leave the record; past
  // kEarlierEventsMax, so do the oldest.
  auto later = r;
  step(later, "succeeded", 102000 + recovery::kEarlierEventsMs + 1);
  // (seq 7 joins; 1-3 leave, seq 3 at 102000 too old by 1 ms)
  REQUIRE(later.earlier_size() == 4);
  CHECK(later.earlier(0).seq() == 4);
  CHECK(later.earlier(3).seq() == 7);
  auto many = r;
  for (int i = 0; i < 40; ++i) step(many, "running", 112000);
  CHECK(many.earlier_size() == recovery::kEarlierEventsMax);

  // The stream holds 1-4 and 6; 5 was never stored. Its snapshot says 6.
  recovery::State s;
  recovery::add_snapshot(s, "job.j1", bytes(r));
  stored_events(s, {1, 2, 3, 4, 6});
  auto again = recovery::unannounced(s, 100500);
  REQUIRE(again.size() == 1);
  CHECK(again[0].seq() == 5);
  CHECK(again[0].state() == "starting");
  CHECK(again[0].ts_ms() == 111000);
  CHECK(again[0].attempt() == r.earlier(4).attempt());
  // Older than the read's start: not judged (the stream read did not cover it).
  CHECK(recovery::unannounced(s, 111001).empty());
}

TEST_CASE(
    "an event announced again after a kill is the one announced, not what its record became "
    "after (a retry's next attempt, its placement cleared)",
    "[recovery]") {
  // Seen in the fault suite: attempt 1's `running` was never stored; the
  // retry moved the record to attempt 2 without workers before its `queued`,
  // and the copy rebuilt then said "attempt 2 running, no workers".
  auto r = job("j1", "queued");
  auto step = [&r](const std::string& state, int64_t at) {
    r.set_state(state);
    r.set_event_seq(r.event_seq() + 1);
    r.set_event_ts_ms(at);
    recovery::remember_announced(r, at);
  };
  step("queued", 100000);  // seq 1
  auto* w = r.add_placement();
  w->set_rank(0);
  w->set_node("n1");
  w->add_gpus(4);
  step("starting", 101000);  // seq 2
  step("running", 101005);   // seq 3: lost
  r.set_attempt(2);
  r.clear_placement();
  step("queued", 103000);  // seq 4
  recovery::State s;
  recovery::add_snapshot(s, "job.j1", bytes(r));
  stored_events(s, {1, 2, 4});
  auto again = recovery::unannounced(s, 100000);
  REQUIRE(again.size() == 1);
  CHECK(again[0].seq() == 3);
  CHECK(again[0].state() == "running");
  CHECK(again[0].attempt() == 1);
  REQUIRE(again[0].workers_size() == 1);
  CHECK(again[0].workers(0).node() == "n1");
  CHECK(again[0].ts_ms() == 101005);
  // The last event, kept too, is not announced twice when missing.
  recovery::State lost_last;
  recovery::add_snapshot(lost_last, "job.j1", bytes(r));
  stored_events(lost_last, {1, 2, 3});
  auto last = recovery::unannounced(lost_last, 100000);
  REQUIRE(last.size() == 1);
  CHECK(last[0].seq() == 4);
  CHECK(last[0].attempt() == 2);
}

TEST_CASE("recovery quarantines stored records that fail validation", "[recovery][security]") {
  recovery::State s;
  auto huge = job("j1", "queued");
  huge.mutable_spec()->mutable_resources()->set_gpus(100000);
  CHECK_FALSE(recovery::add_snapshot(s, "job.j1", bytes(huge)));
  auto bad_team = job("j2", "queued");
  bad_team.mutable_spec()->set_team("sys");
  CHECK_FALSE(recovery::add_snapshot(s, "job.j2", bytes(bad_team)));
  auto elsewhere = job("j3", "queued");
  CHECK_FALSE(recovery::add_snapshot(s, "job.other", bytes(elsewhere)));  // under another key
  auto weird = job("j4", "exploded");
  CHECK_FALSE(recovery::add_snapshot(s, "job.j4", bytes(weird)));
  auto bad_gpu = job("j5", "running");
  place(bad_gpu, "n1", {1 << 20});
  CHECK_FALSE(recovery::add_snapshot(s, "job.j5", bytes(bad_gpu)));
  CHECK(s.jobs.empty());
  CHECK(s.quarantined.size() == 5);
  CHECK(s.quarantined.count("job.j1"));

  // An intake record on another team's subject, and a new job with a placement.
  auto fresh = job("j6", "");
  CHECK_FALSE(recovery::add_intake(s, bytes(fresh), "troupe.sys.intake.t2"));
  auto placed = job("j7", "");
  place(placed, "n1", {0});
  CHECK_FALSE(recovery::add_intake(s, bytes(placed), "troupe.sys.intake.t1"));
  CHECK(recovery::add_intake(s, bytes(job("j8", "")), "troupe.sys.intake.t1"));
  // A standby's record (troupe.sys.intake.<team>.handoff): its team's only.
  CHECK_FALSE(recovery::add_intake(s, bytes(job("j9", "")), "troupe.sys.intake.t2.handoff"));
  CHECK(recovery::add_intake(s, bytes(job("j9", "")), "troupe.sys.intake.t1.handoff"));

  // An event of j8 published on another team's subject, or naming another team.
  auto running = job("j8", "running");
  place(running, "n1", {0});
  CHECK_FALSE(recovery::add_event(s, event_json(running, 2), "troupe.t2.events.j8"));
  auto other_team = running;
  other_team.mutable_spec()->set_team("t2");
  CHECK_FALSE(recovery::add_event(s, event_json(other_team, 3), "troupe.t2.events.j8"));
  CHECK(s.jobs.at("j8").state().empty());
  CHECK(recovery::add_event(s, event_json(running, 4), "troupe.t1.events.j8"));
  CHECK(s.jobs.at("j8").state() == "running");

  // A node record whose hold names a GPU out of range.
  pb::NodeRecord n;
  n.set_node("n1");
  n.set_gpus(8);
  auto* h = n.add_holds();
  h->set_id("j8/1/0");
  h->set_job_id("j8");
  h->add_gpus(99999);
  CHECK_FALSE(recovery::add_snapshot(s, "node.n1", bytes(n)));
  CHECK(s.nodes.empty());
  CHECK(s.quarantined.size() == 11);
}

TEST_CASE("a purged job stays purged: its intake record and events bring nothing back",
          "[recovery][retention]") {
  recovery::State s;
  CHECK(recovery::add_snapshot(s, "job.j1", ""));  // the purge marker of a job past retention
  CHECK(s.purged == std::set<std::string>{"j1"});
  CHECK_FALSE(recovery::add_intake(s, bytes(job("j1", ""))));
  auto done = job("j1", "succeeded");
  CHECK_FALSE(recovery::add_event(s, event_json(done, 7)));
  CHECK(s.jobs.empty());
  CHECK(s.changed.empty());
  CHECK(s.bad == 0);
  CHECK(s.quarantined.empty());
  CHECK(recovery::add_intake(s, bytes(job("j2", ""))));  // another job is still new
}

TEST_CASE("a purged job's status is rebuilt from its stored events", "[recovery][retention]") {
  auto r = job("j1", "queued");
  r.mutable_spec()->set_name("train");
  std::vector<std::string> events;
  events.push_back(event_json(r, 1));
  r.set_state("starting");
  place(r, "n1", {0, 1});
  events.push_back(event_json(r, 2));
  r.set_state("running");
  events.push_back(event_json(r, 3));
  r.set_state("failed");
  r.set_exit_code(7);
  r.set_reason("exit code 7");
  events.push_back(event_json(r, 4));
  events.push_back("not json");
  auto other = job("j9", "succeeded");
  events.push_back(event_json(other, 1));  // another job's: not read into j1's view

  auto v = view_from_events("j1", events);
  REQUIRE(v.has_value());
  CHECK(v->purged());
  CHECK(v->job_id() == "j1");
  CHECK(v->team() == "t1");
  CHECK(v->state() == "failed");
  CHECK(v->exit_code() == 7);
  CHECK(v->reason() == "exit code 7");
  CHECK(v->submit_ms() == 1001);
  CHECK(v->start_ms() == 1003);
  CHECK(v->end_ms() == 1004);
  REQUIRE(v->placement_size() == 1);
  CHECK(v->placement(0).node() == "n1");
  CHECK_FALSE(view_from_events("j2", events).has_value());
  CHECK_FALSE(view_from_events("j1", {}).has_value());
}

TEST_CASE("a standby's records restored take their place after every other job, in stream order",
          "[recovery][failover]") {
  recovery::State s;
  auto leader = job("j-a-000007", "queued");
  leader.set_seq(7);
  CHECK(recovery::add_snapshot(s, "job.j-a-000007", bytes(leader)));
  auto first = job("j-b-s000001", ""), second = job("j-b-s000002", "");
  first.set_seq(1);
  second.set_seq(2);
  CHECK(recovery::add_intake(s, bytes(second), "troupe.sys.intake.t1.handoff"));
  CHECK(recovery::add_intake(s, bytes(first), "troupe.sys.intake.t1.handoff"));
  auto plain = job("j-a-000003", "");
  plain.set_seq(3);
  CHECK(recovery::add_intake(s, bytes(plain), "troupe.sys.intake.t1"));
  recovery::order_handoffs(s);
  CHECK(s.jobs.at("j-a-000007").seq() == 7);
  CHECK(s.jobs.at("j-a-000003").seq() == 3);
  CHECK(s.jobs.at("j-b-s000002").seq() == 8);  // first in the stream
  CHECK(s.jobs.at("j-b-s000001").seq() == 9);
}

TEST_CASE("a shard restores its pools' jobs and nodes, the coordinator also what has no pool",
          "[recovery][shards]") {
  policy::ClusterConfig cfg;
  REQUIRE(policy::load_config(R"({"pools":[{"name":"a100","gpu_type":"a100"},
                                           {"name":"h100","gpu_type":"h100"}],
                                 "teams":[{"name":"t1"}]})",
                              cfg)
              .empty());
  auto state = [] {
    recovery::State s;
    for (const char* id : {"j-a100-x00001", "j-h100-x00002", "j-x00003"}) {
      s.jobs[id] = job(id, "running");
      s.changed.insert(id);
    }
    for (auto [name, type] : {std::pair{"na", "a100"}, std::pair{"nh", "h100"}}) {
      pb::NodeRecord n;
      n.set_node(name);
      n.set_gpu_type(type);
      s.nodes[name] = n;
    }
    s.schedules["sched.t1.nightly"] = pb::ScheduleRecord();
    return s;
  };
  auto h = state();
  recovery::keep_shard(h, policy::ShardScope{{"h100"}}, cfg);
  CHECK(h.jobs.size() == 1);
  CHECK(h.jobs.count("j-h100-x00002") == 1);
  CHECK(h.changed == std::set<std::string>{"j-h100-x00002"});
  CHECK(h.nodes.size() == 1);
  CHECK(h.nodes.count("nh") == 1);
  CHECK(h.schedules.empty());  // the coordinator's

  auto a = state();
  recovery::keep_shard(a, policy::ShardScope{{"a100"}}, cfg);
  CHECK(a.jobs.count("j-a100-x00001") == 1);
  CHECK(a.jobs.count("j-x00003") == 1);  // from before the shards: the coordinator's
  CHECK(a.jobs.count("j-h100-x00002") == 0);
  CHECK(a.nodes.count("na") == 1);
  CHECK(a.schedules.size() == 1);

  auto all = state();
  recovery::keep_shard(all, policy::ShardScope{}, cfg);  // one scheduler: everything
  CHECK(all.jobs.size() == 3);
  CHECK(all.nodes.size() == 2);
}

TEST_CASE("a forgotten job's checkpoint dir is removed by every node it ran on, each told once",
          "[recovery][retention]") {
  pb::JobRecord r;
  r.set_job_id("j-1");
  CHECK(checkpoint_nodes(r).empty());  // no checkpoint dir: nothing to remove
  r.set_checkpoint_dir("/ckpt/j-1");
  CHECK(checkpoint_nodes(r).empty());  // never ran
  auto* a0 = r.add_attempts();
  a0->add_nodes("n2");
  a0->add_nodes("n1");
  auto* a1 = r.add_attempts();
  a1->add_nodes("n1");
  a1->add_nodes("");
  r.add_placement()->set_node("n3");
  r.add_placement()->set_node("n2");
  CHECK(checkpoint_nodes(r) == std::vector<std::string>{"n1", "n2", "n3"});
  r.clear_checkpoint_dir();
  CHECK(checkpoint_nodes(r).empty());
}

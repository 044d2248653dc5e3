// Idempotency keys that only the intake stream still knows (issue 15): the
// stream de-duplicates accepted submissions by Nats-Msg-Id (team/key) within
// its 2-minute window. When the router's key map misses such a key, the stream
// drops the new record as a duplicate; the submitter must then get the
// original job's id, and no second job may come of it.
#include <catch2/catch.hpp>
#include <future>
#include <memory>
#include <thread>

#include "bus/nats.hpp"
#include "bus/subjects.hpp"
#include "harness.hpp"
#include "records.pb.h"

using namespace troupe;
using namespace troupe::it;

namespace {

// The jobs of `team` named `name`, as troupe.<team>.jobs lists them.
std::vector<std::string> jobs_named(Cluster& c, const std::string& team, const std::string& name) {
  std::vector<std::string> ids;
  Json list = c.request(subjects::team_jobs(team), Json{{"limit", 1000}});
  INFO("jobs of " << team << ": " << list.dump());
  REQUIRE(list.contains("jobs"));
  for (const auto& j : list["jobs"])
    if (j.value("name", std::string()) == name) ids.push_back(j.value("job_id", std::string()));
  return ids;
}

int64_t stat(Cluster& c, const std::string& field) {
  Json s = c.request(subjects::kSysStats, Json::object());
  INFO("scheduler stats: " << s.dump());
  REQUIRE(s.contains(field));
  return s[field].get<int64_t>();
}

}  // namespace

TEST_CASE(
    "intake: a key only the intake stream knows is answered with the original job's id and "
    "never becomes a second job",
    "[integration][idempotency][recovery]") {
  Cluster c(ClusterOptions{}.node("n1", 2, true));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  std::string err;
  auto js = bus::JetStream::open(c.conn(), &err);
  INFO("JetStream: " << err);
  REQUIRE(js);

  // A record as the router stores it: a job submitted normally, whose stored
  // intake record is the model of the stream-only ones below.
  Json spec = job_spec("t1", {"sleep", "0.1"}, 1);
  spec["name"] = "seed";
  std::string seed = c.submit_ok("t1", spec);
  pb::JobRecord model;
  for (const auto& m : js->read_all(subjects::kIntakeStream, subjects::intake("t1"))) {
    pb::JobRecord r;
    if (r.ParseFromArray(m.data.data(), static_cast<int>(m.data.size())) && r.job_id() == seed)
      model = r;
  }
  REQUIRE(model.job_id() == seed);

  // The stream-only originals: stored in the intake stream under their keys'
  // message ids, as a scheduler would have stored them, but never seen by the
  // scheduler that runs (it reads troupe.sys.intake.* only when it restores).
  auto store_original = [&](const std::string& id, const std::string& name, const std::string& key,
                            const std::string& command) {
    pb::JobRecord r = model;
    r.set_job_id(id);
    r.clear_checkpoint_dir();
    r.mutable_spec()->set_name(name);
    r.mutable_spec()->set_idempotency_key(key);
    r.mutable_spec()->set_command(0, command);
    std::string bytes;
    REQUIRE(r.SerializeToString(&bytes));
    REQUIRE(js->publish(subjects::intake("t1"), bytes.data(), bytes.size(), "t1/" + key) == "");
  };
  const std::string key = "stream-only-" + std::to_string(std::random_device{}());
  const std::string original = "j-1-00000a";
  store_original(original, "stream-only", key, "sleep");

  // Submitted again through the API with the same key and spec.
  int64_t duplicates = stat(c, "duplicates");
  int64_t accepted = stat(c, "accepted");
  Json again = spec;
  again["name"] = "stream-only";
  again["idempotency_key"] = key;
  Json reply = c.submit_json("t1", again);
  INFO("the submission with the stream's key answered " << reply.dump());
  CHECK(reply.value("job_id", std::string()) == original);
  CHECK_FALSE(reply.contains("error"));
  CHECK(stat(c, "duplicates") == duplicates + 1);
  CHECK(stat(c, "accepted") == accepted);
  CHECK(jobs_named(c, "t1", "stream-only").empty());  // no job under a fresh id
  // The router has learnt the key: a retry gets the same answer.
  CHECK(c.submit_json("t1", again).value("job_id", std::string()) == original);
  CHECK(stat(c, "duplicates") == duplicates + 2);

  // The same key with another spec: refused, as for a key the router knew.
  const std::string other_key = key + "-other";
  store_original("j-1-00000b", "stream-only-other", other_key, "sleep");
  Json other = again;
  other["idempotency_key"] = other_key;
  other["command"] = Json::array({"true"});
  Json conflict = c.submit_json("t1", other);
  INFO("the conflicting submission answered " << conflict.dump());
  CHECK(conflict.value("code", std::string()) == "idempotency_conflict");
  CHECK_FALSE(conflict.contains("job_id"));
  CHECK(jobs_named(c, "t1", "stream-only-other").empty());

  // The next scheduler restores the original from the intake stream: then
  // there is exactly one job for the key, the original, and it runs.
  REQUIRE(c.wait_terminal(seed, 30s));
  c.kill_scheduler();
  c.restart_scheduler();
  REQUIRE(c.wait_scheduler_serving(20s));
  auto done = c.wait_terminal(original, 30s);
  INFO("events of " << original << ":\n" << c.events().describe(original));
  REQUIRE(done);
  CHECK(done->state == "succeeded");
  CHECK(jobs_named(c, "t1", "stream-only") == std::vector<std::string>{original});
  CHECK(c.submit_json("t1", again).value("job_id", std::string()) == original);
}

TEST_CASE(
    "intake: a record whose first copy was stored though its ack was lost counts as stored, "
    "another record under the same message id as a duplicate",
    "[integration][idempotency][recovery]") {
  // The router's record is published with its message id and sent again when
  // the ack does not come (a NATS cluster electing a stream leader). When the
  // first copy was stored, the second is dropped as a duplicate of the router's
  // own record: that must read as stored, or the job is answered and never
  // spawned (CI of 113eab1: two acknowledged jobs without a single event).
  ClusterOptions o;
  o.scheduler = false;  // bus::JetStream alone
  Cluster c(o);
  auto js = open_test_stream(c, "TEST_UNIQUE", {"test.unique.>"});
  auto publish = [&](const std::string& bytes, const std::string& id) {
    auto p = std::make_shared<std::promise<bus::JetStream::Unique>>();
    auto f = p->get_future();
    js->publish_unique("test.unique.x", bytes.data(), bytes.size(), id,
                       [p](bus::JetStream::Unique u) { p->set_value(std::move(u)); });
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    return f.get();
  };
  auto first = publish("record-1", "id-1");
  INFO("first: " << first.error);
  REQUIRE(first.ok);
  CHECK_FALSE(first.duplicate);
  auto again = publish("record-1", "id-1");  // the same bytes: our own resend
  INFO("again: " << again.error);
  CHECK(again.ok);
  CHECK_FALSE(again.duplicate);
  CHECK(again.seq == first.seq);
  auto other = publish("record-2", "id-1");  // another record under the same id
  INFO("other: " << other.error);
  CHECK(other.ok);
  CHECK(other.duplicate);
  CHECK(other.seq == first.seq);
  CHECK(std::string(other.original.begin(), other.original.end()) == "record-1");
}

// Unit tests for actors/submission: the stateless half of accepting a
// submission, shared by the router and a standby's front door.
#include <catch2/catch.hpp>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "actors/submission.hpp"
#include "bus/subjects.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"

using namespace troupe;
using policy::Refusal;

namespace {

std::vector<uint8_t> bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

policy::ClusterConfig config(const std::string& yaml) {
  policy::ClusterConfig cfg;
  REQUIRE(policy::load_config(yaml, cfg).empty());
  return cfg;
}

}  // namespace

TEST_CASE("submission: the subject's team and the body's format are read before the spec",
          "[submission]") {
  auto ok = submission::open("troupe.t1.submit", bytes("  {\"command\":[\"true\"]}"));
  CHECK(ok.verdict.ok());
  CHECK(ok.team == "t1");
  CHECK_FALSE(ok.flatbuffers);
  // Addressed to a pool: the same team.
  auto addressed = submission::open("troupe.t1.submit.a100", bytes("{\"command\":[\"true\"]}"));
  CHECK(addressed.verdict.ok());
  CHECK(addressed.team == "t1");

  auto sys = submission::open("troupe.sys.submit", bytes("{}"));
  CHECK(sys.verdict.code == Refusal::not_allowed);

  auto junk = submission::open("troupe.t1.submit", bytes("\x01\x02garbage"));
  CHECK(junk.verdict.code == Refusal::malformed);
  CHECK_FALSE(junk.flatbuffers);  // answered in JSON
}

TEST_CASE("submission: a spec is parsed, defaulted and checked against the cluster config",
          "[submission]") {
  auto cfg = config("pools: [{name: a100, gpu_type: a100}]\nteams: [{name: t1}]\n");
  spec::Limits limits;
  limits.priority_classes = cfg.class_names();
  auto read = [&](const std::string& subject, const std::string& body) {
    auto data = bytes(body);
    auto o = submission::open(subject, data);
    REQUIRE(o.verdict.ok());
    return submission::read(o, data, cfg, limits);
  };
  auto r = read("troupe.t1.submit", R"({"command":["true"]})");
  REQUIRE(r.verdict.ok());
  CHECK(r.spec.team() == "t1");
  CHECK(r.spec.priority() == cfg.default_class);
  CHECK_FALSE(r.adm.pool.empty());

  CHECK(read("troupe.t1.submit", "{not json").verdict.code == Refusal::malformed);
  CHECK(read("troupe.t1.submit", R"({"team":"t2","command":["true"]})").verdict.code ==
        Refusal::wrong_team);
  CHECK(read("troupe.t2.submit", R"({"command":["true"]})").verdict.code == Refusal::not_allowed);
  CHECK(read("troupe.t1.submit", R"({"command":[]})").verdict.code == Refusal::invalid_spec);

  // An enqueued one's key defaults to its message id, else to its sequence.
  auto data = bytes(R"({"command":["true"]})");
  auto o = submission::open("troupe.t1.enqueue", data);
  CHECK(submission::read(o, data, cfg, limits, 7, "m-1").spec.idempotency_key() == "m-1");
  CHECK(submission::read(o, data, cfg, limits, 7).spec.idempotency_key() == "enqueue-7");
}

TEST_CASE(
    "submission: one handed over by the shard that read it is checked again as that shard read it",
    "[submission][shards]") {
  auto cfg = config(
      "pools: [{name: a100, gpu_type: a100}, {name: h100, gpu_type: h100}]\n"
      "teams: [{name: t1, borrow: true}, {name: t2, borrow: true}]\n");
  spec::Limits limits;
  limits.priority_classes = cfg.class_names();
  const auto sent =
      bytes(R"({"command":["true"],"resources":{"gpus":2,"gpu_type":"h100"},"labels":{"a":"b"},)"
            R"("idempotency_key":"k1"})");
  auto o = submission::open("troupe.t1.submit", sent);
  auto first = submission::read(o, sent, cfg, limits);
  REQUIRE(first.verdict.ok());
  const auto body = submission::hand_over(first.spec, true, sent);
  auto h = submission::read_handed(subjects::shard_read("h100", "t1"),
                                   std::vector<uint8_t>(body.begin(), body.end()), cfg, limits);
  REQUIRE(h.opened.verdict.ok());
  REQUIRE(h.read.verdict.ok());
  CHECK(h.opened.team == "t1");
  CHECK(h.opened.flatbuffers);  // answered as the client asked
  CHECK(h.original == sent);    // the intake message id is the client's
  CHECK(h.read.adm.pool == "h100");
  // Checking again changes nothing: the same spec, the same fingerprint.
  CHECK(spec::fingerprint(h.read.spec) == spec::fingerprint(first.spec));

  // The subject's team is the one it is checked for; junk is malformed.
  auto other = submission::read_handed(subjects::shard_read("h100", "t2"),
                                       std::vector<uint8_t>(body.begin(), body.end()), cfg, limits);
  CHECK(other.read.verdict.code == Refusal::wrong_team);
  auto junk = submission::read_handed(subjects::shard_read("h100", "t1"), bytes("\xff\xff\x01"),
                                      cfg, limits);
  CHECK(junk.opened.verdict.code == Refusal::malformed);
  auto bad_team =
      submission::read_handed(subjects::shard_read("h100", "sys"),
                              std::vector<uint8_t>(body.begin(), body.end()), cfg, limits);
  CHECK(bad_team.opened.verdict.code == Refusal::not_allowed);
}

TEST_CASE("submission: the intake message id makes one record of a key, or of one request",
          "[submission]") {
  auto body = bytes(R"({"command":["true"]})");
  auto other = bytes(R"({"command":["false"]})");
  CHECK(submission::intake_msg_id("t1", "t1/k", "_INBOX_t1.x.1", body, "j-1") == "t1/k");
  // The leader and a standby (or two standbys) that heard one request: one id.
  CHECK(submission::intake_msg_id("t1", "", "_INBOX_t1.x.1", body, "j-1-000001") ==
        submission::intake_msg_id("t1", "", "_INBOX_t1.x.1", body, "j-2-s000001"));
  // Another body on the same reply subject, or another team naming it: another id.
  CHECK(submission::intake_msg_id("t1", "", "_INBOX_t1.x.1", other, "j-1") !=
        submission::intake_msg_id("t1", "", "_INBOX_t1.x.1", body, "j-1"));
  CHECK(submission::intake_msg_id("t2", "", "_INBOX_t1.x.1", body, "j-2") !=
        submission::intake_msg_id("t1", "", "_INBOX_t1.x.1", body, "j-1"));
  // No reply subject: the job id.
  CHECK(submission::intake_msg_id("t1", "", "", body, "j-1") == "j-1");
}

TEST_CASE(
    "submission: the record holds what the config admitted, and a duplicate is answered "
    "with the original's job",
    "[submission]") {
  auto cfg = config("pools: [{name: a100, gpu_type: a100}]\nteams: [{name: t1}]\n");
  spec::Limits limits;
  limits.priority_classes = cfg.class_names();
  auto data = bytes(R"({"command":["true"],"idempotency_key":"k"})");
  auto o = submission::open("troupe.t1.submit", data);
  auto r = submission::read(o, data, cfg, limits);
  REQUIRE(r.verdict.ok());
  auto fp = spec::fingerprint(r.spec);
  auto rec = submission::make_record(r.spec, r.adm, cfg, "/ckpt", "j-1-s000001", 1, 1234);
  CHECK(rec.job_id() == "j-1-s000001");
  CHECK(rec.seq() == 1);
  CHECK(rec.submit_ms() == 1234);
  CHECK(rec.pool() == r.adm.pool);
  CHECK(rec.priority_value() == r.adm.priority_value);
  CHECK(rec.checkpoint_dir() == "/ckpt/j-1-s000001");
  CHECK(rec.state().empty());

  std::string stored;
  rec.SerializeToString(&stored);
  auto same = submission::answer_duplicate(stored, "k", fp);
  CHECK(same.job_id == "j-1-s000001");
  CHECK(same.verdict.ok());
  auto other = submission::answer_duplicate(stored, "k", "another spec");
  CHECK(other.verdict.code == Refusal::idempotency_conflict);
  auto unreadable = submission::answer_duplicate("\x01junk", "k", fp);
  CHECK(unreadable.job_id.empty());
  CHECK(unreadable.verdict.code == Refusal::unavailable);
}

TEST_CASE("submission: job ids are short, distinct per process start, and numbered",
          "[submission]") {
  auto prefix = submission::job_id_prefix(1796214968695);
  CHECK(prefix == "j-mx640k1j");
  CHECK(submission::job_id(prefix, 1) == "j-mx640k1j00001");
  CHECK(submission::job_id(prefix, 1).size() == 15);  // kept inline by std::string
  CHECK(submission::job_id(prefix, 36) == "j-mx640k1j00010");
  CHECK(submission::job_id(prefix, 60466176) == "j-mx640k1j100000");  // past 5 digits: longer
  CHECK(submission::job_id(submission::job_id_prefix(1796214968696), 1) !=
        submission::job_id(prefix, 1));
  CHECK(submission::job_id_prefix(1) == "j-00000001");
  CHECK(names::check_token(submission::job_id(prefix, 12345)).empty());
}

TEST_CASE("submission: a shard's job ids name their pool", "[submission][shards]") {
  auto prefix = submission::shard_job_id_prefix("h100", 1796214968695);
  CHECK(prefix == "j-h100-mx640k1j");
  auto id = submission::job_id(prefix, 1);
  CHECK(id == "j-h100-mx640k1j00001");
  CHECK(names::check_token(id).empty());
  CHECK(names::check_token(
            submission::job_id(submission::shard_job_id_prefix(std::string(48, 'p'), 1), 99999) +
            "-99999")
            .empty());  // the longest pool a shard takes, an array task's id
}

TEST_CASE("submission: a shard's report reads back, bad teams and counts left out",
          "[submission][shards]") {
  submission::ShardReport sent;
  sent.shard = "s1";
  sent.taken = {{"t1", 3},
                {"bad team", 2},
                {"t2", -1},
                {"t3", 0.5},
                {"t4", std::numeric_limits<double>::infinity()}};
  sent.has_queued = true;
  sent.queued = {{"t1", 7}, {"t2", 0}, {"bad.team", 3}};
  sent.rooms = {
      {"h100", {16, 8, 4, 0, 32}}, {"bad.pool", {1, 1, 0, 0, 1}}, {"a100", {-3, 2, -1, 0, -8}}};
  const auto body = submission::shard_report(sent);
  submission::ShardReport got;
  REQUIRE(submission::read_shard_report(std::vector<uint8_t>(body.begin(), body.end()), &got));
  CHECK(got.shard == "s1");
  CHECK(std::map<std::string, double>(got.taken.begin(), got.taken.end()) ==
        std::map<std::string, double>{{"t1", 3}, {"t3", 0.5}});
  CHECK(got.has_queued);
  CHECK(std::map<std::string, int64_t>(got.queued.begin(), got.queued.end()) ==
        std::map<std::string, int64_t>{{"t1", 7}});
  std::map<std::string, policy::PoolRoom> rooms(got.rooms.begin(), got.rooms.end());
  REQUIRE(rooms.size() == 2);  // a pool name that is no subject token is left out
  CHECK(rooms["h100"] == policy::PoolRoom{16, 8, 4, 0, 32});
  CHECK(rooms["a100"] == policy::PoolRoom{0, 2, 0, 0, 0});  // negative figures read as 0
  const std::string junk = "\xff\xff\xff\x01garbage";
  CHECK_FALSE(submission::read_shard_report(std::vector<uint8_t>(junk.begin(), junk.end()), &got));
}

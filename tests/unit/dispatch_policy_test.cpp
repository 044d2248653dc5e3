// The front door's rules (gateway/dispatch/policy.hpp): its config, the
// clusters' capacity from their replies, where a job may go and in what
// order, spill-over timing, its ids and records.
#include <catch2/catch.hpp>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gateway/dispatch/policy.hpp"
#include "messages/spec.hpp"

using namespace troupe::dispatch;

namespace {

const char* kConfig = R"(
clusters:
  - {name: c1, region: east, nats: "nats://127.0.0.1:4222"}
  - {name: c2, region: west, nats: "nats://127.0.0.1:4322,nats://127.0.0.1:4323"}
teams:
  vision: {clusters: [c1], quota: {c1: 8}}
  nlp: {quota: {c2: 4}}
spill_after_s: 30
)";

Config config() {
  std::string err;
  auto c = parse_config(kConfig, &err);
  INFO(err);
  REQUIRE(c);
  return *c;
}

ClusterState cluster(const std::string& name, const std::string& region, const std::string& type,
                     int64_t total, int64_t free, int64_t queued = 0) {
  ClusterState s;
  s.name = name;
  s.region = region;
  s.reachable = true;
  s.types[type] = TypeCapacity{total, free};
  s.queued = queued;
  return s;
}

Needs needs(const std::string& spec_json, const std::string& team = "t1") {
  auto p = troupe::spec::from_json(spec_json);
  INFO(p.error);
  REQUIRE(p.ok);
  return needs_of(team, p.spec);
}

}  // namespace

TEST_CASE("dispatch config: clusters, teams, bounds and clear errors", "[dispatch]") {
  auto c = config();
  REQUIRE(c.clusters.size() == 2);
  CHECK(c.clusters[1].nats == "nats://127.0.0.1:4322,nats://127.0.0.1:4323");
  CHECK(c.clusters[0].region == "east");
  CHECK(c.teams.at("vision").clusters == std::vector<std::string>{"c1"});
  CHECK(c.teams.at("nlp").quota.at("c2") == 4);
  CHECK(c.spill_after_s == 30);
  CHECK(c.job_retention_s == 7 * 24 * 3600);  // the default

  std::string err;
  auto kept = parse_config("clusters: [{name: c1, nats: x}]\njob_retention_s: 0", &err);
  REQUIRE(kept);
  CHECK(kept->job_retention_s == 0);
  CHECK_FALSE(parse_config("clusters: [{name: c1, nats: x}]\njob_retention_s: -5", &err));
  CHECK(kept->events_max_age_s == 7 * 24 * 3600);  // the defaults
  CHECK(kept->events_max_bytes == 0);
  auto events = parse_config(
      "clusters: [{name: c1, nats: x}]\nevents_max_age_s: 3600\nevents_max_bytes: 1048576", &err);
  REQUIRE(events);
  CHECK(events->events_max_age_s == 3600);
  CHECK(events->events_max_bytes == 1048576);
  CHECK_FALSE(parse_config("clusters: [{name: c1, nats: x}]\nevents_max_bytes: -1", &err));
  CHECK(err.find("events_max_bytes") != std::string::npos);
  CHECK(kept->keep_events);  // the default
  auto unkept = parse_config("clusters: [{name: c1, nats: x}]\nkeep_events: false", &err);
  REQUIRE(unkept);
  CHECK_FALSE(unkept->keep_events);
  CHECK_FALSE(parse_config("clusters: [{name: c1, nats: x}]\nkeep_events: sometimes", &err));
  CHECK(err.find("keep_events") != std::string::npos);
  CHECK_FALSE(parse_config("clusters: []", &err));
  CHECK(err.find("at least one") != std::string::npos);
  CHECK_FALSE(parse_config("clusters: [{name: c1}]", &err));
  CHECK(err.find("nats") != std::string::npos);
  CHECK_FALSE(parse_config("clusters: [{name: 'a b', nats: x}]", &err));
  CHECK_FALSE(parse_config("clusters: [{name: c1, nats: x}, {name: c1, nats: y}]", &err));
  CHECK(err.find("twice") != std::string::npos);
  CHECK_FALSE(parse_config("clusters: [{name: c1, nats: x}]\nteams: {t: {clusters: [c9]}}", &err));
  CHECK(err.find("no cluster c9") != std::string::npos);
  CHECK_FALSE(parse_config("clusters: [{name: c1, nats: x}]\nspill_after_s: -1", &err));
  CHECK_FALSE(parse_config("{{{", &err));
  CHECK_FALSE(parse_config("clusters: [{name: c1, nats: x}]\nteams: {t: {quota: {c1: -2}}}", &err));
}

TEST_CASE("dispatch: a cluster's capacity is read from its nodes and queues replies",
          "[dispatch]") {
  ClusterState s;
  std::string err;
  REQUIRE(read_capacity(
      R"({"nodes":[{"node":"a","gpu_type":"a100","gpus_total":8,"gpus_free":3,"alive":true,"running":2},
                   {"node":"b","gpu_type":"a100","gpus_total":8,"gpus_free":8,"alive":false,"running":0},
                   {"node":"c","gpu_type":"h100","gpus_total":4,"gpus_free":4,"alive":true}]})",
      R"({"pools":[],"teams":[{"team":"t","pending_jobs":5},{"team":"u","pending_jobs":"2"}]})", &s,
      &err));
  CHECK(s.types.at("a100").total == 8);  // the dead node's GPUs do not count
  CHECK(s.types.at("a100").free == 3);
  CHECK(s.types.at("h100").free == 4);
  CHECK(s.running == 2);
  CHECK(s.queued == 7);
  CHECK_FALSE(read_capacity("{}", R"({"teams":[]})", &s, &err));
  CHECK_FALSE(read_capacity(R"({"nodes":[]})", "not json", &s, &err));
}

TEST_CASE("dispatch: jobs go to a cluster of their GPU type, the freest and shortest queue first",
          "[dispatch]") {
  auto cfg = config();
  std::vector<ClusterState> cs = {cluster("c1", "east", "a100", 8, 8),
                                  cluster("c2", "west", "h100", 8, 8)};
  auto h = choose(cfg, cs, needs(R"({"command":["x"],"resources":{"gpus":2,"gpu_type":"h100"}})"),
                  {}, {});
  CHECK(h.order == std::vector<std::string>{"c2"});
  auto a = choose(cfg, cs, needs(R"({"command":["x"],"resources":{"gpus":2,"gpu_type":"a100"}})"),
                  {}, {});
  CHECK(a.order == std::vector<std::string>{"c1"});
  // Any type: both, the one where it fits now first, then the shorter queue.
  const char* any = R"({"command":["x"],"resources":{"gpus":4,"gpu_types":["a100","h100"]}})";
  cs[0].types["a100"].free = 2;
  CHECK(choose(cfg, cs, needs(any), {}, {}).order == std::vector<std::string>{"c2", "c1"});
  cs[0].types["a100"].free = 8;
  cs[1].queued = 20;
  CHECK(choose(cfg, cs, needs(any), {}, {}).order == std::vector<std::string>{"c1", "c2"});
  // Where it fits now in both, the type it lists first wins (not the name,
  // not the queue); where it fits in neither, the shorter queue, then the
  // type it lists first.
  cs[1].queued = 0;
  const char* h100_first =
      R"({"command":["x"],"resources":{"gpus":4,"gpu_types":["h100","a100"]}})";
  CHECK(choose(cfg, cs, needs(h100_first), {}, {}).order == std::vector<std::string>{"c2", "c1"});
  cs[0].queued = 0;
  cs[1].queued = 5;
  CHECK(choose(cfg, cs, needs(h100_first), {}, {}).order == std::vector<std::string>{"c2", "c1"});
  CHECK(choose(cfg, cs, needs(any), {}, {}).order == std::vector<std::string>{"c1", "c2"});
  cs[1].types["h100"].free = 2;  // h100 full: a100 where it starts now
  CHECK(choose(cfg, cs, needs(h100_first), {}, {}).order == std::vector<std::string>{"c1", "c2"});
  cs[0].types["a100"].free = 0;  // both full: the shorter queue (c1), then the type
  CHECK(choose(cfg, cs, needs(h100_first), {}, {}).order == std::vector<std::string>{"c1", "c2"});
  cs[0].queued = 5;
  CHECK(choose(cfg, cs, needs(h100_first), {}, {}).order == std::vector<std::string>{"c2", "c1"});
  cs[0].types["a100"].free = 8;
  cs[1].types["h100"].free = 8;
  cs[1].queued = 20;
  // A type no cluster has.
  auto none = choose(
      cfg, cs, needs(R"({"command":["x"],"resources":{"gpus":1,"gpu_type":"v100"}})"), {}, {});
  CHECK(none.order.empty());
  CHECK(none.code == "no_cluster_of_type");
  // More per worker than any node type total: nowhere.
  auto big = choose(
      cfg, cs, needs(R"({"command":["x"],"resources":{"gpus":16,"gpu_type":"a100"}})"), {}, {});
  CHECK(big.code == "no_cluster_of_type");
  // Excluded (spill-over from it) and unreachable clusters are not chosen.
  CHECK(choose(cfg, cs, needs(any), {}, {"c1"}).order == std::vector<std::string>{"c2"});
  cs[1].reachable = false;
  CHECK(choose(cfg, cs, needs(any), {}, {"c1"}).code == "no_cluster_reachable");
}

TEST_CASE("dispatch: a team's allowed clusters and quota per cluster", "[dispatch]") {
  auto cfg = config();
  std::vector<ClusterState> cs = {cluster("c1", "east", "a100", 16, 16),
                                  cluster("c2", "west", "a100", 16, 16)};
  const char* four = R"({"command":["x"],"resources":{"gpus":4}})";
  CHECK(choose(cfg, cs, needs(four, "vision"), {}, {}).order == std::vector<std::string>{"c1"});
  auto over = choose(cfg, cs, needs(four, "vision"), {{"c1", 6}}, {});
  CHECK(over.order.empty());
  CHECK(over.code == "over_cluster_quota");
  CHECK(over.error.find("6/8") != std::string::npos);
  // nlp may use both; c2 only up to 4 GPUs.
  CHECK(choose(cfg, cs, needs(four, "nlp"), {{"c2", 1}}, {}).order ==
        std::vector<std::string>{"c1"});
  CHECK(choose(cfg, cs, needs(four, "nlp"), {}, {}).order.size() == 2);
  auto no = choose(cfg, cs, needs(four, "vision"), {}, {"c1"});
  CHECK(no.code == "not_allowed");
}

TEST_CASE("dispatch: locality by cluster or region, hard or soft", "[dispatch]") {
  auto cfg = config();
  std::vector<ClusterState> cs = {cluster("c1", "east", "a100", 8, 0, 50),
                                  cluster("c2", "west", "a100", 8, 8)};
  auto hard =
      choose(cfg, cs, needs(R"({"command":["x"],"resources":{"gpus":1,"region":"east"}})"), {}, {});
  CHECK(hard.order == std::vector<std::string>{"c1"});  // full and long queue, but only there
  auto soft =
      choose(cfg, cs,
             needs(R"({"command":["x"],"resources":{"gpus":1,"cluster":"c1","locality":"soft"}})"),
             {}, {});
  CHECK(soft.order == std::vector<std::string>{"c1", "c2"});  // there first, then elsewhere
  cs[0].reachable = false;
  auto gone =
      choose(cfg, cs, needs(R"({"command":["x"],"resources":{"gpus":1,"cluster":"c1"}})"), {}, {});
  CHECK(gone.order.empty());
  CHECK(gone.code == "no_cluster_reachable");
  auto nowhere =
      choose(cfg, cs, needs(R"({"command":["x"],"resources":{"gpus":1,"region":"mars"}})"), {}, {});
  CHECK(nowhere.code == "no_cluster_in_locality");
  // A spec with a bad locality is refused where it is read.
  auto bad = troupe::spec::from_json(
      R"({"team":"t1","kind":"training","command":["x"],"resources":{"locality":"maybe"}})");
  std::string why = bad.ok ? troupe::spec::validate(bad.spec, troupe::spec::Limits{}) : bad.error;
  INFO(why);
  CHECK(why.find("locality") != std::string::npos);
}

TEST_CASE("dispatch: gang and array jobs count all their GPUs", "[dispatch]") {
  auto n = needs(R"({"command":["x"],"workers":4,"resources":{"gpus":2},"array":{"count":3}})");
  CHECK(n.gpus == 24);
  CHECK(n.gpus_per_worker == 2);
  CHECK(n.hard);
}

TEST_CASE("dispatch: spill-over timing, ids, records and a team's use", "[dispatch]") {
  auto cfg = config();
  CHECK_FALSE(should_spill(cfg, 1000, 30999));
  CHECK(should_spill(cfg, 1000, 31000));
  cfg.spill_after_s = 0;
  CHECK_FALSE(should_spill(cfg, 0, 1LL << 40));

  auto a = front_job_id(1767225600000, 1);
  auto b = front_job_id(1767225600000, 2);
  CHECK(a != b);
  CHECK(a.rfind("j-x", 0) == 0);
  CHECK(a.size() == 16);

  JobPlace p;
  p.job_id = a;
  p.team = "t1";
  p.cluster = "c2";
  p.cluster_job_id = "j-abc";
  p.spec_json = R"({"command":["x"]})";
  p.sent_ms = 42;
  p.gpus = 3;
  p.tried = {"c1"};
  auto back = place_from_json(to_json(p));
  REQUIRE(back);
  CHECK(back->cluster == "c2");
  CHECK(back->tried == std::vector<std::string>{"c1"});
  CHECK(back->spec_json == p.spec_json);
  CHECK_FALSE(place_from_json("[]"));
  CHECK_FALSE(place_from_json(R"({"team":"t1"})"));
  // Bytes that are not UTF-8 (a hostile spec's, echoed in an error) do not throw.
  nlohmann::json bad{{"error", std::string("invalid job spec: \xF2\x80 near")}};
  std::string text;
  REQUIRE_NOTHROW(text = dump_json(bad));
  CHECK(nlohmann::json::parse(text, nullptr, false).is_object());
  JobPlace odd = p;
  odd.spec_json = "\xFF";
  REQUIRE_NOTHROW(text = to_json(odd));

  JobPlace ended = p;
  ended.state = "ended";
  JobPlace other = p;
  other.cluster = "c1";
  other.state = "started";
  TeamUse use;
  TeamUse::Counted cp, cended, cother;
  use.recount(p, &cp);
  use.recount(ended, &cended);
  use.recount(other, &cother);
  CHECK(use.of("t1") == std::map<std::string, int64_t>{{"c1", 3}, {"c2", 3}});
  CHECK(use.of("t2").empty());
  // A place counts as it is now: moved to another cluster, ended, forgotten;
  // counted twice in a row, once.
  p.cluster = "c1";
  use.recount(p, &cp);
  use.recount(p, &cp);
  CHECK(use.of("t1") == std::map<std::string, int64_t>{{"c1", 6}});
  other.state = "ended";
  use.recount(other, &cother);
  CHECK(use.of("t1") == std::map<std::string, int64_t>{{"c1", 3}});
  use.recount(p, &cp, true);
  CHECK(use.of("t1").empty());
  CHECK(cp.cluster.empty());
  // A withdrawn place (taken nowhere: no cluster) counts nothing.
  JobPlace nowhere = p;
  nowhere.cluster.clear();
  TeamUse::Counted cn;
  use.recount(nowhere, &cn);
  CHECK(use.of("t1").empty());
}

TEST_CASE("dispatch: a claim is granted to the copy the place names, withdrawn for one left behind",
          "[dispatch]") {
  JobPlace p;
  p.job_id = "j-x1";
  p.team = "t1";
  p.cluster = "c2";
  p.cluster_job_id = "j-new";
  p.withdrawn = {"c1/j-old"};
  auto mine = answer_claim(&p, "c2", "j-new");
  CHECK(mine.granted);
  auto left = answer_claim(&p, "c1", "j-old");
  CHECK_FALSE(left.granted);
  CHECK(left.withdrawn);
  CHECK(left.reason.find("c2") != std::string::npos);
  auto other = answer_claim(&p, "c1", "j-other");  // a copy it does not know: ask again
  CHECK_FALSE(other.granted);
  CHECK_FALSE(other.withdrawn);
  auto unknown = answer_claim(nullptr, "c1", "j-old");
  CHECK_FALSE(unknown.granted);
  CHECK_FALSE(unknown.withdrawn);
  // A copy it does not know, taken before the front door's retention: left
  // behind (its job was forgotten, ended or sent elsewhere): withdrawn. A
  // younger one, no age said, or no retention: asked again.
  auto old = answer_claim(nullptr, "c1", "j-old", 7200 * 1000, 3600 * 1000);
  CHECK_FALSE(old.granted);
  CHECK(old.withdrawn);
  CHECK(old.reason.find("left behind") != std::string::npos);
  CHECK_FALSE(answer_claim(nullptr, "c1", "j-old", 60 * 1000, 3600 * 1000).withdrawn);
  CHECK_FALSE(answer_claim(nullptr, "c1", "j-old", -1, 3600 * 1000).withdrawn);
  CHECK_FALSE(answer_claim(nullptr, "c1", "j-old", 7200 * 1000, 0).withdrawn);
  // A copy it knows is answered by its place, whatever its age.
  CHECK(answer_claim(&p, "c2", "j-new", 7200 * 1000, 3600 * 1000).granted);
  p.state = "withdrawn";  // taken nowhere: every copy is withdrawn
  CHECK(answer_claim(&p, "c2", "j-new").withdrawn);
  std::string err;
  auto named = parse_config("name: door-1\nclusters: [{name: c1, nats: x}]", &err);
  REQUIRE(named);
  CHECK(named->name == "door-1");
  CHECK_FALSE(parse_config("name: 'a b'\nclusters: [{name: c1, nats: x}]", &err));
}

TEST_CASE("dispatch: the front door's jobs list, from each job's place and last event, in pages",
          "[dispatch]") {
  JobPlace p;
  p.job_id = "j-xaaaaaaaa00001";
  p.team = "t1";
  p.cluster = "c1";
  p.cluster_job_id = "j-abc";
  p.spec_json = R"({"kind":"training","name":"resnet","command":["x"]})";
  p.sent_ms = 42;
  p.gpus = 2;
  // Before any event: queued, with the spec's kind and name.
  auto v = job_view(p, nlohmann::json(), true);
  CHECK(v["job_id"] == p.job_id);
  CHECK(v["state"] == "queued");
  CHECK(v["kind"] == "training");
  CHECK(v["name"] == "resnet");
  CHECK(v["cluster"] == "c1");
  CHECK(v["cluster_job_id"] == "j-abc");
  CHECK(v["submit_ms"] == 42);
  // The last event decides; a cluster cut off shows unreachable until it ended.
  nlohmann::json running{{"state", "running"}, {"attempt", 2}, {"kind", "training"}};
  v = job_view(p, running, true);
  CHECK(v["state"] == "running");
  CHECK(v["attempt"] == 2);
  CHECK(job_view(p, running, false)["state"] == "unreachable");
  p.state = "ended";
  p.last_state = "failed";  // after a restart: no event in memory, the stored one
  CHECK(job_view(p, nlohmann::json(), false)["state"] == "failed");
  p.state = "withdrawn";
  CHECK(job_view(p, running, true)["state"] == "canceled");
  // A place round-trips its last state.
  auto back = place_from_json(to_json(p));
  REQUIRE(back);
  CHECK(back->last_state == "failed");
  // A hostile last event (wrong types) does not throw.
  REQUIRE_NOTHROW(job_view(p, nlohmann::json{{"state", 5}, {"attempt", "x"}}, true));
  REQUIRE_NOTHROW(job_view(p, nlohmann::json{{"state", "failed"}, {"ts_ms", "x"}}, true));
}

TEST_CASE(
    "dispatch: a job's row at the front door has its start, end, exit code and what it "
    "asked for, as a cluster's",
    "[dispatch]") {
  JobPlace p;
  p.job_id = "j-x1";
  p.team = "t1";
  p.cluster = "c1";
  p.spec_json =
      R"({"command":["x"],"workers":2,"priority":"high","resources":{"gpus":1,"gpu_type":"a100"}})";
  p.state = "started";
  auto v = job_view(p, nlohmann::json{{"state", "running"}, {"ts_ms", "1000"}}, true);
  CHECK_FALSE(v.contains("start_ms"));  // (the place's, set as the running event is mirrored)
  CHECK_FALSE(v.contains("end_ms"));
  CHECK(v["workers"] == 2);
  CHECK(v["priority"] == "high");
  CHECK(v["gpu_type"] == "a100");
  p.started_ms = 1000;
  nlohmann::json failed{{"state", "failed"}, {"ts_ms", "5000"}, {"exit_code", 3}};
  v = job_view(p, failed, true);
  CHECK(v["start_ms"] == 1000);
  CHECK(v["end_ms"] == 5000);
  CHECK(v["exit_code"] == 3);
  // After a restart (no event in memory): the stored end.
  p.state = "ended";
  p.last_state = "failed";
  p.ended_ms = 5100;
  v = job_view(p, nlohmann::json(), true);
  CHECK(v["end_ms"] == 5100);
  CHECK_FALSE(v.contains("exit_code"));
  auto back = place_from_json(to_json(p));
  REQUIRE(back);
  CHECK(back->started_ms == 1000);
  // ts_ms as protobuf's JSON writes it, or a number; anything else is none.
  CHECK(event_ms(nlohmann::json{{"ts_ms", "1796546385264"}}) == 1796546385264);
  CHECK(event_ms(nlohmann::json{{"ts_ms", 7}}) == 7);
  CHECK(event_ms(nlohmann::json{{"ts_ms", "7x"}}) == 0);
  CHECK(event_ms(nlohmann::json{{"ts_ms", "-7"}}) == 0);
  CHECK(event_ms(nlohmann::json{{"ts_ms", nullptr}}) == 0);
  CHECK(event_ms(nlohmann::json::array()) == 0);
}

TEST_CASE("dispatch: the front door's jobs list pages", "[dispatch]") {
  JobPlace p;
  p.job_id = "j-xaaaaaaaa00001";
  p.team = "t1";
  p.cluster = "c1";

  std::vector<nlohmann::json> rows;
  for (int i = 1; i <= 5; ++i)
    rows.push_back(
        {{"job_id", "j-x" + std::to_string(i)}, {"state", i % 2 ? "running" : "queued"}});
  auto page = jobs_page(rows, {{"limit", 2}});
  REQUIRE(page["jobs"].size() == 2);
  CHECK(page["jobs"][0]["job_id"] == "j-x1");
  CHECK(page["next"] == "j-x2");
  page = jobs_page(rows, {{"limit", 2}, {"after", "j-x4"}});
  REQUIRE(page["jobs"].size() == 1);
  CHECK(page["jobs"][0]["job_id"] == "j-x5");
  CHECK_FALSE(page.contains("next"));
  page = jobs_page(rows, {{"state", "queued"}});
  REQUIRE(page["jobs"].size() == 2);
  CHECK(page["jobs"][1]["job_id"] == "j-x4");
  CHECK_FALSE(page.contains("next"));
  page = jobs_page(rows, {{"state", "queued"}, {"limit", 1}});
  CHECK(page["next"] == "j-x2");
  // By cluster (troupe jobs --cluster), with the other filters.
  for (int i = 0; i < 5; ++i) rows[static_cast<size_t>(i)]["cluster"] = i < 3 ? "c1" : "c2";
  page = jobs_page(rows, {{"cluster", "c2"}});
  REQUIRE(page["jobs"].size() == 2);
  CHECK(page["jobs"][0]["job_id"] == "j-x4");
  page = jobs_page(rows, {{"cluster", "c1"}, {"state", "queued"}});
  REQUIRE(page["jobs"].size() == 1);
  CHECK(page["jobs"][0]["job_id"] == "j-x2");
  CHECK(jobs_page(rows, {{"cluster", 2}}).value("code", "") == "bad_request");
  CHECK(jobs_page(rows, nlohmann::json::object())["jobs"].size() == 5);
  // By label (a pipeline's is troupe.pipeline), as on a cluster.
  rows[1]["labels"] = {{"troupe.pipeline", "p-1"}, {"exp", "a"}};
  rows[3]["labels"] = {{"exp", "a"}};
  rows[4]["labels"] = {{"exp", 7}};
  page = jobs_page(rows, {{"label", "exp=a"}});
  REQUIRE(page["jobs"].size() == 2);
  CHECK(page["jobs"][1]["job_id"] == "j-x4");
  page = jobs_page(rows, {{"label", "exp=a"}, {"limit", 1}});
  CHECK(page["next"] == "j-x2");
  page = jobs_page(rows, {{"pipeline", "p-1"}});
  REQUIRE(page["jobs"].size() == 1);
  CHECK(page["jobs"][0]["job_id"] == "j-x2");
  CHECK(jobs_page(rows, {{"label", "exp=a"}, {"state", "running"}})["jobs"].empty());
  CHECK(jobs_page(rows, {{"label", "exp="}})["jobs"].empty());
  // A view carries its spec's labels.
  JobPlace lp = p;
  lp.spec_json = R"({"command":["x"],"labels":{"exp":"a"}})";
  CHECK(job_view(lp, nlohmann::json{{"state", "running"}}, true)["labels"]["exp"] == "a");
  for (const auto& bad : {nlohmann::json{{"after", "j-nope"}}, nlohmann::json{{"limit", 0}},
                          nlohmann::json{{"limit", "5"}}, nlohmann::json{{"pipeline", 1}},
                          nlohmann::json{{"label", "ab"}}, nlohmann::json{{"label", "=b"}},
                          nlohmann::json{{"pipeline", "p-1"}, {"label", "a=b"}},
                          nlohmann::json{{"state", 3}}, nlohmann::json::array()}) {
    INFO(bad.dump());
    CHECK(jobs_page(rows, bad).value("code", "") == "bad_request");
  }
}

TEST_CASE("a moved job's history: every copy's events, oldest copy first, a silent cluster named",
          "[dispatch]") {
  using nlohmann::json;
  json c1{{"job_id", "j-1"},
          {"events", json::array({json{{"job_id", "j-1"}, {"state", "queued"}},
                                  json{{"job_id", "j-1"}, {"state", "canceled"}}})}};
  json c2{{"job_id", "j-9"},
          {"events", json::array({json{{"job_id", "j-9"}, {"state", "queued"}}, json("junk"),
                                  json{{"job_id", "j-9"}, {"state", "succeeded"}}})},
          {"truncated", true}};
  auto h = merge_history("j-x1", {{"c1/j-1", c1}, {"c2/j-9", c2}});
  REQUIRE(h["events"].size() == 4);
  CHECK(h["job_id"] == "j-x1");
  CHECK(h["events"][0]["cluster"] == "c1");
  CHECK(h["events"][0]["cluster_job_id"] == "j-1");
  CHECK(h["events"][1]["state"] == "canceled");
  CHECK(h["events"][3]["cluster"] == "c2");
  CHECK(h["events"][3]["job_id"] == "j-x1");
  CHECK(h["truncated"] == true);
  CHECK_FALSE(h.contains("partial"));
  // c1 silent, or answering an error: the rest, and who did not answer.
  for (const auto& silent :
       {std::optional<json>(), std::optional<json>(json{{"error", "x"}, {"code", "not_found"}})}) {
    h = merge_history("j-x1", {{"c1/j-1", silent}, {"c2/j-9", c2}});
    CHECK(h["events"].size() == 2);
    CHECK(h["partial"] == true);
    CHECK(h["unanswered"] == json::array({"c1"}));
  }
}

TEST_CASE("dispatch: a job is forgotten once ended (or withdrawn) longer than the retention",
          "[dispatch]") {
  JobPlace p;
  p.job_id = "j-x1";
  p.team = "t1";
  p.sent_ms = 1000;
  const int64_t day = 24 * 3600 * 1000LL;
  CHECK_FALSE(past_retention(p, 100 * day, day));  // sent, not ended
  p.state = "started";
  CHECK_FALSE(past_retention(p, 100 * day, day));
  p.state = "ended";
  p.ended_ms = 50 * day;
  CHECK_FALSE(past_retention(p, 50 * day + day - 1, day));
  CHECK(past_retention(p, 51 * day, day));
  CHECK_FALSE(past_retention(p, 100 * day, 0));  // 0: kept forever
  p.ended_ms = 0;  // stored before ended_ms was kept: from when it was sent
  CHECK(past_retention(p, 1000 + day, day));
  p.state = "withdrawn";
  p.ended_ms = 7;
  CHECK(past_retention(p, 7 + day, day));
  // ended_ms round-trips.
  auto back = place_from_json(to_json(p));
  REQUIRE(back);
  CHECK(back->ended_ms == 7);
}

TEST_CASE(
    "dispatch: depends_on goes where the upstream jobs are, with their ids there, unknown, "
    "another team's, nowhere and split upstreams are refused",
    "[dispatch]") {
  std::map<std::string, JobPlace> places;
  auto add = [&](const std::string& id, const std::string& team, const std::string& cluster,
                 const std::string& remote_id) {
    JobPlace p;
    p.job_id = id;
    p.team = team;
    p.cluster = cluster;
    p.cluster_job_id = remote_id;
    places[id] = p;
  };
  add("j-x1", "t1", "c1", "j-a1");
  add("j-x2", "t1", "c1", "j-a2");
  add("j-x3", "t1", "c2", "j-b3");
  add("j-x4", "t2", "c1", "j-a4");
  add("j-x5", "t1", "", "");  // withdrawn and taken nowhere
  auto place_of = [&](const std::string& id) -> const JobPlace* {
    auto it = places.find(id);
    return it == places.end() ? nullptr : &it->second;
  };
  auto spec_after = [](std::vector<std::pair<std::string, std::string>> deps) {
    troupe::pb::JobSpec s;
    s.set_team("t1");
    s.add_command("true");
    for (const auto& [job, on] : deps) {
      auto* d = s.add_depends_on();
      d->set_job(job);
      d->set_on(on);
    }
    return s;
  };

  // Two upstreams in c1 (one named twice): c1, their ids there, `on` kept.
  auto s = spec_after({{"j-x1", "succeeded"}, {"j-x2", "finished"}, {"j-x1", "failed"}});
  auto u = resolve_upstreams("t1", s, place_of);
  CHECK(u.error.empty());
  CHECK(u.cluster == "c1");
  CHECK(u.upstreams == std::vector<std::string>{"j-x1", "j-x2"});
  REQUIRE(s.depends_on_size() == 3);
  CHECK(s.depends_on(0).job() == "j-a1");
  CHECK(s.depends_on(1).job() == "j-a2");
  CHECK(s.depends_on(1).on() == "finished");
  CHECK(s.depends_on(2).job() == "j-a1");

  // No entry naming a job: anywhere.
  auto none = spec_after({});
  CHECK(resolve_upstreams("t1", none, place_of).cluster.empty());

  // Unknown, and another team's: the same text.
  auto unknown = spec_after({{"j-x9", ""}});
  auto uu = resolve_upstreams("t1", unknown, place_of);
  CHECK(uu.code == "invalid_spec");
  auto theirs = spec_after({{"j-x4", ""}});
  auto ut = resolve_upstreams("t1", theirs, place_of);
  CHECK(ut.code == "invalid_spec");
  CHECK(ut.error ==
        "depends_on: no job j-x4 in team t1 (a job of the same team, submitted "
        "before and not yet forgotten)");
  CHECK(uu.error.substr(uu.error.find(" in team")) == ut.error.substr(ut.error.find(" in team")));

  // Nowhere, and in two clusters.
  auto nowhere = spec_after({{"j-x5", ""}});
  CHECK(resolve_upstreams("t1", nowhere, place_of).error.find("in no cluster") !=
        std::string::npos);
  auto split = spec_after({{"j-x1", ""}, {"j-x3", ""}});
  auto us = resolve_upstreams("t1", split, place_of);
  CHECK(us.code == "invalid_spec");
  CHECK(us.cluster.empty());
  CHECK(us.error.find("j-x1 (cluster c1) and j-x3 (cluster c2)") != std::string::npos);
}

TEST_CASE("dispatch: a pinned place keeps its pin through its stored JSON", "[dispatch]") {
  JobPlace p;
  p.job_id = "j-x1";
  p.team = "t1";
  p.cluster = "c1";
  CHECK_FALSE(place_from_json(to_json(p))->pinned);
  p.pinned = true;
  CHECK(place_from_json(to_json(p))->pinned);
  CHECK(place_from_json(to_json(p))->pipeline_key.empty());
  p.pipeline_key = "t1/pipeline/nightly-1";  // a pipeline member's: where a retry goes
  CHECK(place_from_json(to_json(p))->pipeline_key == "t1/pipeline/nightly-1");
}

TEST_CASE("dispatch: a cluster's ids put back to the front door's, whole ids only, at any depth",
          "[dispatch]") {
  std::map<std::string, std::string> ids = {{"j-a1", "j-x1"}, {"j-a2", "j-x2"}};
  nlohmann::json j = {{"depends_on", {{{"job", "j-a1"}, {"on", "finished"}}}},
                      {"reason", "waiting for j-a1 (running) to succeed, j-a2 (queued) to finish"},
                      {"other", "j-a10 j-a1x xj-a1 j-a1"},
                      {"n", 5}};
  put_back_ids(j, ids);
  CHECK(j["depends_on"][0]["job"] == "j-x1");
  CHECK(j["depends_on"][0]["on"] == "finished");
  CHECK(j["reason"] == "waiting for j-x1 (running) to succeed, j-x2 (queued) to finish");
  CHECK(j["other"] == "j-a10 j-a1x xj-a1 j-x1");
  CHECK(j["n"] == 5);
}

TEST_CASE(
    "dispatch: nodes and queues at the front door are every reachable cluster's, each row "
    "with its cluster",
    "[dispatch]") {
  ClusterState c1, c2, c3;
  std::string err;
  REQUIRE(read_capacity(
      R"({"nodes":[{"node":"node-1","gpu_type":"a100","gpus_total":4,"gpus_free":4,"alive":true}]})",
      R"({"pools":[{"pool":"default","gpus_total":4,"gpus_free":4}],
          "teams":[{"team":"nlp","pool":"default","pending_jobs":1}],
          "grants":3,"preemptions":1,"gpu_seconds_lost":1.5,"retries":{"infra:node_lost":2},
          "policy":"troupe"})",
      &c1, &err));
  REQUIRE(read_capacity(
      R"({"nodes":[{"node":"node-1","gpu_type":"h100","gpus_total":8,"gpus_free":2,"alive":true},
                   "not a node"]})",
      R"({"pools":[{"pool":"default","gpus_total":8,"gpus_free":2}],"teams":[],
          "grants":"4","reclaims":"x","preemptions":2,"gpu_seconds_lost":2.0,"retries":{"infra:node_lost":1,
          "user:exit_code":5},"policy":"fifo"})",
      &c2, &err));
  c1.name = "c1";
  c2.name = "c2";
  c3.name = "c3";  // never answered
  c1.reachable = c2.reachable = true;

  auto nodes = merge_nodes({c1, c2, c3});
  REQUIRE(nodes["nodes"].size() == 2);  // the two node-1 told apart by cluster
  CHECK(nodes["nodes"][0]["cluster"] == "c1");
  CHECK(nodes["nodes"][0]["gpu_type"] == "a100");
  CHECK(nodes["nodes"][1]["cluster"] == "c2");
  CHECK(nodes["partial"] == true);
  CHECK(nodes["unanswered"] == nlohmann::json::array({"c3"}));

  // A cluster cut off since its last answer: its rows are not shown.
  c2.reachable = false;
  nodes = merge_nodes({c1, c2});
  REQUIRE(nodes["nodes"].size() == 1);
  CHECK(nodes["unanswered"] == nlohmann::json::array({"c2"}));
  c2.reachable = true;
  CHECK_FALSE(merge_nodes({c1, c2}).contains("partial"));

  // Cordon at the front door: node-1 is in two clusters (name one), none
  // has node-9; a cluster cut off is not asked.
  CHECK(clusters_with_node({c1, c2, c3}, "node-1") == std::vector<std::string>{"c1", "c2"});
  CHECK(clusters_with_node({c1, c2}, "node-9").empty());
  c2.reachable = false;
  CHECK(clusters_with_node({c1, c2}, "node-1") == std::vector<std::string>{"c1"});
  c2.reachable = true;

  auto queues = merge_queues({c1, c2, c3});
  REQUIRE(queues["pools"].size() == 2);
  CHECK(queues["pools"][1]["cluster"] == "c2");
  CHECK(queues["pools"][1]["gpus_free"] == 2);
  REQUIRE(queues["teams"].size() == 1);
  CHECK(queues["teams"][0]["cluster"] == "c1");
  CHECK(queues["grants"] == 7);  // "4": an int64 as protobuf's JSON writes it
  CHECK(queues["preemptions"] == 3);
  CHECK(queues["preemptions"].is_number_integer());
  CHECK(queues["gpu_seconds_lost"] == Approx(3.5));
  CHECK(queues["retries"]["infra:node_lost"] == 3);
  CHECK(queues["retries"]["user:exit_code"] == 5);
  CHECK(queues["policy"] == "mixed");
  CHECK_FALSE(queues.contains("reclaims"));                      // not a number: nothing added
  CHECK(queues["unanswered"] == nlohmann::json::array({"c3"}));  // named once
  CHECK(merge_queues({c1})["policy"] == "troupe");
  // Nothing reachable: empty lists, every cluster named.
  auto none = merge_queues({c3});
  CHECK(none["pools"].empty());
  CHECK(none["teams"].empty());
  CHECK(none["partial"] == true);

  // troupe queues --cluster: one cluster's rows and its own counters, named.
  std::string code;
  CHECK(queues_reply({c1, c2, c3}, "", &code) == queues);
  CHECK(code.empty());
  CHECK(queues_reply({c1, c2, c3}, R"({"cluster":""})", &code) == queues);
  auto only = queues_reply({c1, c2, c3}, R"({"cluster":"c2"})", &code);
  CHECK(code.empty());
  CHECK(only["cluster"] == "c2");
  REQUIRE(only["pools"].size() == 1);
  CHECK(only["pools"][0]["cluster"] == "c2");
  CHECK(only["teams"].empty());
  CHECK(only["grants"] == 4);  // c2's, not the sum
  CHECK(only["policy"] == "fifo");
  CHECK_FALSE(only.contains("partial"));
  // A cluster not heard from: named unanswered, no rows.
  auto silent = queues_reply({c1, c2, c3}, R"({"cluster":"c3"})", &code);
  CHECK(code.empty());
  CHECK(silent["cluster"] == "c3");
  CHECK(silent["unanswered"] == nlohmann::json::array({"c3"}));
  // Refused: an unknown cluster (echoed at most 128 characters), a cluster
  // that is not a string, a body that is not an object.
  auto unknown = queues_reply({c1, c2}, R"({"cluster":")" + std::string(300, 'x') + R"("})", &code);
  CHECK(code == "not_found");
  CHECK(unknown["code"] == "not_found");
  CHECK(unknown["error"].get<std::string>().size() == std::string("no cluster ").size() + 128);
  CHECK(queues_reply({c1}, R"({"cluster":7})", &code)["code"] == "bad_request");
  CHECK(code == "bad_request");
  CHECK(queues_reply({c1}, "[1]", &code)["code"] == "bad_request");
  CHECK(queues_reply({c1}, "{not json", &code)["code"] == "bad_request");
}

TEST_CASE("dispatch: troupe.sys.find and a job's row at the front door say where it runs",
          "[dispatch]") {
  JobPlace p;
  p.job_id = "j-x1";
  p.team = "nlp";
  p.cluster = "c2";
  p.cluster_job_id = "j-abc";
  p.state = "started";
  nlohmann::json running{{"state", "running"},
                         {"workers", {{{"rank", 0}, {"node", "node-1"}, {"gpus", {0, 1}}}}}};
  auto row = job_view(p, running, true);
  REQUIRE(row["placement"].size() == 1);
  CHECK(row["placement"][0]["node"] == "node-1");
  CHECK_FALSE(
      job_view(p, nlohmann::json{{"state", "queued"}, {"workers", nlohmann::json::array()}}, true)
          .contains("placement"));
  CHECK_FALSE(job_view(p, nlohmann::json{{"workers", "node-1"}}, true).contains("placement"));
  auto found = find_reply(row);
  CHECK(found == nlohmann::json{{"job_id", "j-x1"},
                                {"team", "nlp"},
                                {"state", "running"},
                                {"cluster", "c2"},
                                {"cluster_job_id", "j-abc"}});
}

TEST_CASE("dispatch: a pipeline goes whole to one cluster where the team's quota holds all of it",
          "[dispatch]") {
  auto cfg = config();  // nlp: at most 4 GPUs in c2
  std::vector<ClusterState> cs = {cluster("c1", "east", "a100", 16, 0, 50),
                                  cluster("c2", "west", "a100", 16, 16)};
  const char* three = R"({"command":["x"],"resources":{"gpus":3}})";
  const char* two = R"({"command":["x"],"resources":{"gpus":2}})";
  // c2 (free) first; alone each member fits nlp's 4 GPUs there, together
  // (5) they do not: the pipeline goes to c1.
  CHECK(choose(cfg, cs, needs(three, "nlp"), {}, {}).order.front() == "c2");
  auto p = choose_for_pipeline(cfg, cs, {needs(three, "nlp"), needs(two, "nlp")}, {}, {});
  CHECK(p.order == std::vector<std::string>{"c1"});
  // Another team (no quota) goes to c2.
  CHECK(choose_for_pipeline(cfg, cs, {needs(three), needs(two)}, {}, {}).order ==
        std::vector<std::string>{"c2"});
  // With what nlp already uses (or sends) in c2 counted: 2 + 2 fits, 3 + 2 does not.
  CHECK(choose_for_pipeline(cfg, cs, {needs(two, "nlp")}, {{"c2", 2}}, {}).order.front() == "c2");
  CHECK(choose_for_pipeline(cfg, cs, {needs(two, "nlp")}, {{"c2", 3}}, {}).order.front() == "c1");
  // Nowhere: the quota's reason when that was all that stood in the way ...
  auto over = choose_for_pipeline(cfg, cs, {needs(three, "nlp"), needs(two, "nlp")}, {}, {"c1"});
  CHECK(over.order.empty());
  CHECK(over.code == "over_cluster_quota");
  CHECK(over.error.find("the pipeline needs 5") != std::string::npos);
  // ... else the first member no cluster takes, or that no one cluster takes them all.
  const char* h100 = R"({"command":["x"],"resources":{"gpus":1,"gpu_type":"h100"}})";
  auto none = choose_for_pipeline(cfg, cs, {needs(two), needs(h100)}, {}, {});
  CHECK(none.code == "no_cluster_of_type");
  CHECK(none.error.rfind("jobs[1]: ", 0) == 0);
  std::vector<ClusterState> split = {cluster("c1", "east", "a100", 16, 16),
                                     cluster("c2", "west", "h100", 16, 16)};
  const char* a100 = R"({"command":["x"],"resources":{"gpus":1,"gpu_type":"a100"}})";
  CHECK(choose_for_pipeline(cfg, split, {needs(a100), needs(h100)}, {}, {}).code ==
        "no_cluster_for_pipeline");
  CHECK(choose_for_pipeline(cfg, split, {}, {}, {}).order.empty());
}

TEST_CASE(
    "dispatch: numbers out of range from a cluster or a damaged place are no undefined behaviour",
    "[dispatch]") {
  // (found by tests/fuzz/fuzz_dispatch.cpp: a float's cast out of range)
  const std::string base = R"({"job_id":"j-x1","team":"nlp","sent_ms":)";
  CHECK_FALSE(place_from_json(base + "1.79e31}").has_value());
  CHECK_FALSE(place_from_json(base + "\"12\"}").has_value());
  auto p = place_from_json(base + "5.0,\"gpus\":18446744073709551615}");
  REQUIRE(p);
  CHECK(p->sent_ms == 5);
  CHECK(p->gpus == std::numeric_limits<int64_t>::max());
  // A cluster's counts: never below 0, summed without overflow.
  ClusterState c;
  std::string err;
  REQUIRE(read_capacity(
      R"({"nodes":[{"node":"a","gpu_type":"a100","alive":true,"gpus_total":9223372036854775807,"gpus_free":-4},
                   {"node":"b","gpu_type":"a100","alive":true,"gpus_total":9223372036854775807,"gpus_free":2,
                    "running":"-3"}]})",
      R"({"teams":[{"pending_jobs":9223372036854775807},{"pending_jobs":9223372036854775807}],
          "grants":9223372036854775807,"retries":{"x":9223372036854775807}})",
      &c, &err));
  CHECK(c.types["a100"].total == std::numeric_limits<int64_t>::max());
  CHECK(c.types["a100"].free == 2);
  CHECK(c.running == 0);
  CHECK(c.queued == std::numeric_limits<int64_t>::max());
  c.name = "c1";
  c.reachable = true;
  ClusterState c2 = c;
  c2.name = "c2";
  auto q = merge_queues({c, c2});
  CHECK(q["grants"] == std::numeric_limits<int64_t>::max());
  CHECK(q["retries"]["x"] == std::numeric_limits<int64_t>::max());
}

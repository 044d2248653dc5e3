// Unit tests of the fault-injection audit (tests/fault/audit.hpp): hand-made
// event histories that keep, and that break, each of the four properties.
#include "audit.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using Catch::Matchers::Contains;
using troupe::fault::audit_json;
using troupe::fault::AuditReport;
using troupe::fault::JobInfo;
using troupe::fault::parse_event;
using Json = nlohmann::json;

namespace {

// A stored event as the JobActor publishes it (protobuf JSON, int64 as text).
struct Ev {
  std::string job;
  std::string state;
  int attempt = 1;
  std::vector<std::tuple<int, std::string, std::vector<int>>> workers;  // rank, node, gpus
  int exit_code = -1000;                                                // -1000: none
  long seq = 0;                                                         // JobEvent.seq; 0: left out
  long long ts = 1700000000000;                                         // JobEvent.ts_ms

  std::string json() const {
    Json w = Json::array();
    for (const auto& [rank, node, gpus] : workers)
      w.push_back({{"rank", rank}, {"node", node}, {"gpus", gpus}});
    Json j = {{"job_id", job},
              {"team", "t"},
              {"state", state},
              {"attempt", attempt},
              {"ts_ms", std::to_string(ts)},
              {"ts", ""},
              {"workers", w},
              {"reason", ""},
              {"name", ""},
              {"kind", "training"},
              {"cause", ""}};
    if (exit_code != -1000) j["exit_code"] = exit_code;
    if (seq > 0) j["seq"] = std::to_string(seq);
    return j.dump();
  }
};

using W = std::vector<std::tuple<int, std::string, std::vector<int>>>;

AuditReport run(const std::vector<Ev>& evs, const std::map<std::string, JobInfo>& acked) {
  std::vector<std::string> texts;
  for (const auto& e : evs) texts.push_back(e.json());
  return audit_json(texts, acked);
}

// A whole clean life: queued, starting, running, then `end`.
std::vector<Ev> life(const std::string& job, const W& w, const std::string& end = "succeeded",
                     int attempt = 1) {
  return {{job, "queued", attempt, {}},
          {job, "starting", attempt, w},
          {job, "running", attempt, w},
          {job, end, attempt, w, end == "succeeded" ? 0 : 1}};
}

std::vector<Ev> cat(std::initializer_list<std::vector<Ev>> parts) {
  std::vector<Ev> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

const W kN1G0 = {{0, "n1", {0}}};
const W kGang2 = {{0, "n1", {0, 1}}, {1, "n2", {0, 1}}};

}  // namespace

TEST_CASE("fault audit: a clean history passes with every figure at zero", "[audit]") {
  // a and b use n1/gpu0 one after the other; g is a 2-worker gang; r is
  // requeued (queued carries attempt 2) and runs again on the same GPU; p is
  // preempted; c is canceled while queued.
  auto evs = cat({life("a", kN1G0),
                  life("b", kN1G0),
                  life("g", kGang2),
                  {{"r", "queued", 1, {}},
                   {"r", "starting", 1, kN1G0},
                   {"r", "running", 1, kN1G0},
                   {"r", "queued", 2, {}},  // agent lost: requeued, attempt 2
                   {"r", "starting", 2, kN1G0},
                   {"r", "running", 2, kN1G0},
                   {"r", "failed", 2, kN1G0, 3}},
                  {{"p", "queued", 1, {}},
                   {"p", "starting", 1, {{0, "n3", {5}}}},
                   {"p", "running", 1, {{0, "n3", {5}}}},
                   {"p", "preempted", 1, {{0, "n3", {5}}}},
                   {"p", "queued", 2, {}},
                   {"p", "starting", 2, {{0, "n3", {5}}}},
                   {"p", "running", 2, {{0, "n3", {5}}}},
                   {"p", "succeeded", 2, {{0, "n3", {5}}}, 0}},
                  {{"c", "queued", 1, {}}, {"c", "canceled", 1, {}}}});
  std::map<std::string, JobInfo> acked = {{"a", {1, 1}}, {"b", {1, 1}}, {"g", {2, 2}},
                                          {"r", {1, 1}}, {"p", {1, 1}}, {"c", {1, 1}}};
  auto r = run(evs, acked);
  INFO(r.describe());
  CHECK(r.ok());
  CHECK(r.acknowledged == 6);
  CHECK(r.terminal_once == 6);
  CHECK(r.overlapping_jobs == 0);
  CHECK(r.gpu_clashes == 0);
  CHECK(r.gangs == 1);
  CHECK(r.partial_gangs == 0);
  CHECK(r.attempts_started == 7);
  CHECK(r.terminal_states.at("succeeded") == 4);
  CHECK(r.terminal_states.at("failed") == 1);
  CHECK(r.terminal_states.at("canceled") == 1);
  CHECK_THAT(r.figures(), Contains("exactly one terminal state: 6/6"));
}

TEST_CASE("fault audit: identical re-emissions after a restart are not violations", "[audit]") {
  auto evs = cat({{{"a", "queued", 1, {}},
                   {"a", "starting", 1, kN1G0},
                   {"a", "running", 1, kN1G0},
                   {"a", "running", 1, kN1G0},  // re-announced by a restarted scheduler
                   {"a", "succeeded", 1, kN1G0, 0},
                   {"a", "succeeded", 1, kN1G0, 0}},  // the same end, published twice
                  life("b", kN1G0)});
  auto r = run(evs, {{"a", {1, 1}}, {"b", {1, 1}}});
  INFO(r.describe());
  CHECK(r.ok());
  CHECK(r.reemitted_terminal == 1);
  CHECK(r.reemitted_other == 1);
}

TEST_CASE("fault audit: figure 1 fails on a missing, a second or a left terminal state",
          "[audit]") {
  SECTION("no terminal event, and no event at all") {
    auto evs =
        cat({{{"a", "queued", 1, {}}, {"a", "starting", 1, kN1G0}}, life("b", kN1G0, "succeeded")});
    // b's GPU is a's too: a never ended, so that is a clash as well.
    auto r = run(evs, {{"a", {1, 1}}, {"b", {1, 1}}, {"ghost", {1, 1}}});
    INFO(r.describe());
    CHECK_FALSE(r.ok());
    CHECK(r.terminal_once == 1);
    CHECK(r.terminal_violations() == 2);
    CHECK(r.missing_terminal == 2);
    CHECK_THAT(r.describe(), Contains("ghost: acknowledged but no event at all"));
    CHECK_THAT(r.describe(), Contains("a: no terminal state"));
  }
  SECTION("two different terminal states") {
    auto evs = life("a", kN1G0, "succeeded");
    evs.push_back({"a", "failed", 1, kN1G0, 1});
    auto r = run(evs, {{"a", {1, 1}}});
    INFO(r.describe());
    CHECK_FALSE(r.ok());
    CHECK(r.terminal_once == 0);
    CHECK(r.missing_terminal == 0);
    CHECK_THAT(r.describe(), Contains("second terminal event"));
  }
  SECTION("the same terminal state for another attempt") {
    auto evs = life("a", kN1G0, "succeeded");
    auto again = life("a", kN1G0, "succeeded", 2);
    evs.insert(evs.end(), again.begin() + 1, again.end());
    auto r = run(evs, {{"a", {1, 1}}});
    INFO(r.describe());
    CHECK(r.terminal_once == 0);
    CHECK_THAT(r.describe(), Contains("left its terminal state"));
  }
  SECTION("running again after the terminal state") {
    auto evs = life("a", kN1G0, "canceled");
    evs.push_back({"a", "running", 1, kN1G0});
    auto r = run(evs, {{"a", {1, 1}}});
    INFO(r.describe());
    CHECK(r.terminal_once == 0);
    CHECK(r.terminal_violations() == 1);
  }
}

TEST_CASE("fault audit: figure 2 fails when a job runs two attempts at once", "[audit]") {
  // Attempt 2 starts (on other GPUs) while attempt 1 has not ended.
  std::vector<Ev> evs = {{"a", "queued", 1, {}},
                         {"a", "starting", 1, kN1G0},
                         {"a", "running", 1, kN1G0},
                         {"a", "starting", 2, {{0, "n2", {3}}}},
                         {"a", "running", 2, {{0, "n2", {3}}}},
                         {"a", "succeeded", 2, {{0, "n2", {3}}}, 0}};
  auto r = run(evs, {{"a", {1, 1}}});
  INFO(r.describe());
  CHECK_FALSE(r.ok());
  CHECK(r.overlapping_jobs == 1);
  CHECK(r.gpu_clashes == 0);
  // An end event closes every attempt up to its own: one terminal state.
  CHECK(r.terminal_once == 1);
  CHECK_THAT(r.describe(), Contains("while attempt 1 still holds its GPUs"));

  SECTION("a stale end of attempt 1 does not end attempt 2") {
    std::vector<Ev> evs2 = {{"b", "queued", 2, {}},
                            {"b", "starting", 2, kN1G0},
                            {"b", "queued", 1, {}},  // stale
                            {"b", "starting", 1, {{0, "n2", {1}}}}};
    auto r2 = run(evs2, {});
    CHECK(r2.overlapping_jobs == 1);
  }
}

TEST_CASE("fault audit: figure 3 fails when two jobs hold one GPU", "[audit]") {
  SECTION("b starts on a GPU a still holds") {
    std::vector<Ev> evs = {{"a", "queued", 1, {}},
                           {"a", "starting", 1, kN1G0},
                           {"a", "running", 1, kN1G0},
                           {"b", "queued", 1, {}},
                           {"b", "starting", 1, {{0, "n1", {1, 0}}}},
                           {"a", "succeeded", 1, kN1G0, 0},
                           {"b", "running", 1, {{0, "n1", {1, 0}}}},
                           {"b", "succeeded", 1, {{0, "n1", {1, 0}}}, 0}};
    auto r = run(evs, {{"a", {1, 1}}, {"b", {1, 2}}});
    INFO(r.describe());
    CHECK_FALSE(r.ok());
    CHECK(r.gpu_clashes == 1);
    CHECK(r.gpus_clashed == 1);
    CHECK(r.terminal_once == 2);
    CHECK_THAT(
        r.describe(),
        Contains("took n1/gpu0 held by a attempt 1 since #2; its attempt ended later, at #6"));
  }
  SECTION("a job that was never acknowledged and never ended still holds its GPUs") {
    std::vector<Ev> evs = {{"orphan", "queued", 1, {}}, {"orphan", "starting", 1, kN1G0}};
    auto b = life("b", kN1G0);
    evs.insert(evs.end(), b.begin(), b.end());
    auto r = run(evs, {{"b", {1, 1}}});
    INFO(r.describe());
    CHECK(r.gpu_clashes == 1);
    CHECK(r.unacknowledged_jobs == 1);
    CHECK(r.unacknowledged_unfinished == 1);
    CHECK_THAT(r.describe(), Contains("(not acknowledged)"));
    CHECK_THAT(r.describe(), Contains("never ended in the stream"));
  }
  SECTION("two ranks of one gang on the same GPU") {
    W w = {{0, "n1", {0}}, {1, "n1", {0}}};
    auto r = run(life("g", w), {{"g", {2, 1}}});
    INFO(r.describe());
    CHECK(r.gpu_clashes == 2);  // at starting and at running
    CHECK(r.partial_gangs == 0);
  }
  SECTION("the same index on two nodes is no clash") {
    auto evs = cat({{{"a", "starting", 1, kN1G0}, {"b", "starting", 1, {{0, "n2", {0}}}}}});
    auto r = run(evs, {});
    CHECK(r.gpu_clashes == 0);
    CHECK(r.max_gpus_held == 2);
  }
}

TEST_CASE("fault audit: figure 4 fails when a gang runs partially", "[audit]") {
  SECTION("running lists fewer workers than the gang has") {
    std::vector<Ev> evs = {{"g", "queued", 1, {}},
                           {"g", "starting", 1, {{0, "n1", {0}}, {1, "n2", {0}}, {2, "n3", {0}}}},
                           {"g", "running", 1, {{0, "n1", {0}}, {1, "n2", {0}}}},
                           {"g", "succeeded", 1, {}, 0}};
    auto r = run(evs, {{"g", {3, 1}}});
    INFO(r.describe());
    CHECK_FALSE(r.ok());
    CHECK(r.gangs == 1);
    CHECK(r.partial_gangs == 1);
    CHECK_THAT(r.describe(), Contains("lists 2 worker(s) of 3"));
    CHECK_THAT(r.describe(), Contains("rank 2 missing"));
  }
  SECTION("running moves a rank off the node it was placed on") {
    std::vector<Ev> evs = {{"g", "starting", 1, kGang2},
                           {"g", "running", 1, {{0, "n1", {0, 1}}, {1, "n1", {2, 3}}}},
                           {"g", "succeeded", 1, {}, 0}};
    auto r = run(evs, {{"g", {2, 2}}});
    INFO(r.describe());
    CHECK(r.partial_gangs == 1);
    CHECK_THAT(r.describe(), Contains("rank 1 runs on"));
  }
  SECTION("a rank listed twice, or with the wrong GPU count") {
    std::vector<Ev> evs = {{"g", "starting", 1, {{0, "n1", {0, 1}}, {0, "n2", {0}}}},
                           {"g", "succeeded", 1, {}, 0}};
    auto r = run(evs, {{"g", {2, 2}}});
    INFO(r.describe());
    CHECK(r.partial_gangs == 1);
    CHECK_THAT(r.describe(), Contains("rank 0 listed twice"));
    CHECK_THAT(r.describe(), Contains("has 1 GPU(s), not 2"));
  }
  SECTION("a single job started without a placement") {
    std::vector<Ev> evs = {{"s", "starting", 1, {}}, {"s", "succeeded", 1, {}, 0}};
    auto r = run(evs, {{"s", {1, 1}}});
    CHECK(r.partial_gangs == 0);
    CHECK(r.partial_singles == 1);
    CHECK_FALSE(r.ok());
  }
}

TEST_CASE("fault audit: figure 5 fails when a job starts before its upstream job succeeded",
          "[audit]") {
  const W n2 = {{0, "n2", {0}}};
  // d waits for u and starts after u's end; f's upstream failed and f never
  // started (canceled, dependency_failed); e started while u2 still ran; g
  // started though its upstream failed.
  auto evs = cat({life("u", kN1G0),
                  life("d", n2),
                  life("bad", kN1G0, "failed"),
                  {{"f", "blocked", 0, {}}, {"f", "canceled", 0, {}}},
                  {{"u2", "queued", 1, {}}, {"u2", "starting", 1, kN1G0}},
                  life("e", n2),
                  {{"u2", "running", 1, kN1G0}, {"u2", "succeeded", 1, kN1G0, 0}},
                  life("g", {{0, "n3", {0}}})});
  for (size_t i = 0; i < evs.size(); ++i) evs[i].ts += static_cast<long long>(i);
  auto after = [](std::vector<std::string> up) { return JobInfo{1, 1, std::move(up)}; };
  std::map<std::string, JobInfo> acked = {
      {"u", {1, 1}},         {"bad", {1, 1}},           {"u2", {1, 1}},       {"d", after({"u"})},
      {"f", after({"bad"})}, {"e", after({"u", "u2"})}, {"g", after({"bad"})}};
  auto r = run(evs, acked);
  INFO(r.describe());
  CHECK_FALSE(r.ok());
  CHECK(r.dependents == 4);
  CHECK(r.early_dependents == 2);
  REQUIRE(r.early.size() == 2);
  CHECK(r.early[0].job_id == "e");
  CHECK_THAT(r.early[0].what, Contains("u2 succeeded only at"));
  CHECK(r.early[1].job_id == "g");
  CHECK_THAT(r.early[1].what, Contains("bad never succeeded"));
  CHECK_THAT(r.figures(), Contains("jobs started before their upstream succeeded: 2/4"));
  // The same history without e and g passes.
  acked.erase("e");
  acked.erase("g");
  acked["e"] = {1, 1};
  acked["g"] = {1, 1};
  auto clean = run(evs, acked);
  INFO(clean.describe());
  CHECK(clean.early_dependents == 0);
  CHECK(clean.dependents == 2);
  CHECK(clean.ok());
}

TEST_CASE("fault audit: stored events are parsed as protobuf JSON, malformed ones fail the audit",
          "[audit]") {
  std::string err;
  auto e = parse_event(
      R"({"job_id":"j-1","team":"t","state":"failed","attempt":2,"ts_ms":"1700000000123",)"
      R"("workers":[{"rank":1,"node":"n1","gpus":[3,4]}],"exit_code":7,"reason":"boom","cause":"exit_code"})",
      42, &err);
  REQUIRE(e);
  CHECK(e->seq == 42);
  CHECK(e->attempt == 2);
  CHECK(e->ts_ms == 1700000000123);
  REQUIRE(e->workers.size() == 1);
  CHECK(e->workers[0].rank == 1);
  CHECK(e->workers[0].gpus == std::vector<int>{3, 4});
  CHECK(e->exit_code == 7);
  CHECK(e->cause == "exit_code");
  CHECK_FALSE(parse_event("not json", 1, &err));
  CHECK_FALSE(parse_event(R"({"state":"queued"})", 1, &err));
  CHECK(err == "no job_id");
  CHECK_FALSE(
      parse_event(R"({"job_id":"a","state":"running","workers":[{"gpus":["x"]}]})", 1, &err));

  auto r = audit_json({life("a", kN1G0)[0].json(), "{oops", life("a", kN1G0)[3].json()},
                      {{"a", {1, 1}}});
  CHECK(r.malformed == 1);
  CHECK(r.terminal_once == 1);
  CHECK_FALSE(r.ok());
  CHECK_THAT(r.describe(), Contains("#2: not a JSON object"));
}

TEST_CASE("fault audit: event numbers tell lost events and rewritten ones apart from re-emissions",
          "[audit]") {
  std::vector<Ev> evs = {
      {"a", "queued", 1, {}, -1000, 1},      {"a", "starting", 1, kN1G0, -1000, 2},
      {"a", "starting", 1, kN1G0, -1000, 2},  // re-emitted: fine
      {"a", "succeeded", 1, kN1G0, 0, 4},     // 3 (running) never stored
      {"b", "queued", 1, {}, -1000, 1},      {"b", "canceled", 1, {}, -1000, 2},
      {"b", "queued", 1, {}, -1000, 2}};  // number 2 rewritten
  auto r = run(evs, {{"a", {1, 1}}, {"b", {1, 1}}});
  INFO(r.describe());
  CHECK(r.seq_gaps == 1);
  CHECK(r.seq_conflicts == 1);
  CHECK_THAT(r.describe(), Contains("event number(s) 3 of 1..4 not in the stream"));
  CHECK_THAT(r.describe(), Contains("event number 2 stored as"));
  // Context only: a's figures hold; b left its terminal state (figure 1).
  CHECK(r.terminal_once == 1);
  CHECK(r.gpu_clashes == 0);
}

TEST_CASE(
    "fault audit: events are audited in the order the scheduler decided them (ts_ms), not the "
    "order a retried publish reached the stream",
    "[fault][audit]") {
  W g0 = {{0, "n1", {0}}};
  Ev a_run{"a", "running", 1, g0};
  a_run.ts = 1000;
  Ev a_done{"a", "succeeded", 1, g0, 0};
  a_done.ts = 2000;  // stored late: its first publish was lost and retried
  Ev b_start{"b", "starting", 1, g0};
  b_start.ts = 3000;
  Ev b_run{"b", "running", 1, g0};
  b_run.ts = 3001;
  Ev b_done{"b", "succeeded", 1, g0, 0};
  b_done.ts = 4000;
  std::map<std::string, JobInfo> acked = {{"a", JobInfo{1, 1}}, {"b", JobInfo{1, 1}}};
  auto in_order = run({a_run, a_done, b_start, b_run, b_done}, acked);
  auto retried = run({a_run, b_start, b_run, a_done, b_done}, acked);
  CHECK(in_order.gpu_clashes == 0);
  CHECK(retried.gpu_clashes == 0);
  // Out of order in time as well, it is a clash.
  a_done.ts = 3500;
  auto clash = run({a_run, b_start, b_run, a_done, b_done}, acked);
  CHECK(clash.gpu_clashes > 0);
}

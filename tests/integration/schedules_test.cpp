// Recurring schedules (troupe schedule ...; docs/api.md "Schedules") with a
// real nats-server, scheduler and agent: an @every schedule with
// concurrency forbid never runs two of its jobs at once (read from the
// events), and a scheduler kill -9 neither runs a tick twice nor loses the
// ticks missed while it was down (run_once: one run stands for them).
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "bus/subjects.hpp"
#include "harness.hpp"

using namespace troupe;
using namespace troupe::it;

namespace {

int64_t wall_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// The runs (job ids) of schedule `name` that ended, in the events so far.
std::set<std::string> ended_runs(const std::vector<Event>& events, const std::string& name) {
  std::set<std::string> out;
  for (const auto& e : events)
    if (e.json.value("name", "") == name &&
        (e.state == "succeeded" || e.state == "failed" || e.state == "canceled"))
      out.insert(e.job_id);
  return out;
}

// The schedule's runs as the jobs request lists them: job id -> tick label.
std::map<std::string, int64_t> runs_of(Cluster& c, const std::string& team,
                                       const std::string& name) {
  Json list = c.request(subjects::team_verb(team, subjects::kJobs), Json{{"schedule", name}});
  std::map<std::string, int64_t> out;
  for (const auto& j : list["jobs"])
    out[j.value("job_id", "")] = std::stoll(j["labels"].value("troupe.schedule.tick", "0"));
  return out;
}

Json schedule(Cluster& c, const std::string& team, Json req) {
  return c.request(subjects::team_verb(team, subjects::kSchedule), req);
}

}  // namespace

TEST_CASE(
    "schedules: @every 5s with forbid and 8-second jobs never overlaps, and the CLI creates, "
    "lists, shows, suspends and deletes",
    "[integration][schedules]") {
  Cluster c(ClusterOptions{}.node("n1", 2));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  const std::string spec = c.file("nightly.yaml");
  std::ofstream(spec) << "team: nlp\ncommand: [sleep, '8']\nresources: {gpus: 0}\n";
  RunResult made = c.run_cli(
      {"schedule", "create", "nightly", spec, "--cron", "@every 5s", "--concurrency", "forbid"});
  INFO(describe(made));
  REQUIRE(made.exit_code == 0);
  CHECK(made.out.find("concurrency    forbid") != std::string::npos);

  // Two runs ended: the tick between them fell while the first ran.
  REQUIRE(c.events().wait_for(
      [](const std::vector<Event>& ev) { return ended_runs(ev, "nightly").size() >= 2; }, 60s));
  Json shown = schedule(c, "nlp", Json{{"op", "show"}, {"name", "nightly"}});
  INFO(shown.dump());
  CHECK(shown.value("skipped_ticks", 0) >= 1);
  CHECK(shown.value("runs", 0) >= 2);
  RunResult susp = c.run_cli({"schedule", "suspend", "nightly", "--team", "nlp"});
  INFO(describe(susp));
  CHECK(susp.exit_code == 0);
  CHECK(susp.out.find("suspended") != std::string::npos);

  // No run started before the one before it ended (arrival order).
  std::vector<std::pair<size_t, size_t>> spans;  // (running, end) per run
  std::map<std::string, std::pair<size_t, size_t>> by_job;
  for (const auto& e : c.events().all()) {
    if (e.json.value("name", "") != "nightly") continue;
    auto& s = by_job[e.job_id];
    if (e.state == "starting" && s.first == 0) s.first = e.seq;
    if (e.state == "succeeded" || e.state == "failed" || e.state == "canceled") s.second = e.seq;
  }
  for (const auto& [id, s] : by_job)
    if (s.first != 0) spans.push_back(s);
  std::sort(spans.begin(), spans.end());
  INFO(c.events().describe());
  REQUIRE(spans.size() >= 2);
  for (size_t i = 1; i < spans.size(); ++i) {
    CHECK(spans[i - 1].second != 0);
    CHECK(spans[i - 1].second < spans[i].first);
  }
  // Each run is labelled with its schedule and its own tick.
  auto runs = runs_of(c, "nlp", "nightly");
  CHECK(runs.size() == by_job.size());
  std::set<int64_t> ticks;
  for (const auto& [id, tick] : runs) ticks.insert(tick);
  CHECK(ticks.size() == runs.size());
  RunResult table = c.run_cli({"jobs", "--team", "nlp", "--schedule", "nightly"});
  CHECK(table.exit_code == 0);
  CHECK(table.out.find(runs.begin()->first) != std::string::npos);

  RunResult list = c.run_cli({"schedule", "list", "--team", "nlp"});
  INFO(describe(list));
  CHECK(list.out.find("nightly") != std::string::npos);
  CHECK(list.out.find("suspended") != std::string::npos);
  // Refused: a bad cron, a taken name, an unknown zone; another team sees none.
  Json bad = schedule(c, "nlp",
                      Json{{"op", "create"},
                           {"name", "x"},
                           {"cron", "61 * * * *"},
                           {"spec", {{"command", {"true"}}}}});
  CHECK(bad.value("code", "") == "bad_request");
  Json taken = schedule(c, "nlp",
                        Json{{"op", "create"},
                             {"name", "nightly"},
                             {"cron", "@daily"},
                             {"spec", {{"command", {"true"}}}}});
  CHECK(taken.value("error", "").find("exists") != std::string::npos);
  Json zone = schedule(c, "nlp",
                       Json{{"op", "create"},
                            {"name", "y"},
                            {"cron", "@daily"},
                            {"tz", "Mars/Olympus"},
                            {"spec", {{"command", {"true"}}}}});
  CHECK(zone.value("error", "").find("tz") != std::string::npos);
  Json theirs = schedule(c, "vision", Json{{"op", "show"}, {"name", "nightly"}});
  CHECK(theirs.value("code", "") == "not_found");
  RunResult del = c.run_cli({"schedule", "delete", "nightly", "--team", "nlp"});
  CHECK(del.exit_code == 0);
  Json none = schedule(c, "nlp", Json{{"op", "list"}});
  CHECK(none["schedules"].empty());
}

TEST_CASE(
    "schedules: a scheduler kill -9 runs no tick twice and loses none (run_once: one run for the "
    "ticks missed while down)",
    "[integration][schedules][recovery]") {
  Cluster c(ClusterOptions{}.node("n1", 2));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  Json made = schedule(c, "nlp",
                       Json{{"op", "create"},
                            {"name", "often"},
                            {"cron", "@every 2s"},
                            {"spec", {{"command", {"true"}}, {"resources", {{"gpus", 0}}}}}});
  INFO(made.dump());
  REQUIRE(made.value("name", "") == "often");
  REQUIRE(c.events().wait_for(
      [](const std::vector<Event>& ev) { return ended_runs(ev, "often").size() >= 2; }, 30s));
  c.kill_scheduler();
  const int64_t killed_ms = wall_ms();
  // The downtime itself (what the test is about): three ticks fall in it.
  std::this_thread::sleep_for(6s);
  c.restart_scheduler();
  REQUIRE(c.wait_scheduler_serving(20s));
  const size_t before = ended_runs(c.events().all(), "often").size();
  REQUIRE(c.events().wait_for(
      [&](const std::vector<Event>& ev) { return ended_runs(ev, "often").size() >= before + 2; },
      30s));
  Json shown = schedule(c, "nlp", Json{{"op", "show"}, {"name", "often"}});
  INFO(shown.dump());
  CHECK(shown.value("missed_ticks", 0) >= 1);
  auto runs = runs_of(c, "nlp", "often");
  std::set<int64_t> ticks;
  for (const auto& [id, tick] : runs) ticks.insert(tick);
  CHECK(ticks.size() == runs.size());  // no tick ran twice
  // The ticks missed while down: one run stands for them (run_once).
  bool caught_up = false;
  for (int64_t t : ticks) caught_up |= t > killed_ms && t <= killed_ms + 6000 + 20000;
  CHECK(caught_up);
  // Each run's tick is a tick of the schedule: 2 s apart from its anchor.
  for (int64_t t : ticks) CHECK((t - *ticks.begin()) % 2000 == 0);
  CHECK(schedule(c, "nlp", Json{{"op", "delete"}, {"name", "often"}}).value("deleted", "") ==
        "often");
}

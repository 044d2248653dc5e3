// gateway/format: `troupe history ID` (parse_events, history_table, history_json).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gateway/format.hpp"
#include "messages/spec.hpp"

using namespace troupe;
using namespace troupe::gateway;

namespace {

constexpr int64_t kT0 = 1'717'171'717'000;

pb::JobEvent event(const std::string& state, int attempt, int64_t ts_ms) {
  pb::JobEvent e;
  e.set_job_id("j-1");
  e.set_team("vision");
  e.set_name("resnet");
  e.set_kind("training");
  e.set_state(state);
  e.set_attempt(attempt);
  e.set_ts_ms(ts_ms);
  return e;
}

void place(pb::JobEvent& e, int rank, const std::string& node, std::initializer_list<int> gpus) {
  auto* w = e.add_workers();
  w->set_rank(rank);
  w->set_node(node);
  for (int g : gpus) w->add_gpus(g);
}

// A job that fails once (exit 3), is retried and succeeds.
std::vector<pb::JobEvent> retried_job() {
  std::vector<pb::JobEvent> v;
  v.push_back(event("queued", 1, kT0));
  v.push_back(event("starting", 1, kT0 + 100));
  place(v.back(), 0, "n1", {0, 1});
  v.push_back(event("running", 1, kT0 + 250));
  place(v.back(), 0, "n1", {0, 1});
  v.push_back(event("queued", 2, kT0 + 1'300));
  v.back().set_reason("retry 1 of 1 after: exited with code 3");
  v.back().set_cause("exit_code");
  v.push_back(event("starting", 2, kT0 + 2'400));
  place(v.back(), 0, "n2", {3});
  place(v.back(), 1, "n3", {0});
  v.push_back(event("running", 2, kT0 + 2'500));
  v.push_back(event("succeeded", 2, kT0 + 3'000));
  v.back().set_exit_code(0);
  v.back().set_reason("all workers exited with code 0");
  v.back().set_cause("succeeded");
  return v;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// Whitespace-separated cells of a table row.
std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

TEST_CASE("gateway: history_table has a header and one row per event, in the given order",
          "[gateway][history]") {
  auto events = retried_job();
  auto lines = lines_of(history_table(events));
  REQUIRE(lines.size() == events.size() + 1);
  CHECK(words(lines[0]) ==
        std::vector<std::string>{"TIME", "STATE", "ATTEMPT", "NODES/GPUS", "EXIT", "REASON"});
  for (size_t i = 0; i < events.size(); ++i) {
    INFO("row " << i << ": " << lines[i + 1]);
    // The time is the local date and time with milliseconds (two words).
    CHECK(lines[i + 1].rfind(format_datetime(events[i].ts_ms(), true), 0) == 0);
    auto w = words(lines[i + 1]);
    REQUIRE(w.size() >= 6);
    CHECK(w[2] == events[i].state());
    CHECK(w[3] == std::to_string(events[i].attempt()));
    CHECK(lines[i + 1].back() != ' ');
  }
  // Columns line up: every row's STATE starts under the header's.
  auto col = lines[0].find("STATE");
  for (size_t i = 1; i < lines.size(); ++i) CHECK(lines[i].find(events[i - 1].state()) == col);
}

TEST_CASE("gateway: history_table shows placement, exit code, reason and cause",
          "[gateway][history]") {
  auto lines = lines_of(history_table(retried_job()));
  REQUIRE(lines.size() == 8);
  auto queued1 = words(lines[1]);
  CHECK(queued1[4] == "-");  // no placement
  CHECK(queued1[5] == "-");  // no exit code
  CHECK(queued1[6] == "-");  // no reason
  CHECK(queued1.size() == 7);
  CHECK(words(lines[2])[4] == "n1[0,1]");
  CHECK_THAT(lines[4], Catch::EndsWith("retry 1 of 1 after: exited with code 3 (cause exit_code)"));
  CHECK_THAT(lines[5], Catch::Contains("n2[3] n3[0]"));
  auto done = words(lines[7]);
  CHECK(done[2] == "succeeded");
  CHECK(done[5] == "0");
  // A cause equal to the state is not repeated.
  CHECK_THAT(lines[7], Catch::EndsWith("all workers exited with code 0"));
}

TEST_CASE("gateway: history_table falls back to the RFC 3339 time, and a cause without reason",
          "[gateway][history]") {
  pb::JobEvent e;
  e.set_job_id("j-2");
  e.set_state("failed");
  e.set_ts("2024-05-31T16:08:40.123Z");
  e.set_exit_code(3);
  e.set_cause("exit_code");
  auto lines = lines_of(history_table({e}));
  REQUIRE(lines.size() == 2);
  auto w = words(lines[1]);
  CHECK(w == std::vector<std::string>{"2024-05-31T16:08:40.123Z", "failed", "-", "-", "3", "(cause",
                                      "exit_code)"});
  pb::JobEvent bare;
  bare.set_state("queued");
  CHECK(words(lines_of(history_table({bare}))[1])[0] == "-");
  // No events: the header only.
  CHECK(lines_of(history_table({})).size() == 1);
}

TEST_CASE("gateway: format_datetime with milliseconds", "[gateway][history]") {
  CHECK(format_datetime(kT0 + 45, true) == format_datetime(kT0 + 45) + ".045");
  CHECK(format_datetime(kT0 + 999, true).size() == std::string("YYYY-MM-DD HH:MM:SS.mmm").size());
}

TEST_CASE("gateway: parse_events keeps stored order and leaves out what is not an event",
          "[gateway][history]") {
  auto events = retried_job();
  std::vector<std::string> raw;
  for (const auto& e : events) raw.push_back(spec::to_json(e));
  raw.insert(raw.begin() + 2, "not json");
  raw.insert(raw.begin() + 4, R"({"job_id":"j-1"})");  // no state
  raw.push_back(R"({"job_id":"j-1","state":"queued","future_field":7})");
  size_t skipped = 0;
  auto parsed = parse_events(raw, &skipped);
  CHECK(skipped == 2);
  REQUIRE(parsed.size() == events.size() + 1);
  for (size_t i = 0; i < events.size(); ++i) {
    CHECK(parsed[i].state() == events[i].state());
    CHECK(parsed[i].attempt() == events[i].attempt());
    CHECK(parsed[i].ts_ms() == events[i].ts_ms());
  }
  CHECK(parsed[3].cause() == "exit_code");
  CHECK(parsed[6].has_exit_code());
  CHECK(parse_events({}).empty());
}

TEST_CASE("gateway: history_json is a JSON array of the raw events, unchanged",
          "[gateway][history]") {
  auto events = retried_job();
  std::vector<std::string> raw;
  for (const auto& e : events) raw.push_back(spec::to_json(e));
  std::string with_noise = "  " + raw[0] + "\n";
  std::vector<std::string> input = {with_noise, "garbage", "[1,2]"};
  input.insert(input.end(), raw.begin() + 1, raw.end());
  std::string out = history_json(input);
  auto j = nlohmann::json::parse(out);
  REQUIRE(j.is_array());
  REQUIRE(j.size() == events.size());
  for (size_t i = 0; i < events.size(); ++i) CHECK(j[i] == nlohmann::json::parse(raw[i]));
  // One event per line, exactly as stored.
  auto lines = lines_of(out);
  REQUIRE(lines.size() == events.size() + 2);
  CHECK(lines.front() == "[");
  CHECK(lines.back() == "]");
  CHECK(lines[1] == raw[0] + ",");
  CHECK(lines[events.size()] == raw.back());
  CHECK(history_json({}) == "[]");
  CHECK(nlohmann::json::parse(history_json({"x"})).empty());
}

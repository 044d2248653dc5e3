// actors/policy/pages.hpp: job list pages (limit, after, state, the byte
// budget, "next") and the history reply's budget.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "actors/policy/pages.hpp"

using namespace troupe::policy;
using nlohmann::json;

namespace {

struct Job {
  std::string id;
  std::string state;
  std::string pad;  // makes the rendered object larger
};

std::vector<Job> jobs(int n, const std::string& pad = {}) {
  std::vector<Job> v;
  for (int i = 0; i < n; ++i) {
    char id[32];
    std::snprintf(id, sizeof id, "j-%04d", i);
    v.push_back({id, i % 3 == 0 ? "queued" : "running", pad});
  }
  return v;
}

Page page_of(const std::vector<Job>& v, size_t from, size_t limit, size_t max_bytes,
             const std::string& state = {}) {
  return take_page(
      v.begin() + static_cast<std::ptrdiff_t>(from), v.end(), limit, max_bytes,
      [&](const Job& j) { return state.empty() || j.state == state; },
      [](const Job& j) {
        return json{{"job_id", j.id}, {"state", j.state}, {"pad", j.pad}}.dump();
      },
      [](const Job& j) { return j.id; });
}

std::vector<std::string> ids_of(const Page& p) {
  std::vector<std::string> out;
  const json body = json::parse(p.body);
  for (const auto& j : body.at("jobs")) out.push_back(j.at("job_id"));
  return out;
}

// Index of the job after `id` in `v`.
size_t after(const std::vector<Job>& v, const std::string& id) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i].id == id) return i + 1;
  FAIL("no job " << id);
  return v.size();
}

}  // namespace

TEST_CASE("pages: a jobs request's limit, after and state", "[pages]") {
  PageRequest p;
  REQUIRE(parse_page_request(json::object(), &p).empty());
  CHECK(p.limit == kDefaultPageLimit);
  CHECK(p.after.empty());
  CHECK(p.state.empty());

  REQUIRE(parse_page_request(json{{"limit", 50}, {"after", "j-1a-000002"}, {"state", "queued"}}, &p)
              .empty());
  CHECK(p.limit == 50);
  CHECK(p.after == "j-1a-000002");
  CHECK(p.state == "queued");

  REQUIRE(parse_page_request(json{{"limit", 1000000}}, &p).empty());
  CHECK(p.limit == kMaxPageLimit);  // lowered, not refused

  for (const auto& bad :
       {json{{"limit", 0}}, json{{"limit", -3}}, json{{"limit", "ten"}}, json{{"limit", 1.5}},
        json{{"after", 7}}, json{{"after", "j-1.>"}}, json{{"state", "dreaming"}},
        json{{"state", 1}}, json{{"cluster", "c1"}}}) {
    PageRequest q;
    q.limit = 42;
    INFO(bad.dump());
    CHECK_FALSE(parse_page_request(bad, &q).empty());
    CHECK(q.limit == 42);  // left as it was
  }
}

TEST_CASE("pages: limit and next, every page after the last one's next covers each job once",
          "[pages]") {
  auto v = jobs(10);
  auto first = page_of(v, 0, 4, kMaxReplyBytes);
  CHECK(first.count == 4);
  CHECK(ids_of(first) == std::vector<std::string>{"j-0000", "j-0001", "j-0002", "j-0003"});
  CHECK(first.next == "j-0003");
  CHECK(json::parse(first.body).at("next") == "j-0003");

  std::vector<std::string> seen;
  size_t from = 0;
  int pages = 0;
  for (;;) {
    auto p = page_of(v, from, 4, kMaxReplyBytes);
    ++pages;
    for (auto& id : ids_of(p)) seen.push_back(id);
    if (p.next.empty()) {
      CHECK_FALSE(json::parse(p.body).contains("next"));
      break;
    }
    from = after(v, p.next);
  }
  CHECK(pages == 3);
  REQUIRE(seen.size() == v.size());
  for (size_t i = 0; i < v.size(); ++i) CHECK(seen[i] == v[i].id);

  // Exactly `limit` left: no next (nothing remains), not an empty last page.
  auto exact = page_of(v, 6, 4, kMaxReplyBytes);
  CHECK(exact.count == 4);
  CHECK(exact.next.empty());
}

TEST_CASE("pages: the state filter, and next only when a kept job remains", "[pages]") {
  auto v = jobs(10);  // queued: 0, 3, 6, 9
  auto p = page_of(v, 0, 2, kMaxReplyBytes, "queued");
  CHECK(ids_of(p) == std::vector<std::string>{"j-0000", "j-0003"});
  CHECK(p.next == "j-0003");
  auto q = page_of(v, after(v, p.next), 2, kMaxReplyBytes, "queued");
  CHECK(ids_of(q) == std::vector<std::string>{"j-0006", "j-0009"});
  CHECK(q.next.empty());
  // Only running jobs remain after j-0006: a queued page from there stops
  // without a next.
  auto r = page_of(v, 7, 1, kMaxReplyBytes, "queued");
  CHECK(ids_of(r) == std::vector<std::string>{"j-0009"});
  CHECK(r.next.empty());
  auto none = page_of(v, 10, 5, kMaxReplyBytes);
  CHECK(none.count == 0);
  CHECK(json::parse(none.body) == json{{"jobs", json::array()}});
}

TEST_CASE("pages: a page stops before the byte budget, and holds at least one job", "[pages]") {
  auto v = jobs(100, std::string(1000, 'x'));  // about 1 KB each
  const size_t budget = 10 * 1024;
  auto p = page_of(v, 0, 1000, budget);
  CHECK(p.body.size() <= budget);
  CHECK(p.count >= 8);
  CHECK(p.count < 11);
  CHECK(p.next == v[p.count - 1].id);
  // Pages by bytes still cover every job once.
  size_t total = 0, from = 0;
  for (;;) {
    auto q = page_of(v, from, 1000, budget);
    CHECK(q.body.size() <= budget);
    total += q.count;
    if (q.next.empty()) break;
    from = after(v, q.next);
  }
  CHECK(total == v.size());
  // One job larger than the budget alone still comes (else no reader moves on).
  auto big = page_of(v, 0, 1000, 500);
  CHECK(big.count == 1);
  CHECK(big.next == "j-0000");
}

TEST_CASE("pages: the history reply keeps the stored texts, drops the oldest past the budget",
          "[pages]") {
  std::vector<std::string> events;
  for (int i = 0; i < 20; ++i)
    events.push_back(R"({"job_id":"j-1","state":"queued","seq":")" + std::to_string(i) +
                     R"(","pad":")" + std::string(100, 'p') + "\"}");
  events.insert(events.begin() + 3, "not json");
  events.insert(events.begin() + 5, "[1,2]");

  auto whole = json::parse(history_reply("j-1", events, kMaxReplyBytes));
  CHECK(whole.at("job_id") == "j-1");
  REQUIRE(whole.at("events").size() == 20);  // the two that are not objects left out
  CHECK_FALSE(whole.contains("truncated"));
  for (int i = 0; i < 20; ++i) CHECK(whole["events"][i]["seq"] == std::to_string(i));
  // As stored: the body holds each text unchanged.
  CHECK(history_reply("j-1", events, kMaxReplyBytes).find(events[0]) != std::string::npos);

  const size_t budget = 1000;
  auto text = history_reply("j-1", events, budget);
  CHECK(text.size() <= budget);
  auto cut = json::parse(text);
  CHECK(cut.at("truncated") == true);
  auto n = cut.at("events").size();
  REQUIRE(n > 0);
  CHECK(n < 20);
  CHECK(cut["events"].back()["seq"] == "19");  // the newest are kept
  CHECK(cut["events"].front()["seq"] == std::to_string(20 - n));

  auto empty = json::parse(history_reply("j-2", {}, kMaxReplyBytes));
  CHECK(empty == json{{"job_id", "j-2"}, {"events", json::array()}});
}

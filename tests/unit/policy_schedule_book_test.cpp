// policy::schedule::Book (actors/policy/schedule_book.hpp): the schedule
// requests and records that a cluster's keeper and the front door share.
#include <catch2/catch.hpp>

#include "actors/policy/schedule_book.hpp"

using namespace troupe::policy::schedule;
using nlohmann::json;

namespace {

constexpr int64_t kNow = 1'800'000'000'000;

std::string create(const std::string& name, const std::string& cron = "@every 30s") {
  return json{{"op", "create"},
              {"name", name},
              {"cron", cron},
              {"spec", {{"command", {"true"}}, {"resources", {{"gpus", 1}}}}}}
      .dump();
}

}  // namespace

TEST_CASE("a book creates, lists, suspends, resumes and deletes a team's schedules",
          "[policy][schedules]") {
  Book b;
  auto made = b.request("t1", create("nightly"), kNow);
  REQUIRE(made.fault == Book::Fault::none);
  REQUIRE(made.put);
  CHECK(made.put->name() == "nightly");
  CHECK(made.reply.value("next_ms", int64_t{0}) == kNow + 30000);
  CHECK(b.request("t1", create("nightly"), kNow).fault == Book::Fault::bad_request);  // taken
  CHECK(b.request("t2", create("other"), kNow).fault == Book::Fault::none);
  auto list = b.request("t1", R"({"op":"list"})", kNow);
  REQUIRE(list.reply["schedules"].size() == 1);  // the team's own only
  auto off = b.request("t1", R"({"op":"suspend","name":"nightly"})", kNow);
  CHECK(off.reply.value("suspended", false));
  REQUIRE(off.put);
  CHECK(due_now(*b.find({"t1", "nightly"}), kNow + 90000).fire_tick_ms == -1);  // suspended
  auto on = b.request("t1", R"({"op":"resume","name":"nightly"})", kNow + 90000);
  REQUIRE(on.put);
  CHECK(on.put->last_tick_ms() == kNow + 90000);  // the ticks while suspended passed over
  CHECK(b.request("t2", R"({"op":"show","name":"nightly"})", kNow).fault ==
        Book::Fault::not_found);  // another team's reads as none
  auto gone = b.request("t1", R"({"op":"delete","name":"nightly"})", kNow);
  REQUIRE(gone.purged);
  CHECK(*gone.purged == Key{"t1", "nightly"});
  CHECK(b.find({"t1", "nightly"}) == nullptr);
}

TEST_CASE("a book refuses bad requests with a reason", "[policy][schedules]") {
  Book b;
  CHECK(b.request("t1", "{nope", kNow).fault == Book::Fault::bad_request);
  CHECK(b.request("t1", R"({"op":"explode"})", kNow).fault == Book::Fault::bad_request);
  auto bad = b.request("t1", create("x", "0 0 30 2 *"), kNow);  // never fires
  CHECK(bad.fault == Book::Fault::bad_request);
  CHECK(bad.error.rfind("cron: ", 0) == 0);
  CHECK(b.records().empty());
}

TEST_CASE("a tick's run: its spec carries the tick's key, its outcome is recorded",
          "[policy][schedules]") {
  Book b;
  REQUIRE(b.request("t1", create("every"), kNow).put);
  auto& r = *b.find({"t1", "every"});
  auto d = due_now(r, kNow + 65000);  // two ticks due: one run, one missed
  REQUIRE(d.fire_tick_ms == kNow + 60000);
  CHECK(run_spec(r, d.fire_tick_ms).idempotency_key() == run_id("t1", "every", kNow + 60000));
  record_run(r, d.fire_tick_ms, d.missed, "j-1", "");
  CHECK(r.runs() == 1);
  CHECK(r.last_run() == "j-1");
  CHECK(r.missed_ticks() == 1);
  record_run(r, kNow + 90000, 0, "", "over quota");
  CHECK(r.runs() == 1);
  CHECK(r.last_error() == "over quota");
  pass_over(r, due_now(r, kNow + 125000), true);
  CHECK(r.skipped_ticks() == 1);
  CHECK(r.last_tick_ms() == kNow + 120000);
}

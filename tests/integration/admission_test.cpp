// Admission limits against real processes (docs/admission.md): a team that
// floods the submit subject is refused with rate_limited / too_many_queued
// while another team's job still gets the next free GPU; hostile specs are
// refused at submit with stable codes; a job no registered node could ever
// hold is refused unsatisfiable; an idempotency key reused with another spec
// is a conflict.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bus/subjects.hpp"
#include "harness.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"
#include "messages/wire.hpp"

using namespace troupe;
using namespace troupe::it;

namespace {

int64_t ts_of(const Event& e) {
  const Json& v = e.json.contains("ts_ms") ? e.json["ts_ms"] : Json();
  if (v.is_string()) return std::stoll(v.get<std::string>());
  return v.is_number() ? v.get<int64_t>() : 0;
}

// A simulated worker that "runs" `seconds`.
Json sim_job(const std::string& team, double seconds, int gpus = 1) {
  Json j = job_spec(team, {"simulated-work"}, gpus);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", seconds);
  j["env"] = {{"TROUPE_SIM_DURATION_S", buf}};
  return j;
}

// Replies to many submissions in flight, counted by code ("" = accepted).
class ReplyCounter {
 public:
  explicit ReplyCounter(bus::Connection& conn) : inbox_(conn.new_inbox()) {
    sub_ = conn.subscribe(inbox_ + ".*", [this](Inbound&& in) {
      Json j = Json::parse(in.data.begin(), in.data.end(), nullptr, false);
      std::string code = j.is_object() && j.contains("job_id") ? std::string()
                         : j.is_object() ? j.value("code", std::string("(no code)"))
                                         : std::string("(not JSON)");
      std::lock_guard<std::mutex> lock(mu_);
      ++by_code_[code];
      if (!code.empty() && examples_.count(code) == 0) examples_[code] = j.value("error", "");
      ++total_;
      cv_.notify_all();
    });
  }
  std::string reply_to(size_t i) const { return inbox_ + "." + std::to_string(i); }
  bool wait_total(size_t n, Clock::duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return total_ >= n; });
  }
  std::map<std::string, size_t> by_code() const {
    std::lock_guard<std::mutex> lock(mu_);
    return by_code_;
  }
  std::map<std::string, std::string> examples() const {
    std::lock_guard<std::mutex> lock(mu_);
    return examples_;
  }
  size_t total() const {
    std::lock_guard<std::mutex> lock(mu_);
    return total_;
  }

 private:
  std::string inbox_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, size_t> by_code_;
  std::map<std::string, std::string> examples_;
  size_t total_ = 0;
  bus::SubscriptionPtr sub_;
};

std::string describe(const std::map<std::string, size_t>& m) {
  std::string s;
  for (const auto& [k, v] : m) s += (k.empty() ? "accepted" : k) + "=" + std::to_string(v) + " ";
  return s;
}

// Submits and expects a refusal with `code`; returns the error text.
std::string refused(Cluster& c, const std::string& team, const Json& spec,
                    const std::string& code) {
  Json r = c.submit_json(team, spec);
  INFO("reply: " << r.dump().substr(0, 400));
  CHECK_FALSE(r.contains("job_id"));
  CHECK(r.value("code", "") == code);
  return r.value("error", "");
}

}  // namespace

TEST_CASE("admission: a flooding team is rate limited while another team's job starts at once",
          "[integration][admission]") {
  const std::string cfg = R"(
pools: [{name: a100, gpu_type: a100}]
teams:
  - {name: flood, limits: {submit_rate: 200, submit_burst: 200, max_queued_jobs: 1000}}
  - {name: calm}
)";
  ClusterOptions o = ClusterOptions{}.with_config(cfg);
  o.node("n1", 4, true).node("n2", 4, true);
  Cluster c(o);
  REQUIRE(c.wait_nodes_alive(2, 20s));

  constexpr size_t kFlood = 50'000;
  ReplyCounter replies(c.conn());
  const std::string body = sim_job("flood", 0.5).dump();
  const auto subject = subjects::team_submit("flood");
  auto t0 = Clock::now();
  std::string calm_id;
  int64_t calm_submit_ms = 0;
  for (size_t i = 0; i < kFlood; ++i) {
    REQUIRE(c.conn().publish(subject, body, replies.reply_to(i)));
    if (i == kFlood / 2) {
      // In the middle of the flood: another team's job.
      calm_submit_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
      Json r = c.submit_json("calm", sim_job("calm", 30.0));
      INFO("calm's submit: " << r.dump());
      REQUIRE(r.contains("job_id"));
      calm_id = r["job_id"].get<std::string>();
    }
  }
  double publish_s = std::chrono::duration<double>(Clock::now() - t0).count();
  bool all = replies.wait_total(kFlood, 60s);
  auto codes = replies.by_code();
  INFO("published " << kFlood << " in " << publish_s << " s; replies: " << describe(codes));
  for (const auto& [code, text] : replies.examples()) INFO(code << ": " << text);
  CHECK(all);
  size_t limited = codes["rate_limited"] + codes["too_many_queued"];
  CHECK(limited >= kFlood * 9 / 10);  // most are refused
  CHECK(codes["rate_limited"] > 0);
  // Accepted: the burst plus the rate for as long as the flood lasted, and
  // never more than the queue limit beyond what has started.
  CHECK(codes[""] >= 200);
  CHECK(codes[""] <= 200 + static_cast<size_t>(200 * (publish_s + 5)));
  CHECK(codes.size() <= 3);  // accepted, rate_limited, too_many_queued: nothing else

  // calm's job runs within 2 s of the first GPU freed after its submission.
  auto running = c.events().wait_state(calm_id, std::string(names::kRunning), 30s);
  INFO(c.events().describe(calm_id));
  REQUIRE(running);
  auto queued = c.events().wait_state(calm_id, std::string(names::kQueued), 1s);
  REQUIRE(queued);
  int64_t since = std::max(ts_of(*queued), calm_submit_ms);
  int64_t freed = 0;  // the first end of another job after calm's job was queued
  for (const auto& e : c.events().all())
    if (e.job_id != calm_id && names::is_terminal(e.state) && ts_of(e) >= since &&
        (freed == 0 || ts_of(e) < freed))
      freed = ts_of(e);
  int64_t from = (freed == 0 || ts_of(*running) < freed) ? since : freed;
  INFO("calm queued at " << since << ", first GPU freed at " << freed << ", running at "
                         << ts_of(*running));
  CHECK(ts_of(*running) - from <= 2000);
  WARN("flood: " << kFlood << " published in " << publish_s << " s; replies " << describe(codes)
                 << "; calm running " << ts_of(*running) - from << " ms after a GPU was free ("
                 << ts_of(*running) - calm_submit_ms << " ms after its submit)");

  // The counters say the same (troupe.sys.stats).
  Json stats = c.request(subjects::kSysStats, Json::object());
  INFO(stats.dump());
  REQUIRE(stats.contains("refused"));
  CHECK(stats["refused"].value("rate_limited", int64_t{0}) ==
        static_cast<int64_t>(codes["rate_limited"]));
  CHECK(stats["refused"].value("too_many_queued", int64_t{0}) ==
        static_cast<int64_t>(codes["too_many_queued"]));
  CHECK(stats["refused"].contains("unsatisfiable"));  // every code, 0 when none
  CHECK(stats["refused_by_team"]["flood"].value("rate_limited", int64_t{0}) ==
        static_cast<int64_t>(codes["rate_limited"]));
  CHECK_FALSE(stats["refused_by_team"].contains("calm"));
}

TEST_CASE(
    "admission: a team's flood of requests is rate limited, and another team's requests are "
    "still answered",
    "[integration][admission]") {
  const std::string cfg = R"(
pools: [{name: a100, gpu_type: a100}]
teams:
  - {name: flood, limits: {request_rate: 5, request_burst: 10}}
  - {name: calm}
)";
  ClusterOptions o = ClusterOptions{}.with_config(cfg);
  o.node("n1", 2, true);
  Cluster c(o);
  REQUIRE(c.wait_nodes_alive(1, 20s));
  // Submissions are not requests: they have their own rate.
  Json own = c.submit_json("flood", sim_job("flood", 600.0));
  REQUIRE(own.contains("job_id"));
  const std::string id = own["job_id"].get<std::string>();
  Json theirs = c.submit_json("calm", sim_job("calm", 600.0));
  REQUIRE(theirs.contains("job_id"));
  const std::string calm_id = theirs["job_id"].get<std::string>();

  constexpr size_t kFlood = 2000;
  ReplyCounter replies(c.conn());
  const std::string body = Json{{"job_id", id}}.dump();
  auto t0 = Clock::now();
  for (size_t i = 0; i < kFlood; ++i) {
    REQUIRE(c.conn().publish(subjects::team_status("flood"), body, replies.reply_to(i)));
    if (i == kFlood / 2) {
      // In the middle of the flood, calm is answered as ever.
      Json st = c.status("calm", calm_id);
      INFO("calm's status: " << st.dump());
      CHECK(st.value("job_id", "") == calm_id);
    }
  }
  bool all = replies.wait_total(kFlood, 30s);
  double flood_s = std::chrono::duration<double>(Clock::now() - t0).count();
  auto codes = replies.by_code();
  INFO("replies: " << describe(codes) << "in " << flood_s << " s");
  for (const auto& [code, text] : replies.examples()) INFO(code << ": " << text);
  CHECK(all);
  CHECK(codes.size() == 2);  // answered, rate_limited: nothing else
  // Answered: the burst and the rate for as long as the flood lasted.
  CHECK(codes[""] >= 10);
  CHECK(codes[""] <= 10 + static_cast<size_t>(5 * (flood_s + 1)));
  CHECK(codes["rate_limited"] == kFlood - codes[""]);
  const std::string why = replies.examples()["rate_limited"];
  CHECK_THAT(why, Catch::Contains("request_rate 5/s") && Catch::Contains("request_burst 10") &&
                      Catch::Contains("flood"));
  // Counted, by team.
  Json stats = c.request(subjects::kSysStats, Json::object());
  INFO(stats.dump().substr(0, 2000));
  CHECK(stats.value("requests_rate_limited", int64_t{0}) ==
        static_cast<int64_t>(codes["rate_limited"]));
  CHECK(stats["requests_rate_limited_by_team"].value("flood", int64_t{0}) ==
        static_cast<int64_t>(codes["rate_limited"]));
  CHECK_FALSE(stats["requests_rate_limited_by_team"].contains("calm"));
  // The CLI asks again while it is refused for the rate: with flood's
  // bucket kept empty for 2 s (its first ask is all but surely refused),
  // `troupe status` still ends with the job.
  std::thread drain([&] {
    for (auto until = Clock::now() + 2s; Clock::now() < until;) {
      c.conn().publish(subjects::team_status("flood"), body);
      std::this_thread::sleep_for(2ms);  // about 500 a second, 100 times the rate
    }
  });
  RunResult cli = c.run_cli({"status", id, "--team", "flood"}, 30s);
  drain.join();
  INFO(describe(cli));
  CHECK(cli.exit_code == 0);
  CHECK_THAT(cli.out, Catch::Contains(id));
  // The bucket refills: flood is answered again (5 a second).
  Json again;
  for (auto deadline = Clock::now() + 5s; Clock::now() < deadline;) {
    again = c.status("flood", id);
    if (again.contains("job_id")) break;
    std::this_thread::sleep_for(100ms);  // asks again; each ask is one of its 5 a second
  }
  INFO(again.dump());
  CHECK(again.value("job_id", "") == id);
}

TEST_CASE("admission: hostile specs, unsatisfiable jobs and idempotency conflicts are refused",
          "[integration][admission]") {
  const std::string cfg = R"(
pools: [{name: a100, gpu_type: a100}, {name: h100, gpu_type: h100}]
teams: [{name: t}, {name: few, limits: {max_queued_jobs: 3}}]
)";
  ClusterOptions o = ClusterOptions{}.with_config(cfg);
  o.node("n1", 4, true).node("n2", 4, true);
  Cluster c(o);
  REQUIRE(c.wait_nodes_alive(2, 20s));

  {  // 60,000 env entries: too_large at submit
    Json s = sim_job("t", 0.1);
    for (int i = 0; i < 60000; ++i) s["env"]["K" + std::to_string(i)] = "v";
    auto text = refused(c, "t", s, "too_large");
    CHECK_THAT(text, Catch::Contains("60001 entries (limit max_env_entries 256)"));
  }

  {  // 1,024 workers x 64 GPUs, max_runtime_s 2^63-1, max_retries 2^31-1: refused
    Json all = sim_job("t", 0.1, 64);
    all["workers"] = 1024;
    all["max_runtime_s"] = "9223372036854775807";
    all["max_retries"] = 2147483647;
    refused(c, "t", all, "invalid_spec");
    Json gang = sim_job("t", 0.1, 64);
    gang["workers"] = 1024;
    CHECK_THAT(refused(c, "t", gang, "invalid_spec"),
               Catch::Contains("65536 GPUs (1024 workers x 64); limit max_gpus_per_job 32768"));
    Json runtime = sim_job("t", 0.1);
    runtime["max_runtime_s"] = "9223372036854775807";
    CHECK_THAT(refused(c, "t", runtime, "invalid_spec"),
               Catch::Contains("max_runtime_s 9223372036854775807 is more than 2592000"));
    Json retries = sim_job("t", 0.1);
    retries["max_retries"] = 2147483647;
    CHECK_THAT(refused(c, "t", retries, "invalid_spec"),
               Catch::Contains("max_retries 2147483647 is more than 100"));
  }

  {  // 16 GPUs per worker on 4-GPU nodes: unsatisfiable; a pool with no node: queued
    Json big = sim_job("t", 0.1, 16);
    big["resources"]["gpu_type"] = "a100";
    CHECK_THAT(refused(c, "t", big, "unsatisfiable"),
               Catch::Contains("needs 16 GPUs per worker; the largest node of pool a100 "
                               "(GPU type a100) has 4"));
    Json later = sim_job("t", 0.1, 16);
    later["pool"] = "h100";
    auto id = c.submit_ok("t", later);
    REQUIRE(c.events().wait_state(id, std::string(names::kQueued), 10s));
    Json st = c.status("t", id);
    CHECK(st.value("state", "") == "queued");
  }

  {  // max_queued_jobs 3: a fourth waiting job is refused until one leaves the queue
    Json waits = sim_job("few", 0.1, 1);
    waits["pool"] = "h100";  // no node: they stay queued
    std::vector<std::string> ids;
    for (int i = 0; i < 3; ++i) ids.push_back(c.submit_ok("few", waits));
    CHECK_THAT(refused(c, "few", waits, "too_many_queued"),
               Catch::Contains("3 jobs queued (limit max_queued_jobs 3)"));
    Json cancel = c.cancel("few", ids[0]);
    INFO(cancel.dump());
    REQUIRE(c.events().wait_state(ids[0], std::string(names::kCanceled), 10s));
    // The router hears it from the job supervisor: wait for the reply to change.
    std::string id4;
    auto deadline = Clock::now() + 10s;
    while (id4.empty() && Clock::now() < deadline) {
      Json r = c.submit_json("few", waits);
      if (r.contains("job_id"))
        id4 = r["job_id"].get<std::string>();
      else
        REQUIRE(r.value("code", "") == "too_many_queued");
    }
    CHECK_FALSE(id4.empty());
    // Three queued again: the next one is refused, whatever its pool.
    Json runs = sim_job("few", 0.2, 1);
    runs["pool"] = "a100";
    CHECK_THAT(refused(c, "few", runs, "too_many_queued"), Catch::Contains("max_queued_jobs 3"));
  }

  {  // the same idempotency key: the same job, or a conflict for another spec
    Json a = sim_job("t", 0.1);
    a["resources"]["gpu_type"] = "a100";  // two pools: name one
    a["idempotency_key"] = "run-7";
    auto id = c.submit_ok("t", a);
    CHECK(c.submit_ok("t", a) == id);
    Json b = a;
    b["command"] = {"simulated-work", "--other"};
    CHECK_THAT(refused(c, "t", b, "idempotency_conflict"), Catch::Contains("run-7"));
    // A FlatBuffers submission gets the code in its SubmitReply.
    pb::JobSpec pbs;
    REQUIRE(spec::parse_json(b.dump(), pbs).empty());
    flatbuffers::FlatBufferBuilder fbb;
    auto bytes = wire::seal(fbb, wire::CreateSubmitRequest(fbb, spec::to_wire(fbb, pbs)));
    auto raw = c.request_raw(subjects::team_submit("t"), bytes);
    REQUIRE(raw);
    const wire::Envelope* env = wire::open(*raw);
    REQUIRE(env != nullptr);
    const auto* r = env->body_as_SubmitReply();
    REQUIRE(r != nullptr);
    CHECK(wire::str(r->code()) == "idempotency_conflict");
    CHECK(wire::str(r->job_id()).empty());
    // The first spec again, and it is still that job.
    CHECK(c.submit_ok("t", a) == id);
  }
}

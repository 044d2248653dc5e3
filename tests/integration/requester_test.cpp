// bus::Requester against a real nats-server: many requests out at once on
// one connection, each answered with its own reply; no responders and
// timeouts told once each.
#include "bus/requester.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "harness.hpp"

using namespace troupe;
using namespace troupe::it;
using namespace std::chrono_literals;

namespace {

// What came back, by request number.
struct Answers {
  std::mutex mu;
  std::condition_variable cv;
  std::map<int, std::vector<std::string>> got;  // n -> each answer (reply, or "error: ...")
  size_t count = 0;

  bus::Requester::Done on(int n) {
    return [this, n](std::optional<std::vector<uint8_t>> r, const std::string& error) {
      std::lock_guard<std::mutex> lock(mu);
      got[n].push_back(r ? std::string(r->begin(), r->end()) : "error: " + error);
      ++count;
      cv.notify_all();
    };
  }
  bool wait(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return count >= n; });
  }
  // One more request, waited for (5 s): what came back for it so far.
  std::vector<std::string> ask(bus::Requester& r, const std::string& subject, int timeout_ms) {
    const int n = static_cast<int>(count);
    r.request(subject, "x", timeout_ms, on(n));
    REQUIRE(wait(static_cast<size_t>(n) + 1, std::chrono::seconds(5)));
    std::lock_guard<std::mutex> lock(mu);
    return got[n];
  }
};

}  // namespace

TEST_CASE(
    "bus::Requester: 3,000 requests out at once each get their own answer, once, and "
    "no responders and timeouts are told",
    "[integration][bus]") {
  ClusterOptions o;
  o.scheduler = false;
  o.secure = false;
  o.tls = false;
  Cluster c(o);
  std::string err;
  auto responder = c.connect_as("", &err);
  INFO(err);
  REQUIRE(responder);
  auto conn = c.connect_as("", &err);
  REQUIRE(conn);
  // Echoes "re:<body>" on test.echo; test.late answers only its 2nd request
  // (the 1st times out).
  std::mutex held_mu;
  std::vector<troupe::Inbound> held;
  auto echo = responder->subscribe("test.echo", [&](troupe::Inbound&& in) {
    responder->publish(in.reply, "re:" + std::string(in.data.begin(), in.data.end()));
  });
  auto late = responder->subscribe("test.late", [&](troupe::Inbound&& in) {
    std::lock_guard<std::mutex> lock(held_mu);
    held.push_back(std::move(in));
  });
  REQUIRE(echo);
  REQUIRE(late);
  REQUIRE(responder->flush());
  auto requester = bus::Requester::open(*conn, &err);
  INFO(err);
  REQUIRE(requester);

  Answers a;
  const int n = 3000;
  for (int i = 0; i < n; ++i)
    requester->request("test.echo", "m" + std::to_string(i), 10000, a.on(i));
  REQUIRE(a.wait(n, 30s));
  {
    std::lock_guard<std::mutex> lock(a.mu);
    REQUIRE(a.got.size() == static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      REQUIRE(a.got[i].size() == 1);
      REQUIRE(a.got[i][0] == "re:m" + std::to_string(i));
    }
  }
  CHECK(requester->out() == 0);

  SECTION("no responders: told at once (one server), not as a timeout") {
    Answers b;
    CHECK(b.ask(*requester, "test.nobody", 10000) ==
          std::vector<std::string>{"error: no responders on test.nobody"});
  }
  SECTION("a request not answered in its time is told so once; a late reply is dropped") {
    Answers b;
    CHECK(b.ask(*requester, "test.late", 300) ==
          std::vector<std::string>{"error: request on test.late timed out"});
    // Answered now, after its time: nothing more comes to it; the next
    // request is answered (after the late reply: the same responder).
    {
      std::lock_guard<std::mutex> lock(held_mu);
      REQUIRE(held.size() == 1);
      responder->publish(held[0].reply, "too late");
    }
    CHECK(b.ask(*requester, "test.echo", 10000) == std::vector<std::string>{"re:x"});
    std::lock_guard<std::mutex> lock(b.mu);
    CHECK(b.got[0].size() == 1);
    CHECK(requester->out() == 0);
  }
  SECTION("requests out when the requester goes are dropped: no callback runs after") {
    Answers b;
    requester->request("test.late", "never", 10000, b.on(0));
    CHECK(requester->out() == 1);
    requester.reset();
    std::lock_guard<std::mutex> lock(b.mu);
    CHECK(b.count == 0);
  }
}

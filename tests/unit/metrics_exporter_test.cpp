// The shared exporter loop (actors/metrics/exporter.hpp): gauge rows a
// complete sample no longer sets go, an incomplete sample removes none; the
// polling thread samples until stop_polling() and never after; a bad address
// is an error. Loopback, port 0; no NATS.
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>

#include "actors/metrics/exporter.hpp"
#include "actors/metrics/model.hpp"

using namespace troupe::metrics;

namespace {

SeriesInfo gauge_info(const std::string& name) {
  SeriesInfo s;
  s.name = name;
  s.help = "test gauge";
  return s;
}

// The "gpu" label of every row of family `name` in the registry.
std::set<std::string> rows_of(Exporter& ex, const std::string& name) {
  std::set<std::string> out;
  for (const auto& fam : ex.registry().Collect()) {
    if (fam.name != name) continue;
    for (const auto& m : fam.metric)
      for (const auto& l : m.label)
        if (l.name == "gpu") out.insert(l.value);
  }
  return out;
}

}  // namespace

TEST_CASE("exporter: rows a complete sample does not set again go", "[metrics]") {
  std::string err;
  auto ex = Exporter::start("127.0.0.1:0", 1, &err);
  INFO(err);
  REQUIRE(ex);
  auto& g = ex->gauge(gauge_info("test_rows"));
  GaugeRows rows;
  rows.set(g, {{"gpu", "0"}}, 1);
  rows.set(g, {{"gpu", "1"}}, 2);
  rows.end_sample(true);
  CHECK(rows_of(*ex, "test_rows") == std::set<std::string>{"0", "1"});

  rows.set(g, {{"gpu", "1"}}, 3);
  rows.end_sample(false);  // could not measure: nothing goes
  CHECK(rows_of(*ex, "test_rows") == std::set<std::string>{"0", "1"});

  rows.set(g, {{"gpu", "2"}}, 4);
  rows.end_sample(true);  // 0 and 1 were set by samples before, not by this one
  CHECK(rows_of(*ex, "test_rows") == std::set<std::string>{"2"});

  rows.end_sample(true);
  CHECK(rows_of(*ex, "test_rows").empty());
}

TEST_CASE("exporter: the polling thread samples until stopped", "[metrics]") {
  std::string err;
  auto ex = Exporter::start("127.0.0.1:0", 1, &err);
  REQUIRE(ex);
  REQUIRE(ex->port() > 0);
  CHECK(ex->url() == "http://127.0.0.1:" + std::to_string(ex->port()) + "/metrics");
  auto& g = ex->gauge(gauge_info("test_polled"));

  std::mutex mu;
  std::condition_variable cv;
  int samples = 0;
  ex->poll_every(std::chrono::milliseconds(1), [&](GaugeRows& rows) {
    std::lock_guard<std::mutex> l(mu);
    rows.set(g, {{"gpu", std::to_string(samples)}}, 1);
    ++samples;
    cv.notify_all();
    return true;
  });
  {
    std::unique_lock<std::mutex> l(mu);
    REQUIRE(cv.wait_for(l, std::chrono::seconds(10), [&] { return samples >= 3; }));
  }
  ex->stop_polling();
  int after = 0;
  {
    std::lock_guard<std::mutex> l(mu);
    after = samples;
  }
  // Only the last sample's row is left, and no sample runs any more.
  CHECK(rows_of(*ex, "test_polled") == std::set<std::string>{std::to_string(after - 1)});
  ex->stop_polling();
  std::lock_guard<std::mutex> l(mu);
  CHECK(samples == after);
}

TEST_CASE("exporter: a bad or taken address is an error", "[metrics]") {
  std::string err;
  CHECK_FALSE(Exporter::start("no-port", 1, &err));
  CHECK(err == "--metrics wants HOST:PORT, got 'no-port'");
  auto first = Exporter::start("127.0.0.1:0", 1, &err);
  REQUIRE(first);
  err.clear();
  CHECK_FALSE(Exporter::start("127.0.0.1:" + std::to_string(first->port()), 1, &err));
  CHECK(err.rfind("cannot serve metrics on 127.0.0.1:", 0) == 0);
}

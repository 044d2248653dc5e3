// The shared exporter loop (actors/metrics/exporter.hpp): gauge rows a
// complete sample no longer sets go, an incomplete sample removes none; the
// polling thread samples until stop_polling() and never after; a bad address
// is an error; a scrape holds Troupe's families only (none of prometheus-cpp's
// exposer_*), and no NaN. Loopback, port 0; no NATS.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "actors/metrics/exporter.hpp"
#include "actors/metrics/model.hpp"
#include "scrape.hpp"

using namespace troupe::metrics;

namespace {

using troupe::testing::scrape;

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

// The series names of a text-format body: of each sample line, and of each
// # HELP / # TYPE line.
std::vector<std::string> names_in(const std::string& body) {
  std::vector<std::string> out;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) line = line.substr(7);
    out.push_back(line.substr(0, line.find_first_of("{ ")));
  }
  return out;
}

}  // namespace

TEST_CASE("exporter: a scrape holds Troupe's series only, and no NaN", "[metrics]") {
  std::string err;
  auto ex = Exporter::start("127.0.0.1:0", 1, &err);
  INFO(err);
  REQUIRE(ex);
  // Every family both daemons export, each with one row; histograms and
  // counters left at zero, as before the first observation.
  for (const auto* table : {&scheduler_series(), &node_series(), &dispatch_series()})
    for (const auto& s : *table) {
      prometheus::Labels l;
      for (const auto& name : s.labels) l[name] = "x";
      if (s.type == Type::kGauge)
        ex->gauge(s).Add(l).Set(1);
      else if (s.type == Type::kCounter)
        ex->counter(s).Add(l);
      else
        ex->histogram(s).Add(l, prometheus::Histogram::BucketBoundaries(s.buckets));
    }
  // Scraped twice: the second scrape is the one a server that counts its own
  // scrapes (prometheus-cpp's Exposer) would add its exposer_* series to.
  scrape(ex->port());
  auto resp = scrape(ex->port());
  REQUIRE(resp.rfind("HTTP/1.1 200", 0) == 0);
  auto head_end = resp.find("\r\n\r\n");
  REQUIRE(head_end != std::string::npos);
  CHECK_THAT(resp.substr(0, head_end), Catch::Contains("Content-Type: text/plain; version=0.0.4"));
  auto body = resp.substr(head_end + 4);
  INFO(body);
  CHECK(body.find("NaN") == std::string::npos);
  CHECK(body.find("exposer_") == std::string::npos);
  auto names = names_in(body);
  CHECK(names.size() > 100);
  std::set<std::string> families;
  for (const auto& n : names) {
    INFO(n);
    CHECK(n.rfind("troupe_", 0) == 0);
    families.insert(n);
  }
  CHECK(families.count("troupe_queue_wait_seconds_bucket") == 1);
  CHECK(families.count("troupe_node_gpu_allocated") == 1);
}

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

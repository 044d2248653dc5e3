// NodeMetrics serves what the agent bumps on /metrics (loopback, port 0; no
// NATS, no processes), exports no utilisation series without nvidia-smi but
// which GPUs workers hold either way; its pure parts read nvidia-smi rows,
// follow GPU holders through Launch / Exited / Heartbeat and name a worker's
// exit cause.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "messages/wire.hpp"
#include "node/agent_messages.hpp"
#include "node/metrics.hpp"
#include "scrape.hpp"

namespace {

using troupe::testing::scrape;

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

}  // namespace

TEST_CASE("node metrics: counters and gauges on /metrics", "[metrics]") {
  troupe::metrics::NodeMetrics::Options o;
  o.bind = "127.0.0.1:0";
  o.node = "n1";
  o.nvidia_smi = "/nonexistent/nvidia-smi";
  std::string err;
  auto m = troupe::metrics::NodeMetrics::start(o, &err);
  INFO(err);
  REQUIRE(m);
  REQUIRE(m->port() > 0);
  CHECK(m->url() == "http://127.0.0.1:" + std::to_string(m->port()) + "/metrics");
  m->worker_launched();
  m->worker_launched();
  m->set_running(1);
  m->heartbeat_sent();
  m->worker_exited(3, 0, "exited with code 3");
  m->worker_exited(-1, 9, "stopped");

  auto text = scrape(m->port());
  INFO(text);
  CHECK(text.rfind("HTTP/1.", 0) == 0);
  CHECK(has_line(text, "troupe_node_workers_launched_total{node=\"n1\"} 2"));
  CHECK(has_line(text, "troupe_node_workers_running{node=\"n1\"} 1"));
  CHECK(has_line(text, "troupe_node_heartbeats_sent_total{node=\"n1\"} 1"));
  CHECK(has_line(text, "troupe_node_workers_exited_total{cause=\"exit_code\",node=\"n1\"} 1"));
  CHECK(has_line(text, "troupe_node_workers_exited_total{cause=\"stopped\",node=\"n1\"} 1"));
  CHECK(has_line(text, "troupe_node_gpu_probe_up{node=\"n1\"} 0"));
  CHECK(text.find("troupe_node_gpu_utilization_ratio{") == std::string::npos);
}

TEST_CASE("node metrics: the agent's own counts, read from their source", "[metrics]") {
  troupe::metrics::NodeMetrics::Options o;
  o.bind = "127.0.0.1:0";
  o.node = "n1";
  o.nvidia_smi = "/nonexistent/nvidia-smi";  // no GPU: the counts are read all the same
  o.gpu_poll_ms = 20;
  std::string err;
  auto m = troupe::metrics::NodeMetrics::start(o, &err);
  INFO(err);
  REQUIRE(m);
  std::mutex mu;
  troupe::metrics::NodeMetrics::Counts counts = {{"bad_messages", 3}, {"fenced", 0}};
  auto read = [&] {
    std::lock_guard<std::mutex> l(mu);
    return counts;
  };
  m->count_from(read);
  auto shows = [&](const std::vector<std::string>& lines) {
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
         std::chrono::steady_clock::now() < until;) {
      const auto text = scrape(m->port());
      bool all = true;
      for (const auto& l : lines) all = all && has_line(text, l);
      if (all) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polled: read every 20 ms
    }
    return false;
  };
  CHECK(shows({"troupe_node_agent_events_total{event=\"bad_messages\",node=\"n1\"} 3",
               "troupe_node_agent_events_total{event=\"fenced\",node=\"n1\"} 0"}));
  {
    std::lock_guard<std::mutex> l(mu);
    counts = {{"bad_messages", 5}, {"fenced", 1}};
  }
  CHECK(shows({"troupe_node_agent_events_total{event=\"bad_messages\",node=\"n1\"} 5",
               "troupe_node_agent_events_total{event=\"fenced\",node=\"n1\"} 1"}));
  // A total that went down (a counter never does) leaves the series as it is.
  {
    std::lock_guard<std::mutex> l(mu);
    counts = {{"bad_messages", 2}, {"fenced", 2}};
  }
  CHECK(shows({"troupe_node_agent_events_total{event=\"bad_messages\",node=\"n1\"} 5",
               "troupe_node_agent_events_total{event=\"fenced\",node=\"n1\"} 2"}));
  m->count_from(nullptr);  // before `counts` goes
}

TEST_CASE("node metrics: a bad or taken address is an error, not a crash", "[metrics]") {
  std::string err;
  CHECK_FALSE(troupe::metrics::NodeMetrics::start({"no-port", "n1"}, &err));
  CHECK(err.find("HOST:PORT") != std::string::npos);
  auto first = troupe::metrics::NodeMetrics::start({"127.0.0.1:0", "n1", "/nonexistent"}, &err);
  REQUIRE(first);
  err.clear();
  auto second = troupe::metrics::NodeMetrics::start(
      {"127.0.0.1:" + std::to_string(first->port()), "n2", "/nonexistent"}, &err);
  CHECK_FALSE(second);
  CHECK_FALSE(err.empty());
}

TEST_CASE("node metrics: nvidia-smi rows", "[metrics]") {
  using troupe::metrics::parse_nvidia_smi;
  // As nvidia-smi --query-gpu=index,utilization.gpu,memory.used,memory.total
  // --format=csv,noheader,nounits prints them: an 8x H100 node busy on two
  // GPUs, then a GPU whose utilisation the driver does not report (MIG mode).
  const std::string h100 =
      "0, 100, 79537, 81559\n"
      "1, 97, 79537, 81559\n"
      "2, 0, 4, 81559\n"
      "3, 0, 4, 81559\n"
      "4, 0, 4, 81559\n"
      "5, 0, 4, 81559\n"
      "6, 0, 4, 81559\n"
      "7, 0, 4, 81559\n";
  auto rows = parse_nvidia_smi(h100);
  REQUIRE(rows.size() == 8);
  CHECK(rows[0].gpu == "0");
  CHECK(rows[0].utilization == Approx(1.0));
  CHECK(rows[0].memory_used_bytes == Approx(79537.0 * 1024 * 1024));
  CHECK(rows[0].memory_total_bytes == Approx(81559.0 * 1024 * 1024));
  CHECK(rows[1].utilization == Approx(0.97));
  CHECK(rows[7].gpu == "7");
  CHECK(rows[7].utilization == Approx(0.0));
  CHECK(rows[7].memory_used_bytes == Approx(4.0 * 1024 * 1024));

  auto mig = parse_nvidia_smi("0, [N/A], 12345, 81920\r\n1, [Not Supported], [N/A], 16384\r\n");
  REQUIRE(mig.size() == 2);
  CHECK_FALSE(mig[0].utilization);
  CHECK(mig[0].memory_used_bytes == Approx(12345.0 * 1024 * 1024));
  CHECK(mig[0].memory_total_bytes == Approx(81920.0 * 1024 * 1024));
  CHECK_FALSE(mig[1].utilization);
  CHECK_FALSE(mig[1].memory_used_bytes);
  CHECK(mig[1].memory_total_bytes == Approx(16384.0 * 1024 * 1024));

  // Blank lines, a header, an error message, short and long rows, bad numbers.
  auto mixed = parse_nvidia_smi(
      "\n   \n"
      "index, utilization.gpu [%], memory.used [MiB], memory.total [MiB]\n"
      "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
      "0, 87, 40000\n"
      "0, 87, 40000, 81920, 5\n"
      "x, 87, 40000, 81920\n"
      "-1, 87, 40000, 81920\n"
      "2, 250, -5, nan\n"
      "3, 12abc, 1e400, inf\n"
      "4, 50.5, 1024, 2048\n");
  REQUIRE(mixed.size() == 3);
  CHECK(mixed[0].gpu == "2");
  CHECK_FALSE(mixed[0].utilization);  // above 100 %
  CHECK_FALSE(mixed[0].memory_used_bytes);
  CHECK_FALSE(mixed[0].memory_total_bytes);
  CHECK(mixed[1].gpu == "3");
  CHECK_FALSE(mixed[1].utilization);
  CHECK_FALSE(mixed[1].memory_used_bytes);
  CHECK_FALSE(mixed[1].memory_total_bytes);
  CHECK(mixed[2].gpu == "4");
  CHECK(mixed[2].utilization == Approx(0.505));
  CHECK(mixed[2].memory_total_bytes == Approx(2048.0 * 1024 * 1024));

  CHECK(parse_nvidia_smi("").empty());
  CHECK(parse_nvidia_smi("garbage").empty());
  CHECK(parse_nvidia_smi(std::string("0, 1, 2, 3\0\n", 12)).size() == 1);
}

TEST_CASE("node metrics: GPU holders follow Launch, Exited and heartbeats", "[metrics]") {
  using troupe::metrics::GpuHolders;
  using troupe::metrics::WorkerId;
  GpuHolders h;
  CHECK(h.held().empty());
  h.launched({"j1", 1, 0}, {0, 1});
  h.launched({"j2", 1, 0}, {2});
  h.launched({"s1", 1, 0}, {3});  // two shared workers on GPU 3
  h.launched({"s2", 1, 0}, {3});
  CHECK(h.held() == std::set<int>{0, 1, 2, 3});
  h.exited({"j1", 1, 0});
  h.exited({"s1", 1, 0});
  CHECK(h.held() == std::set<int>{2, 3});
  h.exited({"j2", 2, 0});  // another attempt: not this worker
  CHECK(h.held() == std::set<int>{2, 3});

  // A heartbeat that misses a worker once keeps it (it may have been built
  // before the agent took the Launch); twice in a row, it goes.
  h.heartbeat({{"s2", 1, 0}});
  CHECK(h.held() == std::set<int>{2, 3});
  h.heartbeat({{"s2", 1, 0}, {"j2", 1, 0}});
  h.heartbeat({{"s2", 1, 0}});
  CHECK(h.held() == std::set<int>{2, 3});
  h.heartbeat({{"s2", 1, 0}});
  CHECK(h.held() == std::set<int>{3});
  CHECK(h.workers() == 1);
  h.heartbeat({});
  h.heartbeat({});
  CHECK(h.held().empty());
}

TEST_CASE("node metrics: troupe_node_gpu_allocated from the agent's messages", "[metrics]") {
  troupe::metrics::NodeMetrics::Options o;
  o.bind = "127.0.0.1:0";
  o.node = "n1";
  o.nvidia_smi = "/nonexistent/nvidia-smi";
  o.gpus = {0, 1, 2};
  std::string err;
  auto m = troupe::metrics::NodeMetrics::start(o, &err);
  INFO(err);
  REQUIRE(m);
  auto text = scrape(m->port());
  CHECK(has_line(text, "troupe_node_gpu_allocated{gpu=\"0\",node=\"n1\"} 0"));
  CHECK(has_line(text, "troupe_node_gpu_allocated{gpu=\"2\",node=\"n1\"} 0"));

  troupe::wire::LaunchFields l;
  l.job_id = "j1";
  l.team = "vision";
  l.gpus = {1, 2};
  l.command = {"true"};
  auto launch = troupe::wire::launch(l);
  m->observe(launch.data(), launch.size());
  m->observe("not an envelope", 15);
  text = scrape(m->port());
  INFO(text);
  CHECK(has_line(text, "troupe_node_gpu_allocated{gpu=\"0\",node=\"n1\"} 0"));
  CHECK(has_line(text, "troupe_node_gpu_allocated{gpu=\"1\",node=\"n1\"} 1"));
  CHECK(has_line(text, "troupe_node_gpu_allocated{gpu=\"2\",node=\"n1\"} 1"));

  auto beat = troupe::node::make_heartbeat("n1", 1, {{"j1", 1, 0}});
  m->observe(beat.data(), beat.size());
  text = scrape(m->port());
  CHECK(has_line(text, "troupe_node_gpu_allocated{gpu=\"1\",node=\"n1\"} 1"));

  auto done = troupe::wire::exited("n1", "j1", 1, 0, 0, 0, "exited with code 0");
  m->observe(done.data(), done.size());
  text = scrape(m->port());
  CHECK(has_line(text, "troupe_node_gpu_allocated{gpu=\"1\",node=\"n1\"} 0"));
  CHECK(has_line(text, "troupe_node_gpu_allocated{gpu=\"2\",node=\"n1\"} 0"));
  // Never utilisation without nvidia-smi.
  CHECK(text.find("troupe_node_gpu_utilization_ratio{") == std::string::npos);
}

TEST_CASE("node metrics: utilisation and memory from a fake nvidia-smi", "[metrics]") {
  // A stand-in for nvidia-smi that prints what the real one prints on a
  // two-GPU node, one of whose utilisation is not reported.
  std::string smi = "/tmp/troupe-fake-nvidia-smi-" + std::to_string(::getpid());
  {
    std::ofstream f(smi);
    f << "#!/bin/sh\nprintf '0, 42, 1024, 81559\\n1, [N/A], 2048, 81559\\n'\n";
  }
  REQUIRE(::chmod(smi.c_str(), 0755) == 0);
  troupe::metrics::NodeMetrics::Options o;
  o.bind = "127.0.0.1:0";
  o.node = "n1";
  o.nvidia_smi = smi;
  o.gpu_poll_ms = 50;
  std::string err;
  auto m = troupe::metrics::NodeMetrics::start(o, &err);
  INFO(err);
  REQUIRE(m);
  std::string text;
  for (int i = 0; i < 200; ++i) {
    text = scrape(m->port());
    if (has_line(text, "troupe_node_gpu_probe_up{node=\"n1\"} 1")) break;
    ::usleep(20000);
  }
  ::unlink(smi.c_str());
  INFO(text);
  CHECK(has_line(text, "troupe_node_gpu_probe_up{node=\"n1\"} 1"));
  CHECK(has_line(text, "troupe_node_gpu_utilization_ratio{gpu=\"0\",node=\"n1\"} 0.42"));
  CHECK(text.find("troupe_node_gpu_utilization_ratio{gpu=\"1\"") == std::string::npos);
  CHECK(has_line(text, "troupe_node_gpu_memory_used_bytes{gpu=\"1\",node=\"n1\"} 2147483648"));
  CHECK(has_line(text, "troupe_node_gpu_memory_total_bytes{gpu=\"0\",node=\"n1\"} 85520809984"));
}

TEST_CASE("node metrics: worker exit causes", "[metrics]") {
  using troupe::metrics::worker_exit_cause;
  CHECK(worker_exit_cause(0, 0, "exited with code 0") == "succeeded");
  CHECK(worker_exit_cause(3, 0, "exited with code 3") == "exit_code");
  CHECK(worker_exit_cause(-1, 9, "killed by signal 9") == "signal");
  CHECK(worker_exit_cause(-1, 9, "stopped") == "stopped");
  CHECK(worker_exit_cause(-1, 9, "exceeded max_runtime_s") == "max_runtime");
  CHECK(worker_exit_cause(-1, 0, "launch failed: ENOENT") == "launch_failed");
  CHECK(worker_exit_cause(-1, 0, "") == "other");
}

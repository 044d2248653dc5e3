// NodeMetrics serves what the agent bumps on /metrics (loopback, port 0; no
// NATS, no processes), and exports no GPU series without nvidia-smi; its
// pure parts read nvidia-smi rows and name a worker's exit cause.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "node/metrics.hpp"

namespace {

// GET /metrics over HTTP/1.0 on 127.0.0.1:port; the whole response ("" on failure).
std::string scrape(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string resp;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    std::string req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
      char buf[8192];
      ssize_t n;
      while ((n = recv(fd, buf, sizeof buf, 0)) > 0) resp.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return resp;
}

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

TEST_CASE("node metrics: nvidia-smi rows and worker exit causes", "[metrics]") {
  using troupe::metrics::parse_nvidia_smi;
  using troupe::metrics::worker_exit_cause;
  auto rows = parse_nvidia_smi("0, 87, 40000, 81920\n1, [N/A], 0, 81920\n2, 3, 1024, 81920\n\n");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].gpu == "0");
  CHECK(rows[0].utilization == Approx(0.87));
  CHECK(rows[0].memory_used_bytes == Approx(40000.0 * 1024 * 1024));
  CHECK(rows[0].memory_total_bytes == Approx(81920.0 * 1024 * 1024));
  CHECK(rows[1].gpu == "2");
  CHECK(parse_nvidia_smi("").empty());
  CHECK(parse_nvidia_smi("garbage").empty());

  CHECK(worker_exit_cause(0, 0, "exited with code 0") == "succeeded");
  CHECK(worker_exit_cause(3, 0, "exited with code 3") == "exit_code");
  CHECK(worker_exit_cause(-1, 9, "killed by signal 9") == "signal");
  CHECK(worker_exit_cause(-1, 9, "stopped") == "stopped");
  CHECK(worker_exit_cause(-1, 9, "exceeded max_runtime_s") == "max_runtime");
  CHECK(worker_exit_cause(-1, 0, "launch failed: ENOENT") == "launch_failed");
  CHECK(worker_exit_cause(-1, 0, "") == "other");
}

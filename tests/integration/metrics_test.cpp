// Acceptance of the metrics: a cluster of real processes with
// `troupe-scheduler --metrics 127.0.0.1:0`, scraped every second by Debian's
// real Prometheus server (/usr/bin/prometheus, 2.42); the test asks
// Prometheus's HTTP API (/api/v1/query, plain HTTP over a socket) that the series are there and
// their values make sense for the jobs it ran. Each scrape of the scheduler
// and of a node agent also passes Debian's `promtool check metrics` without a
// word, holds only troupe_* series and no NaN.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bus/subjects.hpp"
#include "harness.hpp"
#include "messages/names.hpp"

using namespace troupe::it;

namespace {

const char* kPrometheus = "/usr/bin/prometheus";
const char* kPromtool = "/usr/bin/promtool";

// The series the issue asks for (scheduler_series() in actors/metrics/model.hpp
// holds them all; this list is checked independently of it).
const std::vector<std::string> kRequired = {"troupe_gpus_capacity",
                                            "troupe_gpus_allocated",
                                            "troupe_gpus_reserved",
                                            "troupe_gpus_free",
                                            "troupe_gpus_held_idle",
                                            "troupe_gpus_fragmented",
                                            "troupe_gpu_allocation_ratio",
                                            "troupe_nodes",
                                            "troupe_workers_running",
                                            "troupe_queue_jobs",
                                            "troupe_queue_pending_gpus",
                                            "troupe_queue_flexible_jobs",
                                            "troupe_team_gpus_in_use",
                                            "troupe_team_gpus_borrowed",
                                            "troupe_team_gpus_guaranteed",
                                            "troupe_team_weight",
                                            "troupe_team_dominant_share",
                                            "troupe_team_weighted_share",
                                            "troupe_reserved_idle_gpu_seconds_total",
                                            "troupe_grants_total",
                                            "troupe_submissions_total",
                                            "troupe_bus_messages_total",
                                            "troupe_bus_malformed_messages_total",
                                            "troupe_actor_restarts_total",
                                            "troupe_queue_wait_seconds_bucket",
                                            "troupe_queue_wait_seconds_count",
                                            "troupe_queue_wait_seconds_sum",
                                            "troupe_placement_latency_seconds_bucket",
                                            "troupe_placement_latency_seconds_count",
                                            "troupe_jobs_finished_total",
                                            "troupe_job_attempts_ended_total",
                                            "troupe_job_success_ratio",
                                            "troupe_preemptions_total",
                                            "troupe_preemption_lost_gpu_seconds_total",
                                            "troupe_metrics_events_total",
                                            "troupe_metrics_poll_errors_total"};

// One HTTP/1.0 GET to 127.0.0.1:port (the server closes the connection after
// the reply, so the body is everything after the headers); nullopt unless 200.
std::optional<std::string> http_get(int port, const std::string& target) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return std::nullopt;
  std::unique_ptr<int, void (*)(int*)> guard(&fd, [](int* f) { close(*f); });
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return std::nullopt;
  std::string req = "GET " + target + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size()))
    return std::nullopt;
  std::string resp;
  char buf[8192];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) resp.append(buf, static_cast<size_t>(n));
  auto head_end = resp.find("\r\n\r\n");
  if (resp.compare(0, 12, "HTTP/1.0 200") != 0 && resp.compare(0, 12, "HTTP/1.1 200") != 0)
    return std::nullopt;
  if (head_end == std::string::npos) return std::nullopt;
  return resp.substr(head_end + 4);
}

std::string url_encode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// Prometheus's HTTP API on one port.
class PromApi {
 public:
  explicit PromApi(int port) : port_(port) {}
  // The instant vector of `q` ({"metric":{...},"value":[ts,"v"]} items); nullopt on error.
  std::optional<Json> query(const std::string& q) {
    auto body = http_get(port_, "/api/v1/query?query=" + url_encode(q));
    if (!body) return std::nullopt;
    auto j = Json::parse(*body, nullptr, false);
    if (j.is_discarded() || j.value("status", "") != "success") return std::nullopt;
    return j["data"]["result"];
  }
  // The single value of a scalar-valued query (a vector of one element).
  std::optional<double> value(const std::string& q) {
    auto r = query(q);
    if (!r || !r->is_array() || r->size() != 1) return std::nullopt;
    return std::stod((*r)[0]["value"][1].get<std::string>());
  }
  bool ready() { return http_get(port_, "/-/ready").has_value(); }

 private:
  int port_;
};

// Waits until `q` has exactly one value satisfying `ok`; returns the last value seen.
std::optional<double> wait_value(PromApi& api, const std::string& q,
                                 const std::function<bool(double)>& ok, Clock::duration timeout) {
  auto deadline = Clock::now() + timeout;
  std::optional<double> v;
  while (Clock::now() < deadline) {
    v = api.value(q);
    if (v && ok(*v)) return v;
    std::this_thread::sleep_for(250ms);
  }
  return v;
}

// What `promtool check metrics` says of a scrape: its exit status and all it
// printed (stdout and stderr; lint problems go to stderr).
struct Lint {
  int rc = -1;
  std::string output;
};
Lint promtool_check(const std::string& body, TmpDir& tmp, const std::string& name) {
  std::string in = tmp.file(name + ".prom"), out = tmp.file(name + ".promtool");
  std::ofstream(in) << body;
  std::string cmd = std::string(kPromtool) + " check metrics < '" + in + "' > '" + out + "' 2>&1";
  int st = std::system(cmd.c_str());
  Lint l;
  l.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  l.output = read_file(out);
  return l;
}

// A scrape holds only troupe_* series (no prometheus-cpp exposer_*), no NaN,
// and promtool has nothing to say about it.
void check_scrape(const std::string& body, TmpDir& tmp, const std::string& name) {
  INFO(name << " scrape:\n" << body);
  CHECK_FALSE(body.empty());
  CHECK(body.find("NaN") == std::string::npos);
  std::istringstream lines(body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) line = line.substr(7);
    INFO(line);
    CHECK(line.rfind("troupe_", 0) == 0);
  }
  auto lint = promtool_check(body, tmp, name);
  INFO("promtool check metrics: " << lint.output);
  CHECK(lint.rc == 0);
  CHECK(lint.output.empty());
}

// The metrics port the scheduler logged ("metrics on http://127.0.0.1:PORT/metrics").
int metrics_port(Cluster& c, Clock::duration timeout) {
  static const std::regex re(R"(metrics on http://127\.0\.0\.1:([0-9]+)/metrics)");
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    std::smatch m;
    std::string err = read_file(c.scheduler().err_path());
    if (std::regex_search(err, m, re)) return std::stoi(m[1].str());
    std::this_thread::sleep_for(100ms);
  }
  return 0;
}

}  // namespace

TEST_CASE("metrics: a real Prometheus scrapes the scheduler's series", "[integration][metrics]") {
  INFO("the Prometheus server is a Debian package: scripts/setup.sh installs it");
  REQUIRE(access(kPrometheus, X_OK) == 0);

  TmpDir tmp("troupe-metrics");
  std::string config = tmp.file("cluster.yaml");
  std::ofstream(config)
      << "pools: [{name: a100, gpu_type: a100}]\n"
         "teams:\n"
         "  - {name: vision, weight: 2, borrow: true, quotas: {a100: {guaranteed: 4, limit: 8}}}\n"
         "  - {name: nlp, weight: 1, borrow: true, quotas: {a100: {guaranteed: 4, limit: 8}}}\n";
  ClusterOptions opts;
  opts.node("n1").node("n2");
  opts.scheduler_args = {"--config", config, "--metrics", "127.0.0.1:0"};
  Cluster c(opts);
  REQUIRE(c.wait_nodes_alive(2, 20s));
  int port = metrics_port(c, 10s);
  REQUIRE(port > 0);
  INFO("promtool is part of Debian's prometheus package: scripts/setup.sh installs it");
  REQUIRE(access(kPromtool, X_OK) == 0);
  // Before anything was observed (histograms empty, no job finished).
  auto first = http_get(port, "/metrics");
  REQUIRE(first);
  check_scrape(*first, tmp, "scheduler-first");

  // Prometheus, scraping the scheduler every second.
  int prom_port = free_port();
  std::string prom_yml = tmp.file("prom.yml");
  std::ofstream(prom_yml) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                             "scrape_configs:\n  - job_name: troupe\n    static_configs:\n"
                             "      - targets: ['127.0.0.1:"
                          << port << "']\n";
  Process prom("prometheus",
               {kPrometheus, "--config.file=" + prom_yml, "--storage.tsdb.path=" + tmp.file("data"),
                "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)},
               tmp.file("prometheus.out"), tmp.file("prometheus.err"));
  c.dump().add("prometheus stderr", tmp.file("prometheus.err"));
  PromApi api(prom_port);
  auto deadline = Clock::now() + 30s;
  while (!api.ready() && Clock::now() < deadline && prom.running())
    std::this_thread::sleep_for(200ms);
  REQUIRE(api.ready());

  // Capacity: 2 agents x 4 a100.
  CHECK(wait_value(
            api, "sum(troupe_gpus_capacity)", [](double v) { return v == 8; }, 30s) == 8.0);
  CHECK(wait_value(
            api, "troupe_gpus_capacity{pool=\"a100\",gpu_type=\"a100\"}",
            [](double v) { return v == 8; }, 10s) == 8.0);
  CHECK(wait_value(
            api, "troupe_nodes{state=\"alive\"}", [](double v) { return v == 2; }, 10s) == 2.0);
  CHECK(wait_value(
            api, "troupe_team_weight{team=\"vision\",pool=\"a100\"}",
            [](double v) { return v == 2; }, 10s) == 2.0);

  // A long 4-GPU job: half the cluster is allocated while it runs.
  auto long_job = c.submit_ok("nlp", job_spec("nlp", {"sleep", "60"}, 4));
  REQUIRE(c.events().wait_state(long_job, "running", 30s));
  CHECK(wait_value(
            api, "sum(troupe_gpus_allocated)", [](double v) { return v == 4; }, 20s) == 4.0);
  CHECK(wait_value(
            api, "troupe_gpu_allocation_ratio", [](double v) { return v == 0.5; }, 20s) == 0.5);
  CHECK(wait_value(
            api, "sum(troupe_team_gpus_in_use{team=\"nlp\"})", [](double v) { return v == 4; },
            20s) == 4.0);

  // One job fails with exit code 3 (first, so that nlp never holds more than
  // its guarantee), then four plain jobs and a 2x2 gang succeed.
  auto failing = c.submit_ok("nlp", job_spec("nlp", {"sh", "-c", "exit 3"}, 1));
  REQUIRE(c.wait_terminal(failing, 60s));
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i)
    ids.push_back(c.submit_ok("vision", job_spec("vision", {"sh", "-c", "sleep 0.3"}, 1)));
  ids.push_back(c.submit_ok("vision", job_spec("vision", {"true"}, 2, 2)));
  for (const auto& id : ids) {
    INFO(c.events().describe(id));
    REQUIRE(c.wait_terminal(id, 60s));
  }
  CHECK(c.cancel("nlp", long_job).value("state", "") == "canceling");
  REQUIRE(c.wait_terminal(long_job, 30s));
  // Garbage on a submit subject is counted as malformed.
  c.request_text("troupe.vision.submit", "this is not a job spec");

  auto eq = [](double want) { return [want](double v) { return std::fabs(v - want) < 1e-6; }; };
  CHECK(wait_value(api, "sum(troupe_jobs_finished_total{state=\"succeeded\"})", eq(5), 30s) == 5.0);
  CHECK(wait_value(api, "sum(troupe_jobs_finished_total{state=\"failed\",cause=\"exit_code\"})",
                   eq(1), 10s) == 1.0);
  CHECK(wait_value(api, "sum(troupe_jobs_finished_total{state=\"canceled\",cause=\"canceled\"})",
                   eq(1), 10s) == 1.0);
  CHECK(wait_value(api, "troupe_job_success_ratio", eq(5.0 / 6.0), 10s) == Approx(5.0 / 6.0));
  // Each of the 7 jobs was queued, placed and ran once.
  CHECK(wait_value(api, "sum(troupe_queue_wait_seconds_count)", eq(7), 10s) == 7.0);
  CHECK(wait_value(api, "sum(troupe_placement_latency_seconds_count)", eq(7), 10s) == 7.0);
  CHECK(wait_value(api, "sum(troupe_queue_wait_seconds_count{team=\"vision\",kind=\"training\"})",
                   eq(5), 10s) == 5.0);
  CHECK(wait_value(api, "troupe_submissions_total{result=\"accepted\"}", eq(7), 10s) == 7.0);
  CHECK(wait_value(
            api, "troupe_bus_malformed_messages_total", [](double v) { return v >= 1; }, 10s) >=
        1.0);
  // Everything ended: nothing allocated, nothing queued.
  CHECK(wait_value(api, "troupe_gpu_allocation_ratio", eq(0), 20s) == 0.0);
  CHECK(wait_value(api, "sum(troupe_queue_jobs)", eq(0), 10s) == 0.0);

  // Sensible values across the board.
  auto wait_mean =
      api.value("sum(troupe_queue_wait_seconds_sum) / sum(troupe_queue_wait_seconds_count)");
  REQUIRE(wait_mean);
  CHECK(*wait_mean >= 0);
  CHECK(*wait_mean < 30);
  auto lat_mean = api.value(
      "sum(troupe_placement_latency_seconds_sum) / sum(troupe_placement_latency_seconds_count)");
  REQUIRE(lat_mean);
  CHECK(*lat_mean >= 0);
  CHECK(*lat_mean < 30);
  // The +Inf bucket holds every observation.
  CHECK(api.value("sum(troupe_placement_latency_seconds_bucket{le=\"+Inf\"})") == 7.0);
  // Each team stayed within its guarantee, so nothing was preempted.
  CHECK(api.value("troupe_preemptions_total") == 0.0);
  CHECK(api.value("troupe_preemption_lost_gpu_seconds_total") == 0.0);
  CHECK(api.value("sum(troupe_gpus_fragmented)") == 0.0);  // nothing pending
  auto ratio = api.value("max_over_time(troupe_gpu_allocation_ratio[5m])");
  REQUIRE(ratio);
  CHECK(*ratio >= 0.5);
  CHECK(*ratio <= 1.0);
  CHECK(api.value("sum(troupe_metrics_events_total{result=\"malformed\"})") == 0.0);

  // Every required series is in Prometheus.
  auto names = api.query("count by (__name__) ({__name__=~\"troupe_.+\"})");
  REQUIRE(names);
  std::set<std::string> present;
  for (const auto& r : *names) present.insert(r["metric"]["__name__"].get<std::string>());
  for (const auto& n : kRequired) {
    INFO(n);
    CHECK(present.count(n) == 1);
  }
  // The scrape itself is healthy.
  CHECK(api.value("up{job=\"troupe\"}") == 1.0);
  // After the jobs: every family has rows.
  auto last = http_get(port, "/metrics");
  REQUIRE(last);
  CHECK_THAT(*last, Catch::Contains("troupe_queue_wait_seconds_bucket{"));
  check_scrape(*last, tmp, "scheduler-last");
  prom.stop(5s);
}

TEST_CASE("metrics: the node agent serves its own /metrics", "[integration][metrics]") {
  ClusterOptions opts;
  opts.node_args("n1", 2, true, "a100", {"--metrics", "127.0.0.1:0"});
  Cluster c(opts);
  REQUIRE(c.wait_nodes_alive(1, 20s));
  // The port the agent logged.
  static const std::regex re(R"(metrics on http://127\.0\.0\.1:([0-9]+)/metrics)");
  int port = 0;
  for (auto deadline = Clock::now() + 10s; Clock::now() < deadline && port == 0;) {
    std::smatch m;
    std::string err = read_file(c.node(0).err_path());
    if (std::regex_search(err, m, re))
      port = std::stoi(m[1].str());
    else
      std::this_thread::sleep_for(100ms);
  }
  REQUIRE(port > 0);
  INFO("promtool is part of Debian's prometheus package: scripts/setup.sh installs it");
  REQUIRE(access(kPromtool, X_OK) == 0);
  TmpDir tmp("troupe-node-metrics");
  auto first = http_get(port, "/metrics");
  REQUIRE(first);
  check_scrape(*first, tmp, "node-first");
  Json spec = {{"command", {"true"}},
               {"resources", {{"gpus", 1}}},
               {"env", {{"TROUPE_SIM_DURATION_S", "0.1"}}}};
  auto id = c.submit_ok("t", spec);
  auto done = c.wait_terminal(id, 20s);
  REQUIRE(done);
  // The exit is counted once the agent has published it (which the
  // scheduler's terminal event follows).
  auto body = http_get(port, "/metrics");
  REQUIRE(body);
  CHECK_THAT(*body, Catch::Contains("troupe_node_workers_launched_total{node=\"n1\"} 1"));
  CHECK_THAT(*body, Catch::Contains(
                        "troupe_node_workers_exited_total{cause=\"succeeded\",node=\"n1\"} 1"));
  CHECK_THAT(*body, Catch::Contains("troupe_node_heartbeats_sent_total{node=\"n1\"}"));
  check_scrape(*body, tmp, "node-last");
  // Per GPU: 0 while free, 1 while a worker holds it (from its Launch).
  CHECK_THAT(*first, Catch::Contains("troupe_node_gpu_allocated{gpu=\"0\",node=\"n1\"} 0"));
  CHECK_THAT(*first, Catch::Contains("troupe_node_gpu_allocated{gpu=\"1\",node=\"n1\"} 0"));
  spec["env"] = {{"TROUPE_SIM_DURATION_S", "300"}};
  auto held = c.submit_ok("t", spec);
  auto running = c.events().wait_state(held, std::string(troupe::names::kRunning), 20s);
  REQUIRE(running);
  REQUIRE(running->json.contains("workers"));
  const int gpu = running->json["workers"][0]["gpus"][0].get<int>();
  auto during = http_get(port, "/metrics");
  REQUIRE(during);
  CHECK_THAT(*during, Catch::Contains("troupe_node_gpu_allocated{gpu=\"" + std::to_string(gpu) +
                                      "\",node=\"n1\"} 1"));
  CHECK_THAT(*during, Catch::Contains("troupe_node_gpu_allocated{gpu=\"" + std::to_string(1 - gpu) +
                                      "\",node=\"n1\"} 0"));
  c.cancel("t", held);
  // What the agent counts itself: a malformed message on its subject is
  // dropped and counted (read every 5 s, the agent's default).
  const std::string junk = "not a flatbuffer";
  namespace sj = troupe::subjects;
  REQUIRE(c.conn().publish(sj::scheduler_to_agent("n1", sj::kLaunch), junk));
  bool counted = false;
  for (auto deadline = Clock::now() + 20s; !counted && Clock::now() < deadline;) {
    auto now = http_get(port, "/metrics");
    counted = now && now->find(
                         "troupe_node_agent_events_total{event=\"bad_messages\",node=\"n1\"} "
                         "1\n") != std::string::npos;
    if (!counted) std::this_thread::sleep_for(250ms);  // polled: the agent's counts are sampled
  }
  CHECK(counted);
}

// NodeMetrics (see metrics.hpp): the agent's families, and its nvidia-smi
// sample on the shared exporter loop (actors/metrics/exporter.hpp).
#include "node/metrics.hpp"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>

#include "actors/metrics/exporter.hpp"
#include "actors/metrics/model.hpp"

namespace troupe::metrics {

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  size_t e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

bool to_double(const std::string& s, double* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  return end != s.c_str() && *end == '\0';
}

// Full path of `prog` on PATH ("" when absent); a path with '/' is taken as is.
std::string find_program(const std::string& prog) {
  if (prog.find('/') != std::string::npos) return access(prog.c_str(), X_OK) == 0 ? prog : "";
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    std::string p = (dir.empty() ? "." : dir) + "/" + prog;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// Runs a command, returning its stdout; nullopt when it could not run or failed.
std::optional<std::string> run_capture(const std::string& cmd) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  if (!pipe) return std::nullopt;
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe.get())) > 0) out.append(buf.data(), n);
  int rc = pclose(pipe.release());
  if (rc != 0) return std::nullopt;
  return out;
}

}  // namespace

std::vector<GpuUse> parse_nvidia_smi(const std::string& csv) {
  std::vector<GpuUse> out;
  std::stringstream lines(csv);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string> f;
    std::stringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, ',')) f.push_back(trim(cell));
    if (f.size() < 4 || f[0].empty()) continue;
    GpuUse g;
    double util = 0, used = 0, total = 0;
    if (!to_double(f[1], &util) || !to_double(f[2], &used) || !to_double(f[3], &total)) continue;
    g.gpu = f[0];
    g.utilization = util / 100.0;
    g.memory_used_bytes = used * 1024 * 1024;
    g.memory_total_bytes = total * 1024 * 1024;
    out.push_back(g);
  }
  return out;
}

std::string worker_exit_cause(int exit_code, int signal, const std::string& reason) {
  if (reason.rfind("stopped", 0) == 0)
    return "stopped";  // also "stopped: the node agent is shutting down"
  if (reason.rfind("exceeded max_runtime", 0) == 0) return "max_runtime";
  if (reason.rfind("launch failed", 0) == 0) return "launch_failed";
  if (signal > 0) return "signal";
  if (exit_code == 0) return "succeeded";
  if (exit_code > 0) return "exit_code";
  return "other";
}

struct NodeMetrics::Impl {
  Options opts;
  std::unique_ptr<Exporter> exporter;
  prometheus::Family<prometheus::Counter>* launched = nullptr;
  prometheus::Family<prometheus::Gauge>* running = nullptr;
  prometheus::Family<prometheus::Counter>* exited = nullptr;
  prometheus::Family<prometheus::Counter>* heartbeats = nullptr;
  prometheus::Family<prometheus::Gauge>* probe_up = nullptr;
  prometheus::Family<prometheus::Gauge>* util = nullptr;
  prometheus::Family<prometheus::Gauge>* mem_used = nullptr;
  prometheus::Family<prometheus::Gauge>* mem_total = nullptr;
  std::string smi;  // full path of nvidia-smi ("" when absent)

  // The sampler reads the fields above: it stops before they go.
  ~Impl() {
    if (exporter) exporter->stop_polling();
  }

  prometheus::Labels node() const { return {{"node", opts.node}}; }
  prometheus::Labels gpu(const std::string& g) const { return {{"node", opts.node}, {"gpu", g}}; }

  void build() {
    auto fam = [&](const char* name) { return *find_series(node_series(), name); };
    launched = &exporter->counter(fam("troupe_node_workers_launched_total"));
    running = &exporter->gauge(fam("troupe_node_workers_running"));
    exited = &exporter->counter(fam("troupe_node_workers_exited_total"));
    heartbeats = &exporter->counter(fam("troupe_node_heartbeats_sent_total"));
    probe_up = &exporter->gauge(fam("troupe_node_gpu_probe_up"));
    util = &exporter->gauge(fam("troupe_node_gpu_utilization_ratio"));
    mem_used = &exporter->gauge(fam("troupe_node_gpu_memory_used_bytes"));
    mem_total = &exporter->gauge(fam("troupe_node_gpu_memory_total_bytes"));
    launched->Add(node());
    running->Add(node());
    heartbeats->Add(node());
    probe_up->Add(node());
  }

  // One sample on the exporter's polling thread: a GPU nvidia-smi no longer
  // lists loses its rows.
  bool sample_gpus(GaugeRows& rows) {
    auto out = run_capture(smi +
                           " --query-gpu=index,utilization.gpu,memory.used,memory.total"
                           " --format=csv,noheader,nounits 2>/dev/null");
    auto found = out ? parse_nvidia_smi(*out) : std::vector<GpuUse>{};
    probe_up->Add(node()).Set(out && !found.empty() ? 1 : 0);
    for (const auto& g : found) {
      rows.set(*util, gpu(g.gpu), g.utilization);
      rows.set(*mem_used, gpu(g.gpu), g.memory_used_bytes);
      rows.set(*mem_total, gpu(g.gpu), g.memory_total_bytes);
    }
    return true;
  }
};

NodeMetrics::NodeMetrics(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NodeMetrics::~NodeMetrics() = default;

std::unique_ptr<NodeMetrics> NodeMetrics::start(const Options& opts, std::string* error) {
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  impl->exporter = Exporter::start(opts.bind, 1, error);
  if (!impl->exporter) return nullptr;
  impl->build();
  impl->smi = find_program(opts.nvidia_smi);
  if (!impl->smi.empty()) {
    Impl* raw = impl.get();
    impl->exporter->poll_every(std::chrono::milliseconds(opts.gpu_poll_ms),
                               [raw](GaugeRows& rows) { return raw->sample_gpus(rows); });
  }
  return std::make_unique<NodeMetrics>(std::move(impl));
}

void NodeMetrics::worker_launched() {
  impl_->launched->Add(impl_->node()).Increment();
}

void NodeMetrics::worker_exited(int exit_code, int signal, const std::string& reason) {
  auto l = impl_->node();
  l["cause"] = worker_exit_cause(exit_code, signal, reason);
  impl_->exited->Add(l).Increment();
}

void NodeMetrics::set_running(int workers) {
  impl_->running->Add(impl_->node()).Set(workers);
}

void NodeMetrics::heartbeat_sent() {
  impl_->heartbeats->Add(impl_->node()).Increment();
}

int NodeMetrics::port() const {
  return impl_->exporter->port();
}

std::string NodeMetrics::url() const {
  return impl_->exporter->url();
}

}  // namespace troupe::metrics

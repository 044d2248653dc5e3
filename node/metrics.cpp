// NodeMetrics (see metrics.hpp): the agent's families, and its nvidia-smi
// sample on the shared exporter loop (actors/metrics/exporter.hpp).
#include "node/metrics.hpp"

#include <unistd.h>

#include <array>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <sstream>

#include "actors/metrics/exporter.hpp"
#include "actors/metrics/model.hpp"
#include "messages/wire.hpp"

namespace troupe::metrics {

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  size_t e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// A finite number in [0, max]; nullopt for "[N/A]", "[Not Supported]", garbage.
std::optional<double> number(const std::string& s, double max) {
  if (s.empty() || !(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.'))
    return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || !std::isfinite(v) || v < 0 || v > max)
    return std::nullopt;
  return v;
}

bool all_digits(const std::string& s) {
  if (s.empty() || s.size() > 4) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
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
    if (f.size() != 4 || !all_digits(f[0])) continue;
    constexpr double kMiB = 1024.0 * 1024.0;
    constexpr double kMaxMiB = 1e9;  // a petabyte: anything more is garbage
    GpuUse g;
    g.gpu = std::to_string(std::stoi(f[0]));  // "00" and "0" are one GPU
    if (auto u = number(f[1], 100)) g.utilization = *u / 100.0;
    if (auto m = number(f[2], kMaxMiB)) g.memory_used_bytes = *m * kMiB;
    if (auto m = number(f[3], kMaxMiB)) g.memory_total_bytes = *m * kMiB;
    out.push_back(g);
  }
  return out;
}

void GpuHolders::launched(const WorkerId& w, const std::vector<int>& gpus) {
  holds_[w] = Hold{gpus, 0};
}

void GpuHolders::exited(const WorkerId& w) {
  holds_.erase(w);
}

void GpuHolders::heartbeat(const std::vector<WorkerId>& running) {
  std::set<WorkerId> listed(running.begin(), running.end());
  for (auto it = holds_.begin(); it != holds_.end();) {
    if (listed.count(it->first) != 0)
      it->second.missed = 0;
    else
      ++it->second.missed;
    // One miss may be a heartbeat built just before the agent took the Launch.
    if (it->second.missed >= 2)
      it = holds_.erase(it);
    else
      ++it;
  }
}

std::set<int> GpuHolders::held() const {
  std::set<int> out;
  for (const auto& [w, h] : holds_) out.insert(h.gpus.begin(), h.gpus.end());
  return out;
}

std::string worker_exit_cause(int exit_code, int signal, const std::string& reason) {
  if (reason.rfind("stopped", 0) == 0)
    return "stopped";  // also "stopped: the node agent is shutting down"
  if (reason.rfind("exceeded max_runtime", 0) == 0) return "max_runtime";
  if (reason.rfind("log_limit", 0) == 0) return "log_limit";
  if (reason.rfind("disk_limit", 0) == 0) return "disk_limit";
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
  prometheus::Family<prometheus::Gauge>* allocated = nullptr;
  prometheus::Family<prometheus::Counter>* agent_events = nullptr;
  std::string smi;      // full path of nvidia-smi ("" when absent)
  std::string timeout;  // full path of coreutils' timeout ("" when absent)

  std::mutex holders_mu;  // guards holders and gpus_known
  GpuHolders holders;
  std::set<int> gpus_known;  // rows of troupe_node_gpu_allocated

  std::mutex source_mu;  // guards source
  std::function<Counts()> source;

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
    allocated = &exporter->gauge(fam("troupe_node_gpu_allocated"));
    agent_events = &exporter->counter(fam("troupe_node_agent_events_total"));
    launched->Add(node());
    running->Add(node());
    heartbeats->Add(node());
    probe_up->Add(node());
    std::lock_guard<std::mutex> l(holders_mu);
    gpus_known.insert(opts.gpus.begin(), opts.gpus.end());
    publish_allocated();
  }

  // troupe_node_gpu_allocated from `holders` (holders_mu held).
  void publish_allocated() {
    auto held = holders.held();
    gpus_known.insert(held.begin(), held.end());
    for (int g : gpus_known) allocated->Add(gpu(std::to_string(g))).Set(held.count(g) != 0 ? 1 : 0);
  }

  void observe(const void* data, size_t size) {
    const auto* env = wire::open(static_cast<const uint8_t*>(data), size);
    if (env == nullptr) return;
    std::lock_guard<std::mutex> l(holders_mu);
    if (const auto* x = env->body_as_Launch()) {
      std::vector<int> gpus;
      for (int g : wire::ints(x->gpus()))
        if (g >= 0 && g < 1024) gpus.push_back(g);  // a bounded label set
      holders.launched({wire::str(x->job_id()), x->attempt(), x->rank()}, gpus);
    } else if (const auto* x = env->body_as_Exited()) {
      holders.exited({wire::str(x->job_id()), x->attempt(), x->rank()});
    } else if (const auto* h = env->body_as_Heartbeat()) {
      std::vector<WorkerId> running;
      if (h->running() != nullptr)
        for (const auto* w : *h->running())
          running.push_back({wire::str(w->job_id()), w->attempt(), w->rank()});
      holders.heartbeat(running);
    } else {
      return;
    }
    publish_allocated();
  }

  // One sample on the exporter's polling thread: the agent's counts, and
  // the GPUs (when nvidia-smi is there).
  bool sample(GaugeRows& rows) {
    {
      std::lock_guard<std::mutex> l(source_mu);
      if (source)
        for (const auto& [event, total] : source()) {
          auto labels = node();
          labels["event"] = event;
          auto& c = agent_events->Add(labels);
          if (static_cast<double>(total) > c.Value())
            c.Increment(static_cast<double>(total) - c.Value());
        }
    }
    return smi.empty() || sample_gpus(rows);
  }

  // A GPU nvidia-smi no longer lists loses its rows.
  bool sample_gpus(GaugeRows& rows) {
    // A wedged driver can hang nvidia-smi: give up after 10 s (this thread
    // only; the agent never waits for it).
    auto out = run_capture((timeout.empty() ? std::string() : timeout + " -k 2 10 ") + smi +
                           " --query-gpu=index,utilization.gpu,memory.used,memory.total"
                           " --format=csv,noheader,nounits 2>/dev/null");
    auto found = out ? parse_nvidia_smi(*out) : std::vector<GpuUse>{};
    probe_up->Add(node()).Set(out && !found.empty() ? 1 : 0);
    for (const auto& g : found) {
      if (g.utilization) rows.set(*util, gpu(g.gpu), *g.utilization);
      if (g.memory_used_bytes) rows.set(*mem_used, gpu(g.gpu), *g.memory_used_bytes);
      if (g.memory_total_bytes) rows.set(*mem_total, gpu(g.gpu), *g.memory_total_bytes);
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
  impl->timeout = find_program("timeout");
  Impl* raw = impl.get();
  impl->exporter->poll_every(std::chrono::milliseconds(opts.gpu_poll_ms),
                             [raw](GaugeRows& rows) { return raw->sample(rows); });
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

void NodeMetrics::observe(const void* data, size_t size) {
  impl_->observe(data, size);
}

void NodeMetrics::count_from(std::function<Counts()> source) {
  std::lock_guard<std::mutex> l(impl_->source_mu);
  impl_->source = std::move(source);
}

int NodeMetrics::port() const {
  return impl_->exporter->port();
}

std::string NodeMetrics::url() const {
  return impl_->exporter->url();
}

}  // namespace troupe::metrics

// Exporter and GaugeRows (see exporter.hpp): the registry, its HTTP endpoint,
// the polling thread and the stale-row cleanup both exporters share.
#include "actors/metrics/exporter.hpp"

#include <CivetServer.h>
#include <prometheus/text_serializer.h>

#include <cstdlib>
#include <exception>
#include <utility>
#include <vector>

namespace troupe::metrics {

bool split_host_port(const std::string& addr, std::string* host, int* port) {
  auto colon = addr.rfind(':');
  if (colon == std::string::npos || colon + 1 >= addr.size()) return false;
  std::string h = addr.substr(0, colon);
  if (!h.empty() && h.front() == '[' && h.back() != ']') return false;
  const std::string p = addr.substr(colon + 1);
  for (char c : p)
    if (c < '0' || c > '9') return false;
  if (p.size() > 5) return false;
  int v = std::atoi(p.c_str());
  if (v > 65535) return false;
  *host = h;
  *port = v;
  return true;
}

// ---- GaugeRows ----

void GaugeRows::set(prometheus::Family<prometheus::Gauge>& family, const prometheus::Labels& labels,
                    double value) {
  family.Add(labels).Set(value);
  now_[&family].insert(labels);
}

void GaugeRows::end_sample(bool complete) {
  if (!complete) {
    for (auto& [family, rows] : now_) last_[family].insert(rows.begin(), rows.end());
    now_.clear();
    return;
  }
  for (const auto& [family, rows] : last_)
    for (const auto& labels : rows)
      if (now_[family].count(labels) == 0) family->Remove(&family->Add(labels));
  last_ = std::move(now_);
  now_.clear();
}

// ---- Exporter ----

// The registry's families in the text format, nothing else (no exposer_*
// families of prometheus-cpp's own MetricsHandler).
struct Exporter::Handler : CivetHandler {
  explicit Handler(std::shared_ptr<prometheus::Registry> r) : registry(std::move(r)) {}
  bool handleGet(CivetServer* /*server*/, mg_connection* conn) override {
    const std::string body = prometheus::TextSerializer().Serialize(registry->Collect());
    mg_printf(conn,
              "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
              "Content-Length: %zu\r\n\r\n",
              body.size());
    mg_write(conn, body.data(), body.size());
    return true;
  }
  std::shared_ptr<prometheus::Registry> registry;
};

std::unique_ptr<Exporter> Exporter::start(const std::string& bind, size_t threads,
                                          std::string* error) {
  auto ex = std::make_unique<Exporter>(Key{});
  int port = 0;
  if (!split_host_port(bind, &ex->host_, &port)) {
    if (error) *error = "--metrics wants HOST:PORT, got '" + bind + "'";
    return nullptr;
  }
  ex->handler_ = std::make_unique<Handler>(ex->registry_);
  try {
    ex->server_ = std::make_unique<CivetServer>(std::vector<std::string>{
        "listening_ports", bind, "num_threads", std::to_string(threads == 0 ? 1 : threads)});
  } catch (const std::exception& e) {
    if (error) *error = "cannot serve metrics on " + bind + ": " + e.what();
    return nullptr;
  }
  ex->server_->addHandler("/metrics", ex->handler_.get());
  return ex;
}

Exporter::Exporter(Key) {}

Exporter::~Exporter() {
  stop_polling();
  server_.reset();  // no request runs the handler any more
  handler_.reset();
}

prometheus::Family<prometheus::Gauge>& Exporter::gauge(const SeriesInfo& s) {
  return prometheus::BuildGauge().Name(s.name).Help(s.help).Register(*registry_);
}

prometheus::Family<prometheus::Counter>& Exporter::counter(const SeriesInfo& s) {
  return prometheus::BuildCounter().Name(s.name).Help(s.help).Register(*registry_);
}

prometheus::Family<prometheus::Histogram>& Exporter::histogram(const SeriesInfo& s) {
  return prometheus::BuildHistogram().Name(s.name).Help(s.help).Register(*registry_);
}

void Exporter::poll_every(std::chrono::milliseconds interval, Sampler sample) {
  if (poller_.joinable()) return;
  poller_ = std::thread([this, interval, sample = std::move(sample)] { run(interval, sample); });
}

void Exporter::stop_polling() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (poller_.joinable()) poller_.join();
}

void Exporter::run(std::chrono::milliseconds interval, const Sampler& sample) {
  GaugeRows rows;  // only this thread touches it
  std::unique_lock<std::mutex> l(mu_);
  while (!stopping_) {
    l.unlock();
    rows.end_sample(sample(rows));
    l.lock();
    cv_.wait_for(l, interval, [&] { return stopping_; });
  }
}

int Exporter::port() const {
  auto ports = server_->getListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

std::string Exporter::url() const {
  std::string host = host_.empty() ? "0.0.0.0" : host_;
  return "http://" + host + ":" + std::to_string(port()) + "/metrics";
}

}  // namespace troupe::metrics

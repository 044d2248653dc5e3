// What a job pays at start for its isolation: a real node agent (no NATS; its
// messages go to a callback) launches `true` again and again, plain (as the
// agent's user, no cgroup), isolated (its team's user, a cgroup with limits,
// owner-only folders), in bubblewrap, and in podman (a local busybox image).
// Reported per launch: Launch -> Started (the worker exec'd) as the
// benchmark's time, and Launch -> Exited (started, ran, and torn down: the
// cgroup emptied and removed) as the counter exited_ms. Needs root (as the
// agent in production); podman needs the image localhost/troupe-busybox:it
// (tests/integration/isolation_test.cpp builds it from busybox-static).
//   build/bin/troupe-isolation-bench --benchmark_min_time=2
#include <benchmark/benchmark.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>

#include "bus/subjects.hpp"
#include "messages/wire.hpp"
#include "node/agent.hpp"

using namespace troupe;
using Clock = std::chrono::steady_clock;

namespace {

struct Sink {
  std::mutex mu;
  std::condition_variable cv;
  int started = 0, exited = 0;
  void on(const std::string& subject) {
    std::lock_guard<std::mutex> lock(mu);
    if (subject.find(".started") != std::string::npos) ++started;
    if (subject.find(".exited") != std::string::npos) ++exited;
    cv.notify_all();
  }
  template <class Pred>
  bool wait(Pred p) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(30), p);
  }
};

Inbound launch(const std::string& node, int n, const std::string& image) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<flatbuffers::String>> cmd = {fbb.CreateString("true")};
  std::vector<int32_t> gpus;
  auto body = wire::CreateLaunch(
      fbb, fbb.CreateString("j-bench-" + std::to_string(n)), fbb.CreateString("bench"), 1, 0, 1,
      fbb.CreateString("127.0.0.1:1"), fbb.CreateVector(gpus), fbb.CreateVector(cmd), 0, 0, 10, 0,
      1, image.empty() ? 0 : fbb.CreateString(image), 0, 256, -1);
  return Inbound{subjects::scheduler_to_agent(node, subjects::kLaunch), "", wire::seal(fbb, body)};
}

void run(benchmark::State& state, bool isolated, const std::string& sandbox,
         const std::string& runtime, const std::string& image) {
  if (isolated && ::geteuid() != 0) {
    state.SkipWithError("isolation needs root");
    return;
  }
  std::string dir = "/tmp/troupe-isolation-bench-XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) {
    state.SkipWithError("mkdtemp failed");
    return;
  }
  ::chmod(dir.c_str(), 0711);
  Sink sink;
  node::AgentConfig cfg;
  cfg.name = "bench";
  cfg.state_dir = dir;
  cfg.base_env = {"PATH=/usr/bin:/bin"};
  cfg.isolation.enabled = isolated;
  cfg.isolation.sandbox = sandbox;
  cfg.isolation.runtime = runtime;
  cfg.isolation.default_memory_mb = 1024;
  cfg.log_summary = false;
  {
    node::Agent agent(cfg, [&](const std::string& s, const void*, size_t) { sink.on(s); });
    agent.start();
    int n = 0;
    double exited_ms = 0;
    for (auto _ : state) {
      ++n;
      auto t0 = Clock::now();
      agent.on_message(launch(cfg.name, n, image));
      if (!sink.wait([&] { return sink.started >= n || sink.exited >= n; })) {
        state.SkipWithError("no Started within 30 s");
        break;
      }
      auto t1 = Clock::now();
      state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
      state.PauseTiming();
      if (!sink.wait([&] { return sink.exited >= n; })) {
        state.SkipWithError("no Exited within 30 s");
        break;
      }
      exited_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      state.ResumeTiming();
    }
    if (n > 0) state.counters["exited_ms"] = exited_ms / n;
    agent.shutdown();
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

void BM_Plain(benchmark::State& s) {
  run(s, false, "", "", "");
}
void BM_UserAndCgroup(benchmark::State& s) {
  run(s, true, "", "", "");
}
void BM_Bwrap(benchmark::State& s) {
  run(s, true, "bwrap", "", "");
}
void BM_Podman(benchmark::State& s) {
  run(s, true, "", "podman", "localhost/troupe-busybox:it");
}

}  // namespace

BENCHMARK(BM_Plain)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_UserAndCgroup)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Bwrap)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Podman)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(10);
int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);  // the agent logs every start and end
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

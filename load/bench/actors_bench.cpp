// The scheduler's actors alone, as one benchmark: N one-GPU jobs submitted
// at once go through the router, team queue, pool arbiter, gang reservation,
// node and job actors of a real start_scheduler() until every one has
// succeeded. No NATS and no other process: the ports are fakes (the intake
// stores at once, the outbox plays every node's agent: each Launch is
// answered with Started and Exited 0), and the actors run on CAF's
// deterministic test coordinator, on this thread, one message at a time.
//
// What it measures is the actor layer's CPU cost per job, the part of
// `load/perf/targets.sh throughput` that lives in actors/, without the noise
// that several processes sharing a small VM add to that end-to-end figure:
// the A/B comparison of a refactoring of the actors.
//
// Run: build/bin/troupe-actors-bench [--benchmark_repetitions=5]
//   (figures in docs/performance.md)
#include <benchmark/benchmark.h>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "actors/scheduler.hpp"
#include "bus/subjects.hpp"
#include "messages/wire.hpp"

using namespace troupe;

namespace {

// Every node's agent: a Launch is noted, and answered (Started, Exited 0)
// once the actors are idle.
class AgentsOutbox : public Outbox {
 public:
  struct Launched {
    std::string node, job_id;
    int attempt = 0, rank = 0;
  };
  std::vector<Launched> launched;
  size_t succeeded = 0;

 protected:
  void send(const std::string& subject, const void* data, size_t size,
            const std::string&) override {
    if (subjects::token(subject, 1) != "sys" || subjects::token(subject, 2) != "node" ||
        subjects::token(subject, 4) != subjects::kLaunch)
      return;
    const auto* e = wire::open(static_cast<const uint8_t*>(data), size);
    const auto* l = e ? e->body_as_Launch() : nullptr;
    if (l != nullptr)
      launched.push_back({std::string(subjects::token(subject, 3)), wire::str(l->job_id()),
                          l->attempt(), l->rank()});
  }
  void send_event(const std::string& subject, const std::string& data, Stored stored) override {
    send(subject, data.data(), data.size(), {});
    if (data.find("\"state\":\"succeeded\"") != std::string::npos) ++succeeded;
    if (stored) stored();
  }
};

class InstantIntake : public Intake {
 public:
  void append(const std::string&, std::vector<uint8_t>, const std::string&, Done done) override {
    done({true, false, {}, {}});
  }
};

std::vector<uint8_t> node_register(const std::string& name, int gpus) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<wire::Gpu>> g;
  for (int i = 0; i < gpus; ++i)
    g.push_back(wire::CreateGpu(fbb, i, fbb.CreateString("a100"), 80000));
  auto body = wire::CreateNodeRegister(fbb, fbb.CreateString(name), fbb.CreateString("127.0.0.1"),
                                       fbb.CreateString("a100"), fbb.CreateVector(g), 64, 512000);
  return wire::seal(fbb, body);
}

void to_router(const Wiring& w, const std::string& subject, std::vector<uint8_t> data,
               std::string reply = {}) {
  caf::anon_send(w.router, Inbound{subject, std::move(reply), std::move(data)});
}

// One whole run: `nodes` nodes of 8 GPUs, `jobs` jobs of team t.
void run_jobs(int nodes, int jobs) {
  caf::actor_system_config cfg;
  configure(cfg);
  cfg.set("scheduler.policy", caf::atom("testing"));
  caf::actor_system sys{cfg};
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  auto out = std::make_shared<AgentsOutbox>();
  Wiring w = start_scheduler(sys, out, std::make_shared<InstantIntake>());
  for (int i = 0; i < nodes; ++i) {
    auto name = "n" + std::to_string(i);
    to_router(w, subjects::agent_to_scheduler(name, subjects::kRegister), node_register(name, 8));
  }
  sched.run();
  const std::string spec = R"({"command":["true"],"resources":{"gpus":1}})";
  for (int i = 0; i < jobs; ++i)
    to_router(w, subjects::team_submit("t"), std::vector<uint8_t>(spec.begin(), spec.end()),
              "_INBOX.bench." + std::to_string(i));
  sched.run();
  while (out->succeeded < static_cast<size_t>(jobs)) {
    // A pool plans at most one round per round gap (SchedulerOptions::
    // round_gap_us, on CAF's clock): let it pass when nothing is left to run.
    for (int i = 0; i < 100 && out->launched.empty(); ++i) {
      sched.advance_time(std::chrono::microseconds(SchedulerOptions{}.round_gap_us));
      sched.run();
    }
    if (out->launched.empty()) throw std::runtime_error("no job launched and not all succeeded");
    auto batch = std::move(out->launched);
    out->launched.clear();
    for (const auto& l : batch) {
      to_router(w, subjects::agent_to_scheduler(l.node, subjects::kStarted),
                wire::started(l.node, l.job_id, l.attempt, l.rank, 4242));
      to_router(w, subjects::agent_to_scheduler(l.node, subjects::kExited),
                wire::exited(l.node, l.job_id, l.attempt, l.rank, 0, 0, "exited with code 0"));
    }
    sched.run();
  }
  stop_scheduler(w);
  sched.run();
}

void BM_JobsThroughActors(benchmark::State& state) {
  int nodes = static_cast<int>(state.range(0));
  int jobs = static_cast<int>(state.range(1));
  for (auto _ : state) run_jobs(nodes, jobs);
  state.SetItemsProcessed(state.iterations() * jobs);
}
// 100 nodes x 8 GPUs: 2,000 jobs place in waves as GPUs free.
BENCHMARK(BM_JobsThroughActors)->Args({100, 2000})->Unit(benchmark::kMillisecond);
// 1,000 nodes: every job places in the first wave (the arbiter's rounds over a big fleet).
BENCHMARK(BM_JobsThroughActors)->Args({1000, 2000})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

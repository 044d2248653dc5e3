// Micro-benchmarks of the pure scheduling policy (Google Benchmark):
//   ordering 10,000 queued jobs of 50 teams, placing one job against 1,000
//   or 10,000 nodes (best fit, gang fit: by a scan, and by the capacity
//   index), and a whole planning round (on a copy, and in place on the live
//   capacity with its index, as the pool arbiter plans); and the cost of the
//   depth bound on JSON from others (json_text::parse against nlohmann's
//   parse alone) on a job spec and on a 1,000-row jobs reply.
// Run: build/bin/troupe-policy-bench   (figures in docs/performance.md)
#include <benchmark/benchmark.h>

#include <map>
#include <random>

#include "actors/policy/fair_share.hpp"
#include "actors/policy/fit.hpp"
#include "actors/policy/queue_order.hpp"
#include "actors/policy/round.hpp"
#include "messages/json_text.hpp"

using namespace troupe::policy;

namespace {

std::vector<NodeCapacity> fleet(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<NodeCapacity> nodes(n);
  for (size_t i = 0; i < n; ++i) {
    auto& c = nodes[i];
    c.name = "node-" + std::to_string(i);
    c.gpu_type = c.pool = "a100";
    c.rack = "r" + std::to_string(i / 32);
    c.gpus_total = 8;
    c.gpus_free = static_cast<int>(rng() % 9);
    c.cpus_total = c.cpus_free = 64;
    c.memory_total_mb = c.memory_free_mb = 512000;
  }
  return nodes;
}

PlacementRequest one(int gpus, int workers = 1) {
  PlacementRequest r;
  r.gpus = gpus;
  r.workers = workers;
  r.pool = r.gpu_type = "a100";
  return r;
}

void BM_OrderQueuedJobs(benchmark::State& state) {
  const int jobs = static_cast<int>(state.range(0));
  const int teams = 50;
  std::mt19937 rng(7);
  std::vector<std::pair<int, QueueKey>> input;
  for (int i = 0; i < jobs; ++i)
    input.push_back({static_cast<int>(rng() % teams),
                     QueueKey{static_cast<int>(rng() % 3) * 50, static_cast<uint64_t>(i), 0}});
  std::vector<TeamStanding> standings(teams);
  for (int t = 0; t < teams; ++t) {
    standings[t].team = "team-" + std::to_string(t);
    standings[t].weight = 1 + t % 3;
    standings[t].used.gpus = static_cast<int>(rng() % 64);
  }
  PoolTotals totals{8000, 64000, 512000000};
  for (auto _ : state) {
    std::vector<std::map<QueueKey, int>> queues(teams);
    for (const auto& [team, key] : input) queues[static_cast<size_t>(team)].emplace(key, 0);
    auto order = team_order(standings, totals);
    benchmark::DoNotOptimize(order);
    benchmark::DoNotOptimize(queues);
  }
  state.SetItemsProcessed(state.iterations() * jobs);
}
BENCHMARK(BM_OrderQueuedJobs)->Arg(10000)->Unit(benchmark::kMicrosecond);

void BM_BestFit(benchmark::State& state) {
  auto nodes = fleet(static_cast<size_t>(state.range(0)), 1);
  auto req = one(2);
  for (auto _ : state) benchmark::DoNotOptimize(best_fit(nodes, req));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BestFit)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

void BM_BestFitIndexed(benchmark::State& state) {
  auto nodes = fleet(static_cast<size_t>(state.range(0)), 1);
  CapacityIndex index(nodes);
  auto req = one(2);
  for (auto _ : state) benchmark::DoNotOptimize(best_fit(nodes, req, {}, &index));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BestFitIndexed)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

void BM_GangFit(benchmark::State& state) {
  auto nodes = fleet(static_cast<size_t>(state.range(0)), 2);
  auto req = one(8, 4);
  for (auto _ : state) benchmark::DoNotOptimize(gang_fit(nodes, req));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_GangFit)->Arg(1000)->Unit(benchmark::kMicrosecond);

void BM_GangFitIndexed(benchmark::State& state) {
  auto nodes = fleet(static_cast<size_t>(state.range(0)), 2);
  CapacityIndex index(nodes);
  auto req = one(8, 4);
  for (auto _ : state) benchmark::DoNotOptimize(gang_fit(nodes, req, {}, &index));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_GangFitIndexed)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

// The load mix's gang, 2 ranks x 4 GPUs: one node with 8 free GPUs takes it.
void BM_GangFitOneNode(benchmark::State& state) {
  auto nodes = fleet(static_cast<size_t>(state.range(0)), 2);
  CapacityIndex index(nodes);
  auto req = one(4, 2);
  for (auto _ : state) benchmark::DoNotOptimize(gang_fit(nodes, req, {}, &index));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_GangFitOneNode)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

RoundInput round_input(size_t nodes) {
  RoundInput in;
  in.pool = "a100";
  in.nodes = fleet(nodes, 3);
  in.now_ms = 1000;
  for (int t = 0; t < 50; ++t) {
    TeamInput ti;
    ti.standing.team = "team-" + std::to_string(t);
    ti.standing.used.gpus = t;
    for (int d = 0; d < 16; ++d) {
      Demand dm;
      dm.job_id = "j-" + std::to_string(t) + "-" + std::to_string(d);
      dm.req = one(1 + d % 4);
      dm.max_runtime_s = 600;
      ti.demands.push_back(dm);
    }
    in.teams.push_back(std::move(ti));
  }
  return in;
}

void BM_PlanRound(benchmark::State& state) {
  auto in = round_input(static_cast<size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(plan_round(in));
  state.SetItemsProcessed(state.iterations() * 50);  // up to one grant per team
}
BENCHMARK(BM_PlanRound)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

// As the arbiter plans: in place on its capacity, with the index it keeps
// (each iteration starts again from the same capacity, outside the timing).
void BM_PlanRoundLive(benchmark::State& state) {
  const auto base = round_input(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    state.PauseTiming();
    RoundInput in = base;
    CapacityIndex index(in.nodes);
    in.index = &index;
    state.ResumeTiming();
    benchmark::DoNotOptimize(plan_round_live(in));
  }
  state.SetItemsProcessed(state.iterations() * 50);
}
BENCHMARK(BM_PlanRoundLive)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

// A submission's JSON (263 bytes), or a jobs reply of `rows` rows (110 bytes each).
std::string json_of(int64_t rows) {
  const std::string spec =
      R"({"team":"nlp","name":"train-7","kind":"training","command":["python","train.py","--lr","0.001"],)"
      R"("resources":{"gpus":8,"gpu_type":"a100","workers":2},"env":{"A":"1","B":"two"},)"
      R"("labels":{"project":"llm","stage":"pretrain"},"max_retries":2,"idempotency_key":"k-123"})";
  if (rows == 0) return spec;
  std::string out = R"({"jobs":[)";
  for (int64_t i = 0; i < rows; ++i) {
    if (i > 0) out += ',';
    out +=
        R"({"job_id":"j-mz0000)" + std::to_string(i) +
        R"(","team":"nlp","state":"running","gpus":8,"placement":[{"node":"n1","gpus":[0,1,2,3]}]})";
  }
  return out + R"(],"next":"j-x"})";
}

void BM_JsonParse(benchmark::State& state) {
  const std::string text = json_of(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(nlohmann::json::parse(text, nullptr, false).size());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_JsonParse)->Arg(0)->Arg(1000)->Unit(benchmark::kMicrosecond);

void BM_JsonTextParse(benchmark::State& state) {
  const std::string text = json_of(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(troupe::json_text::parse(text).size());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_JsonTextParse)->Arg(0)->Arg(1000)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();

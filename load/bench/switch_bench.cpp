// What a wake-up costs on this machine: two threads of one process, or two
// processes, pass a byte back and forth through two pipes; the time is one
// round trip (two wake-ups, two context switches). On one CPU
// (`pinned`) every round trip is two switches on that CPU; on any CPU the
// other side may wake on the other core. A scheduler's CPU on a small VM
// follows its wake-ups (docs/performance.md, Scheduler shards): a switch
// between processes costs more than one between threads of a process where
// the machine pays for changing address spaces.
//   build/bin/troupe-switch-bench
#include <benchmark/benchmark.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

// Two pipes, closed when it goes (RAII for the four descriptors).
struct Pipes {
  std::array<int, 2> there{-1, -1}, back{-1, -1};
  bool ok = false;
  Pipes() { ok = pipe(there.data()) == 0 && pipe(back.data()) == 0; }
  ~Pipes() {
    for (int fd : {there[0], there[1], back[0], back[1]})
      if (fd >= 0) close(fd);
  }
  Pipes(const Pipes&) = delete;
  Pipes& operator=(const Pipes&) = delete;
};

// The other side: echoes `rounds` bytes, then stops.
void echo(const Pipes& p, int64_t rounds) {
  char c = 0;
  for (int64_t i = 0; i < rounds; ++i)
    if (read(p.there[0], &c, 1) != 1 || write(p.back[1], &c, 1) != 1) return;
}

bool round_trip(const Pipes& p) {
  char c = 'x';
  return write(p.there[1], &c, 1) == 1 && read(p.back[0], &c, 1) == 1;
}

void pin_to_cpu0() {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  sched_setaffinity(0, sizeof set, &set);  // this thread, and what it starts after
}

void BM_WakeUp(benchmark::State& state) {
  const bool processes = state.range(0) == 1;
  const bool pinned = state.range(1) == 1;
  cpu_set_t before;
  sched_getaffinity(0, sizeof before, &before);
  if (pinned) pin_to_cpu0();
  const int64_t rounds = state.max_iterations;
  Pipes p;
  if (!p.ok) {
    state.SkipWithError("pipe failed");
    return;
  }
  std::thread other;
  pid_t child = -1;
  if (processes) {
    child = fork();
    if (child == 0) {
      echo(p, rounds);
      _exit(0);
    }
  } else {
    other = std::thread([&p, rounds] { echo(p, rounds); });
  }
  for (auto _ : state)
    if (!round_trip(p)) state.SkipWithError("the other side is gone");
  if (processes && child > 0) waitpid(child, nullptr, 0);
  if (other.joinable()) other.join();
  sched_setaffinity(0, sizeof before, &before);
  state.SetLabel(std::string(processes ? "processes" : "threads") + (pinned ? ", one CPU" : ""));
}

}  // namespace

BENCHMARK(BM_WakeUp)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->ArgNames({"processes", "pinned"})
    ->Iterations(100000)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();

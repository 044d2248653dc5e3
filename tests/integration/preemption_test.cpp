// Acceptance tests of preemption with checkpoints, retries and node failure
// with fencing, on real processes: nats-server, troupe-scheduler --config,
// real troupe-node agents (not --simulate) running tests/integration/
// counter_job.sh, a job that follows docs/checkpointing.md. The job's own
// output (COUNTER_OUT: progress, checkpoints, pids) and the job events are
// the evidence; the scheduler's word (status) is only checked for what it
// says about retries.
//
// Timings: the scheduler declares a node lost after 10 s without heartbeat;
// preemption graces are 5 s (spec grace_s). The whole file takes ~2-3 min.
#include <signal.h>
#include <sys/types.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "messages/names.hpp"

using namespace troupe;
using namespace troupe::it;

namespace {

// Priority classes high (100, not preemptible) and low (10, preemptible);
// team ta borrows with no guarantee, tb is guaranteed 8 GPUs; a generous
// preemption budget and no churn protection to speak of.
const char* kConfig = R"(pools:
  - {name: a100, gpu_type: a100}
teams:
  - {name: t1, weight: 1, borrow: true}
  - {name: ta, weight: 1, borrow: true, quotas: {a100: {guaranteed: 0}}}
  - {name: tb, weight: 1, borrow: true, quotas: {a100: {guaranteed: 8}}}
priority_classes:
  - {name: high, value: 100, preemptible: false}
  - {name: normal, value: 50, preemptible: true}
  - {name: low, value: 10, preemptible: true}
preemption: {max_per_minute: 100, protect_after: 100, window_s: 600, protect_s: 1, infra_requeue_cap: 10}
)";

const std::string kQueued(names::kQueued), kRunning(names::kRunning),
    kSucceeded(names::kSucceeded), kFailed(names::kFailed), kCanceled(names::kCanceled);

std::string counter_script() {
  return (std::filesystem::path(__FILE__).parent_path() / "counter_job.sh").string();
}

int64_t as_i64(const Json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number()) return static_cast<int64_t>(v.get<double>());
  if (v.is_string()) {
    try {
      return std::stoll(v.get<std::string>());
    } catch (const std::exception&) {
    }
  }
  return 0;
}
int64_t ts_of(const Event& e) { return e.json.contains("ts_ms") ? as_i64(e.json["ts_ms"]) : 0; }
int attempt_of(const Event& e) { return static_cast<int>(as_i64(e.json.value("attempt", Json(0)))); }
std::string cause_of(const Event& e) { return e.json.value("cause", std::string()); }

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The attempt history of a JobView (status reply).
std::vector<Json> attempts_of(const Json& view) {
  std::vector<Json> out;
  if (view.contains("attempts") && view["attempts"].is_array())
    for (const auto& a : view["attempts"]) out.push_back(a);
  return out;
}

// Nodes of the event's workers, by rank.
std::vector<std::string> nodes_of(const Event& e) {
  std::vector<std::pair<int, std::string>> v;
  if (e.json.contains("workers") && e.json["workers"].is_array())
    for (const auto& w : e.json["workers"])
      v.push_back({static_cast<int>(as_i64(w.value("rank", Json(0)))), w.value("node", std::string())});
  std::sort(v.begin(), v.end());
  std::vector<std::string> out;
  for (auto& [r, n] : v) out.push_back(n);
  return out;
}
int gpus_of(const Event& e) {
  int n = 0;
  if (e.json.contains("workers") && e.json["workers"].is_array())
    for (const auto& w : e.json["workers"])
      if (w.contains("gpus") && w["gpus"].is_array()) n += static_cast<int>(w["gpus"].size());
  return n;
}

std::vector<std::string> states_of(const std::vector<Event>& events) {
  std::vector<std::string> s;
  for (const auto& e : events) s.push_back(e.state);
  return s;
}
std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}
std::vector<Event> in_state(const std::vector<Event>& events, const std::string& state) {
  std::vector<Event> out;
  for (const auto& e : events)
    if (e.state == state) out.push_back(e);
  return out;
}
// True when `want` appears in `have` in order (other states may come between).
bool in_order(const std::vector<std::string>& have, const std::vector<std::string>& want) {
  size_t i = 0;
  for (const auto& s : have)
    if (i < want.size() && s == want[i]) ++i;
  return i == want.size();
}

// Alive and not a zombie: an orphaned worker waits for whoever reaps it, but
// it no longer runs.
bool alive(pid_t pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  auto paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return false;
  char state = stat[paren + 2];
  return state != 'Z' && state != 'X';
}
bool wait_dead(pid_t pid, Clock::duration timeout) {
  auto deadline = Clock::now() + timeout;
  while (alive(pid) && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
  return !alive(pid);
}

// The lines counter_job.sh appends to COUNTER_OUT.
struct CounterLog {
  struct Count {
    int attempt;
    long counter;
    int64_t ms;
  };
  struct Start {
    int attempt;
    int rank;
    pid_t pid;
    std::string resume;  // "-" when TROUPE_RESUME_FROM was not set
    long counter;
    int64_t ms;
  };
  struct Ckpt {
    int attempt;
    long counter;
    std::string name;
    int64_t ms;
  };
  struct Exit {
    int attempt;
    int rank;
    std::string why;
    long counter;
    int64_t ms;
  };
  std::vector<Count> counts;
  std::vector<Start> starts;
  std::vector<Ckpt> ckpts;
  std::vector<Exit> exits;

  static CounterLog read(const std::string& path) {
    CounterLog log;
    std::istringstream in(read_file(path));
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string first;
      ls >> first;
      if (first == "start") {
        Start s{};
        ls >> s.attempt >> s.rank >> s.pid >> s.resume >> s.counter >> s.ms;
        if (ls) log.starts.push_back(s);
      } else if (first == "ckpt") {
        Ckpt c{};
        ls >> c.attempt >> c.counter >> c.name >> c.ms;
        if (ls) log.ckpts.push_back(c);
      } else if (first == "exit") {
        Exit x{};
        ls >> x.attempt >> x.rank >> x.why >> x.counter >> x.ms;
        if (ls) log.exits.push_back(x);
      } else if (!first.empty()) {
        Count c{};
        c.attempt = std::atoi(first.c_str());
        ls >> c.counter >> c.ms;
        if (ls) log.counts.push_back(c);
      }
    }
    return log;
  }
  std::vector<Count> of_attempt(int attempt) const {
    std::vector<Count> out;
    for (const auto& c : counts)
      if (c.attempt == attempt) out.push_back(c);
    return out;
  }
  std::optional<Start> start(int attempt, int rank = 0) const {
    for (const auto& s : starts)
      if (s.attempt == attempt && s.rank == rank) return s;
    return std::nullopt;
  }
  long max_counter(int attempt) const {
    long m = -1;
    for (const auto& c : counts)
      if (c.attempt == attempt) m = std::max(m, c.counter);
    return m;
  }
};

// Waits until `pred(log)` holds for the file at `path`.
bool wait_log(const std::string& path, const std::function<bool(const CounterLog&)>& pred,
              Clock::duration timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (pred(CounterLog::read(path))) return true;
    std::this_thread::sleep_for(50ms);
  }
  return pred(CounterLog::read(path));
}

// A counter_job.sh spec.
Json counter_spec(const std::string& team, int gpus, const std::string& out, long target,
                  const std::string& priority = "normal", int workers = 1,
                  const std::string& interval = "0.1", int ckpt_every = 0) {
  Json j = job_spec(team, {"/bin/sh", counter_script()}, gpus, workers);
  j["resources"]["gpu_type"] = "a100";
  j["priority"] = priority;
  j["grace_s"] = 5;
  j["env"] = {{"COUNTER_OUT", out},
              {"COUNTER_TARGET", std::to_string(target)},
              {"COUNTER_INTERVAL", interval},
              {"COUNTER_CKPT_EVERY", std::to_string(ckpt_every)}};
  return j;
}

ClusterOptions options(const TmpDir& work) {
  ClusterOptions o;
  o.with_config(kConfig);
  o.scheduler_args = {"--checkpoint-root", work.file("checkpoints")};
  return o;
}

// The first event of `job` in `state` for attempt `attempt`.
std::optional<Event> wait_attempt(Cluster& c, const std::string& job, const std::string& state,
                                  int attempt, Clock::duration timeout) {
  std::optional<Event> found;
  c.events().wait_for(
      [&](const std::vector<Event>& all) {
        for (const auto& e : all)
          if (e.job_id == job && e.state == state && attempt_of(e) == attempt) {
            found = e;
            return true;
          }
        return false;
      },
      timeout);
  return found;
}

}  // namespace

TEST_CASE("preemption: a low-priority job checkpoints on SIGUSR1, yields to a high one, and resumes "
          "from its checkpoint",
          "[integration][preemption]") {
  TmpDir work("troupe-preempt");
  Cluster c(options(work).node("n1", 8));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  const std::string out = work.file("low.out");
  const std::string low = c.submit_ok("t1", counter_spec("t1", 8, out, 40, "low"));
  REQUIRE(wait_attempt(c, low, kRunning, 1, 20s));
  // Let it make some progress first (1 s).
  REQUIRE(wait_log(out, [](const CounterLog& l) { return l.max_counter(1) >= 10; }, 10s));

  Json high_spec = job_spec("t1", {"/bin/sh", "-c", "sleep 2"}, 8);
  high_spec["resources"]["gpu_type"] = "a100";
  high_spec["priority"] = "high";
  const int64_t high_submit_ms = wall_ms();
  const std::string high = c.submit_ok("t1", high_spec);

  auto preempted = c.events().wait_state(low, "preempted", 20s);
  INFO(c.events().describe());
  REQUIRE(preempted);
  // It stopped within its grace period (5 s), plus the time to decide.
  CHECK(ts_of(*preempted) - high_submit_ms < 5000 + 3000);
  CHECK(attempt_of(*preempted) == 1);
  CHECK(cause_of(*preempted) == "preempted");

  auto high_running = c.events().wait_state(high, kRunning, 20s);
  REQUIRE(high_running);
  CHECK(high_running->seq > preempted->seq);
  auto high_done = c.wait_terminal(high, 30s);
  REQUIRE(high_done);
  CHECK(high_done->state == kSucceeded);

  auto low_done = c.wait_terminal(low, 60s);
  REQUIRE(low_done);
  CHECK(low_done->state == kSucceeded);

  auto ev = c.events().of_job(low);
  auto states = states_of(ev);
  INFO("low's states: " << join(states));
  CHECK(in_order(states, {"queued", "running", "preempted", "queued", "running", "succeeded"}));
  auto runs = in_state(ev, kRunning);
  REQUIRE(runs.size() == 2);
  CHECK(attempt_of(runs[0]) == 1);
  CHECK(attempt_of(runs[1]) == 2);
  // The high job ran between low's two attempts, and no GPU was held twice.
  CHECK(runs[1].seq > high_done->seq);
  auto replay = replay_gpus(c.events().all());
  INFO(join(replay.clashes));
  CHECK(replay.clashes.empty());

  // The job's own account: it checkpointed on SIGUSR1, and attempt 2 resumed
  // from that checkpoint through TROUPE_RESUME_FROM.
  auto log = CounterLog::read(out);
  INFO("counter log:\n" << read_file(out));
  REQUIRE(log.ckpts.size() == 1);
  const auto ck = log.ckpts[0];
  CHECK(ck.attempt == 1);
  CHECK(ck.counter >= 10);
  REQUIRE(log.start(1));
  CHECK(log.start(1)->resume == "-");
  REQUIRE(log.start(2));
  CHECK(log.start(2)->resume == work.file("checkpoints") + "/" + low + "/" + ck.name);
  CHECK(log.start(2)->counter == ck.counter);
  auto a2 = log.of_attempt(2);
  REQUIRE(!a2.empty());
  CHECK(a2.front().counter == ck.counter + 1);  // continues, does not restart at 0
  CHECK(a2.back().counter == 40);
  CHECK(log.max_counter(1) == ck.counter);
  bool checkpointed_exit = false;
  for (const auto& x : log.exits)
    if (x.attempt == 1 && x.why == "checkpointed") checkpointed_exit = true;
  CHECK(checkpointed_exit);
  // Every count after the first happened once: 1..40 with no gap or repeat.
  for (size_t i = 0; i < log.counts.size(); ++i) CHECK(log.counts[i].counter == static_cast<long>(i + 1));

  Json st = c.status("t1", low);
  CHECK(as_i64(st.value("retries_used", Json(0))) == 0);
  CHECK(st.value("last_checkpoint", std::string()) == ck.name);
  INFO("status: " << st.dump());
  CHECK(as_i64(st.value("infra_requeues", Json(0))) == 1);
  CHECK(as_i64(st.value("preemptions", Json(0))) == 1);
  CHECK(attempts_of(st).size() == 2);
  if (!attempts_of(st).empty()) {
    CHECK(attempts_of(st)[0].value("cause", std::string()) == "preempted");
    CHECK(attempts_of(st)[0].value("kind", std::string()) == "infra");
  }
}

TEST_CASE("preemption: a team below its guarantee reclaims borrowed GPUs, taking the jobs with "
          "the least work lost",
          "[integration][preemption]") {
  TmpDir work("troupe-reclaim");
  Cluster c(options(work).node("n1", 8).node("n2", 8));
  REQUIRE(c.wait_nodes_alive(2, 20s));
  // Team A (guarantee 0, borrowing) fills all 16 GPUs with four 4-GPU jobs,
  // oldest first. The two oldest checkpoint every second; the two youngest
  // never do. Best fit packs them pairwise: the two oldest share a node.
  // Least work lost picks the two oldest (their last checkpoint is < 1 s
  // old); a "youngest first" rule would pick the other two.
  std::vector<std::string> a;
  std::vector<std::string> outs;
  for (int i = 0; i < 4; ++i) {
    outs.push_back(work.file("a" + std::to_string(i) + ".out"));
    bool ckpt = i < 2;
    a.push_back(c.submit_ok("ta", counter_spec("ta", 4, outs.back(), 100000, "normal", 1, "0.2",
                                               ckpt ? 5 : 0)));
    REQUIRE(wait_attempt(c, a.back(), kRunning, 1, 20s));
    std::this_thread::sleep_for(1s);
  }
  std::vector<std::string> node_of;
  for (const auto& id : a) node_of.push_back(nodes_of(*wait_attempt(c, id, kRunning, 1, 1s)).at(0));
  INFO("A's jobs on " << join(node_of));
  REQUIRE(node_of[0] == node_of[1]);
  REQUIRE(node_of[2] == node_of[3]);
  REQUIRE(node_of[0] != node_of[2]);
  // The two oldest have checkpointed (by their own account), the others not.
  for (int i = 0; i < 2; ++i)
    REQUIRE(wait_log(outs[static_cast<size_t>(i)], [](const CounterLog& l) { return !l.ckpts.empty(); }, 5s));
  std::this_thread::sleep_for(2s);  // the youngest have run ~4 s without a checkpoint
  for (int i = 0; i < 4; ++i) {
    Json st = c.status("ta", a[static_cast<size_t>(i)]);
    INFO("status of A's job " << i << ": " << st.dump());
    CHECK(st.value("last_checkpoint", std::string()).empty() == (i >= 2));
  }

  Json b_spec = job_spec("tb", {"/bin/sh", "-c", "sleep 3"}, 8);
  b_spec["resources"]["gpu_type"] = "a100";
  auto t0 = Clock::now();
  const std::string b = c.submit_ok("tb", b_spec);
  auto b_running = c.events().wait_state(b, kRunning, 30s);
  INFO(c.events().describe());
  REQUIRE(b_running);
  CHECK(Clock::now() - t0 < 30s);
  CHECK(gpus_of(*b_running) == 8);
  CHECK(nodes_of(*b_running) == std::vector<std::string>{node_of[0]});

  std::set<std::string> victims;
  for (const auto& e : c.events().all())
    if (e.state == "preempted") victims.insert(e.job_id);
  CHECK(victims == std::set<std::string>{a[0], a[1]});
  // The others ran on, untouched.
  for (int i = 2; i < 4; ++i) {
    auto ev = c.events().of_job(a[static_cast<size_t>(i)]);
    CHECK(ev.back().state == kRunning);
    CHECK(in_state(ev, kRunning).size() == 1);
  }
  // The victims checkpointed on the signal and went back to the queue.
  for (int i = 0; i < 2; ++i) {
    auto q = wait_attempt(c, a[static_cast<size_t>(i)], kQueued, 2, 10s);
    CHECK(q);
    auto log = CounterLog::read(outs[static_cast<size_t>(i)]);
    bool checkpointed_exit = false;
    for (const auto& x : log.exits)
      if (x.attempt == 1 && x.why == "checkpointed") checkpointed_exit = true;
    CHECK(checkpointed_exit);
  }
  auto b_done = c.wait_terminal(b, 30s);
  REQUIRE(b_done);
  CHECK(b_done->state == kSucceeded);
  auto replay = replay_gpus(c.events().all());
  INFO(join(replay.clashes));
  CHECK(replay.clashes.empty());
}

TEST_CASE("node failure: a gang worker's agent is SIGKILLed, the gang stops whole, is requeued "
          "without using a retry, and runs again",
          "[integration][preemption][node_failure]") {
  TmpDir work("troupe-gang-loss");
  Cluster c(options(work).node("n1", 8).node("n2", 8));
  REQUIRE(c.wait_nodes_alive(2, 20s));
  const std::string out = work.file("gang.out");
  Json spec = counter_spec("t1", 8, out, 100000, "normal", 2, "0.2");
  spec["max_retries"] = 0;
  const std::string job = c.submit_ok("t1", spec);
  auto running = wait_attempt(c, job, kRunning, 1, 20s);
  REQUIRE(running);
  auto placed = nodes_of(*running);
  REQUIRE(placed.size() == 2);
  REQUIRE(placed[0] != placed[1]);
  REQUIRE(wait_log(out, [](const CounterLog& l) { return l.start(1, 0) && l.start(1, 1); }, 10s));
  auto log = CounterLog::read(out);
  const pid_t rank0 = log.start(1, 0)->pid;
  const pid_t rank1 = log.start(1, 1)->pid;
  REQUIRE(alive(rank0));
  REQUIRE(alive(rank1));

  // SIGKILL the agent of rank 1: its worker dies with it (PR_SET_PDEATHSIG).
  const size_t victim = placed[1] == "n1" ? 0 : 1;
  const std::string lost_node = placed[1];
  c.node(victim).kill_now();
  CHECK(wait_dead(rank1, 3s));
  // After 10 s without heartbeats the scheduler loses the node, stops the
  // rest of the gang (rank 0 on the live node) and requeues the job.
  auto requeued = wait_attempt(c, job, kQueued, 2, 25s);
  INFO(c.events().describe(job));
  REQUIRE(requeued);
  CHECK(cause_of(*requeued) == "node_lost");
  CHECK(wait_dead(rank0, 15s));
  CHECK(!alive(rank1));

  // Capacity returns: the agent starts again (it adopts nothing: its workers
  // died with it) and the gang runs again on both nodes.
  NodeOptions again;
  again.name = lost_node;
  again.gpus = 8;
  c.add_node(again);
  auto running2 = wait_attempt(c, job, kRunning, 2, 30s);
  REQUIRE(running2);
  CHECK(nodes_of(*running2).size() == 2);
  REQUIRE(wait_log(out, [](const CounterLog& l) { return l.start(2, 0) && l.start(2, 1); }, 10s));
  log = CounterLog::read(out);
  CHECK(alive(log.start(2, 0)->pid));
  CHECK(alive(log.start(2, 1)->pid));

  Json st = c.status("t1", job);
  INFO(st.dump());
  CHECK(as_i64(st.value("retries_used", Json(0))) == 0);
  CHECK(as_i64(st.value("infra_requeues", Json(0))) == 1);
  CHECK(attempts_of(st).size() == 1);  // the one that ended
  if (!attempts_of(st).empty()) {
    CHECK(attempts_of(st)[0].value("kind", std::string()) == "infra");
    std::string cause = attempts_of(st)[0].value("cause", std::string());
    CHECK((cause == "node_lost" || cause == "agent_lost"));
  }
  c.cancel("t1", job);
  auto done = c.wait_terminal(job, 20s);
  REQUIRE(done);
  CHECK(done->state == kCanceled);
}

TEST_CASE("node failure: an agent restarted at once adopts nothing, its job is requeued as an "
          "infrastructure failure and runs again",
          "[integration][preemption][node_failure]") {
  TmpDir work("troupe-agent-restart");
  Cluster c(options(work).node("n1", 4));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  const std::string out = work.file("job.out");
  Json spec = counter_spec("t1", 4, out, 30);
  spec["max_retries"] = 0;
  const std::string job = c.submit_ok("t1", spec);
  REQUIRE(wait_attempt(c, job, kRunning, 1, 20s));
  REQUIRE(wait_log(out, [](const CounterLog& l) { return l.start(1).has_value(); }, 10s));
  const pid_t pid1 = CounterLog::read(out).start(1)->pid;
  // SIGKILL the agent and start it again right away, well within the 10 s
  // the scheduler waits before it calls a silent node lost: the node never
  // looks lost, but its new agent registers with nothing running.
  c.node(0).kill_now();
  CHECK(wait_dead(pid1, 3s));
  NodeOptions again;
  again.name = "n1";
  again.gpus = 4;
  c.add_node(again);
  auto requeued = wait_attempt(c, job, kQueued, 2, 20s);
  INFO(c.events().describe(job));
  REQUIRE(requeued);
  std::string cause = cause_of(*requeued);
  CHECK((cause == "node_lost" || cause == "agent_lost"));
  auto done = c.wait_terminal(job, 30s);
  REQUIRE(done);
  CHECK(done->state == kSucceeded);
  Json st = c.status("t1", job);
  INFO("status: " << st.dump());
  CHECK(as_i64(st.value("retries_used", Json(0))) == 0);
  CHECK(as_i64(st.value("infra_requeues", Json(0))) == 1);
}

TEST_CASE("retries: a job exiting 1 with max_retries 2 runs 3 times, backing off, then fails with "
          "exit code 1",
          "[integration][preemption][retries]") {
  TmpDir work("troupe-retries");
  Cluster c(options(work).node("n1", 8));
  REQUIRE(c.wait_nodes_alive(1, 20s));
  Json spec = job_spec("t1", {"/bin/sh", "-c", "echo attempt $TROUPE_ATTEMPT; exit 1"}, 1);
  spec["resources"]["gpu_type"] = "a100";
  spec["max_retries"] = 2;
  const std::string job = c.submit_ok("t1", spec);
  auto done = c.wait_terminal(job, 40s);
  INFO(c.events().describe(job));
  REQUIRE(done);
  CHECK(done->state == kFailed);
  CHECK(as_i64(done->json.value("exit_code", Json(-1))) == 1);
  auto ev = c.events().of_job(job);
  auto runs = in_state(ev, kRunning);
  REQUIRE(runs.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(attempt_of(runs[static_cast<size_t>(i)]) == i + 1);
  // Back-off: 1 s before the second attempt, 2 s before the third.
  auto requeues = in_state(ev, kQueued);
  REQUIRE(requeues.size() == 3);  // submit, retry 1, retry 2
  CHECK(ts_of(runs[1]) - ts_of(requeues[1]) >= 900);
  CHECK(ts_of(runs[2]) - ts_of(requeues[2]) >= 1900);
  CHECK(cause_of(requeues[1]) == "exit_code");
  Json st = c.status("t1", job);
  INFO("status: " << st.dump());
  CHECK(as_i64(st.value("retries_used", Json(0))) == 2);
  CHECK(as_i64(st.value("infra_requeues", Json(0))) == 0);
  CHECK(attempts_of(st).size() == 3);
}

TEST_CASE("retries: a job whose node is lost runs again elsewhere without using a retry",
          "[integration][preemption][retries][node_failure]") {
  TmpDir work("troupe-node-lost");
  Cluster c(options(work).node("n1", 4).node("n2", 4));
  REQUIRE(c.wait_nodes_alive(2, 20s));
  const std::string out = work.file("job.out");
  Json spec = counter_spec("t1", 4, out, 30);
  spec["max_retries"] = 0;  // no retry to use: only an infrastructure requeue can bring it back
  const std::string job = c.submit_ok("t1", spec);
  auto running = wait_attempt(c, job, kRunning, 1, 20s);
  REQUIRE(running);
  const std::string first = nodes_of(*running).at(0);
  REQUIRE(wait_log(out, [](const CounterLog& l) { return l.start(1).has_value(); }, 10s));
  const pid_t pid1 = CounterLog::read(out).start(1)->pid;
  c.node(first == "n1" ? 0 : 1).kill_now();
  CHECK(wait_dead(pid1, 3s));  // died with its agent

  auto running2 = wait_attempt(c, job, kRunning, 2, 30s);
  INFO(c.events().describe(job));
  REQUIRE(running2);
  CHECK(nodes_of(*running2).at(0) != first);
  auto done = c.wait_terminal(job, 30s);
  REQUIRE(done);
  CHECK(done->state == kSucceeded);
  auto requeued = wait_attempt(c, job, kQueued, 2, 1s);
  REQUIRE(requeued);
  CHECK(cause_of(*requeued) == "node_lost");
  Json st = c.status("t1", job);
  INFO("status: " << st.dump());
  CHECK(as_i64(st.value("retries_used", Json(0))) == 0);
  CHECK(as_i64(st.value("infra_requeues", Json(0))) == 1);
  CHECK(as_i64(st.value("attempt", Json(0))) == 2);
  CHECK(attempts_of(st).size() == 2);
  if (!attempts_of(st).empty()) CHECK(attempts_of(st)[0].value("cause", std::string()) == "node_lost");
}

TEST_CASE("fencing: a paused node's job moves, on its return the old worker is killed, and two "
          "attempts never made progress at once",
          "[integration][preemption][fencing]") {
  TmpDir work("troupe-fencing");
  Cluster c(options(work).node("n1", 4).node("n2", 4));
  REQUIRE(c.wait_nodes_alive(2, 20s));
  const std::string out = work.file("job.out");
  const std::string job = c.submit_ok("t1", counter_spec("t1", 4, out, 60));
  auto running = wait_attempt(c, job, kRunning, 1, 20s);
  REQUIRE(running);
  const std::string first = nodes_of(*running).at(0);
  Process& agent = c.node(first == "n1" ? 0 : 1);
  REQUIRE(wait_log(out, [](const CounterLog& l) { return l.max_counter(1) >= 5; }, 10s));
  const pid_t worker = CounterLog::read(out).start(1)->pid;

  // "Running" here means making progress, as the job's own lines show. A
  // paused node pauses everything on it, so the worker's process group is
  // stopped with its agent (the agent starts workers in their own sessions,
  // so stopping the agent alone would leave the worker counting: that is a
  // network partition, which no scheduler-side fencing can stop before the
  // node is heard from again). On the way back the agent is continued first
  // and the worker only once fencing had its chance to act: the fence is a
  // SIGKILL, which ends a stopped process too, so a worker that makes even
  // one more count after the pause was not fenced. (Were both continued at
  // the same instant, the old worker could count for one heartbeat's round
  // trip before the fence lands; this test does not claim otherwise.)
  REQUIRE(::kill(-worker, SIGSTOP) == 0);
  REQUIRE(agent.signal(SIGSTOP));
  const int64_t paused_ms = wall_ms();

  auto running2 = wait_attempt(c, job, kRunning, 2, 30s);
  INFO(c.events().describe(job));
  REQUIRE(running2);
  CHECK(nodes_of(*running2).at(0) != first);
  CHECK(ts_of(*running2) - paused_ms >= 9000);  // not before the node timeout
  REQUIRE(wait_log(out, [](const CounterLog& l) { return l.max_counter(2) >= 3; }, 10s));
  CHECK(alive(worker));  // still there, stopped

  REQUIRE(agent.signal(SIGCONT));
  bool fenced = wait_dead(worker, 5s);
  ::kill(-worker, SIGCONT);  // a no-op once it is dead; otherwise the check below tells
  CHECK(fenced);
  CHECK(wait_dead(worker, 2s));

  auto done = c.wait_terminal(job, 30s);
  REQUIRE(done);
  CHECK(done->state == kSucceeded);

  auto log = CounterLog::read(out);
  INFO("counter log:\n" << read_file(out));
  auto a1 = log.of_attempt(1);
  auto a2 = log.of_attempt(2);
  REQUIRE(!a1.empty());
  REQUIRE(!a2.empty());
  // Progress intervals [first count, last count] of the two attempts do not overlap.
  CHECK(a1.back().ms < a2.front().ms);
  CHECK(a1.back().ms <= paused_ms + 200);
  for (const auto& e : log.exits) CHECK(e.attempt != 1);  // attempt 1 never ended by itself
  CHECK(a2.back().counter == 60);
  Json st = c.status("t1", job);
  CHECK(as_i64(st.value("retries_used", Json(0))) == 0);
  CHECK(read_file(c.scheduler().err_path()).find("node " + first + " is back") !=
        std::string::npos);
}

TEST_CASE("drain: running jobs finish, nothing new lands on the node, then uncordon",
          "[integration][preemption][drain]") {
  TmpDir work("troupe-drain");
  Cluster c(options(work).node("n1", 4).node("n2", 4));
  REQUIRE(c.wait_nodes_alive(2, 20s));
  auto sleeper = [](double s) {
    Json j = job_spec("t1", {"/bin/sh", "-c", "sleep " + std::to_string(s)}, 4);
    j["resources"]["gpu_type"] = "a100";
    return j;
  };
  const std::string a = c.submit_ok("t1", sleeper(4));
  auto a_running = c.events().wait_state(a, kRunning, 20s);
  REQUIRE(a_running);
  const std::string drained = nodes_of(*a_running).at(0);
  const std::string other = drained == "n1" ? "n2" : "n1";

  Json r = c.request("troupe.sys.drain", {{"node", drained}});
  INFO(r.dump());
  CHECK(r.value("state", std::string()) == "draining");
  CHECK(as_i64(r.value("running", Json(0))) == 1);
  const size_t drain_seq = c.events().all().back().seq;

  std::vector<std::string> more;
  for (int i = 0; i < 3; ++i) more.push_back(c.submit_ok("t1", sleeper(1)));
  for (const auto& id : more) {
    auto d = c.wait_terminal(id, 30s);
    REQUIRE(d);
    CHECK(d->state == kSucceeded);
  }
  auto a_done = c.wait_terminal(a, 20s);
  REQUIRE(a_done);
  CHECK(a_done->state == kSucceeded);  // it finished; it was not stopped
  CHECK(in_state(c.events().of_job(a), kRunning).size() == 1);
  INFO(c.events().describe());
  for (const auto& e : c.events().all())
    if (e.seq > drain_seq && e.state == kRunning) CHECK(nodes_of(e).at(0) == other);

  r = c.request("troupe.sys.drain", {{"node", drained}});
  CHECK(r.value("state", std::string()) == "drained");
  CHECK(as_i64(r.value("running", Json(0))) == 0);
  Json nodes = c.nodes();
  for (const auto& n : nodes["nodes"])
    if (n.value("node", std::string()) == drained) CHECK(n.value("schedulable", true) == false);

  r = c.request("troupe.sys.uncordon", {{"node", drained}});
  CHECK(r.value("state", std::string()) == "schedulable");
  // Two 4-GPU jobs at once: one of them needs the node back.
  std::vector<std::string> last = {c.submit_ok("t1", sleeper(2)), c.submit_ok("t1", sleeper(2))};
  std::set<std::string> used;
  for (const auto& id : last) {
    auto run = c.events().wait_state(id, kRunning, 20s);
    REQUIRE(run);
    used.insert(nodes_of(*run).at(0));
  }
  CHECK(used == std::set<std::string>{"n1", "n2"});
  for (const auto& id : last) {
    auto d = c.wait_terminal(id, 20s);
    REQUIRE(d);
    CHECK(d->state == kSucceeded);
  }
}

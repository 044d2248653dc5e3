// Fault-injection suite: 2,000 mixed jobs (1-GPU jobs and gangs) on simulated
// nodes while the harness kill -9s the scheduler 3 times, kills a node agent
// twice, restarts nats-server once and crashes random actors. At the end an
// audit over the TROUPE_EVENTS stream (tests/fault/audit.hpp), not the
// scheduler's own word, must show: every acknowledged job reached exactly one
// terminal state; no job ran two attempts at once; no GPU index was held by
// two jobs at a time; no gang ran partially; no job started before its
// upstream job succeeded (every 10th submission is a two-job pipeline). The
// five figures are printed and written to fault-report.txt (or
// $TROUPE_FAULT_REPORT).
//
// Faults are paced by progress (acknowledged submissions), not by time.
// Tuning through the environment (defaults in brackets): TROUPE_FAULT_JOBS
// [2000], TROUPE_FAULT_SEED [20261201], TROUPE_FAULT_SCHEDULER_KILLS [3],
// TROUPE_FAULT_AGENT_KILLS [2], TROUPE_FAULT_NATS_RESTARTS [1],
// TROUPE_FAULT_NATS_KILL [0; 1: kill -9 nats-server instead of SIGTERM],
// TROUPE_FAULT_CRASH_ROUNDS [8], TROUPE_FAULT_AGENTS [8],
// TROUPE_FAULT_BUDGET_S [285] (the whole test case, start to audit).
//
// NATS-cluster mode: TROUPE_FAULT_NATS_SERVERS [1; 3: a 3-server NATS
// cluster, streams and buckets R3]. Each nats fault then stops one server
// (the next in turn; SIGKILL with TROUPE_FAULT_NATS_KILL=1) and starts it
// again, and TROUPE_FAULT_NATS_ROLLING [0] adds that many rolling restarts
// (every server in turn, SIGTERM, each waited for until every stream has
// its copies current again). The audit is the same.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "audit.hpp"
#include "bus/subjects.hpp"
#include "harness.hpp"
#include "messages/names.hpp"

using namespace troupe::it;
namespace fault = troupe::fault;
namespace subjects = troupe::subjects;
namespace names = troupe::names;

namespace {

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  return end != nullptr && *end == '\0' ? n : fallback;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// What the live event subscription shows: each job's last state, which
// acknowledged jobs are terminal. It misses what is published while
// nats-server is down: the audit reads the stream instead.
class LiveView {
 public:
  explicit LiveView(troupe::bus::Connection& conn) {
    sub_ = conn.subscribe(subjects::kAllEvents, [this](troupe::Inbound&& in) { on_event(in); });
    REQUIRE(sub_);
    REQUIRE(conn.flush(5000));
  }
  ~LiveView() { sub_.reset(); }

  void acknowledged(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!acked_.insert(id).second) return;
    if (terminal_.count(id) != 0) ++acked_terminal_;
    cv_.notify_all();
  }
  size_t events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  // Every event text seen, in arrival order.
  std::vector<std::string> texts() const {
    std::lock_guard<std::mutex> lock(mu_);
    return texts_;
  }
  size_t outstanding() const {
    std::lock_guard<std::mutex> lock(mu_);
    return acked_.size() - acked_terminal_;
  }
  // Waits until fewer than `limit` acknowledged jobs are unfinished, or a
  // burst lets this submission through regardless.
  bool wait_room(size_t limit, Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    bool ok = cv_.wait_until(lock, deadline,
                             [&] { return burst_ > 0 || acked_.size() - acked_terminal_ < limit; });
    if (burst_ > 0) --burst_;
    return ok;
  }
  // The next `n` submissions go out without waiting for room (so that some
  // are in flight when a fault hits).
  void start_burst(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    burst_ = n;
    cv_.notify_all();
  }
  // Waits until every acknowledged job is terminal (as far as this view saw).
  bool wait_all_terminal(Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_until(lock, deadline, [&] { return acked_terminal_ == acked_.size(); });
  }
  std::vector<std::string> in_state(std::string_view state) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& [id, s] : last_)
      if (s == state) out.push_back(id);
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  void on_event(const troupe::Inbound& in) {
    Json j = Json::parse(in.data.begin(), in.data.end(), nullptr, false);
    if (!j.is_object() || !j.contains("job_id") || !j["job_id"].is_string() ||
        !j.contains("state") || !j["state"].is_string())
      return;
    std::string id = j["job_id"].get<std::string>();
    std::string state = j["state"].get<std::string>();
    std::lock_guard<std::mutex> lock(mu_);
    ++events_;
    texts_.emplace_back(in.data.begin(), in.data.end());
    last_[id] = state;
    if (names::is_terminal(state) && terminal_.insert(id).second && acked_.count(id) != 0)
      ++acked_terminal_;
    cv_.notify_all();
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, std::string> last_;
  std::unordered_set<std::string> terminal_;
  std::unordered_set<std::string> acked_;
  size_t acked_terminal_ = 0;
  int burst_ = 0;
  size_t events_ = 0;
  std::vector<std::string> texts_;
  troupe::bus::SubscriptionPtr sub_;
};

// Texts in `a` that `b` lacks (as multisets).
std::vector<std::string> missing_from(const std::vector<std::string>& a,
                                      const std::vector<std::string>& b) {
  std::unordered_map<std::string, int> count;
  for (const auto& s : b) ++count[s];
  std::vector<std::string> out;
  for (const auto& s : a)
    if (--count[s] < 0) out.push_back(s);
  return out;
}

std::vector<uint8_t> base64_decode(const std::string& in) {
  static const std::string chars =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> out;
  uint32_t buf = 0;
  int bits = 0;
  for (char ch : in) {
    auto pos = chars.find(ch);
    if (pos == std::string::npos) continue;  // '=' padding, line breaks
    buf = (buf << 6) | static_cast<uint32_t>(pos);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>((buf >> bits) & 0xff));
    }
  }
  return out;
}

// Every message of a stream, read one by one through the JetStream API
// ($JS.API.STREAM.INFO, then $JS.API.STREAM.MSG.GET for each sequence), on
// a few threads. No consumer is involved, so nothing can be skipped by flow
// control or a timeout: a sequence that is not there is reported.
struct StreamRead {
  std::vector<std::string> texts;  // in stream order
  uint64_t first_seq = 0, last_seq = 0, messages = 0;
  std::vector<std::string> errors;
};

StreamRead read_stream_by_seq(troupe::bus::Connection& conn, const std::string& stream) {
  StreamRead r;
  std::string err;
  auto info = conn.request("$JS.API.STREAM.INFO." + stream, std::string("{}"), 5000, &err);
  if (!info) {
    r.errors.push_back("stream info: no reply: " + err);
    return r;
  }
  Json j = Json::parse(info->begin(), info->end(), nullptr, false);
  if (!j.is_object() || !j.contains("state")) {
    r.errors.push_back("stream info: " + std::string(info->begin(), info->end()));
    return r;
  }
  r.first_seq = j["state"].value("first_seq", uint64_t{0});
  r.last_seq = j["state"].value("last_seq", uint64_t{0});
  r.messages = j["state"].value("messages", uint64_t{0});
  if (r.messages == 0 || r.last_seq < r.first_seq) return r;
  size_t n = static_cast<size_t>(r.last_seq - r.first_seq + 1);
  std::vector<std::optional<std::string>> got(n);
  std::vector<std::string> errors(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      std::string body = Json{{"seq", r.first_seq + i}}.dump(), e;
      std::optional<std::vector<uint8_t>> reply;
      for (int attempt = 0; attempt < 3 && !reply; ++attempt)
        reply = conn.request("$JS.API.STREAM.MSG.GET." + stream, body, 5000, &e);
      if (!reply) {
        errors[i] = "no reply: " + e;
        continue;
      }
      Json m = Json::parse(reply->begin(), reply->end(), nullptr, false);
      if (m.is_object() && m.contains("message") && m["message"].contains("data")) {
        auto bytes = base64_decode(m["message"]["data"].get<std::string>());
        got[i] = std::string(bytes.begin(), bytes.end());
      } else {
        errors[i] = std::string(reply->begin(), reply->end());
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) threads.emplace_back(work);
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < n; ++i) {
    if (got[i]) {
      r.texts.push_back(std::move(*got[i]));
    } else if (errors[i].find("no message found") == std::string::npos) {
      // A deleted sequence says "no message found": not an error.
      r.errors.push_back("seq " + std::to_string(r.first_seq + i) + ": " + errors[i]);
    }
  }
  return r;
}

struct PlannedJob {
  std::string team;
  Json spec;  // a job's, or (pipeline) a pipeline's: its upstream job, then its dependent
  int workers = 1;
  int gpus = 1;
  bool pipeline = false;
};

// A simulated job of the mix: `name`, `gpus` x `workers`, for `dur` seconds;
// `fails`: exit 3, one retry.
Json sim_job(const std::string& team, const std::string& name, int gpus, int workers,
             const char* dur, bool fails) {
  Json spec = job_spec(team, {"sleep", dur}, gpus, workers);
  spec["name"] = name;
  spec["env"] = Json{{"TROUPE_SIM_DURATION_S", dur}};
  if (fails) {
    spec["env"]["TROUPE_SIM_EXIT"] = "3";
    spec["max_retries"] = 1;
  }
  return spec;
}

// The mix: mostly 1-GPU jobs, a fifth gangs of 2-4 workers with 1-2 GPUs
// each, every 31st job fails (exit 3, one retry), simulated for 0.3-2.5 s.
// Every 10th is a pipeline of two 1-GPU jobs, the second after the first
// (depends_on): the audit's figure 5.
std::vector<PlannedJob> plan_jobs(size_t n, uint32_t seed, const std::vector<std::string>& teams) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<PlannedJob> jobs;
  for (size_t i = 0; i < n; ++i) {
    PlannedJob p;
    p.team = teams[i % teams.size()];
    bool gang = unit(rng) < 0.2;
    p.workers = gang ? 2 + static_cast<int>(rng() % 3) : 1;
    p.gpus = gang ? 1 + static_cast<int>(rng() % 2) : 1;
    double dur = gang ? 0.5 + 2.0 * unit(rng) : 0.3 + 1.7 * unit(rng);
    char buf[16];
    std::snprintf(buf, sizeof buf, "%.2f", dur);
    const std::string name = "fault-" + std::to_string(i);
    const bool fails = i % 31 == 30;
    p.pipeline = i % 10 == 5;
    if (p.pipeline) {
      p.workers = p.gpus = 1;
      Json down = sim_job(p.team, name + "-down", 1, 1, buf, false);
      down["depends_on"] = Json::array({Json{{"name", name + "-up"}}});
      p.spec = Json{{"name", name},
                    {"jobs", Json::array({sim_job(p.team, name + "-up", 1, 1, buf, fails), down})}};
    } else {
      p.spec = sim_job(p.team, name, p.gpus, p.workers, buf, fails);
    }
    p.spec["idempotency_key"] = "fault-" + std::to_string(seed) + "-" + std::to_string(i);
    jobs.push_back(std::move(p));
  }
  return jobs;
}

struct Counters {
  std::atomic<size_t> acked{0};
  std::atomic<size_t> submit_retries{0};
  std::atomic<size_t> cancels{0};
  std::atomic<bool> stop{false};  // submitters give up (no acknowledgement for long)
  std::mutex mu;
  std::condition_variable cv;  // acked grew
  std::map<std::string, fault::JobInfo> acknowledged;
  std::map<std::string, size_t> index_of;  // job id -> plan index
  std::vector<std::string> errors;         // refusals that are not "try again"
};

// One submitter: takes the next job, retries it with the same idempotency key
// until a reply carries a job id.
void submit_loop(Cluster& c, LiveView& live, const std::vector<PlannedJob>& plan,
                 std::atomic<size_t>& next, Counters& k, size_t window, std::atomic<bool>& unpaced,
                 Clock::time_point deadline) {
  while (true) {
    size_t i = next++;
    if (i >= plan.size() || Clock::now() >= deadline || k.stop) return;
    // Pace: at most `window` acknowledged jobs unfinished. When the view stops
    // moving (the scheduler lost them), go on unpaced so the run still ends.
    if (!unpaced && !live.wait_room(window, Clock::now() + 20s)) unpaced = true;
    const auto& p = plan[i];
    std::string body = p.spec.dump();
    std::vector<std::string> ids;  // a pipeline's: upstream first
    while (ids.empty() && Clock::now() < deadline && !k.stop) {
      std::string err;
      auto reply = c.conn().request(
          p.pipeline ? subjects::team_pipeline(p.team) : subjects::team_submit(p.team), body, 2000,
          &err);
      if (reply) {
        Json r = Json::parse(reply->begin(), reply->end(), nullptr, false);
        if (r.is_object() && r.contains("job_id") && r["job_id"].is_string()) {
          ids.push_back(r["job_id"].get<std::string>());
          break;
        }
        if (r.is_object() && r.contains("jobs") && r["jobs"].is_array() && r["jobs"].size() == 2) {
          for (const auto& j : r["jobs"]) ids.push_back(j.value("job_id", ""));
          break;
        }
        std::string e = r.is_object() && r.contains("error") ? r["error"].dump() : r.dump();
        if (e.find("retry") == std::string::npos) {
          std::lock_guard<std::mutex> lock(k.mu);
          k.errors.push_back("job " + std::to_string(i) + ": " + e);
          break;
        }
      }
      ++k.submit_retries;
      // Back-off between tries while the scheduler or nats-server is down.
      std::this_thread::sleep_for(100ms);
    }
    if (ids.empty()) continue;
    {
      std::lock_guard<std::mutex> lock(k.mu);
      for (size_t m = 0; m < ids.size(); ++m) {
        const auto& id = ids[m];
        if (k.acknowledged.count(id) != 0)
          k.errors.push_back("job id " + id + " acknowledged for two submissions (" +
                             std::to_string(k.index_of[id]) + " and " + std::to_string(i) + ")");
        std::vector<std::string> after;
        if (m > 0) after.push_back(ids[m - 1]);
        k.acknowledged[id] = fault::JobInfo{p.workers, p.gpus, std::move(after)};
        k.index_of[id] = i;
        live.acknowledged(id);
      }
      ++k.acked;  // under k.mu: waiters on k.cv miss no wake-up
    }
    k.cv.notify_all();
    // A few cancels, best effort (lost when the scheduler is down); a
    // pipeline's upstream job (its dependent then ends dependency_failed).
    if (i % 97 == 50) {
      std::string err, req = Json{{"job_id", ids.front()}}.dump();
      if (c.conn().request(subjects::team_cancel(p.team), req, 2000, &err)) ++k.cancels;
    }
  }
}

}  // namespace

TEST_CASE("fault injection: mixed jobs and gangs survive scheduler, agent, nats and actor failures",
          "[fault]") {
  const auto t0 = Clock::now();
  const size_t n_jobs = static_cast<size_t>(env_long("TROUPE_FAULT_JOBS", 2000));
  const uint32_t seed = static_cast<uint32_t>(env_long("TROUPE_FAULT_SEED", 20261201));
  const int scheduler_kills = static_cast<int>(env_long("TROUPE_FAULT_SCHEDULER_KILLS", 3));
  const int agent_kills = static_cast<int>(env_long("TROUPE_FAULT_AGENT_KILLS", 2));
  const int nats_restarts = static_cast<int>(env_long("TROUPE_FAULT_NATS_RESTARTS", 1));
  const bool nats_kill = env_long("TROUPE_FAULT_NATS_KILL", 0) != 0;
  const int nats_servers = static_cast<int>(env_long("TROUPE_FAULT_NATS_SERVERS", 1));
  const int nats_rolling = static_cast<int>(env_long("TROUPE_FAULT_NATS_ROLLING", 0));
  const int crash_rounds = static_cast<int>(env_long("TROUPE_FAULT_CRASH_ROUNDS", 8));
  const int n_agents = static_cast<int>(env_long("TROUPE_FAULT_AGENTS", 8));
  const int gpus_per_agent = 8;
  const auto deadline = t0 + std::chrono::seconds(env_long("TROUPE_FAULT_BUDGET_S", 285));
  const std::vector<std::string> teams = {"fa", "fb", "fc", "fd"};

  TmpDir ckpt("troupe-fault-ckpt");
  ClusterOptions opts;
  opts.nats_servers = nats_servers;
  opts.scheduler_args = {"--debug-crash", "--checkpoint-root", ckpt.path()};
  std::vector<NodeOptions> agents;
  for (int i = 1; i <= n_agents; ++i) {
    agents.push_back(NodeOptions{"f" + std::to_string(i), gpus_per_agent, "a100", true, {}});
    opts.nodes.push_back(agents.back());
  }
  Cluster c(opts);
  // Longer than the scheduler waits for a forming NATS cluster's JetStream
  // (30 s, shell/bootstrap.cpp): should it give up, its reason is shown.
  REQUIRE(c.wait_nodes_alive(static_cast<size_t>(n_agents), 45s));
  LiveView live(c.conn());

  auto plan = plan_jobs(n_jobs, seed, teams);
  size_t planned_gangs = 0, planned_jobs = 0;  // (a pipeline is two jobs)
  for (const auto& p : plan) {
    planned_gangs += p.workers > 1 ? 1 : 0;
    planned_jobs += p.pipeline ? 2 : 1;
  }

  Counters k;
  std::atomic<size_t> next{0};
  std::atomic<bool> unpaced{false};
  const size_t window = static_cast<size_t>(n_agents * gpus_per_agent) * 3;
  std::vector<std::thread> submitters;
  for (int t = 0; t < 4; ++t)
    submitters.emplace_back(submit_loop, std::ref(c), std::ref(live), std::cref(plan),
                            std::ref(next), std::ref(k), window, std::ref(unpaced), deadline);

  // --- the faults, paced by acknowledged submissions ------------------------
  std::ostringstream log;  // what was done, when
  int sched_kills_done = 0, agent_kills_done = 0, nats_restarts_done = 0, crashes_sent = 0,
      crashes_answered = 0, rolling_done = 0;
  std::vector<std::string> fault_problems;
  std::mt19937 rng(seed ^ 0x5eedu);
  // The schedule: (fraction of the jobs acknowledged, fault).
  enum class Fault { crash, scheduler, agent, nats, rolling };
  std::vector<std::pair<double, Fault>> schedule;
  for (int i = 0; i < crash_rounds; ++i)
    schedule.emplace_back(0.10 + 0.75 * i / std::max(1, crash_rounds - 1) - 0.02, Fault::crash);
  for (int i = 0; i < scheduler_kills; ++i)
    schedule.emplace_back(0.15 + 0.60 * i / std::max(1, scheduler_kills - 1), Fault::scheduler);
  for (int i = 0; i < agent_kills; ++i)
    schedule.emplace_back(0.25 + 0.40 * i / std::max(1, agent_kills - 1), Fault::agent);
  for (int i = 0; i < nats_restarts; ++i) schedule.emplace_back(0.40 + 0.2 * i, Fault::nats);
  for (int i = 0; i < nats_rolling; ++i) schedule.emplace_back(0.50 + 0.2 * i, Fault::rolling);
  std::stable_sort(schedule.begin(), schedule.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });

  auto note = [&](const std::string& what) {
    log << "  t=" << static_cast<int>(seconds_since(t0)) << "s acked=" << k.acked.load()
        << " outstanding=" << live.outstanding() << ": " << what << "\n";
  };
  auto crash = [&](const std::string& kind, const std::string& id) {
    ++crashes_sent;
    std::string err, body = Json{{"kind", kind}, {"id", id}}.dump();
    auto r = c.conn().request(subjects::kSysDebugCrash, body, 2000, &err);
    std::string text = r ? std::string(r->begin(), r->end()) : "no reply: " + err;
    if (r && text.find("crashed") != std::string::npos) ++crashes_answered;
    note("crash " + kind + " " + id + " -> " + text);
  };
  auto serving = [&](const std::string& after) {
    if (!c.wait_scheduler_serving(30s)) {
      fault_problems.push_back("no scheduler served within 30 s after " + after);
      note("scheduler NOT serving after " + after);
    }
  };

  // Waits until `target` submissions are acknowledged; false at the deadline
  // or when none was acknowledged for `stall` (the scheduler stopped taking them).
  auto wait_acked = [&](size_t target, Clock::duration stall) {
    while (true) {
      size_t before = k.acked.load();
      std::unique_lock<std::mutex> lock(k.mu);
      if (k.cv.wait_until(lock, std::min(deadline, Clock::now() + stall),
                          [&] { return k.acked.load() >= target; }))
        return true;
      if (Clock::now() >= deadline || k.acked.load() == before) return false;
    }
  };
  // Submissions in flight when the fault hits: let a burst through and strike
  // once part of it is acknowledged (its rest then meets the fault).
  auto burst = [&] {
    live.start_burst(60);
    wait_acked(k.acked.load() + 20, 10s);
  };
  bool submissions_stalled = false;
  for (const auto& [fraction, f] : schedule) {
    if (!wait_acked(static_cast<size_t>(fraction * static_cast<double>(n_jobs)), 60s)) {
      submissions_stalled = true;
      note("no submission acknowledged for 60 s (or out of time): no more faults");
      break;
    }
    switch (f) {
      case Fault::crash: {
        auto running = live.in_state(names::kRunning);
        if (!running.empty()) crash("job", running[rng() % running.size()]);
        crash("queue", teams[rng() % teams.size()]);
        crash("node", agents[rng() % agents.size()].name);
        break;
      }
      case Fault::scheduler: {
        burst();
        note("kill -9 the scheduler (pid " + std::to_string(c.scheduler().pid()) + ")");
        c.kill_scheduler();
        ++sched_kills_done;
        c.restart_scheduler();
        serving("scheduler kill " + std::to_string(sched_kills_done));
        note("scheduler restarted (pid " + std::to_string(c.scheduler().pid()) + ")");
        break;
      }
      case Fault::agent: {
        // The first kill restarts the agent at once (it registers again
        // without its workers: agent lost); the next waits until the
        // scheduler calls the node lost (heartbeats stop for 10 s).
        const auto& a = agents[(2 + 3 * static_cast<size_t>(agent_kills_done)) % agents.size()];
        Process* p = nullptr;
        for (size_t i = 0;; ++i) {
          try {
            if (c.node(i).name() == "troupe-node " + a.name) p = &c.node(i);
          } catch (const std::out_of_range&) {
            break;
          }
        }
        REQUIRE(p != nullptr);
        note("kill -9 node agent " + a.name + " (pid " + std::to_string(p->pid()) + ")");
        p->kill_now();
        ++agent_kills_done;
        if (agent_kills_done % 2 == 0) {
          auto until = std::min(deadline, Clock::now() + 20s);
          bool lost = false;
          while (!lost && Clock::now() < until) {
            Json nodes = c.nodes(1s);
            if (nodes.contains("nodes") && nodes["nodes"].is_array())
              for (const auto& n : nodes["nodes"])
                if (n.value("node", "") == a.name && !n.value("alive", true)) lost = true;
            if (!lost) std::this_thread::sleep_for(200ms);  // polling: no event for "lost"
          }
          note(std::string("node ") + a.name + (lost ? " reported lost" : " NOT reported lost"));
        }
        c.add_node(a);
        note("node agent " + a.name + " restarted");
        break;
      }
      case Fault::nats: {
        burst();
        const size_t server = static_cast<size_t>(nats_restarts_done) % c.nats_servers();
        const std::string which =
            c.nats_servers() > 1 ? "nats-server s" + std::to_string(server) : "nats-server";
        note(nats_kill ? "kill -9 and restart " + which : "restart " + which + " (SIGTERM)");
        c.restart_nats_server(server, nats_kill, 30s);
        ++nats_restarts_done;
        serving(which + " restart");
        note(which + " restarted");
        break;
      }
      case Fault::rolling: {
        // Every server in turn, the next once every stream has its copies
        // again (as an operator upgrading the cluster does).
        burst();
        // An operator starts once every copy is current (a server restarted
        // a moment ago, by the last fault, may still be catching up: one
        // restarted again then may stay behind on nats-server 2.9.10).
        if (c.nats_servers() > 1) {
          auto before = c.bring_streams_current(60s);
          for (const auto& step : before.steps) note("before the rolling restart: " + step);
          if (!before.current)
            fault_problems.push_back("streams not current before the rolling restart: " +
                                     before.why);
        }
        for (size_t i = 0; i < c.nats_servers(); ++i) {
          note("rolling restart: nats-server s" + std::to_string(i) + " (SIGTERM)");
          c.restart_nats_server(i, false, 30s);
          if (c.nats_servers() < 2) continue;
          // What an operator does when one is still behind (docs/deploy.md):
          // its leader steps down, then its server restarts; each step is in
          // the fault log, and still behind after both is a problem.
          auto caught = c.bring_streams_current(60s);
          for (const auto& step : caught.steps) note(step);
          if (!caught.current)
            fault_problems.push_back("streams not current after restarting s" + std::to_string(i) +
                                     ", their leaders' step-down and " +
                                     "their servers' restart: " + caught.why);
        }
        ++rolling_done;
        serving("the rolling restart");
        note("rolling restart done");
        break;
      }
    }
  }
  if (!submissions_stalled && !wait_acked(plan.size(), 60s)) {
    submissions_stalled = true;
    note("no submission acknowledged for 60 s (or out of time)");
  }
  k.stop = true;
  live.start_burst(1 << 20);  // wakes submitters waiting for room: they see `stop`
  for (auto& t : submitters) t.join();
  note("all submissions done: " + std::to_string(k.acked.load()) + " acknowledged");

  // --- the end: every acknowledged job terminal in the stream ----------------
  std::map<std::string, fault::JobInfo> acked;
  {
    std::lock_guard<std::mutex> lock(k.mu);
    acked = k.acknowledged;
  }
  StreamRead last_read;
  auto read_stream = [&] {
    last_read = read_stream_by_seq(c.conn(), subjects::kEventsStream);
    return last_read.texts;
  };
  std::vector<std::string> stored;
  fault::AuditReport report;
  size_t best_missing = SIZE_MAX;
  auto progress_at = Clock::now();
  bool stalled = false;
  while (true) {
    // The live view first (cheap); the stream decides.
    live.wait_all_terminal(std::min(deadline, Clock::now() + 10s));
    stored = read_stream();
    report = fault::audit_json(stored, acked);
    if (report.missing_terminal == 0 || Clock::now() >= deadline) break;
    if (report.missing_terminal < best_missing) {
      best_missing = report.missing_terminal;
      progress_at = Clock::now();
    } else if (Clock::now() - progress_at > 45s) {
      // No acknowledged job has ended for 45 s: the rest are lost, not slow.
      stalled = true;
      break;
    }
    // The live view may have seen them all while the stream has not (yet):
    // poll the stream, bounded by the deadline.
    if (live.outstanding() == 0) std::this_thread::sleep_for(1s);
  }
  note("audit of " + std::to_string(stored.size()) + " stored events" +
       (stalled ? " (stopped waiting: no acknowledged job ended for 45 s)" : ""));

  // Idempotency: each submission (its name, fault-<i>, is unique) must be one
  // job, however often it was retried across scheduler kills.
  std::vector<std::string> split_submissions;
  {
    std::map<std::string, std::set<std::string>> ids_by_name;
    for (const auto& t : stored) {
      Json j = Json::parse(t, nullptr, false);
      if (j.is_object() && j.contains("name") && j["name"].is_string() && j.contains("job_id"))
        ids_by_name[j["name"].get<std::string>()].insert(j["job_id"].get<std::string>());
    }
    for (const auto& [name, ids] : ids_by_name) {
      if (ids.size() < 2) continue;
      std::string line = name + " ran as " + std::to_string(ids.size()) + " jobs:";
      for (const auto& id : ids)
        line += " " + id + (acked.count(id) ? " (acknowledged)" : " (never acknowledged)");
      split_submissions.push_back(line);
    }
  }

  // The same stream through bus::JetStream::read_all (an ordered consumer), to
  // compare: what `troupe history` would see.
  size_t via_bus = 0;
  {
    std::string js_error;
    auto js = troupe::bus::JetStream::open(c.conn(), &js_error);
    if (js) via_bus = js->read_all(subjects::kEventsStream, subjects::kAllEvents, 3000).size();
  }

  // --- the report ------------------------------------------------------------
  // Events published (seen live) that the stream did not keep would be lost
  // history; the other way round is normal (published while the test's
  // subscription was reconnecting).
  auto live_texts = live.texts();
  // Every transition seen live is in the stream: compared by job, event
  // number, state and attempt. The stream keeps one event per (job, number)
  // (Nats-Msg-Id); a transition announced again after a restart (its first
  // copy's acknowledgement was still awaited, or nats-server stored it late)
  // is seen live twice, possibly with another time, and stored once.
  auto transition = [](const std::string& text) {
    Json j = Json::parse(text, nullptr, false);
    if (!j.is_object()) return text;
    return j.value("job_id", "") + "#" + j.value("seq", "") + "#" + j.value("state", "") + "#" +
           std::to_string(j.value("attempt", 0));
  };
  std::set<std::string> stored_transitions;
  for (const auto& t : stored) stored_transitions.insert(transition(t));
  std::set<std::string> live_seen;
  std::vector<std::string> not_stored;
  for (const auto& t : live_texts)
    if (!stored_transitions.count(transition(t)) && live_seen.insert(transition(t)).second)
      not_stored.push_back(t);
  auto not_live = missing_from(stored, live_texts);
  std::ostringstream out;
  out << "==== fault-injection audit (seed " << seed << ", " << seconds_since(t0) << " s) ====\n"
      << "FIGURES: " << report.figures() << "\n"
      << "jobs planned " << planned_jobs << " (gangs " << planned_gangs << ", dependents "
      << planned_jobs - plan.size() << "), acknowledged " << acked.size() << " (gangs "
      << report.gangs << "), submit retries " << k.submit_retries.load() << ", cancels sent "
      << k.cancels.load() << "\n"
      << "faults: scheduler kill -9 " << sched_kills_done << ", node agent kill -9 "
      << agent_kills_done << ", nats-server restarts " << nats_restarts_done << " (of "
      << c.nats_servers() << " server(s)), rolling restarts " << rolling_done << ", actor crashes "
      << crashes_answered << " of " << crashes_sent << " answered"
      << (unpaced ? ", submissions went unpaced (the view stopped moving)" : "")
      << (submissions_stalled ? ", SUBMISSIONS STALLED (see the fault log)" : "") << "\n"
      << "events: " << stored.size() << " in the stream, " << live_texts.size()
      << " seen live by the test; seen live but not in the stream: " << not_stored.size()
      << ", in the stream but not seen live: " << not_live.size() << "; stream TROUPE_EVENTS seq "
      << last_read.first_seq << ".." << last_read.last_seq << " (" << last_read.messages
      << " messages), bus::JetStream::read_all returned " << via_bus << "\n"
      << "submissions that ran as two jobs or more (same idempotency key): "
      << split_submissions.size() << "\n"
      << report.describe(25) << "fault log:\n"
      << log.str();
  for (size_t i = 0; i < not_stored.size() && i < 20; ++i)
    out << "seen live, not in the stream: " << not_stored[i] << "\n";
  for (size_t i = 0; i < split_submissions.size() && i < 20; ++i)
    out << "split submission: " << split_submissions[i] << "\n";
  for (size_t i = 0; i < last_read.errors.size() && i < 20; ++i)
    out << "stream read error: " << last_read.errors[i] << "\n";
  for (const auto& e : k.errors) out << "submit error: " << e << "\n";
  for (const auto& e : fault_problems) out << "fault problem: " << e << "\n";
  std::string text = out.str();
  std::cout << text << std::flush;
  const char* path_env = std::getenv("TROUPE_FAULT_REPORT");
  std::string path = path_env && *path_env ? path_env : "fault-report.txt";
  std::ofstream(path) << text;
  // Also the raw events, for digging into a failure.
  {
    std::ofstream ev(path + ".events.jsonl");
    for (const auto& s : stored) ev << s << "\n";
  }
  WARN("fault audit: " << report.figures() << " (report: " << path << ")");

  CHECK(k.errors.empty());
  CHECK(fault_problems.empty());
  CHECK(k.acked == plan.size());
  CHECK(acked.size() == planned_jobs);
  CHECK(sched_kills_done == scheduler_kills);
  CHECK(agent_kills_done == agent_kills);
  CHECK(nats_restarts_done == nats_restarts);
  CHECK(rolling_done == nats_rolling);
  CHECK(not_stored.empty());
  CHECK(last_read.errors.empty());
  CHECK(split_submissions.empty());
  INFO(report.describe(25));
  CHECK(report.malformed == 0);
  CHECK(report.terminal_once == report.acknowledged);
  CHECK(report.overlapping_jobs == 0);
  CHECK(report.gpu_clashes == 0);
  CHECK(report.partial_gangs == 0);
  CHECK(report.partial_singles == 0);
  CHECK(report.dependents == planned_jobs - plan.size());
  CHECK(report.early_dependents == 0);
  CHECK(seconds_since(t0) < 300);
}

// Owns the arithmetic of load and replay reports and their table rendering.
#include "load/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <sstream>

#include "load/stats.hpp"

namespace troupe::load {

namespace {

constexpr double kNsPerMs = 1e6;
constexpr double kNsPerS = 1e9;

double round3(double v) {
  return std::round(v * 1000.0) / 1000.0;
}

Json summary_json(const std::vector<double>& samples) {
  Summary s = summarize(samples);
  return Json{{"count", s.count},     {"mean", round3(s.mean)}, {"p50", round3(s.p50)},
              {"p99", round3(s.p99)}, {"p999", round3(s.p999)}, {"max", round3(s.max)}};
}

Json scheduler_json(const RunInfo& info) {
  if (!info.scheduler) return nullptr;
  Json j{{"pid", info.scheduler->pid}};
  j["peak_rss_kb"] = info.scheduler->hwm_kb ? Json(*info.scheduler->hwm_kb) : Json(nullptr);
  j["rss_kb"] = info.scheduler->rss_kb ? Json(*info.scheduler->rss_kb) : Json(nullptr);
  if (info.scheduler->hwm_kb) j["peak_rss_mb"] = round3(*info.scheduler->hwm_kb / 1024.0);
  return j;
}

// Counts shared by both reports.
void common(const std::vector<JobResult>& jobs, const RunInfo& info, Json& r) {
  size_t acked = 0, rejected = 0, unanswered = 0, placed = 0, terminal = 0;
  std::map<std::string, size_t> states{{"succeeded", 0}, {"failed", 0}, {"canceled", 0}};
  std::map<std::string, size_t> errors;
  for (const auto& j : jobs) {
    if (j.acked_ns >= 0) {
      ++acked;
      if (j.placed_ns >= 0) ++placed;
      if (!j.final_state.empty()) {
        ++terminal;
        ++states[j.final_state];
      }
    } else if (!j.error.empty()) {
      ++rejected;
      if (errors.size() < 10 || errors.count(j.error) != 0) ++errors[j.error];
    } else {
      ++unanswered;
    }
  }
  states["not_terminal"] = acked - terminal;
  r["config"] = info.config;
  r["submitted"] = jobs.size();
  r["acknowledged"] = acked;
  r["rejected"] = rejected;
  r["unanswered"] = unanswered;
  r["placed"] = placed;
  r["terminal"] = terminal;
  r["complete"] = info.complete;
  r["states"] = states;
  r["errors"] = errors;
  r["total_s"] = round3(info.total_s);
  r["scheduler"] = scheduler_json(info);
  r["nats_dropped"] = info.dropped;
  r["rerouted"] = info.rerouted;
}

int64_t first_sent(const std::vector<JobResult>& jobs) {
  int64_t t = -1;
  for (const auto& j : jobs)
    if (j.sent_ns >= 0 && (t < 0 || j.sent_ns < t)) t = j.sent_ns;
  return t;
}

double rate(size_t n, int64_t from_ns, int64_t to_ns) {
  if (n == 0 || from_ns < 0 || to_ns <= from_ns) return 0;
  return round3(static_cast<double>(n) / (static_cast<double>(to_ns - from_ns) / kNsPerS));
}

}  // namespace

Json load_report(const std::vector<JobResult>& jobs, const RunInfo& info) {
  Json r{{"mode", "load"}};
  common(jobs, info, r);
  int64_t t0 = first_sent(jobs), last_ack = -1, last_placed = -1, last_sent = -1;
  std::vector<double> ack_ms, placed_ms;
  size_t acked = 0, placed = 0;
  for (const auto& j : jobs) {
    last_sent = std::max(last_sent, j.sent_ns);
    if (j.acked_ns < 0) continue;
    ++acked;
    last_ack = std::max(last_ack, j.acked_ns);
    ack_ms.push_back(static_cast<double>(j.acked_ns - j.sent_ns) / kNsPerMs);
    if (j.placed_ns >= 0) {
      ++placed;
      last_placed = std::max(last_placed, j.placed_ns);
      placed_ms.push_back(static_cast<double>(j.placed_ns - j.sent_ns) / kNsPerMs);
    }
  }
  r["submit_window_s"] = t0 >= 0 ? round3(static_cast<double>(last_sent - t0) / kNsPerS) : 0.0;
  r["submit_rate_per_s"] = rate(acked, t0, last_ack);
  r["placement_rate_per_s"] = rate(placed, t0, last_placed);
  r["submit_to_ack_ms"] = summary_json(ack_ms);
  r["submit_to_placed_ms"] = summary_json(placed_ms);
  return r;
}

std::vector<TraceTiming> trace_timeline(const std::vector<JobResult>& jobs, double speedup) {
  if (!(speedup > 0)) speedup = 1;
  std::vector<TraceTiming> out(jobs.size());
  // Every attempt: those that ended preempted, then the last one.
  struct Attempt {
    size_t job;
    int64_t run_ns, end_ns;  // end_ns -1: not ended
    bool last;
    double start_s = 0, end_s = 0;
    bool done = false;  // its trace times are computed
  };
  std::vector<Attempt> att;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const JobResult& j = jobs[i];
    if (j.acked_ns < 0 || j.running_ns < 0 || j.trace_arrival_s < 0 || j.trace_duration_s < 0)
      continue;
    for (const auto& [run, stop] : j.preempted_ns) att.push_back({i, run, stop, false});
    const int64_t last =
        j.last_running_ns >= 0 ? j.last_running_ns : (j.preempted_ns.empty() ? j.running_ns : -1);
    if (last >= 0) att.push_back({i, last, j.ended_ns, true});
  }
  std::vector<size_t> started(att.size()), ended;
  for (size_t k = 0; k < att.size(); ++k) {
    started[k] = k;
    if (att[k].end_ns >= 0) ended.push_back(k);
  }
  std::stable_sort(started.begin(), started.end(),
                   [&](size_t a, size_t b) { return att[a].run_ns < att[b].run_ns; });
  std::stable_sort(ended.begin(), ended.end(),
                   [&](size_t a, size_t b) { return att[a].end_ns < att[b].end_ns; });
  std::vector<double> ready(jobs.size(), 0);  // when its next attempt may start (trace)
  for (size_t i = 0; i < jobs.size(); ++i) ready[i] = std::max(0.0, jobs[i].trace_arrival_s);
  double frontier = 0;  // the latest trace end among the attempts ended so far
  size_t next_end = 0;
  for (size_t k : started) {
    Attempt& a = att[k];
    const JobResult& j = jobs[a.job];
    while (next_end < ended.size() && att[ended[next_end]].end_ns <= a.run_ns &&
           att[ended[next_end]].done) {
      frontier = std::max(frontier, att[ended[next_end]].end_s);
      ++next_end;
    }
    a.start_s = std::max(ready[a.job], frontier);
    a.done = true;
    TraceTiming& t = out[a.job];
    if (!t.known) {  // its first attempt: the wait
      t.known = true;
      t.start_s = a.start_s;
      t.wait_s = a.start_s - j.trace_arrival_s;
    }
    if (a.end_ns < 0) continue;
    // A preempted attempt, or one that failed or was canceled, ran its wall
    // run x speedup (at most the trace duration); a last attempt that
    // succeeded, the trace duration.
    double run = j.trace_duration_s;
    if (!a.last || j.final_state != "succeeded")
      run = std::min(
          run, static_cast<double>(std::max<int64_t>(0, a.end_ns - a.run_ns)) / kNsPerS * speedup);
    a.end_s = a.start_s + run;
    ready[a.job] = a.end_s;
    if (a.last) {
      t.ended = true;
      t.end_s = a.end_s;
    }
  }
  return out;
}

namespace {
double runtime_limit_factor_of(const Json& config) {
  if (config.is_object() && config.contains("runtime_limit_factor") &&
      config["runtime_limit_factor"].is_number())
    return std::max(1.0, config["runtime_limit_factor"].get<double>());
  return 2.0;
}
}  // namespace

Json wait_bound_json(const std::vector<JobResult>& jobs, const std::vector<TraceTiming>& timeline,
                     double factor) {
  // Jobs in trace arrival order (file order on a tie): "ahead" of a job are
  // those that arrived before it and had not ended (in trace time) when it
  // arrived. A max-heap of their max_runtime_s, ended ones dropped lazily:
  // arrivals only grow, so a job ended by one arrival is ended for the next.
  std::vector<size_t> order;
  for (size_t i = 0; i < jobs.size() && i < timeline.size(); ++i)
    if (timeline[i].known && jobs[i].trace_arrival_s >= 0 && jobs[i].trace_duration_s >= 0)
      order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return jobs[a].trace_arrival_s < jobs[b].trace_arrival_s;
  });
  std::priority_queue<std::pair<double, double>> ahead;  // (max_runtime_s, trace end)
  size_t violations = 0;
  double worst = 0, worst_wait = 0, worst_bound = 0;
  for (size_t i : order) {
    const double a = jobs[i].trace_arrival_s;
    while (!ahead.empty() && ahead.top().second <= a) ahead.pop();
    const double bound = ahead.empty() ? 0.0 : 2.0 * ahead.top().first;
    const double wait = timeline[i].wait_s;
    if (wait > bound + 1e-3) {
      ++violations;
      const double ratio = bound > 0 ? wait / bound : std::numeric_limits<double>::infinity();
      if (ratio > worst) {
        worst = ratio;
        worst_wait = wait;
        worst_bound = bound;
      }
    }
    const TraceTiming& t = timeline[i];
    ahead.emplace(factor * jobs[i].trace_duration_s,
                  t.ended ? t.end_s : std::numeric_limits<double>::infinity());
  }
  return Json{{"jobs_checked", order.size()},
              {"violations", violations},
              {"worst_wait_trace_s", round3(worst_wait)},
              {"worst_bound_trace_s", round3(worst_bound)}};
}

Json replay_report(const std::vector<JobResult>& jobs, const std::vector<AllocSample>& samples,
                   double speedup, const RunInfo& info) {
  Json r{{"mode", "replay"}};
  common(jobs, info, r);
  if (speedup <= 0) speedup = 1;
  std::vector<TraceTiming> timeline;
  if (info.exact_trace_times) {
    // The event times are trace times (ns from trace 0): wait = first running
    // - arrival, end = the terminal event.
    timeline.resize(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      const JobResult& j = jobs[i];
      if (j.acked_ns < 0 || j.running_ns < 0 || j.trace_arrival_s < 0) continue;
      TraceTiming& t = timeline[i];
      t.known = true;
      t.start_s = static_cast<double>(j.running_ns) / kNsPerS;
      t.wait_s = std::max(0.0, t.start_s - j.trace_arrival_s);
      if (j.ended_ns >= 0) {
        t.ended = true;
        t.end_s = static_cast<double>(j.ended_ns) / kNsPerS;
      }
    }
  } else {
    timeline = trace_timeline(jobs, speedup);
  }
  // JCT per size bucket (submitted GPUs), wall and trace.
  const char* const kBuckets[] = {"1", "2-4", "5-8", ">8"};
  auto bucket_of = [](int gpus) { return gpus <= 1 ? 0 : gpus <= 4 ? 1 : gpus <= 8 ? 2 : 3; };
  std::vector<double> jct_b[4], jct_trace_b[4];
  double preempted_run_gpu_s = 0;
  long long preempted_attempts = 0;
  std::vector<double> jct, queueing, jct_trace, wait_trace, ack_ms, running_ms, own_ms;
  // The same jobs' JCT had none of them waited: its run time in the trace. No
  // scheduler (that does not speed jobs up) does better than this average.
  std::vector<double> no_wait_trace;
  std::map<std::string, double> team_gpu_s, team_gpu_trace_s;
  std::map<std::string, size_t> team_jobs;
  int64_t t0 = first_sent(jobs), last_end = -1;
  size_t censored = 0, censored_ended = 0;
  double trace_makespan = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const JobResult& j = jobs[i];
    const TraceTiming& tt = timeline[i];
    ++team_jobs[j.team];
    team_gpu_s.emplace(j.team, 0.0);
    team_gpu_trace_s.emplace(j.team, 0.0);
    if (j.censored) ++censored;
    if (j.acked_ns < 0) continue;
    for (const auto& [run, stop] : j.preempted_ns) {
      ++preempted_attempts;
      preempted_run_gpu_s +=
          j.gpus * static_cast<double>(std::max<int64_t>(0, stop - run)) / kNsPerS;
    }
    ack_ms.push_back(static_cast<double>(j.acked_ns - j.sent_ns) / kNsPerMs);
    if (j.running_ns >= 0) {
      const double wall_wait_s = static_cast<double>(j.running_ns - j.sent_ns) / kNsPerS;
      queueing.push_back(wall_wait_s);
      running_ms.push_back(wall_wait_s * 1000.0);
      if (tt.known) {
        wait_trace.push_back(tt.wait_s);
        own_ms.push_back(std::max(0.0, wall_wait_s - tt.wait_s / speedup) * 1000.0);
      }
    }
    if (j.ended_ns >= 0) {
      last_end = std::max(last_end, j.ended_ns);
      if (j.censored)
        ++censored_ended;
      else {
        jct.push_back(static_cast<double>(j.ended_ns - j.sent_ns) / kNsPerS);
        jct_b[bucket_of(j.gpus)].push_back(jct.back());
      }
      if (j.running_ns >= 0) {
        // The GPUs it held: its last attempt, and each preempted one (not
        // the waits between them).
        const int64_t last = j.last_running_ns >= 0 ? j.last_running_ns : j.running_ns;
        double held_s = static_cast<double>(std::max<int64_t>(0, j.ended_ns - last)) / kNsPerS;
        for (const auto& [run, stop] : j.preempted_ns)
          held_s += static_cast<double>(std::max<int64_t>(0, stop - run)) / kNsPerS;
        team_gpu_s[j.team] += j.gpus * held_s;
      }
      if (tt.ended) {
        trace_makespan = std::max(trace_makespan, tt.end_s);
        if (j.final_state == "succeeded") {
          team_gpu_trace_s[j.team] += j.gpus * j.trace_duration_s;
          if (!j.censored) {
            // = wait + trace duration under trace_timeline; the true end
            // (a preempted attempt's lost run included) when exact.
            jct_trace.push_back(tt.end_s - j.trace_arrival_s);
            jct_trace_b[bucket_of(j.gpus)].push_back(jct_trace.back());
            no_wait_trace.push_back(j.trace_duration_s);
          }
        }
      }
    }
  }
  auto figures = [&](const std::vector<double>& wall, const std::vector<double>& trace) {
    Summary s = summarize(wall), t = summarize(trace);
    return Json{
        {"count", s.count},       {"avg_s", round3(s.mean)},       {"p99_s", round3(s.p99)},
        {"count_trace", t.count}, {"avg_trace_s", round3(t.mean)}, {"p99_trace_s", round3(t.p99)}};
  };
  r["censored"] = censored;
  r["jct"] = figures(jct, jct_trace);
  r["jct"]["censored_left_out"] = censored_ended;
  {
    const Summary nw = summarize(no_wait_trace);
    r["jct"]["no_wait_avg_trace_s"] = round3(nw.mean);
    r["jct"]["no_wait_p99_trace_s"] = round3(nw.p99);
  }
  {
    Json by_size = Json::object();
    for (int b = 0; b < 4; ++b) {
      Json f = figures(jct_b[b], jct_trace_b[b]);
      // An empty bucket has no figures (not 0 s).
      if (jct_b[b].empty()) f["avg_s"] = f["p99_s"] = nullptr;
      if (jct_trace_b[b].empty()) f["avg_trace_s"] = f["p99_trace_s"] = nullptr;
      by_size[kBuckets[b]] = f;
    }
    r["jct_by_size"] = by_size;
  }
  r["queueing_delay"] = figures(queueing, wait_trace);
  {
    Summary s = summarize(queueing), t = summarize(wait_trace);
    r["queueing_delay"]["avg_ms"] = round3(s.mean * 1000.0);
    r["queueing_delay"]["p99_ms"] = round3(s.p99 * 1000.0);
    r["queueing_delay"]["max_s"] = round3(s.max);
    r["queueing_delay"]["max_trace_s"] = round3(t.max);
  }
  r["scheduler_delay_ms"] = Json{{"submit_to_ack", summary_json(ack_ms)},
                                 {"submit_to_running", summary_json(running_ms)},
                                 {"own", summary_json(own_ms)}};
  double makespan = t0 >= 0 && last_end > t0 ? static_cast<double>(last_end - t0) / kNsPerS : 0;
  r["makespan_s"] = round3(makespan);
  r["makespan_trace_s"] = round3(trace_makespan);

  double sum_frac = 0;
  size_t used = 0;
  for (const auto& s : samples) {
    if (s.total <= 0) continue;
    if (t0 >= 0 && s.t_ns < t0) continue;
    if (last_end >= 0 && s.t_ns > last_end) continue;
    sum_frac += static_cast<double>(s.allocated) / static_cast<double>(s.total);
    ++used;
  }
  r["gpu_allocation"] = Json{
      {"samples", used}, {"mean", used > 0 ? round3(sum_frac / static_cast<double>(used)) : 0.0}};
  {
    // While work waits (a GPU job pending), and while it waits and fits (some
    // free GPU outside any hold fits one of its workers); samples with a
    // queues reply only.
    size_t pend = 0, fits = 0, with_q = 0, fair_n = 0;
    double sum_pend = 0, sum_fits = 0, sum_jain = 0, min_jain = 1, held_gpu_s = 0;
    std::vector<const AllocSample*> window;
    for (const auto& s : samples) {
      if (s.total <= 0) continue;
      if (t0 >= 0 && s.t_ns < t0) continue;
      if (last_end >= 0 && s.t_ns > last_end) continue;
      window.push_back(&s);
    }
    for (size_t k = 0; k < window.size(); ++k) {
      const AllocSample& s = *window[k];
      if (!s.has_queues) continue;
      ++with_q;
      const double frac = static_cast<double>(s.allocated) / static_cast<double>(s.total);
      if (s.pending) {
        ++pend;
        sum_pend += frac;
        if (s.usable_free > 0) {
          ++fits;
          sum_fits += frac;
        }
      }
      if (s.teams_pending >= 2) {
        ++fair_n;
        sum_jain += s.jain_pending;
        min_jain = std::min(min_jain, s.jain_pending);
      }
      if (k + 1 < window.size())
        held_gpu_s += static_cast<double>(s.held_idle) *
                      static_cast<double>(window[k + 1]->t_ns - s.t_ns) / kNsPerS;
    }
    auto mean = [](double sum, size_t n) {
      return n > 0 ? Json(round3(sum / static_cast<double>(n))) : Json(nullptr);
    };
    r["gpu_allocation"]["while_pending"] = Json{{"samples", pend}, {"mean", mean(sum_pend, pend)}};
    r["gpu_allocation"]["while_waiting_fits"] =
        Json{{"samples", fits},
             {"mean", mean(sum_fits, fits)},
             {"fraction_of_samples",
              with_q > 0 ? round3(static_cast<double>(fits) / static_cast<double>(with_q)) : 0.0}};
    r["fair_share"] =
        Json{{"samples", fair_n},
             {"jain_pending_mean", mean(sum_jain, fair_n)},
             {"jain_pending_min", fair_n > 0 ? Json(round3(min_jain)) : Json(nullptr)}};
    const double scale = info.exact_trace_times ? 1.0 : speedup;
    r["reserved_idle"] =
        Json{{"gpu_s", round3(held_gpu_s)}, {"gpu_s_scaled", round3(held_gpu_s * scale)}};
    r["preemption_loss"] = Json{{"attempts", preempted_attempts},
                                {"gpu_s", round3(preempted_run_gpu_s)},
                                {"gpu_s_scaled", round3(preempted_run_gpu_s * scale)}};
  }

  // Fragmentation over the same window, from the samples that had a queues reply.
  size_t fused = 0, with_pending = 0;
  double sum_frag = 0, sum_frag_frac = 0, sum_free = 0;
  long long max_frag = 0;
  for (const auto& s : samples) {
    if (!s.has_queues || s.total <= 0) continue;
    if (t0 >= 0 && s.t_ns < t0) continue;
    if (last_end >= 0 && s.t_ns > last_end) continue;
    ++fused;
    if (s.pending) ++with_pending;
    sum_frag += static_cast<double>(s.fragmented);
    sum_frag_frac += static_cast<double>(s.fragmented) / static_cast<double>(s.total);
    sum_free += static_cast<double>(s.free);
    max_frag = std::max(max_frag, s.fragmented);
  }
  auto mean_of = [&](double sum) {
    return fused > 0 ? round3(sum / static_cast<double>(fused)) : 0.0;
  };
  r["fragmentation"] = Json{{"samples", fused},
                            {"samples_with_pending", with_pending},
                            {"mean_gpus", mean_of(sum_frag)},
                            {"max_gpus", max_frag},
                            {"mean_fraction", mean_of(sum_frag_frac)},
                            {"mean_free_gpus", mean_of(sum_free)}};
  r["preemptions"] = info.preemptions ? Json(*info.preemptions) : Json(nullptr);
  r["wait_bound"] = wait_bound_json(jobs, timeline, runtime_limit_factor_of(info.config));

  double total_gpu_s = 0;
  std::vector<double> per_team;
  for (const auto& [t, g] : team_gpu_s) {
    total_gpu_s += g;
    per_team.push_back(g);
  }
  Json teams = Json::object();
  for (const auto& [t, g] : team_gpu_s)
    teams[t] = Json{{"jobs", team_jobs[t]},
                    {"gpu_s", round3(g)},
                    {"gpu_trace_s", round3(team_gpu_trace_s[t])},
                    {"share", total_gpu_s > 0 ? round3(g / total_gpu_s) : 0.0}};
  r["teams"] = teams;
  r["jain_index"] = round3(jain_index(per_team));
  return r;
}

AllocSample make_sample(const std::vector<SampleNode>& nodes, const std::vector<SampleWant>& wants,
                        const std::vector<SampleTeam>& teams, bool has_queues) {
  AllocSample s;
  s.has_queues = has_queues;
  s.pending = !wants.empty();
  for (const auto& n : nodes) {
    s.allocated += n.allocated;
    s.total += n.total;
    s.free += n.free;
    if (n.free <= 0) continue;
    if (n.held) {
      s.held_idle += n.free;
      continue;
    }
    // As troupe_gpus_fragmented: only where work waits in the node's pool.
    bool pool_waits = std::any_of(wants.begin(), wants.end(), [&](const SampleWant& w) {
      return w.pool.empty() || w.pool == n.pool;
    });
    if (!pool_waits) continue;
    bool usable = std::any_of(wants.begin(), wants.end(), [&](const SampleWant& w) {
      return w.gpus <= n.free && (w.gpu_type.empty() || w.gpu_type == n.gpu_type) &&
             (w.pool.empty() || w.pool == n.pool);
    });
    if (usable)
      s.usable_free += n.free;
    else
      s.fragmented += n.free;
  }
  std::vector<double> x;
  for (const auto& t : teams)
    if (t.pending) x.push_back(t.in_use / (t.weight > 0 ? t.weight : 1.0));
  s.teams_pending = static_cast<int>(x.size());
  s.jain_pending = x.empty() ? 1.0 : jain_index(x);
  return s;
}

std::optional<AllocSample> sample_from(const Json& nodes, const Json& queues,
                                       const std::string& prefix, size_t* alive_out) {
  if (!nodes.is_object() || !nodes.contains("nodes") || !nodes["nodes"].is_array())
    return std::nullopt;
  std::vector<SampleWant> wants;
  std::set<std::string> held;
  std::map<std::string, SampleTeam> teams;
  bool has_queues = false;
  if (queues.is_object() && queues.contains("teams") && queues["teams"].is_array()) {
    for (const auto& row : queues["teams"]) {
      if (!row.is_object()) continue;
      const std::string team = row.value("team", "");
      if (!team.empty()) {
        SampleTeam& t = teams[team];
        t.in_use += row.value("in_use", 0.0);
        t.weight = row.value("weight", 1.0);
        t.pending = t.pending || row.value("pending_jobs", 0LL) > 0;
      }
      auto it = row.find("pending_shapes");
      if (it == row.end() || !it->is_array()) continue;
      has_queues = true;
      for (const auto& w : *it) {
        long long g = w.value("gpus", 0LL);
        if (g <= 0) continue;
        std::string pool = w.value("pool", "");
        if (pool.empty()) pool = row.value("pool", "");
        wants.push_back({g, w.value("gpu_type", ""), pool});
      }
    }
    if (queues.contains("pools") && queues["pools"].is_array())
      for (const auto& p : queues["pools"])
        if (p.contains("hold") && p["hold"].is_object() && p["hold"].contains("nodes") &&
            p["hold"]["nodes"].is_array())
          for (const auto& n : p["hold"]["nodes"])
            if (n.is_string()) held.insert(n.get<std::string>());
  }
  std::vector<SampleNode> in;
  for (const auto& n : nodes["nodes"]) {
    if (!n.value("alive", false)) continue;
    std::string name = n.value("node", "");
    if (!prefix.empty() && name.rfind(prefix + "-", 0) != 0) continue;
    long long t = n.value("gpus_total", 0LL), a = n.value("gpus_allocated", 0LL),
              res = n.value("gpus_reserved", 0LL);
    long long f = n.contains("gpus_free") ? n.value("gpus_free", 0LL) : std::max(0LL, t - a - res);
    in.push_back(
        SampleNode{n.value("gpu_type", ""), n.value("pool", ""), t, a, f, held.count(name) != 0});
  }
  std::vector<SampleTeam> team_list;
  for (const auto& [name, t] : teams) team_list.push_back(t);
  if (alive_out != nullptr) *alive_out = in.size();
  return make_sample(in, wants, team_list, has_queues);
}

namespace {
// A number at a JSON pointer of a report, or nullopt.
std::optional<double> at(const Json& j, const char* pointer) {
  Json::json_pointer p(pointer);
  if (!j.contains(p)) return std::nullopt;
  const Json& v = j.at(p);
  if (!v.is_number()) return std::nullopt;
  return v.get<double>();
}

struct Measure {
  const char* key;      // in "ratios"
  const char* label;    // in the table
  const char* pointer;  // into one run's report
  bool ratio;           // has a ratio
};

const Measure kMeasures[] = {
    {"jobs", "jobs submitted", "/submitted", false},
    {"terminal", "jobs terminal", "/terminal", false},
    {"jct_avg", "JCT avg (s)", "/jct/avg_s", true},
    {"jct_p99", "JCT p99 (s)", "/jct/p99_s", true},
    {"queueing_avg", "queueing delay avg (s)", "/queueing_delay/avg_s", true},
    {"queueing_p99", "queueing delay p99 (s)", "/queueing_delay/p99_s", true},
    {"makespan", "makespan (s)", "/makespan_s", true},
    {"jct_avg_trace", "JCT avg (trace s)", "/jct/avg_trace_s", true},
    {"jct_p99_trace", "JCT p99 (trace s)", "/jct/p99_trace_s", true},
    {"jct_no_wait_avg_trace", "JCT avg without waiting: lower bound (trace s)",
     "/jct/no_wait_avg_trace_s", true},
    {"queueing_avg_trace", "queueing avg (trace s)", "/queueing_delay/avg_trace_s", true},
    {"queueing_p99_trace", "queueing p99 (trace s)", "/queueing_delay/p99_trace_s", true},
    {"makespan_trace", "makespan (trace s)", "/makespan_trace_s", true},
    {"scheduler_own_delay_avg_ms", "scheduler own delay avg (ms)", "/scheduler_delay_ms/own/mean",
     true},
    {"scheduler_own_delay_p99_ms", "scheduler own delay p99 (ms)", "/scheduler_delay_ms/own/p99",
     true},
    {"censored", "jobs censored", "/censored", false},
    {"gpu_allocation_mean", "GPU allocation (mean)", "/gpu_allocation/mean", true},
    {"jain_index", "Jain's index (teams)", "/jain_index", true},
    {"fragmented_gpus_mean", "fragmented GPUs (mean)", "/fragmentation/mean_gpus", true},
    {"queueing_max", "queueing delay max (s)", "/queueing_delay/max_s", true},
    {"queueing_max_trace", "queueing max (trace s)", "/queueing_delay/max_trace_s", true},
    {"jct_avg_trace_1gpu", "JCT avg 1 GPU (trace s)", "/jct_by_size/1/avg_trace_s", true},
    {"jct_avg_trace_2_4gpu", "JCT avg 2-4 GPUs (trace s)", "/jct_by_size/2-4/avg_trace_s", true},
    {"jct_avg_trace_5_8gpu", "JCT avg 5-8 GPUs (trace s)", "/jct_by_size/5-8/avg_trace_s", true},
    {"jct_avg_trace_over_8gpu", "JCT avg >8 GPUs (trace s)", "/jct_by_size/>8/avg_trace_s", true},
    {"gpu_allocation_waiting_fits", "GPU allocation while work waits and fits",
     "/gpu_allocation/while_waiting_fits/mean", true},
    {"gpu_allocation_pending", "GPU allocation while work waits",
     "/gpu_allocation/while_pending/mean", true},
    {"jain_pending", "Jain's index (teams with pending work)", "/fair_share/jain_pending_mean",
     true},
    {"reserved_idle_gpu_s", "reserved-idle GPU-s (scaled)", "/reserved_idle/gpu_s_scaled", true},
    {"preempted_gpu_s", "GPU-s lost to preemption (scaled)", "/preemption_loss/gpu_s_scaled", true},
    {"preemptions", "preemptions", "/preemptions", false},
    {"wait_bound_violations", "jobs that waited > 2 x max_runtime ahead", "/wait_bound/violations",
     false},
    {"scheduler_peak_rss_mb", "scheduler peak RSS (MB)", "/scheduler/peak_rss_mb", false},
    {"total_s", "wall time (s)", "/total_s", false},
};
}  // namespace

Json compare_report(const std::vector<std::pair<std::string, Json>>& runs) {
  Json r{{"mode", "replay_compare"}};
  Json names = Json::array();
  bool complete = !runs.empty();
  for (const auto& [name, rep] : runs) {
    names.push_back(name);
    complete = complete && rep.value("complete", false);
  }
  r["policies"] = names;
  r["complete"] = complete;
  Json ratios = Json::object();
  if (runs.size() >= 2) {
    ratios["of"] = runs[0].first + " / " + runs[1].first;
    for (const auto& m : kMeasures) {
      if (!m.ratio) continue;
      auto a = at(runs[0].second, m.pointer), b = at(runs[1].second, m.pointer);
      ratios[m.key] = a && b && *b != 0 ? Json(round3(*a / *b)) : Json(nullptr);
    }
  }
  r["ratios"] = ratios;
  Json each = Json::object();
  for (const auto& [name, rep] : runs) each[name] = rep;
  r["runs"] = each;
  return r;
}

std::string compare_table(const Json& c) {
  std::vector<std::string> names;
  if (c.contains("policies"))
    for (const auto& n : c["policies"]) names.push_back(n.get<std::string>());
  const bool with_ratio = c.contains("ratios") && c["ratios"].contains("of");
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head{"measure"};
  for (const auto& n : names) head.push_back(n);
  if (with_ratio) head.push_back(c["ratios"]["of"].get<std::string>());
  rows.push_back(head);
  auto cell = [](std::optional<double> v, bool fixed = false) {
    if (!v) return std::string("-");
    char buf[64];
    if (!fixed && *v == std::floor(*v) && std::fabs(*v) < 1e12)
      std::snprintf(buf, sizeof buf, "%.0f", *v);
    else
      std::snprintf(buf, sizeof buf, "%.3f", *v);
    return std::string(buf);
  };
  for (const auto& m : kMeasures) {
    std::vector<std::string> row{m.label};
    for (const auto& n : names) row.push_back(cell(at(c["runs"][n], m.pointer)));
    if (with_ratio) {
      const Json& q = c["ratios"];
      row.push_back(m.ratio && q.contains(m.key) && q[m.key].is_number()
                        ? cell(q[m.key].get<double>(), true)
                        : std::string(m.ratio ? "-" : ""));
    }
    rows.push_back(row);
  }
  // Each team's share of the GPU time.
  std::set<std::string> teams;
  for (const auto& n : names)
    if (c["runs"][n].contains("teams"))
      for (auto it = c["runs"][n]["teams"].begin(); it != c["runs"][n]["teams"].end(); ++it)
        teams.insert(it.key());
  for (const auto& t : teams) {
    std::vector<std::string> row{"share " + t};
    for (const auto& n : names) {
      const Json& rep = c["runs"][n];
      row.push_back(rep.contains("teams") && rep["teams"].contains(t)
                        ? cell(rep["teams"][t].value("share", 0.0))
                        : std::string("-"));
    }
    if (with_ratio) row.push_back("");
    rows.push_back(row);
  }
  std::vector<size_t> width(head.size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  std::ostringstream out;
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      if (i == 0)
        out << row[i] << std::string(width[i] - row[i].size(), ' ');
      else
        out << "  " << std::string(width[i] - row[i].size(), ' ') << row[i];
    }
    out << "\n";
  }
  out << "complete: " << (c.value("complete", false) ? "yes" : "no") << "\n";
  return out.str();
}

namespace {
void flatten(const Json& j, const std::string& prefix,
             std::vector<std::pair<std::string, std::string>>& out) {
  if (j.is_object()) {
    if (j.empty() && !prefix.empty()) out.emplace_back(prefix, "-");
    for (auto it = j.begin(); it != j.end(); ++it)
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
    return;
  }
  std::string v;
  if (j.is_string())
    v = j.get<std::string>();
  else if (j.is_null())
    v = "-";
  else if (j.is_number_float()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", j.get<double>());
    v = buf;
  } else
    v = j.dump();
  out.emplace_back(prefix, v);
}
}  // namespace

std::string report_table(const Json& report) {
  std::vector<std::pair<std::string, std::string>> rows;
  flatten(report, "", rows);
  size_t width = 0;
  for (const auto& [k, v] : rows) width = std::max(width, k.size());
  std::ostringstream out;
  for (const auto& [k, v] : rows) out << k << std::string(width - k.size() + 2, ' ') << v << "\n";
  return out.str();
}

std::string runs_text(const std::vector<std::pair<std::string, Json>>& runs, bool json,
                      const std::string& mode) {
  if (runs.size() == 1) return json ? runs[0].second.dump(2) + "\n" : report_table(runs[0].second);
  Json c = compare_report(runs);
  if (!mode.empty()) c["mode"] = mode;
  return json ? c.dump(2) + "\n" : compare_table(c);
}

std::string failed_text(const std::vector<JobResult>& jobs, size_t shown) {
  size_t failed = 0;
  std::string reasons;
  for (const auto& j : jobs) {
    if (j.final_state != "failed") continue;
    if (++failed <= shown)
      reasons += (reasons.empty() ? "" : "; ") + j.job_id + ": " +
                 (j.end_reason.empty() ? std::string("no reason given") : j.end_reason);
  }
  if (failed == 0) return {};
  return std::to_string(failed) + " job(s) failed: " + reasons + (failed > shown ? "; ..." : "") +
         "\n";
}

}  // namespace troupe::load

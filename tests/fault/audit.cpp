#include "audit.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>

#include "messages/names.hpp"

namespace troupe::fault {

namespace {

using Json = nlohmann::json;

// A number that protobuf's JSON mapping may have written as a string (int64).
bool read_int(const Json& j, const char* key, int64_t& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return false;
  if (it->is_number_integer()) {
    out = it->get<int64_t>();
    return true;
  }
  if (it->is_number()) {
    out = static_cast<int64_t>(it->get<double>());
    return true;
  }
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    try {
      size_t used = 0;
      out = std::stoll(s, &used);
      return used == s.size();
    } catch (...) {
      return false;
    }
  }
  return false;
}

std::string read_str(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool holds(std::string_view state) {
  return state == names::kStarting || state == names::kRunning;
}

using GpuKey = std::pair<std::string, int>;      // (node, gpu index)
using AttemptKey = std::pair<std::string, int>;  // (job, attempt)

std::string gpu_name(const GpuKey& g) {
  return g.first + "/gpu" + std::to_string(g.second);
}

std::string workers_text(const std::vector<Worker>& ws) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < ws.size(); ++i) {
    if (i > 0) s << " ";
    s << "r" << ws[i].rank << "@" << (ws[i].node.empty() ? "?" : ws[i].node) << ":";
    for (size_t k = 0; k < ws[i].gpus.size(); ++k) s << (k ? "," : "") << ws[i].gpus[k];
  }
  s << "]";
  return s.str();
}

std::string event_text(const JobEvent& e) {
  std::ostringstream s;
  s << "#" << e.seq << " " << e.state << " attempt " << e.attempt;
  if (holds(e.state)) s << " " << workers_text(e.workers);
  if (e.exit_code) s << " exit " << *e.exit_code;
  if (!e.cause.empty()) s << " cause=" << e.cause;
  if (!e.reason.empty()) s << " (" << e.reason << ")";
  return s.str();
}

// Why a start event does not place a whole gang of `w` workers ("" if it does).
std::string gang_problem(const std::vector<Worker>& ws, int w, int gpus_per_worker) {
  std::ostringstream s;
  if (static_cast<int>(ws.size()) != w) s << "lists " << ws.size() << " worker(s) of " << w << "; ";
  std::set<int> ranks;
  for (const auto& x : ws) {
    if (x.rank < 0 || x.rank >= w) s << "rank " << x.rank << " out of 0.." << w - 1 << "; ";
    if (!ranks.insert(x.rank).second) s << "rank " << x.rank << " listed twice; ";
    if (x.node.empty()) s << "rank " << x.rank << " has no node; ";
    std::set<int> g(x.gpus.begin(), x.gpus.end());
    if (g.size() != x.gpus.size()) s << "rank " << x.rank << " lists a GPU twice; ";
    if (gpus_per_worker > 0 && static_cast<int>(x.gpus.size()) != gpus_per_worker)
      s << "rank " << x.rank << " has " << x.gpus.size() << " GPU(s), not " << gpus_per_worker
        << "; ";
  }
  for (int r = 0; r < w; ++r)
    if (ranks.count(r) == 0) s << "rank " << r << " missing; ";
  std::string out = s.str();
  if (out.size() >= 2) out.resize(out.size() - 2);
  return out;
}

// Differences between a running event's workers and its attempt's starting placement.
std::string placement_problem(const std::vector<Worker>& placed, const std::vector<Worker>& run) {
  std::map<int, const Worker*> by_rank;
  for (const auto& w : placed) by_rank[w.rank] = &w;
  std::ostringstream s;
  std::set<int> seen;
  for (const auto& w : run) {
    seen.insert(w.rank);
    auto it = by_rank.find(w.rank);
    if (it == by_rank.end()) {
      s << "rank " << w.rank << " runs but was not placed; ";
      continue;
    }
    auto a = it->second->gpus, b = w.gpus;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (it->second->node != w.node || a != b)
      s << "rank " << w.rank << " runs on " << workers_text({w}) << " but was placed on "
        << workers_text({*it->second}) << "; ";
  }
  for (const auto& [rank, w] : by_rank)
    if (seen.count(rank) == 0) s << "rank " << rank << " was placed but does not run; ";
  std::string out = s.str();
  if (out.size() >= 2) out.resize(out.size() - 2);
  return out;
}

struct Hold {
  uint64_t since = 0;
  std::string state;
  std::vector<GpuKey> gpus;
};

struct Track {
  std::map<int, Hold> open;                       // attempts that hold their GPUs now
  std::map<int, std::vector<Worker>> placements;  // attempt -> its starting placement
  std::set<int> started;
  std::optional<JobEvent> terminal;  // the first terminal event
  std::vector<std::string> terminal_issues;
  bool overlap = false;
  bool partial = false;
  std::string last_state;
  int last_attempt = -1;
  size_t events = 0;
  int max_workers = 0;
  std::optional<JobEvent> last;
  std::map<int64_t, JobEvent> by_seq;  // JobEvent.seq -> the first event with it
  int64_t max_seq = 0;
};

struct Clash {
  uint64_t seq;
  std::string job;
  int attempt;
  GpuKey gpu;
  AttemptKey holder;
  uint64_t holder_since;
};

}  // namespace

std::optional<JobEvent> parse_event(const std::string& text, uint64_t seq, std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<JobEvent> {
    if (error) *error = why;
    return std::nullopt;
  };
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return fail("not a JSON object");
  JobEvent e;
  e.seq = seq;
  e.job_id = read_str(j, "job_id");
  e.state = read_str(j, "state");
  if (e.job_id.empty()) return fail("no job_id");
  if (e.state.empty()) return fail("no state");
  e.team = read_str(j, "team");
  int64_t n = 0;
  if (read_int(j, "attempt", n)) e.attempt = static_cast<int>(n);
  if (read_int(j, "ts_ms", n)) e.ts_ms = n;
  if (read_int(j, "exit_code", n)) e.exit_code = static_cast<int>(n);
  if (read_int(j, "seq", n)) e.job_seq = n;
  e.reason = read_str(j, "reason");
  e.cause = read_str(j, "cause");
  if (auto it = j.find("workers"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return fail("workers is not an array");
    for (const auto& w : *it) {
      if (!w.is_object()) return fail("a worker is not an object");
      Worker x;
      if (read_int(w, "rank", n)) x.rank = static_cast<int>(n);
      x.node = read_str(w, "node");
      if (auto g = w.find("gpus"); g != w.end() && !g->is_null()) {
        if (!g->is_array()) return fail("gpus is not an array");
        for (const auto& v : *g) {
          if (!v.is_number_integer()) return fail("a GPU index is not an integer");
          x.gpus.push_back(v.get<int>());
        }
      }
      e.workers.push_back(std::move(x));
    }
  }
  return e;
}

AuditReport audit(const std::vector<JobEvent>& events,
                  const std::map<std::string, JobInfo>& acknowledged) {
  AuditReport r;
  r.acknowledged = acknowledged.size();
  r.events = events.size();
  for (const auto& [id, info] : acknowledged)
    if (info.workers > 1) ++r.gangs;

  std::map<std::string, Track> jobs;
  // Worker counts of jobs the audit was not told about: the largest list seen.
  for (const auto& e : events) {
    auto& t = jobs[e.job_id];
    t.max_workers = std::max(t.max_workers, static_cast<int>(e.workers.size()));
  }
  auto info_of = [&](const std::string& id) {
    auto it = acknowledged.find(id);
    if (it != acknowledged.end()) return it->second;
    JobInfo i;
    i.workers = std::max(1, jobs[id].max_workers);
    return i;
  };

  std::map<GpuKey, std::pair<AttemptKey, uint64_t>> held;  // gpu -> (holder, since)
  std::map<AttemptKey, uint64_t> ended;                    // attempt -> seq of its end
  std::vector<Clash> clashes;
  std::set<GpuKey> clashed;

  auto release = [&](const std::string& job, int attempt, Hold& h) {
    for (const auto& g : h.gpus) {
      auto it = held.find(g);
      if (it != held.end() && it->second.first == AttemptKey{job, attempt}) held.erase(it);
    }
    h.gpus.clear();
  };
  auto take = [&](const JobEvent& e, Hold& h) {
    std::set<GpuKey> mine;  // taken by this event: two ranks on one GPU clash too
    for (const auto& w : e.workers) {
      for (int g : w.gpus) {
        GpuKey key{w.node, g};
        auto it = held.find(key);
        bool clash = false;
        if (mine.count(key) != 0) {
          clash = true;
        } else if (it != held.end()) {
          // Held by another attempt of the same job: figure 2 reports that.
          clash = it->second.first.first != e.job_id;
        }
        if (clash) {
          ++r.gpu_clashes;
          clashed.insert(key);
          auto holder = it != held.end() ? it->second
                                         : std::make_pair(AttemptKey{e.job_id, e.attempt}, h.since);
          clashes.push_back({e.seq, e.job_id, e.attempt, key, holder.first, holder.second});
        }
        mine.insert(key);
        held[key] = {{e.job_id, e.attempt}, h.since};
        h.gpus.push_back(key);
      }
    }
    r.max_gpus_held = std::max(r.max_gpus_held, held.size());
  };

  for (const auto& e : events) {
    ++r.by_state[e.state];
    auto& t = jobs[e.job_id];
    ++t.events;
    bool same_as_last = t.last_state == e.state && t.last_attempt == e.attempt;
    bool terminal = names::is_terminal(e.state);

    // Event numbers (context).
    if (e.job_seq > 0) {
      auto [it, fresh] = t.by_seq.emplace(e.job_seq, e);
      if (!fresh && (it->second.state != e.state || it->second.attempt != e.attempt)) {
        ++r.seq_conflicts;
        r.seq_issues.push_back({e.job_id, e.seq,
                                "event number " + std::to_string(e.job_seq) + " stored as " +
                                    event_text(it->second) + " and as " + event_text(e)});
      }
      t.max_seq = std::max(t.max_seq, e.job_seq);
    }

    // 1. The terminal state.
    if (t.terminal) {
      const auto& first = *t.terminal;
      if (terminal && e.state == first.state && e.attempt == first.attempt &&
          e.exit_code == first.exit_code) {
        ++r.reemitted_terminal;
      } else if (terminal) {
        t.terminal_issues.push_back("second terminal event " + event_text(e) + " after " +
                                    event_text(first));
      } else {
        t.terminal_issues.push_back("left its terminal state: " + event_text(e) + " after " +
                                    event_text(first));
      }
    } else if (terminal) {
      t.terminal = e;
    }

    // 2-4. Attempts, GPUs, gangs.
    if (holds(e.state)) {
      auto info = info_of(e.job_id);
      for (auto& [b, h] : t.open) {
        if (b == e.attempt) continue;
        if (!t.overlap) ++r.overlapping_jobs;
        t.overlap = true;
        r.overlaps.push_back({e.job_id, e.seq,
                              "attempt " + std::to_string(e.attempt) + " " + e.state + " (#" +
                                  std::to_string(e.seq) + ") while attempt " + std::to_string(b) +
                                  " still holds its GPUs (" + h.state + " since #" +
                                  std::to_string(h.since) + ")"});
      }
      std::string why = gang_problem(e.workers, info.workers, info.gpus_per_worker);
      if (why.empty() && e.state == names::kRunning) {
        auto p = t.placements.find(e.attempt);
        if (p != t.placements.end()) why = placement_problem(p->second, e.workers);
      }
      if (!why.empty()) {
        if (!t.partial) ++(info.workers > 1 ? r.partial_gangs : r.partial_singles);
        t.partial = true;
        r.partials.push_back({e.job_id, e.seq,
                              (info.workers > 1 ? "gang of " + std::to_string(info.workers)
                                                : std::string("single job")) +
                                  ": " + event_text(e) + ": " + why});
      }
      if (e.state == names::kStarting && t.placements.count(e.attempt) == 0)
        t.placements[e.attempt] = e.workers;
      if (t.started.insert(e.attempt).second) ++r.attempts_started;
      auto it = t.open.find(e.attempt);
      if (it == t.open.end()) {
        Hold& h = t.open[e.attempt];
        h.since = e.seq;
        h.state = e.state;
        take(e, h);
      } else {
        if (same_as_last) ++r.reemitted_other;
        Hold& h = it->second;
        h.state = e.state;
        // The workers as this event lists them (normally the same ones).
        release(e.job_id, e.attempt, h);
        take(e, h);
      }
    } else {
      if (same_as_last && !terminal) ++r.reemitted_other;
      for (auto it = t.open.begin(); it != t.open.end();) {
        if (it->first <= e.attempt) {
          release(e.job_id, it->first, it->second);
          ended[{e.job_id, it->first}] = e.seq;
          it = t.open.erase(it);
        } else {
          ++it;
        }
      }
    }
    t.last_state = e.state;
    t.last_attempt = e.attempt;
    t.last = e;
  }

  // Figure 1, per acknowledged job.
  for (const auto& [id, info] : acknowledged) {
    auto it = jobs.find(id);
    if (it == jobs.end()) {
      r.terminal.push_back({id, 0, "acknowledged but no event at all in the stream"});
      ++r.missing_terminal;
      continue;
    }
    auto& t = it->second;
    if (!t.terminal) {
      r.terminal.push_back({id, 0,
                            "no terminal state; " + std::to_string(t.events) +
                                " event(s), the last: " + event_text(*t.last)});
      ++r.missing_terminal;
      continue;
    }
    if (!t.terminal_issues.empty()) {
      for (const auto& why : t.terminal_issues) r.terminal.push_back({id, 0, why});
      continue;
    }
    ++r.terminal_once;
    ++r.terminal_states[t.terminal->state];
  }
  for (const auto& [id, t] : jobs) {
    ++r.jobs_seen;
    if (acknowledged.count(id) != 0) continue;
    ++r.unacknowledged_jobs;
    if (!t.terminal) ++r.unacknowledged_unfinished;
  }

  for (const auto& [id, t] : jobs) {
    if (t.by_seq.empty()) continue;
    std::vector<int64_t> missing;
    for (int64_t n = 1; n <= t.max_seq; ++n)
      if (t.by_seq.count(n) == 0) missing.push_back(n);
    if (missing.empty()) continue;
    r.seq_gaps += missing.size();
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 8; ++i)
      list += (i ? "," : "") + std::to_string(missing[i]);
    r.seq_issues.push_back({id, 0,
                            "event number(s) " + list + (missing.size() > 8 ? ",..." : "") +
                                " of 1.." + std::to_string(t.max_seq) + " not in the stream"});
  }

  // 5. Dependencies: each start of a dependent comes after (in the order
  // decided) the first `succeeded` of every upstream job.
  std::map<std::string, size_t> succeeded_at;  // job -> index of its first succeeded
  for (size_t i = 0; i < events.size(); ++i)
    if (events[i].state == names::kSucceeded) succeeded_at.emplace(events[i].job_id, i);
  std::map<std::string, std::pair<size_t, uint64_t>> first_start;  // job -> (index, seq)
  for (size_t i = 0; i < events.size(); ++i)
    if (holds(events[i].state))
      first_start.emplace(events[i].job_id, std::make_pair(i, events[i].seq));
  for (const auto& [id, info] : acknowledged) {
    if (info.after.empty()) continue;
    ++r.dependents;
    auto start = first_start.find(id);
    if (start == first_start.end()) continue;  // never started
    std::string why;
    for (const auto& up : info.after) {
      auto ok = succeeded_at.find(up);
      if (ok == succeeded_at.end())
        why += (why.empty() ? "" : "; ") + ("its upstream " + up + " never succeeded");
      else if (ok->second > start->second.first)
        why += (why.empty() ? "" : "; ") + ("its upstream " + up + " succeeded only at #" +
                                            std::to_string(events[ok->second].seq));
    }
    if (why.empty()) continue;
    ++r.early_dependents;
    if (r.early.size() < 1000) r.early.push_back({id, start->second.second, "started, but " + why});
  }

  // Figure 3 details: say whether the holder's attempt ever ended.
  r.gpus_clashed = clashed.size();
  for (const auto& c : clashes) {
    if (r.clashes.size() >= 1000) break;
    const auto& [hjob, hattempt] = c.holder;
    std::string end;
    auto it = ended.find(c.holder);
    if (it != ended.end() && it->second > c.seq)
      end = "its attempt ended later, at #" + std::to_string(it->second);
    else if (jobs[hjob].open.count(hattempt) != 0)
      end = "its attempt never ended in the stream";
    else
      end = "its attempt ended and started again";
    std::string who = acknowledged.count(hjob) ? "" : " (not acknowledged)";
    r.clashes.push_back({c.job, c.seq,
                         "attempt " + std::to_string(c.attempt) + " took " + gpu_name(c.gpu) +
                             " held by " + hjob + who + " attempt " + std::to_string(hattempt) +
                             " since #" + std::to_string(c.holder_since) + "; " + end});
  }
  return r;
}

AuditReport audit_json(const std::vector<std::string>& texts,
                       const std::map<std::string, JobInfo>& acknowledged) {
  std::vector<JobEvent> events;
  std::vector<std::string> problems;
  events.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    std::string err;
    if (auto e = parse_event(texts[i], i + 1, &err))
      events.push_back(std::move(*e));
    else
      problems.push_back("#" + std::to_string(i + 1) + ": " + err + ": " + texts[i].substr(0, 200));
  }
  // In the order the scheduler decided them (each event's own ts_ms; stream
  // order among equal ones): an event the stream did not take at once
  // (nats-server stopping) is published again and stored after later ones.
  std::stable_sort(events.begin(), events.end(),
                   [](const JobEvent& a, const JobEvent& b) { return a.ts_ms < b.ts_ms; });
  AuditReport r = audit(events, acknowledged);
  r.events = texts.size();
  r.malformed = problems.size();
  r.problems = std::move(problems);
  return r;
}

std::string AuditReport::figures() const {
  std::ostringstream s;
  s << "exactly one terminal state: " << terminal_once << "/" << acknowledged
    << " acknowledged jobs | jobs that ran two attempts at once: " << overlapping_jobs
    << " | GPU held by two jobs at a time: " << gpu_clashes
    << " | gangs run partially: " << partial_gangs << "/" << gangs;
  if (partial_singles > 0) s << " (+" << partial_singles << " single jobs started unplaced)";
  s << " | jobs started before their upstream succeeded: " << early_dependents << "/" << dependents;
  if (malformed > 0) s << " | malformed events: " << malformed;
  return s.str();
}

std::string AuditReport::describe(size_t max_each) const {
  std::ostringstream s;
  s << "audit: " << (ok() ? "PASS" : "FAIL") << "\n";
  s << "  1. every acknowledged job reached exactly one terminal state: " << terminal_once << " of "
    << acknowledged << " (" << terminal_violations() << " violation(s))\n";
  s << "  2. jobs that ran two attempts at once: " << overlapping_jobs << "\n";
  s << "  3. times a GPU index was taken while another job held it: " << gpu_clashes << " ("
    << gpus_clashed << " distinct GPUs)\n";
  s << "  4. gangs that ran partially: " << partial_gangs << " of " << gangs << " gangs";
  if (partial_singles > 0) s << " (and " << partial_singles << " single jobs)";
  s << "\n";
  s << "  5. jobs started before each of their upstream jobs succeeded: " << early_dependents
    << " of " << dependents << " jobs with upstream jobs\n";
  s << "  events: " << events << " (";
  bool first = true;
  for (const auto& [state, n] : by_state) {
    s << (first ? "" : ", ") << state << " " << n;
    first = false;
  }
  s << "), jobs in the stream: " << jobs_seen << ", attempts started: " << attempts_started
    << ", most GPUs held at once: " << max_gpus_held << "\n";
  s << "  final states of acknowledged jobs:";
  for (const auto& [state, n] : terminal_states) s << " " << state << " " << n;
  s << "\n  identical re-emissions: terminal " << reemitted_terminal << ", other "
    << reemitted_other << "; jobs in the stream never acknowledged: " << unacknowledged_jobs << " ("
    << unacknowledged_unfinished << " never finished)\n";
  if (seq_gaps > 0 || seq_conflicts > 0)
    s << "  event numbers (JobEvent.seq): " << seq_gaps << " missing from the stream, "
      << seq_conflicts << " stored twice with different content\n";
  auto list = [&](const char* title, const std::vector<Violation>& v) {
    if (v.empty()) return;
    s << "  " << title << " (" << v.size() << (v.size() >= 1000 ? "+" : "") << "):\n";
    for (size_t i = 0; i < v.size() && i < max_each; ++i)
      s << "    " << v[i].job_id << (v[i].seq ? " @#" + std::to_string(v[i].seq) : "") << ": "
        << v[i].what << "\n";
    if (v.size() > max_each) s << "    ... " << v.size() - max_each << " more\n";
  };
  list("terminal-state violations", terminal);
  list("overlapping attempts", overlaps);
  list("GPU clashes", clashes);
  list("partial gangs", partials);
  list("dependents started early", early);
  list("event-number issues (context)", seq_issues);
  if (!problems.empty()) {
    s << "  malformed events (" << problems.size() << "):\n";
    for (size_t i = 0; i < problems.size() && i < max_each; ++i) s << "    " << problems[i] << "\n";
  }
  return s.str();
}

}  // namespace troupe::fault

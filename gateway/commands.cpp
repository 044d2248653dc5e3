// The request/reply verbs of `troupe`: submit, status, jobs, cancel, logs,
// nodes, queues, why, history, pipeline (`up` is in up.cpp).
#include "gateway/commands.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "bus/subjects.hpp"
#include "gateway/auth/store.hpp"
#include "gateway/auth/tokens.hpp"
#include "gateway/client.hpp"
#include "gateway/format.hpp"
#include "gateway/pipeline_view.hpp"
#include "gateway/policy_view.hpp"
#include "gateway/usage.hpp"
#include "gateway/usage_report.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"

namespace troupe::gateway {

namespace {

int fail(const std::string& what) {
  std::cerr << "troupe: " << what << "\n";
  return 1;
}

ClientPtr open_client(const std::string& url) {
  std::string err;
  auto c = Client::connect(url, &err);
  if (!c)
    std::cerr << "troupe: " << err << " (start a cluster with `troupe up`, or pass --nats URL)\n";
  return c;
}

// A file's whole content; false when it cannot be read.
bool read_text(const std::string& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *text = ss.str();
  return true;
}

// Cancels each job in turn; prints "<id> <state>" per job; 1 when a cancel
// failed (the others are still tried), else 0.
int cancel_each(Client& c, const std::vector<pb::JobView>& jobs) {
  int rc = 0;
  for (const auto& j : jobs) {
    CancelReply r;
    if (auto err = c.cancel(j.team(), j.job_id(), &r); !err.empty()) {
      rc = fail("cancel " + j.job_id() + ": " + err);
      continue;
    }
    std::cout << j.job_id() << " " << r.state << "\n";
  }
  return rc;
}

}  // namespace

int run_submit(const std::string& url, const std::optional<std::string>& file,
               const SubmitFlags& flags, bool wait) {
  std::optional<std::string> text;
  if (file) {
    text.emplace();
    if (!read_text(*file, &*text)) return fail("cannot read " + *file);
  }
  auto built = build_spec(text, flags);
  if (!built.ok) return fail((file ? *file + ": " : std::string()) + built.error);
  if (auto err = check_spec(built.spec); !err.empty()) return fail("invalid job spec: " + err);
  auto c = open_client(url);
  if (!c) return kUnreachableExit;
  std::string id;
  if (auto err = c->submit(built.spec, &id); !err.empty()) return fail("submit refused: " + err);
  std::cout << id << "\n";
  std::cout.flush();
  if (!wait) return 0;
  return run_wait(url, {id}, built.spec.team());
}

namespace {
// How long `logs -f` asks again for a job's team while no scheduler answers.
constexpr auto kFailoverPatience = std::chrono::seconds(60);

// A job's view once it is terminal, asking again through errors (a
// scheduler failover answers `no responders` for a few seconds) until
// `deadline`; "" or why not.
std::string wait_terminal(Client& c, const std::string& team, const std::string& id,
                          std::chrono::steady_clock::time_point deadline, pb::JobView* view) {
  constexpr auto kPoll = std::chrono::milliseconds(300);
  std::string last_error;
  for (;;) {
    std::string err = c.status(team, id, view);
    if (err.empty() && names::is_terminal(view->state())) return {};
    if (err.rfind("not_found", 0) == 0) return err;  // no such job: asking again will not help
    if (!err.empty() && err != last_error) {
      std::cerr << "troupe: " << id << ": " << err << " (trying again)\n";
      last_error = err;
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return err.empty() ? "still " + view->state() + " when the wait ended" : err;
    std::this_thread::sleep_for(kPoll);
  }
}

// The job's team as resolve_team finds it, asking again through transport
// errors (no responders, timeouts: a scheduler failover) until `deadline`;
// "" or the last error. A definite answer (no such job) is not asked again.
std::string resolve_team_retrying(Client& c, const std::string& given, const std::string& id,
                                  std::string* team,
                                  std::chrono::steady_clock::time_point deadline) {
  constexpr auto kPoll = std::chrono::milliseconds(300);
  for (;;) {
    std::string code;
    std::string err = c.resolve_team(given, id, team, &code);
    if (err.empty() || !code.empty()) return err;  // found, or the scheduler said why not
    if (std::chrono::steady_clock::now() >= deadline) return err;
    std::cerr << "troupe: " << id << ": " << err << " (trying again)\n";
    std::this_thread::sleep_for(kPoll);
  }
}

// Prints how a job that did not succeed ended; returns its exit code.
int tell_end(const std::string& id, const pb::JobView& view) {
  std::string why;
  int rc = job_exit_code(view, &why);
  if (rc != 0)
    std::cerr << "troupe: " << id << " " << view.state() << (why.empty() ? "" : ": " + why)
              << " (exit " << rc << ")\n";
  return rc;
}
}  // namespace

int run_wait(const std::string& url, const std::vector<std::string>& ids, const std::string& team,
             int64_t timeout_s) {
  auto c = open_client(url);
  if (!c) return kUnreachableExit;
  auto deadline = timeout_s > 0 ? std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s)
                                : std::chrono::steady_clock::time_point::max();
  int rc = 0;
  for (const auto& id : ids) {
    std::string t;
    if (auto err = resolve_team_retrying(*c, team, id, &t, deadline); !err.empty())
      return fail("wait " + id + ": " + err);
    pb::JobView view;
    if (auto err = wait_terminal(*c, t, id, deadline, &view); !err.empty())
      return fail("wait " + id + ": " + err);
    int one = tell_end(id, view);
    if (rc == 0) rc = one;
  }
  return rc;
}

int run_status(const std::string& url, const std::string& job_id, const std::string& team,
               bool json) {
  auto c = open_client(url);
  if (!c) return kUnreachableExit;
  std::string t;
  if (auto err = c->resolve_team(team, job_id, &t); !err.empty())
    return fail("status " + job_id + ": " + err);
  pb::JobView view;
  std::string raw;
  if (auto err = c->status(t, job_id, &view, &raw); !err.empty())
    return fail("status " + job_id + ": " + err);
  if (json)
    std::cout << raw << "\n";
  else
    std::cout << status_text(view, now_ms());
  return 0;
}

int run_jobs(const std::string& url, const std::string& team, const std::string& state, bool json,
             int64_t limit, const std::string& after, bool wide, const std::string& pipeline,
             const std::string& label, const std::string& cluster) {
  auto c = open_client(url);
  if (!c) return kUnreachableExit;
  pb::JobList list;
  std::string next;
  // The scheduler filters (state, pipeline, label) and pages; every page
  // until `limit`.
  if (auto err = c->jobs(team, &list, JobsFilter{state, pipeline, label, {}, cluster}, limit, after,
                         &next);
      !err.empty())
    return fail("jobs: " + err);
  if (json) {
    // The JobList JSON, a view at a time (one protobuf print of 100,000
    // views is several times slower).
    std::string out = R"({"jobs":[)";
    for (int i = 0; i < list.jobs_size(); ++i) {
      if (i > 0) out += ',';
      out += spec::view_json(list.jobs(i));
    }
    out += "]}\n";
    std::cout << out;
  } else {
    std::cout << jobs_table(list, now_ms(), state, wide);
  }
  if (!next.empty())
    std::cerr << "troupe: more jobs after " << next << " (troupe jobs --after " << next << ")\n";
  return 0;
}

int run_cancel(const std::string& url, const std::string& job_id, const std::string& team) {
  auto c = open_client(url);
  if (!c) return kUnreachableExit;
  std::string t;
  if (auto err = c->resolve_team(team, job_id, &t); !err.empty()) return fail(err);
  CancelReply r;
  if (auto err = c->cancel(t, job_id, &r); !err.empty())
    return fail("cancel " + job_id + ": " + err);
  std::cout << r.state << "\n";
  return 0;
}

int run_cancel_where(const std::string& url, const std::string& team, const std::string& state) {
  auto c = open_client(url);
  if (!c) return kUnreachableExit;
  pb::JobList list;
  if (auto err = c->jobs(team, &list, state); !err.empty()) return fail("cancel: " + err);
  if (list.jobs_size() == 0)
    std::cerr << "troupe: no " << state << " jobs" << (team.empty() ? "" : " of team " + team)
              << "\n";
  return cancel_each(*c, {list.jobs().begin(), list.jobs().end()});
}

int run_pipeline_submit(const std::string& url, const std::string& file, const std::string& team,
                        bool json) {
  std::string text;
  if (!read_text(file, &text)) return fail("cannot read " + file);
  auto parsed = parse_pipeline_file(text);
  if (!parsed.ok) return fail(file + ": " + parsed.error);
  std::string t;
  if (auto err = pipeline_team(team, parsed.pipeline, &t); !err.empty())
    return fail(file + ": " + err);
  auto c = open_client(url);
  if (!c) return kUnreachableExit;
  std::string raw;
  if (auto err = c->pipeline(t, pipeline_request(parsed.pipeline, t), &raw); !err.empty())
    return fail("pipeline submit: " + err);
  auto reply = parse_pipeline_reply(raw);
  if (!reply.error.empty()) return fail("pipeline refused (no job was made): " + reply.error);
  if (json)
    std::cout << raw << "\n";
  else
    std::cout << pipeline_submit_text(reply);
  return 0;
}

int run_schedule(const std::string& url, const std::string& op, std::string team, ScheduleArgs a,
                 const std::string& spec_file, bool json) {
  if (op == "create") {
    std::string text;
    if (!read_text(spec_file, &text)) return fail("cannot read " + spec_file);
    auto parsed = spec::from_text(text);
    if (!parsed.ok) return fail(spec_file + ": " + parsed.error);
    if (team.empty()) team = parsed.spec.team();
    a.spec_json = spec::view_json(parsed.spec);
  }
  if (team.empty()) return fail("schedule " + op + ": --team is required");
  auto c = open_client(url);
  if (!c) return kUnreachableExit;
  std::string raw;
  if (auto err = c->schedule(team, schedule_request(op, a), &raw); !err.empty())
    return fail("schedule " + op + ": " + err);
  std::string text;
  if (auto err = schedule_text(op, raw, now_ms(), &text); !err.empty())
    return fail("schedule " + op + ": " + err);
  std::cout << (json ? raw + "\n" : text);
  return 0;
}

namespace {
// The jobs of a pipeline (of `team`, or of every team), upstream first;
// "" or what went wrong (also: no job of that pipeline).
std::string pipeline_jobs(Client& c, const std::string& pipeline_id, const std::string& team,
                          std::vector<pb::JobView>* jobs) {
  pb::JobList list;
  if (auto err = c.jobs(team, &list, JobsFilter{{}, pipeline_id, {}, {}, {}}); !err.empty())
    return err;
  *jobs = pipeline_members(list, pipeline_id);
  if (jobs->empty()) return "no pipeline " + pipeline_id + (team.empty() ? "" : " in team " + team);
  return {};
}
}  // namespace

int run_pipeline_status(const std::string& url, const std::string& pipeline_id,
                        const std::string& team, bool json) {
  auto c = open_client(url);
  if (!c) return kUnreachableExit;
  std::vector<pb::JobView> jobs;
  if (auto err = pipeline_jobs(*c, pipeline_id, team, &jobs); !err.empty())
    return fail("pipeline status: " + err);
  if (json)
    std::cout << pipeline_status_json(pipeline_id, jobs) << "\n";
  else
    std::cout << pipeline_status_text(pipeline_id, jobs);
  return 0;
}

int run_pipeline_cancel(const std::string& url, const std::string& pipeline_id,
                        const std::string& team) {
  auto c = open_client(url);
  if (!c) return kUnreachableExit;
  std::vector<pb::JobView> jobs;
  if (auto err = pipeline_jobs(*c, pipeline_id, team, &jobs); !err.empty())
    return fail("pipeline cancel: " + err);
  auto open = cancel_order(jobs);
  if (open.empty()) std::cerr << "troupe: every job of pipeline " << pipeline_id << " has ended\n";
  return cancel_each(*c, open);
}

int run_logs(const std::string& url, const std::string& job_id, const std::string& team, int rank,
             bool follow, bool all_ranks) {
  constexpr int kPage = 64 * 1024;
  constexpr auto kPoll = std::chrono::milliseconds(200);
  auto c = open_client(url);
  if (!c) return kUnreachableExit;
  std::string t;
  // Following rides out a failover from the start (its first lookup too).
  auto lookup_deadline =
      std::chrono::steady_clock::now() + (follow ? kFailoverPatience : std::chrono::seconds(0));
  if (auto err = resolve_team_retrying(*c, team, job_id, &t, lookup_deadline); !err.empty())
    return fail("logs " + job_id + ": " + err);
  pb::JobView view;
  // Every rank of the job (--all-ranks), each line prefixed with its rank.
  std::vector<int> ranks = {rank};
  if (all_ranks) {
    if (auto err = c->status(t, job_id, &view); !err.empty())
      return fail("logs " + job_id + ": " + err);
    ranks.clear();
    for (int r = 0; r < std::max(1, view.workers()); ++r) ranks.push_back(r);
  }
  std::vector<int64_t> offset(ranks.size(), 0);
  std::vector<std::string> carry(ranks.size());  // a rank's last line, not yet ended
  auto write = [&](size_t k, const std::string& data) {
    std::string out =
        all_ranks ? prefix_lines(carry[k], data, "[rank " + std::to_string(ranks[k]) + "] ") : data;
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
  };
  auto flush_carries = [&] {
    for (size_t k = 0; k < ranks.size(); ++k)
      if (!carry[k].empty()) write(k, "\n");
  };
  bool terminal = false;  // seen terminal: one more read to eof, then stop
  std::string last_error;
  for (;;) {
    // Each rank read to its end (page after page).
    std::string err;
    for (size_t k = 0; k < ranks.size(); ++k) {
      for (;;) {
        LogChunk chunk;
        std::string e = c->logs(t, job_id, ranks[k], offset[k], kPage, &chunk);
        if (!e.empty()) {
          err = ranks.size() > 1 ? "rank " + std::to_string(ranks[k]) + ": " + e : e;
          break;
        }
        if (!chunk.data.empty()) write(k, chunk.data);
        offset[k] = std::max(offset[k], chunk.next_offset);
        if (chunk.eof || chunk.data.empty()) break;
      }
    }
    if (!follow) {
      flush_carries();
      return err.empty() ? 0 : fail(err);
    }
    // Following: stop once the job is terminal and its log was read to the end;
    // exit as the job ended (troupe wait's codes).
    if (terminal) {
      flush_carries();
      return err.empty() ? tell_end(job_id, view) : fail(err);
    }
    if (auto serr = c->status(t, job_id, &view); !serr.empty()) {
      // A scheduler failover answers `no responders` a few seconds: ask again.
      if (serr.rfind("not_found", 0) == 0) return fail(serr);
      if (serr != last_error) std::cerr << "troupe: " << serr << " (trying again)\n";
      last_error = serr;
      std::this_thread::sleep_for(kPoll);
      continue;
    }
    if (names::is_terminal(view.state())) {
      terminal = true;
      continue;  // read what the last moments wrote
    }
    if (!err.empty() && err != last_error) {
      std::cerr << "troupe: waiting for logs (" << view.state() << "): " << err << "\n";
      last_error = err;
    }
    std::this_thread::sleep_for(kPoll);
  }
}

int run_nodes(const std::string& url, bool json, bool wide, const std::string& cluster) {
  auto c = open_client(url);
  if (!c) return kUnreachableExit;
  pb::NodeList list;
  if (auto err = c->nodes(&list); !err.empty()) return fail(err);
  if (!cluster.empty())
    if (auto err = keep_cluster_nodes(list, cluster); !err.empty()) return fail(err);
  if (json)
    std::cout << spec::view_json(list) << "\n";
  else
    std::cout << nodes_table(list, now_ms(), wide);
  return 0;
}

int run_clusters(const std::string& url, bool json) {
  auto c = open_client(url);
  if (!c) return kUnreachableExit;
  std::string raw, err;
  if (auto e = c->clusters(&raw); !e.empty()) return fail(e);
  if (json) {
    std::cout << raw << "\n";
    return 0;
  }
  auto table = clusters_table(raw, &err);
  if (!err.empty()) return fail(err);
  std::cout << table;
  return 0;
}

int run_queues(const std::string& url, bool json, const std::string& cluster) {
  auto c = open_client(url);
  if (!c) return kUnreachableExit;
  QueuesView q;
  std::string raw;
  if (auto err = c->queues(&q, &raw, cluster); !err.empty()) return fail(err);
  if (json)
    std::cout << raw << "\n";
  else
    std::cout << queues_text(q, now_ms());
  return 0;
}

int run_usage(const std::string& url, const std::string& team, const std::string& since,
              const std::string& until, const std::string& by, const std::string& output) {
  int64_t now = now_ms();
  auto until_ms = parse_when_ms(until, now);
  auto since_ms = until_ms ? parse_when_ms(since, *until_ms) : std::nullopt;
  if (!until_ms || !since_ms) {
    std::cerr << "troupe usage: --since/--until take a duration back from now (7d, 12h), now, or a "
                 "UTC date (2026-12-01, 2026-12-01T08:30)\n";
    return kUsageExit;
  }
  // A duration in --since counts back from --until.
  auto c = open_client(url);
  if (!c) return kUnreachableExit;
  std::string raw;
  if (auto err = c->usage(team, usage_request(*since_ms, *until_ms, by), &raw); !err.empty())
    return fail("usage: " + err);
  if (output == "json") {
    std::cout << raw << "\n";
    return 0;
  }
  auto text = usage_text(raw, output == "csv");
  if (text.empty()) return fail("usage: the reply is not a report");
  std::cout << text;
  return 0;
}

int run_why(const std::string& url, const std::string& job_id, const std::string& team, bool json) {
  auto c = open_client(url);
  if (!c) return kUnreachableExit;
  std::string t;
  if (auto err = c->resolve_team(team, job_id, &t); !err.empty()) return fail(err);
  WhyView w;
  std::string raw;
  if (auto err = c->why(t, job_id, &w, &raw); !err.empty())
    return fail("why " + job_id + ": " + err);
  if (json)
    std::cout << raw << "\n";
  else
    std::cout << why_text(w);
  return 0;
}

int run_history(const std::string& url, const std::string& job_id, const std::string& team,
                bool json) {
  auto c = open_client(url);
  if (!c) return kUnreachableExit;
  std::vector<std::string> raw;
  std::string t, code;
  bool truncated = false;
  auto err = c->resolve_team(team, job_id, &t, &code);
  if (err.empty()) err = c->history(t, job_id, &raw, &truncated, &code);
  if (code == "not_found")  // no such job (in that team): the same as no events
    return fail("history " + job_id + ": no events for " + job_id +
                (team.empty() ? "" : " in team " + team) + " (" + err + ")");
  if (!err.empty()) return fail("history " + job_id + ": " + err);
  if (truncated)
    std::cerr << "troupe: history " << job_id
              << ": the oldest events are left out (the reply would be too large)\n";
  // Each stored message parsed once; the events in story order (JobEvent.seq):
  // one announced again after a restart (recovery.hpp, unannounced) is stored
  // after later ones.
  std::vector<std::pair<pb::JobEvent, std::string>> story;  // (event, its stored text)
  size_t skipped = 0;
  for (auto& text : raw) {
    auto e = parse_events({text});
    if (e.empty()) {
      ++skipped;
      continue;
    }
    story.emplace_back(std::move(e[0]), std::move(text));
  }
  std::stable_sort(story.begin(), story.end(),
                   [](const auto& a, const auto& b) { return a.first.seq() < b.first.seq(); });
  std::vector<pb::JobEvent> events;
  raw.clear();
  for (auto& [e, text] : story) {
    events.push_back(std::move(e));
    raw.push_back(std::move(text));
  }
  if (events.empty())
    return fail("no events for " + job_id + (team.empty() ? "" : " in team " + team) +
                " in stream " + subjects::kEventsStream +
                " (unknown job, or its events are older than the scheduler's --events-max-age)");
  if (skipped > 0)
    std::cerr << "troupe: history " << job_id << ": " << skipped
              << " stored message(s) are not job events, left out\n";
  if (json)
    std::cout << history_json(raw) << "\n";
  else
    std::cout << history_table(events);
  return 0;
}

int run_node_op(const std::string& url, const std::string& op, const std::string& node,
                const std::string& reason, const std::string& cluster) {
  auto c = open_client(url);
  if (!c) return kUnreachableExit;
  std::string state;
  if (auto err = c->node_op(op, node, &state, reason, cluster); !err.empty())
    return fail(op + " " + node + ": " + err);
  std::cout << node << ": " << state << "\n";
  return 0;
}

namespace {

// The token bucket, through the home's scheduler identity (the only one with
// JetStream rights besides reading); nullptr after printing why.
struct TokenStore {
  bus::ConnectionPtr conn;
  bus::JetStreamPtr js;
  bus::KeyValuePtr kv;
};
std::optional<TokenStore> open_token_store(const std::string& url, const std::string& home) {
  namespace ta = troupe::auth;
  bus::ConnectOptions o;
  o.url = url;
  o.name = "troupe-auth";
  o.max_reconnect = 0;
  const std::string root = ta::troupe_home(home);
  std::error_code ec;
  if (!std::filesystem::exists(root + "/" + kInsecureMarker, ec)) {
    const std::string dir = ta::auth_dir_of(root);
    o.creds_file = ta::creds_path(dir, std::string(subjects::kSchedulerIdentity));
    if (!std::filesystem::exists(o.creds_file, ec)) {
      std::cerr << "troupe auth: no " << o.creds_file
                << " (run it where the cluster's home is, or pass --home)\n";
      return std::nullopt;
    }
    if (std::filesystem::exists(dir + "/" + ta::kCaCertFile, ec))
      o.tls_ca = dir + "/" + ta::kCaCertFile;
  }
  TokenStore s;
  std::string err;
  s.conn = bus::Connection::open(o, &err);
  if (s.conn) s.js = bus::JetStream::open(*s.conn, &err);
  if (s.js) s.kv = bus::KeyValue::open(*s.js, subjects::kTokenBucket, &err);
  if (!s.kv) {
    std::cerr << "troupe auth: " << err << " (the cluster must run: troupe up)\n";
    return std::nullopt;
  }
  return s;
}

}  // namespace

std::string make_token(const std::string& url, const std::string& home, const std::string& team,
                       const std::string& admin_name, std::string* token) {
  auth::TokenGrant g;
  g.admin = !admin_name.empty();
  g.team = g.admin ? std::string() : team;
  g.name = g.admin ? admin_name : team;
  g.created_ms = now_ms();
  auto store = open_token_store(url, home);
  if (!store) return "the token bucket cannot be reached";
  const std::string t = auth::new_token();
  if (t.empty()) return "no random bytes for a token";
  std::string err;
  bool conflict = false;
  if (store->kv->update(auth::token_key(t), auth::grant_json(g), 0, &conflict, &err) == 0)
    return "the token was not stored: " + (err.empty() ? std::string("conflict") : err);
  *token = t;
  return {};
}

int run_add_token(const std::string& url, const std::string& home, const std::string& team,
                  const std::string& admin_name) {
  std::string token;
  if (auto err = make_token(url, home, team, admin_name, &token); !err.empty()) {
    std::cerr << "troupe auth: " << err << "\n";
    return kUnreachableExit;
  }
  std::cout << token << "\n";
  return 0;
}

int run_revoke_token(const std::string& url, const std::string& home, const std::string& token) {
  if (!auth::is_token(token)) return fail("auth: that is not a token");
  auto store = open_token_store(url, home);
  if (!store) return kUnreachableExit;
  const std::string key = auth::token_key(token);
  auto entry = store->kv->get(key);
  if (!entry || entry->value.empty()) return fail("auth: no such token");
  std::string err;
  bool conflict = false;
  if (store->kv->update(key, std::string(), entry->revision, &conflict, &err) == 0)
    return fail("auth: the token was not revoked: " + (err.empty() ? "conflict" : err));
  std::cout << "revoked\n";
  return 0;
}

}  // namespace troupe::gateway

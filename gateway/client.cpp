// The CLI's requests to the scheduler over NATS (see client.hpp).
#include "gateway/client.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "bus/subjects.hpp"
#include "messages/json_text.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"

namespace troupe::gateway {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Identity resolve_identity(const EnvFn& env) {
  Identity id;
  auto get = [&](const char* k) {
    auto v = env(k);
    return v ? *v : std::string();
  };
  id.creds_file = get("TROUPE_NATS_CREDS");
  id.tls_ca = get("TROUPE_NATS_CA");
  if (!id.creds_file.empty() && !id.tls_ca.empty()) return id;
  // A `troupe up` cluster: its admin identity and CA under $TROUPE_HOME/auth
  // (./.troupe/auth by default), unless that cluster runs --insecure.
  std::string home = get("TROUPE_HOME");
  if (home.empty()) home = "./.troupe";
  std::error_code ec;
  if (std::filesystem::exists(home + "/" + kInsecureMarker, ec)) return id;
  std::string auth = home + "/auth";
  if (id.creds_file.empty()) {
    std::string admin = auth + "/admin-admin.creds";
    if (std::filesystem::exists(admin, ec)) {
      id.creds_file = admin;
    } else if (std::filesystem::is_directory(auth, ec)) {
      for (const auto& e : std::filesystem::directory_iterator(auth, ec)) {
        auto n = e.path().filename().string();
        if (n.rfind("admin-", 0) == 0 && e.path().extension() == ".creds") {
          id.creds_file = e.path().string();
          break;
        }
      }
    }
    id.discovered = !id.creds_file.empty();
  }
  if (id.tls_ca.empty() && std::filesystem::exists(auth + "/ca.pem", ec))
    id.tls_ca = auth + "/ca.pem";
  return id;
}

std::unique_ptr<Client> Client::connect(const std::string& url, std::string* error,
                                        const std::string& name) {
  bus::ConnectOptions o;
  o.url = url;
  auto id = resolve_identity([](const char* k) -> std::optional<std::string> {
    const char* v = std::getenv(k);
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  });
  o.creds_file = id.creds_file;
  o.tls_ca = id.tls_ca;
  o.name = name;
  o.timeout_ms = 2000;
  o.max_reconnect = 5;
  return open(std::move(o), error);
}

std::unique_ptr<Client> Client::open(bus::ConnectOptions o, std::string* error) {
  // A permission the server denied is printed by the verb's own error (the
  // request's error names it), not once more on stderr.
  if (!o.on_error) o.on_error = [](const std::string&) {};
  auto c = bus::Connection::open(o, error);
  if (!c) return nullptr;
  return std::unique_ptr<Client>(new Client(std::move(c)));
}

std::string Client::call_once(const std::string& subject, const std::string& body,
                              std::string* reply) {
  std::string err;
  auto r = conn_->request(subject, body, timeout_ms_, &err);
  if (!r) return err.empty() ? "request on " + subject + " failed" : err;
  reply->assign(r->begin(), r->end());
  return {};
}

void while_rate_limited(const std::function<bool()>& refused, const std::atomic<bool>* stop) {
  const auto until = std::chrono::steady_clock::now() + kRateLimitedPatience;
  while (refused() && (stop == nullptr || !stop->load()) &&
         std::chrono::steady_clock::now() + kRateLimitedPause < until)
    std::this_thread::sleep_for(kRateLimitedPause);
}

std::string Client::call(const std::string& subject, const std::string& body, std::string* reply) {
  std::string err;
  while_rate_limited([&] {
    err = call_once(subject, body, reply);
    if (!err.empty()) return false;
    auto e = reply_error_of(*reply);
    return e && e->code == "rate_limited";
  });
  return err;
}

std::string Client::forward_or(const std::string& subject, const std::string& fallback,
                               const std::string& body, std::string* reply) {
  std::string err = call_once(subject, body, reply);
  if (!fallback.empty() && err.rfind("no responders", 0) == 0)
    err = call_once(fallback, body, reply);
  return err;
}

namespace {

std::string check_team(const std::string& team) {
  if (auto err = subjects::check_token(team); !err.empty()) return "team: " + err;
  if (!subjects::valid_team(team)) return "team name '" + team + "' is reserved";
  return {};
}

std::string check_job_id(const std::string& id) {
  if (auto err = subjects::check_token(id); !err.empty()) return "job id: " + err;
  return {};
}

}  // namespace

namespace {

constexpr auto kSubmitRetryFor = std::chrono::seconds(30);
constexpr auto kSubmitRetryPause = std::chrono::milliseconds(250);

// A key no other submission has: 128 random bits.
std::string fresh_idempotency_key() {
  std::random_device rd;
  char buf[40];
  std::snprintf(buf, sizeof buf, "cli-%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  return buf;
}

// An answer worth asking again for: none came (the request or its reply
// was lost with a NATS server), or the scheduler said so. ("No responders"
// is asked again by the connection itself in a NATS cluster, and with one
// server means that no scheduler runs.)
bool retryable(const std::string& err) {
  return err.find("timed out") != std::string::npos || err.find("; retry") != std::string::npos;
}

}  // namespace

std::string Client::submit(const pb::JobSpec& spec, std::string* job_id) {
  if (auto err = check_team(spec.team()); !err.empty()) return err;
  pb::JobSpec keyed = spec;
  if (keyed.idempotency_key().empty()) keyed.set_idempotency_key(fresh_idempotency_key());
  const std::string body = spec::to_json(keyed);
  const auto until = std::chrono::steady_clock::now() + kSubmitRetryFor;
  // A spec that names its pool goes to that pool's owner (no hand-over
  // between shards); where nobody listens for it, to any scheduler.
  const bool to_pool = !spec.pool().empty() && subjects::check_token(spec.pool()).empty();
  for (;;) {
    std::string reply;
    std::string err = to_pool ? forward_or(subjects::team_submit_to(spec.team(), spec.pool()),
                                           subjects::team_submit(spec.team()), body, &reply)
                              : call(subjects::team_submit(spec.team()), body, &reply);
    if (err.empty()) {
      auto r = parse_submit_reply(reply);
      err = r.error;
      if (err.empty()) {
        *job_id = r.job_id;
        return {};
      }
    }
    if (!retryable(err) || std::chrono::steady_clock::now() + kSubmitRetryPause >= until)
      return err;
    std::this_thread::sleep_for(kSubmitRetryPause);
  }
}

std::string Client::status(const std::string& team, const std::string& job_id, pb::JobView* out,
                           std::string* raw_json) {
  if (auto err = check_team(team); !err.empty()) return err;
  if (auto err = check_job_id(job_id); !err.empty()) return err;
  std::string reply;
  if (auto err = call(subjects::team_status(team), job_request(job_id), &reply); !err.empty())
    return err;
  if (raw_json != nullptr) *raw_json = reply;
  return parse_view(reply, *out);
}

std::string Client::cancel(const std::string& team, const std::string& job_id, CancelReply* out) {
  if (auto err = check_team(team); !err.empty()) return err;
  if (auto err = check_job_id(job_id); !err.empty()) return err;
  std::string reply;
  if (auto err = call(subjects::team_cancel(team), job_request(job_id), &reply); !err.empty())
    return err;
  *out = parse_cancel_reply(reply);
  return out->error;
}

std::string Client::logs(const std::string& team, const std::string& job_id, int rank,
                         int64_t offset, int max_bytes, LogChunk* out) {
  if (auto err = check_team(team); !err.empty()) return err;
  if (auto err = check_job_id(job_id); !err.empty()) return err;
  std::string reply;
  if (auto err =
          call(subjects::team_logs(team), logs_request(job_id, rank, offset, max_bytes), &reply);
      !err.empty())
    return err;
  *out = parse_log_reply(reply, offset);
  return out->error;
}

std::string Client::jobs_page(const std::string& team, int64_t limit, const std::string& after,
                              const std::string& state, pb::JobList* out, std::string* next) {
  return jobs_page(team, limit, after, JobsFilter{state, {}, {}, {}, {}}, out, next);
}

std::string Client::jobs_page(const std::string& team, int64_t limit, const std::string& after,
                              const JobsFilter& filter, pb::JobList* out, std::string* next) {
  std::string subject;
  if (team.empty()) {
    subject = subjects::team_jobs(names::kSysToken);  // troupe.sys.jobs
  } else {
    if (auto err = check_team(team); !err.empty()) return err;
    subject = subjects::team_jobs(team);
  }
  std::string reply;
  if (auto err = call(subject, jobs_filter_request(limit, after, filter), &reply); !err.empty())
    return err;
  if (auto err = parse_view(reply, *out); !err.empty()) return err;
  *next = parse_jobs_next(reply);
  return {};
}

std::string Client::jobs(const std::string& team, pb::JobList* out, const std::string& state,
                         int64_t max_jobs, const std::string& after, std::string* next) {
  return jobs(team, out, JobsFilter{state, {}, {}, {}, {}}, max_jobs, after, next);
}

std::string Client::jobs(const std::string& team, pb::JobList* out, const JobsFilter& filter,
                         int64_t max_jobs, const std::string& after, std::string* next) {
  std::string from = after;
  for (;;) {
    int64_t have = out->jobs_size();
    int64_t want = max_jobs > 0 ? max_jobs - have : kJobsPageLimit;
    pb::JobList page;
    std::string more;
    if (auto err = jobs_page(team, want, from, filter, &page, &more); !err.empty()) return err;
    for (auto& j : *page.mutable_jobs()) *out->add_jobs() = std::move(j);
    bool full = max_jobs > 0 && out->jobs_size() >= max_jobs;
    // An empty page with a "next" cannot come from a scheduler that keeps
    // its word; stop rather than ask again forever.
    if (more.empty() || full || page.jobs_size() == 0) {
      if (next != nullptr) *next = more;
      return {};
    }
    from = more;
  }
}

std::string Client::pipeline(const std::string& team, const std::string& body, std::string* reply) {
  if (auto err = check_team(team); !err.empty()) return err;
  return call(subjects::team_pipeline(team), body, reply);
}

std::string Client::schedule(const std::string& team, const std::string& body, std::string* reply) {
  if (auto err = check_team(team); !err.empty()) return err;
  return call(subjects::team_verb(team, subjects::kSchedule), body, reply);
}

std::string Client::nodes(pb::NodeList* out) {
  std::string reply;
  if (auto err = call(subjects::kSysNodes, "{}", &reply); !err.empty()) return err;
  return parse_view(reply, *out);
}

std::string Client::why(const std::string& team, const std::string& job_id, WhyView* out,
                        std::string* raw_json) {
  if (auto err = check_team(team); !err.empty()) return err;
  if (auto err = check_job_id(job_id); !err.empty()) return err;
  std::string reply;
  if (auto err = call(subjects::team_why(team), job_request(job_id), &reply); !err.empty())
    return err;
  if (raw_json != nullptr) *raw_json = reply;
  return parse_why(reply, out);
}

std::string Client::usage(const std::string& team, const std::string& request,
                          std::string* raw_json) {
  if (!team.empty())
    if (auto err = check_team(team); !err.empty()) return err;
  const std::string subject =
      subjects::team_verb(team.empty() ? std::string(names::kSysToken) : team, subjects::kUsage);
  if (auto err = call(subject, request, raw_json); !err.empty()) return err;
  auto j = json_text::parse(*raw_json);
  if (!j.is_object()) return "usage: the reply is not JSON";
  if (j.contains("error")) return j.value("error", std::string("usage refused"));
  return {};
}

std::string Client::queues(QueuesView* out, std::string* raw_json, const std::string& cluster) {
  std::string reply;
  if (auto err = call(subjects::kSysQueues, queues_request(cluster), &reply); !err.empty())
    return err;
  if (raw_json != nullptr) *raw_json = reply;
  if (auto err = parse_queues(reply, out); !err.empty()) return err;
  return check_queues_cluster(*out, cluster);
}

std::string Client::clusters(std::string* raw_json, bool* no_front_door) {
  std::string err = call(subjects::kSysClusters, "{}", raw_json);
  const bool none = err.rfind("no responders", 0) == 0;
  if (no_front_door != nullptr) *no_front_door = none;
  if (none)
    err =
        "no front door answers on this NATS (troupe clusters lists the clusters behind a "
        "troupe-dispatch; this NATS serves one cluster: troupe nodes, troupe queues)";
  return err;
}

std::string Client::node_op(const std::string& op, const std::string& node, std::string* state,
                            const std::string& reason, const std::string& cluster) {
  if (auto err = subjects::check_token(node); !err.empty()) return "node: " + err;
  if (!cluster.empty())
    if (auto err = subjects::check_token(cluster); !err.empty()) return "cluster: " + err;
  const char* subject = op == "drain"         ? subjects::kSysDrain
                        : op == "uncordon"    ? subjects::kSysUncordon
                        : op == "remove-node" ? subjects::kSysRemoveNode
                                              : subjects::kSysCordon;
  std::string reply;
  nlohmann::json req{{"node", node}};
  if (!reason.empty()) req["reason"] = reason;
  if (!cluster.empty()) req["cluster"] = cluster;
  if (auto err = call(subject, req.dump(), &reply); !err.empty()) return err;
  auto j = json_text::parse(reply);
  if (j.is_discarded() || !j.is_object()) return "unreadable reply: " + reply;
  if (j.contains("error")) return j["error"].is_string() ? j["error"].get<std::string>() : reply;
  *state =
      j.value("state", std::string()) + " (" + std::to_string(j.value("running", 0)) + " running)";
  if (auto c = j.find("cluster"); c != j.end() && c->is_string())
    *state += " in cluster " + c->get<std::string>();
  // A removed node's checkpoint dirs of purged jobs, left on its disk.
  if (auto d = j.find("checkpoint_dirs_left"); d != j.end() && d->is_array() && !d->empty()) {
    *state += "; checkpoint dirs of purged jobs left on its disk (remove them by hand):";
    for (const auto& dir : *d)
      if (dir.is_string()) *state += "\n  " + dir.get<std::string>();
  }
  return {};
}

std::string Client::history(const std::string& team, const std::string& job_id,
                            std::vector<std::string>* raw, bool* truncated, std::string* code) {
  if (auto err = check_team(team); !err.empty()) return err;
  if (auto err = check_job_id(job_id); !err.empty()) return err;
  std::string reply;
  if (auto err = call(subjects::team_history(team), job_request(job_id), &reply); !err.empty())
    return err;
  if (auto e = reply_error_of(reply); e && code != nullptr) *code = e->code;
  bool cut = false;
  auto err = parse_history_reply(reply, raw, &cut);
  if (truncated != nullptr) *truncated = cut;
  return err;
}

std::string Client::find_team(const std::string& job_id, std::string* team, std::string* code) {
  if (auto err = check_job_id(job_id); !err.empty()) return err;
  std::string reply;
  if (auto err = call(subjects::kSysFind, job_request(job_id), &reply); !err.empty())
    return "cannot look up the job's team: " + err;
  if (auto e = reply_error_of(reply)) {
    if (code != nullptr) *code = e->code;
    return *reply_error(reply);
  }
  auto j = json_text::parse(reply);
  if (j.is_discarded() || !j.is_object() || !j.contains("team") || !j["team"].is_string() ||
      j["team"].get<std::string>().empty())
    return "cannot look up the job's team: unreadable reply: " + reply.substr(0, 200) +
           "; pass --team";
  *team = j["team"].get<std::string>();
  return {};
}

std::string Client::resolve_team(const std::string& given, const std::string& job_id,
                                 std::string* team, std::string* code) {
  if (!given.empty()) {
    if (auto err = check_team(given); !err.empty()) return err;
    *team = given;
    return {};
  }
  return find_team(job_id, team, code);
}

}  // namespace troupe::gateway

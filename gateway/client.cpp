// The CLI's requests to the scheduler over NATS (see client.hpp).
#include "gateway/client.hpp"

#include <chrono>

#include <nlohmann/json.hpp>

#include "bus/subjects.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"

namespace troupe::gateway {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::unique_ptr<Client> Client::connect(const std::string& url, std::string* error,
                                        const std::string& name) {
  bus::ConnectOptions o;
  o.url = url;
  o.name = name;
  o.timeout_ms = 2000;
  o.max_reconnect = 5;
  auto c = bus::Connection::open(o, error);
  if (!c) return nullptr;
  return std::unique_ptr<Client>(new Client(std::move(c)));
}

std::string Client::call(const std::string& subject, const std::string& body,
                         std::string* reply) {
  std::string err;
  auto r = conn_->request(subject, body, timeout_ms_, &err);
  if (!r) return err.empty() ? "request on " + subject + " failed" : err;
  reply->assign(r->begin(), r->end());
  return {};
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

std::string Client::submit(const pb::JobSpec& spec, std::string* job_id) {
  if (auto err = check_team(spec.team()); !err.empty()) return err;
  std::string reply;
  if (auto err = call(subjects::team_submit(spec.team()), spec::to_json(spec), &reply);
      !err.empty())
    return err;
  auto r = parse_submit_reply(reply);
  if (!r.error.empty()) return r.error;
  *job_id = r.job_id;
  return {};
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
  if (auto err = call(subjects::team_logs(team), logs_request(job_id, rank, offset, max_bytes),
                      &reply);
      !err.empty())
    return err;
  *out = parse_log_reply(reply, offset);
  return out->error;
}

std::string Client::jobs(const std::string& team, pb::JobList* out) {
  std::string subject;
  if (team.empty()) {
    subject = subjects::team_jobs(names::kSysToken);  // troupe.sys.jobs
  } else {
    if (auto err = check_team(team); !err.empty()) return err;
    subject = subjects::team_jobs(team);
  }
  std::string reply;
  if (auto err = call(subject, "{}", &reply); !err.empty()) return err;
  return parse_view(reply, *out);
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

std::string Client::queues(QueuesView* out, std::string* raw_json) {
  std::string reply;
  if (auto err = call(subjects::kSysQueues, "{}", &reply); !err.empty()) return err;
  if (raw_json != nullptr) *raw_json = reply;
  return parse_queues(reply, out);
}

std::string Client::node_op(const std::string& op, const std::string& node, std::string* state) {
  if (auto err = subjects::check_token(node); !err.empty()) return "node: " + err;
  const char* subject = op == "drain"      ? subjects::kSysDrain
                        : op == "uncordon" ? subjects::kSysUncordon
                                           : subjects::kSysCordon;
  std::string reply;
  if (auto err = call(subject, nlohmann::json{{"node", node}}.dump(), &reply); !err.empty()) return err;
  auto j = nlohmann::json::parse(reply, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return "unreadable reply: " + reply;
  if (j.contains("error")) return j["error"].is_string() ? j["error"].get<std::string>() : reply;
  *state = j.value("state", std::string()) + " (" + std::to_string(j.value("running", 0)) + " running)";
  return {};
}

std::string Client::history(const std::string& team, const std::string& job_id,
                            std::vector<std::string>* raw) {
  if (auto err = check_job_id(job_id); !err.empty()) return err;
  if (!team.empty())
    if (auto err = check_team(team); !err.empty()) return err;
  std::string err;
  auto js = bus::JetStream::open(*conn_, &err);
  if (!js) return err;
  auto filter = subjects::job_events(team.empty() ? std::string("*") : team, job_id);
  for (auto& m : js->read_all(subjects::kEventsStream, filter))
    raw->emplace_back(m.data.begin(), m.data.end());
  return {};
}

std::string Client::find_team(const std::string& job_id, std::string* team) {
  if (auto err = check_job_id(job_id); !err.empty()) return err;
  pb::JobList all;
  if (auto err = jobs({}, &all); !err.empty()) return "cannot look up the job's team: " + err;
  for (const auto& j : all.jobs()) {
    if (j.job_id() == job_id) {
      if (j.team().empty()) return "the scheduler lists " + job_id + " without a team; pass --team";
      *team = j.team();
      return {};
    }
  }
  return "no job " + job_id;
}

std::string Client::resolve_team(const std::string& given, const std::string& job_id,
                                 std::string* team) {
  if (!given.empty()) {
    if (auto err = check_team(given); !err.empty()) return err;
    *team = given;
    return {};
  }
  return find_team(job_id, team);
}

}  // namespace troupe::gateway

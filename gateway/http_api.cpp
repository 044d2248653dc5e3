// The HTTP API's pure rules (see http_api.hpp).
#include "gateway/http_api.hpp"

#include <map>
#include <nlohmann/json.hpp>

#include "messages/json_text.hpp"

namespace troupe::gateway::http {

const std::vector<Route>& routes() {
  static const std::vector<Route> kRoutes = {
      {"GET", "/healthz", "the process is up"},
      {"GET", "/readyz", "connected to NATS and the scheduler answers"},
      {"GET", "/metrics", "the gateway's Prometheus metrics"},
      {"POST", "/v1/session", "log in: the token becomes an HttpOnly session cookie"},
      {"DELETE", "/v1/session", "log out"},
      {"GET", "/v1/whoami", "the token's team, or admin"},
      {"POST", "/v1/jobs", "submit a job"},
      {"GET", "/v1/jobs", "list jobs, one page"},
      {"GET", "/v1/jobs/{id}", "a job's view"},
      {"DELETE", "/v1/jobs/{id}", "cancel a job"},
      {"GET", "/v1/jobs/{id}/logs", "a worker's log; follow=1 streams it until the job ends"},
      {"GET", "/v1/jobs/{id}/why", "why a job is not running"},
      {"GET", "/v1/jobs/{id}/history", "a job's stored events"},
      {"GET", "/v1/queues", "pools and teams: use, quota, pending work, share"},
      {"GET", "/v1/nodes", "every node"},
      {"POST", "/v1/nodes/{name}/cordon", "admin: the node takes no new work"},
      {"POST", "/v1/nodes/{name}/uncordon", "admin: the node takes work again"},
      {"POST", "/v1/nodes/{name}/drain", "admin: running work ends there, no new work"},
      {"DELETE", "/v1/nodes/{name}", "admin: a lost node forgotten for good"},
      {"GET", "/v1/clusters", "behind a front door: each cluster's GPUs, queue and state"},
      {"GET", "/v1/events", "job events as Server-Sent Events"},
  };
  return kRoutes;
}

bool path_matches(std::string_view pattern, std::string_view path) {
  while (!pattern.empty() && !path.empty()) {
    if (pattern.front() == '{') {
      auto close = pattern.find('}');
      if (close == std::string_view::npos) return false;
      auto seg = path.find('/');
      if (seg == 0) return false;
      pattern.remove_prefix(close + 1);
      path.remove_prefix(seg == std::string_view::npos ? path.size() : seg);
      continue;
    }
    if (pattern.front() != path.front()) return false;
    pattern.remove_prefix(1);
    path.remove_prefix(1);
  }
  return pattern.empty() && path.empty();
}

int problem_status(std::string_view code) {
  struct M {
    std::string_view code;
    int status;
  };
  static constexpr M kMap[] = {
      {"bad_request", 400},
      {"malformed", 400},
      {"unauthorized", 401},
      {"forbidden", 403},
      {"wrong_team", 403},
      {"not_allowed", 403},
      {"not_found", 404},
      {"no_rank", 404},
      {"unknown_node", 404},
      {"method_not_allowed", 405},
      {"idempotency_conflict", 409},
      {"node_alive", 409},
      {"node_busy", 409},
      {"too_large", 413},
      {"invalid_spec", 422},
      {"unsatisfiable", 422},
      {"rate_limited", 429},
      {"too_many_queued", 429},
      {"unavailable", 503},
  };
  for (const auto& m : kMap)
    if (m.code == code) return m.status;
  return 500;
}

namespace {
const char* title_of(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 413:
      return "Payload Too Large";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 503:
      return "Service Unavailable";
    default:
      return "Internal Server Error";
  }
}
}  // namespace

std::string problem_json(int status, std::string_view code, std::string_view detail) {
  nlohmann::json j{{"type", "urn:troupe:problem:" + std::string(code)},
                   {"title", title_of(status)},
                   {"status", status},
                   {"detail", std::string(detail)},
                   {"code", std::string(code)}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string bearer_token(std::string_view authorization) {
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.size() <= kScheme.size()) return {};
  for (std::size_t i = 0; i < kScheme.size(); ++i)  // the scheme is case-insensitive
    if (std::tolower(static_cast<unsigned char>(authorization[i])) !=
        std::tolower(static_cast<unsigned char>(kScheme[i])))
      return {};
  auto token = authorization.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  return std::string(token);
}

std::string cookie_value(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    auto semi = header.find(';');
    auto pair = header.substr(0, semi);
    header = semi == std::string_view::npos ? std::string_view() : header.substr(semi + 1);
    while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
    auto eq = pair.find('=');
    if (eq == std::string_view::npos) continue;
    if (pair.substr(0, eq) == name) {
      auto v = pair.substr(eq + 1);
      while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
      return std::string(v);
    }
  }
  return {};
}

std::optional<std::string> scope_team(const Caller& c, std::string_view asked, std::string* error) {
  if (c.admin) return std::string(asked);
  if (asked.empty() || asked == c.team) return c.team;
  if (error != nullptr) *error = "this token acts for team " + c.team + " only";
  return std::nullopt;
}

std::string queues_view(const std::string& json, const std::string& team) {
  auto j = json_text::parse(json);
  if (j.is_discarded() || !j.is_object()) return json;
  auto tit = j.find("teams");
  if (tit == j.end() || !tit->is_array()) return json;
  // Per pool, every team's weight; at a front door (troupe-dispatch) each
  // row names its cluster too, and each cluster's pools are its own.
  auto pool_of = [](const nlohmann::json& t) {
    auto text = [&t](const char* k) {
      auto v = t.find(k);
      return v != t.end() && v->is_string() ? v->get<std::string>() : std::string();
    };
    const std::string cluster = text("cluster");
    return cluster.empty() ? text("pool") : cluster + "/" + text("pool");
  };
  std::map<std::string, double> weights;
  for (const auto& t : *tit)
    if (t.is_object() && t.contains("weight") && t["weight"].is_number())
      weights[pool_of(t)] += t["weight"].get<double>();
  nlohmann::json teams = nlohmann::json::array();
  for (auto t : *tit) {
    if (!t.is_object()) continue;
    if (!team.empty() && t.value("team", std::string()) != team) continue;
    double sum = weights[pool_of(t)];
    double w = t.contains("weight") && t["weight"].is_number() ? t["weight"].get<double>() : 0;
    t["fair_share"] = sum > 0 ? w / sum : 0.0;
    teams.push_back(std::move(t));
  }
  *tit = std::move(teams);
  if (!team.empty()) {
    if (auto pit = j.find("pools"); pit != j.end() && pit->is_array())
      for (auto& p : *pit)
        if (p.is_object()) p.erase("hold");  // names another team's job and nodes
  }
  return j.dump();
}

}  // namespace troupe::gateway::http

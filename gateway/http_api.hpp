// The HTTP API's rules as pure functions (troupe-gateway, docs/http.md): its
// routes (the one list docs/openapi.yaml is checked against), how a NATS API
// error code maps to an HTTP status and an RFC 7807 problem, who a request may
// act for, and what a team's token may see of whole-cluster replies.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::gateway::http {

// Every route served, OpenAPI path syntax ({id}). `console` routes serve the
// web console's files and need no token.
struct Route {
  const char* method;
  const char* path;
  const char* summary;
};
const std::vector<Route>& routes();
// Whether `path` is an instance of the route path `pattern` ({x} matches one
// non-empty segment).
bool path_matches(std::string_view pattern, std::string_view path);

// The session cookie the console logs in with (HttpOnly, SameSite=Strict):
// the token itself, so any gateway behind a load balancer can check it.
inline constexpr const char* kSessionCookie = "troupe_session";
// A request authenticated by the cookie that changes something (POST,
// DELETE) must carry this header: a cross-site form cannot set it (CSRF).
inline constexpr const char* kConsoleHeader = "X-Troupe-Console";
inline constexpr const char* kProblemType = "application/problem+json";

// Who sent a request: the grant of its token.
struct Caller {
  std::string team;  // "" for an admin
  bool admin = false;
  std::string name;
};

// HTTP status of a NATS API error code (docs/api.md) or of the gateway's own
// (unauthorized 401, forbidden 403, not_found 404, method_not_allowed 405,
// too_large 413, unavailable 503); 500 for a code it does not know.
int problem_status(std::string_view code);
// {"type":"urn:troupe:problem:<code>","title":...,"status":N,"detail":...,"code":...}
std::string problem_json(int status, std::string_view code, std::string_view detail);

// The token of an `Authorization: Bearer <token>` header ("" when none).
std::string bearer_token(std::string_view authorization);
// The value of cookie `name` in a Cookie header ("" when absent).
std::string cookie_value(std::string_view cookie_header, std::string_view name);

// The team a request acts for: a team's token acts for its team only (an
// `asked` team that is another one is refused: `*error` and nullopt); an
// admin's for `asked`, "" meaning every team where the route allows it.
std::optional<std::string> scope_team(const Caller& c, std::string_view asked, std::string* error);

// troupe.sys.queues' reply as the HTTP API gives it: each row of `teams` gets
// `fair_share` (its weight over the weights of its pool's teams). For a
// team's token (`team` not empty) only that team's rows stay, and the pools'
// totals without another team's held job; every other field as it came.
std::string queues_view(const std::string& json, const std::string& team);

}  // namespace troupe::gateway::http

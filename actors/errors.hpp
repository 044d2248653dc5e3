// The error replies of the request subjects (docs/api.md, "Errors"), built in
// one place: {"error": "<text for a person>", "code": "<stable code>"}. The
// codes are part of the API; the texts are not.
//
// A job that does not exist and a job of another team get the same reply
// (not_found, "no job <id>"): a team cannot learn that another team's job
// exists.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace troupe::errors {

inline constexpr std::string_view kNotFound = "not_found";        // unknown job (or another team's)
inline constexpr std::string_view kBadRequest = "bad_request";    // malformed JSON, missing field
inline constexpr std::string_view kNoRank = "no_rank";            // logs of a rank not placed
inline constexpr std::string_view kUnknownNode = "unknown_node";  // cordon/uncordon/drain/remove
// remove_node: its agent is heard; it still holds work.
inline constexpr std::string_view kNodeAlive = "node_alive";
inline constexpr std::string_view kNodeBusy = "node_busy";
inline constexpr std::string_view kUnavailable = "unavailable";  // try again later
inline constexpr std::string_view kNotQueued = "not_queued";     // cancel if_queued: it started

inline std::string error_json(std::string_view code, const std::string& what) {
  return nlohmann::json{{"error", what}, {"code", code}}.dump();
}

// The reply to a job id that no job of the asking team has.
inline std::string no_job(const std::string& job_id) {
  return error_json(kNotFound, "no job " + job_id);
}

// The reply to a cancel with "if_queued" of a job that started or ended
// (`state`, its state now): nothing changed. It names the job and its state
// so that a caller can tell which without asking again.
inline std::string not_queued(const std::string& job_id, std::string_view state) {
  return nlohmann::json{
      {"error", "job " + job_id + " is " + std::string(state) + ": not canceled (if_queued)"},
      {"code", kNotQueued},
      {"job_id", job_id},
      {"state", state}}
      .dump();
}

}  // namespace troupe::errors

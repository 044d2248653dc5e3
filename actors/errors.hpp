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
inline constexpr std::string_view kUnknownNode = "unknown_node";  // cordon/uncordon/drain
inline constexpr std::string_view kUnavailable = "unavailable";   // try again later

inline std::string error_json(std::string_view code, const std::string& what) {
  return nlohmann::json{{"error", what}, {"code", code}}.dump();
}

// The reply to a job id that no job of the asking team has.
inline std::string no_job(const std::string& job_id) {
  return error_json(kNotFound, "no job " + job_id);
}

}  // namespace troupe::errors

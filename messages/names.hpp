// Every job state, job kind and priority name, defined once; and the check
// that a name (team, pool, node, GPU type) can be one NATS subject token.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::names {

// Returns an empty string when `token` can be one subject token, else why not.
inline std::string check_token(std::string_view token) {
  if (token.empty()) return "must not be empty";
  if (token.size() > 128) return "must be at most 128 characters";
  for (char c : token) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_';
    if (!ok) return "'" + std::string(token) + "' may hold only letters, digits, '-' and '_'";
  }
  return {};
}

inline bool valid_team(std::string_view team) {
  return check_token(team).empty() && team != "sys";
}

// Job states. (blocked ->) queued -> placing -> starting -> running -> a
// terminal state. Blocked: waiting for its `depends_on` jobs to end.
inline constexpr std::string_view kBlocked = "blocked";
inline constexpr std::string_view kQueued = "queued";
inline constexpr std::string_view kPlacing = "placing";
inline constexpr std::string_view kStarting = "starting";
inline constexpr std::string_view kRunning = "running";
inline constexpr std::string_view kSucceeded = "succeeded";
inline constexpr std::string_view kFailed = "failed";
inline constexpr std::string_view kCanceled = "canceled";

// A node's cordon or drain reason (troupe drain --reason): at most this
// long, and printable (no control characters).
inline constexpr size_t kMaxNodeReasonBytes = 256;
inline bool printable(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  return true;
}

// Every job state, in life order.
inline constexpr std::array<std::string_view, 8> kStates = {
    kBlocked, kQueued, kPlacing, kStarting, kRunning, kSucceeded, kFailed, kCanceled};

inline bool known_state(std::string_view state) {
  for (auto s : kStates)
    if (s == state) return true;
  return false;
}

inline bool is_terminal(std::string_view state) {
  return state == kSucceeded || state == kFailed || state == kCanceled;
}

// Labels the scheduler sets (users may not): a pipeline member's pipeline id.
inline constexpr std::string_view kReservedLabelPrefix = "troupe.";
inline constexpr std::string_view kPipelineLabel = "troupe.pipeline";
// A schedule's run: its schedule's name, and the tick (ms since the epoch) it ran for.
inline constexpr std::string_view kScheduleLabel = "troupe.schedule";
inline constexpr std::string_view kScheduleTickLabel = "troupe.schedule.tick";

// Job kinds.
inline constexpr std::array<std::string_view, 3> kKinds = {"training", "inference", "evaluation"};
// Priority names (the default classes; the policy issue adds configured ones).
inline constexpr std::array<std::string_view, 3> kPriorities = {"high", "normal", "low"};
inline constexpr std::string_view kDefaultPriority = "normal";

// Buckets (seconds) of the time a team takes to get back to its guarantee:
// the pool arbiter counts into them, the metrics exporter mirrors them
// (troupe.sys.queues teams[].guarantee_restore).
inline constexpr std::array<double, 10> kRestoreBucketsS = {1, 2, 5, 10, 15, 20, 30, 60, 120, 300};

// A duration's unit letter (s, m, h, d: `--since 7d`, `@every 90s`) in
// seconds; 0 for any other letter.
inline int64_t unit_seconds(char unit) {
  switch (unit) {
    case 's':
      return 1;
    case 'm':
      return 60;
    case 'h':
      return 3600;
    case 'd':
      return 86400;
    default:
      return 0;
  }
}

// Team name reserved for scheduler-internal subjects.
inline constexpr std::string_view kSysToken = "sys";

}  // namespace troupe::names

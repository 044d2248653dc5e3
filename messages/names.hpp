// Every job state, job kind and priority name, defined once.
#pragma once

#include <array>
#include <string_view>

namespace troupe::names {

// Job states. queued -> placing -> starting -> running -> a terminal state.
inline constexpr std::string_view kQueued = "queued";
inline constexpr std::string_view kPlacing = "placing";
inline constexpr std::string_view kStarting = "starting";
inline constexpr std::string_view kRunning = "running";
inline constexpr std::string_view kSucceeded = "succeeded";
inline constexpr std::string_view kFailed = "failed";
inline constexpr std::string_view kCanceled = "canceled";

inline bool is_terminal(std::string_view state) {
  return state == kSucceeded || state == kFailed || state == kCanceled;
}

// Job kinds.
inline constexpr std::array<std::string_view, 3> kKinds = {"training", "inference",
                                                            "evaluation"};
// Priority names (the default classes; the policy issue adds configured ones).
inline constexpr std::array<std::string_view, 3> kPriorities = {"high", "normal", "low"};
inline constexpr std::string_view kDefaultPriority = "normal";

// Team name reserved for scheduler-internal subjects.
inline constexpr std::string_view kSysToken = "sys";

}  // namespace troupe::names

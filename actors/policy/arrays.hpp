// Job arrays and sweeps (spec `array` / `sweep`, docs/api.md "Arrays and
// sweeps"): task ids, a sweep's grid, each task's environment, how many tasks
// may start now, and the array's outcome once every task ended. Pure; the job
// supervisor keeps each array as one record whose `array_tasks` holds one
// byte per task (below) and starts a task as an ordinary job only when the
// parallelism lets it. Unit tests: tests/unit/policy_arrays_test.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe::policy::arrays {

// One byte per task in the array's record.
inline constexpr char kPending = '.';    // not started: no job yet
inline constexpr char kStarted = 'r';    // a job of its own (queued or running)
inline constexpr char kSucceeded = 'S';  // its job ended succeeded
inline constexpr char kFailed = 'F';
inline constexpr char kCanceled = 'C';

// The environment every task gets (and TROUPE_PARAM_<NAME> per sweep value).
inline constexpr const char* kIndexEnv = "TROUPE_ARRAY_INDEX";
inline constexpr const char* kCountEnv = "TROUPE_ARRAY_COUNT";
inline constexpr const char* kArrayIdEnv = "TROUPE_ARRAY_ID";
// A sweep task's parameters as one JSON object; the node agent writes it to
// a file in the job's folder and sets TROUPE_PARAMS_FILE to its path.
inline constexpr const char* kParamsEnv = "TROUPE_PARAMS";
inline constexpr const char* kParamsFileEnv = "TROUPE_PARAMS_FILE";
// The label every task carries: its array's id.
inline constexpr const char* kArrayLabel = "troupe.array";

// Outcome codes of an ended array (ArrayView.outcome; a partial one's cause).
inline constexpr const char* kAllSucceeded = "succeeded";
inline constexpr const char* kNoneSucceeded = "failed";
inline constexpr const char* kPartiallySucceeded = "partially_succeeded";
inline constexpr const char* kCanceledOutcome = "canceled";

// Task `index` of array `array_id`: "<array id>-<index>".
std::string task_id(std::string_view array_id, int index);
// The array id and index of a task id (none when `id` has no "-<digits>" end).
std::optional<std::pair<std::string, int>> split_task_id(std::string_view id);

// A sweep parameter's name as its environment variable: TROUPE_PARAM_ and
// the name upper-cased, any character but a letter or digit as '_'.
std::string param_env(std::string_view name);

// One value of a sweep parameter: as its environment text (a string as is, a
// whole number without a fraction, true/false) and as JSON.
struct Value {
  std::string text;
  std::string json;
};
// A sweep's grid: its parameters sorted by name, each with its values.
using Grid = std::vector<std::pair<std::string, std::vector<Value>>>;
// How many points the grid has (capped at `cap` + 1, so no product overflows).
int64_t grid_size(const Grid& g, int64_t cap);
// Point `index` of the grid (the last parameter varies fastest), as
// (name, value) pairs in name order.
std::vector<std::pair<std::string, Value>> point(const Grid& g, int64_t index);
// The point as one JSON object {"name": value, ...}.
std::string point_json(const std::vector<std::pair<std::string, Value>>& p);

// What the tasks' bytes say.
struct Counts {
  int pending = 0;
  int started = 0;
  int succeeded = 0;
  int failed = 0;
  int canceled = 0;
};
Counts count(std::string_view tasks);

// How many more tasks may start now: at most `parallelism` started at once
// (0: no bound), none once a cancel was asked.
int may_start(const Counts& c, int parallelism, bool canceling);

// The byte of a task whose job ended in `state` (succeeded, failed, canceled).
char mark_of(std::string_view state);

// An array's end, once no task is pending or started: its record's state
// (succeeded only when every task did; canceled once a cancel was asked;
// else failed), its outcome code, the reason with the counts, the cause.
struct End {
  std::string state;
  std::string outcome;
  std::string reason;
};
std::optional<End> end_of(const Counts& c, bool cancel_requested);

}  // namespace troupe::policy::arrays

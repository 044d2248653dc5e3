// `troupe schedule`: the request each verb sends on troupe.<team>.schedule
// and how its reply reads (a schedule's lines, the list's table). Pure; the
// commands are in commands.cpp. docs/api.md "Schedules".
#pragma once

#include <string>

namespace troupe::gateway {

struct ScheduleArgs {
  std::string name, cron, tz, concurrency, missed;
  std::string spec_json;  // create: the job spec each run submits (JSON)
};

// The request body for `op` (create, list, show, delete, suspend, resume).
std::string schedule_request(const std::string& op, const ScheduleArgs& a);

// The reply as a user reads it: "" and `out`, or the reply's error.
// A schedule (create, show, suspend, resume): "key  value" lines; the list:
// a table NAME CRON TZ CONCURRENCY NEXT LAST RUN RUNS STATE; delete: a line.
std::string schedule_text(const std::string& op, const std::string& reply, int64_t now_ms,
                          std::string* out);

}  // namespace troupe::gateway

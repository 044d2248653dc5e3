// `troupe usage` (docs/api.md "Usage"): the request from the flags, and the
// report (actors/policy/usage.hpp's JSON) as a table or CSV. Pure; unit tests:
// tests/unit/gateway_usage_report_test.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace troupe::gateway {

// --since/--until: a duration back from now ("7d", "12h", "90m"), "now", or a
// UTC date "2026-12-01" or time "2026-12-01T08:30[:00]"; ms since the epoch.
std::optional<int64_t> parse_when_ms(std::string_view text, int64_t now_ms);

// {"since_ms","until_ms","by"}.
std::string usage_request(int64_t since_ms, int64_t until_ms, const std::string& by);

// One row per group and a TOTAL row: GPU-hours, of them lost to preemption,
// jobs succeeded/failed/canceled, success rate, queue wait p50/p99. `csv`:
// comma-separated with a header line. "" when `report` is not a report.
std::string usage_text(const std::string& report, bool csv);

}  // namespace troupe::gateway

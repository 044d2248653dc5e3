// Cheap field extraction from the scheduler's JSON replies and events, so
// that troupe-load's NATS callbacks keep up with tens of thousands of
// messages per second without building a JSON tree. Pure.
#pragma once

#include <string_view>

namespace troupe::load {

// The value of the first top-level-or-nested string field `"key": "value"`
// in `json` (no unescaping: Troupe's job ids and states have no escapes).
// Empty when absent or not a string.
std::string_view json_string_field(std::string_view json, std::string_view key);

// Last dot-separated token of a subject ("a.b.c" -> "c").
std::string_view last_token(std::string_view subject);

}  // namespace troupe::load

// Whole numbers read from JSON that others sent (a team's request, a
// cluster's reply, a stored value): a float's cast to an integer out of its
// range is undefined behaviour, so every such read goes through here.
// Header-only: the scheduler, the agent, the gateway and the front door.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

namespace troupe::json_number {

// `v` as a whole int64: an integer (an unsigned one above int64's range
// clamped to its max), or a finite float within range (truncated toward
// zero); nullopt for anything else (a string, a float out of range, NaN).
inline std::optional<int64_t> whole(const nlohmann::json& v) {
  if (v.is_number_unsigned())
    return static_cast<int64_t>(
        std::min<uint64_t>(v.get<uint64_t>(), std::numeric_limits<int64_t>::max()));
  if (v.is_number_integer()) return v.get<int64_t>();
  if (!v.is_number_float()) return std::nullopt;
  const double d = v.get<double>();
  // (2^63 is exact as a double; every double below it converts)
  if (!std::isfinite(d) || d >= 9223372036854775808.0 || d < -9223372036854775808.0)
    return std::nullopt;
  return static_cast<int64_t>(d);
}

// The same for an integer only (a float is refused too): request fields
// documented as integers.
inline std::optional<int64_t> integer(const nlohmann::json& v) {
  if (!v.is_number_integer()) return std::nullopt;
  return whole(v);
}

}  // namespace troupe::json_number

// JSON text that others sent (a team's request or HTTP body, a cluster's
// reply, a stored record), parsed with a bound on how deep it nests.
// nlohmann's parser does not recurse, but copying, printing (dump) or
// comparing a value recurses once per level: 100,000 '[' (200 KB, well within
// a NATS message or an HTTP body) would end the process on its stack. So
// every parse of others' JSON goes through here, and what nests deeper than
// kMaxDepth reads as discarded, as malformed JSON does.
// Header-only: the scheduler, the agent, the gateway and the front door.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace troupe::json_text {

// Deeper than any request, reply or record of ours (a job spec is a few
// levels; protobuf's JSON parser stops at 100).
inline constexpr int kMaxDepth = 128;

// Whether the arrays and objects of [first, last) nest at most `max_depth`
// deep (brackets inside strings do not count). Linear, no allocation; it
// does not check that the text is JSON.
template <class It>
bool nesting_within(It first, It last, int max_depth = kMaxDepth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (; first != last; ++first) {
    const char c = static_cast<char>(*first);
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

// [first, last) parsed; discarded when it is not JSON or nests too deep.
template <class Json = nlohmann::json, class It>
Json parse(It first, It last) {
  if (!nesting_within(first, last)) return Json(Json::value_t::discarded);
  return Json::parse(first, last, nullptr, /*allow_exceptions=*/false);
}

template <class Json = nlohmann::json>
Json parse(std::string_view text) {
  return parse<Json>(text.begin(), text.end());
}

}  // namespace troupe::json_text

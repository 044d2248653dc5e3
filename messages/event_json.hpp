// A job event (pb::JobEvent) as JSON, written directly: the events stream
// carries one per state change, and protobuf's reflection-based printer
// (spec::to_json) was a tenth of the scheduler's CPU under load.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "job_spec.pb.h"

namespace troupe::spec {

// Byte for byte what spec::to_json(e) writes: field names of the .proto, every
// field (defaults too, in field order), int64 quoted, the proto3 `optional`
// exit_code only when set and then last (protobuf appends it after the
// defaults), strings escaped as protobuf escapes them (json_escaping).
// tests/unit/messages_event_json_test.cpp holds the two to each other.
std::string event_json(const pb::JobEvent& e);

// RFC 3339 UTC with milliseconds ("2026-12-06T02:40:00.000Z"), as events'
// `ts` and schedules' `next` say a time.
std::string rfc3339(int64_t ms);

// `s` as a JSON string literal the way protobuf's JSON printer writes it:
// '"' and '\\' escaped, '<' '>' as \u003c \u003e, control characters (C0,
// DEL, C1) as \b \t \n \f \r or \u00xx, a few invisible or formatting code
// points as \uxxxx (surrogate pairs above U+FFFF), other UTF-8 as is; bytes
// that are not valid UTF-8 are dropped together with the byte that showed
// them to be invalid, as protobuf drops them.
void append_proto_json_string(std::string& out, std::string_view s);

// Reads an event written by event_json (or by protobuf's printer: the same
// bytes) without protobuf's reflection-based parser, which was two fifths of
// a restore's CPU (docs/performance.md). The fast path takes only that exact
// shape (keys in field order, no spaces, strings that are valid UTF-8, numbers
// in range); anything else — an older or newer writer, a hand-made event,
// unknown fields — goes to protobuf's parser (unknown fields ignored), so
// both paths read the same bytes the same way
// (tests/unit/messages_event_json_test.cpp). False when neither can read it.
bool read_event_json(std::string_view json, pb::JobEvent* e);

// The fast path alone: false when `json` is not exactly event_json's shape
// (then *e is unspecified). Exposed for its tests.
bool read_event_json_fast(std::string_view json, pb::JobEvent* e);

}  // namespace troupe::spec

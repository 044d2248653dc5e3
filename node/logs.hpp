// The logs request of troupe.sys.node.<node>.logs: JSON
// {"job_id","attempt","rank","offset","max_bytes"} -> {"data","offset","eof","size"}
// or {"error"}, read from the worker's log file under the state dir.
#pragma once

#include <cstddef>
#include <string>

namespace troupe::node {

inline constexpr long long kDefaultLogBytes = 65536;
inline constexpr long long kMaxLogBytes = 1 << 20;

// Handles one request body; returns the reply body (JSON text, never throws
// on bad input or invalid UTF-8 in the log). A missing or negative "attempt"
// means the highest attempt that has a log for that rank.
std::string handle_logs_request(const std::string& state_dir, const std::string& body);

// Length of the longest prefix of `data` (size n) that does not end inside a
// UTF-8 multi-byte sequence; n itself when the tail is complete, or when
// cutting would leave nothing.
size_t utf8_complete_prefix(const char* data, size_t n);

}  // namespace troupe::node

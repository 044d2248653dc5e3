// The logs request of troupe.sys.node.<node>.logs: JSON
// {"job_id","attempt","rank","offset","max_bytes"} -> {"data","offset","eof","size"}
// or {"error"}, read from the worker's log file under the state dir.
#pragma once

#include <cstddef>
#include <string>

#include "messages/log_chunks.hpp"

namespace troupe::node {

inline constexpr long long kDefaultLogBytes = logchunks::kDefaultPageBytes;
inline constexpr long long kMaxLogBytes = logchunks::kMaxPageBytes;

// Handles one request body; returns the reply body (JSON text, never throws
// on bad input or invalid UTF-8 in the log). A missing or negative "attempt"
// means the highest attempt that has a log for that rank.
std::string handle_logs_request(const std::string& state_dir, const std::string& body);

// (messages/log_chunks.hpp: the scheduler cuts stored logs the same way.)
using logchunks::utf8_complete_prefix;

}  // namespace troupe::node

// The log of a Troupe daemon (troupe-scheduler, troupe-node): spdlog's
// default logger on stderr, one line per event with the time (UTC), the
// level and the process's tag:
//   2026-12-01T21:18:33.683Z info [troupe-node n1] connected to nats://...
// Set up once in main(); everything else logs with spdlog::info/warn/error.
#pragma once

#include <string>

namespace troupe::bus {

// `level`: trace|debug|info|warn|error|critical|off. False (and nothing changed) for
// another word.
bool use_daemon_log(const std::string& tag, const std::string& level);

// The --log-level values, for the daemons' option checks.
inline constexpr const char* kLogLevels[] = {"trace", "debug",    "info", "warn",
                                             "error", "critical", "off"};

}  // namespace troupe::bus

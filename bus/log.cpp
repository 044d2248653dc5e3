#include "bus/log.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>

namespace troupe::bus {

bool use_daemon_log(const std::string& tag, const std::string& level) {
  bool known = false;
  for (const char* l : kLogLevels) known = known || level == l;
  if (!known) return false;
  auto logger = spdlog::get(tag);
  if (!logger) logger = spdlog::stderr_color_mt(tag);
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::set_formatter(std::make_unique<spdlog::pattern_formatter>(
      "%Y-%m-%dT%H:%M:%S.%eZ %^%l%$ [" + tag + "] %v", spdlog::pattern_time_type::utc));
  return true;
}

}  // namespace troupe::bus

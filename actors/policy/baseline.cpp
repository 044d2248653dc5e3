#include "actors/policy/baseline.hpp"

namespace troupe::policy {

const char* policy_name(Baseline b) {
  switch (b) {
    case Baseline::fifo:
      return "fifo";
    case Baseline::fifo_backfill:
      return "fifo-backfill";
    case Baseline::none:
      break;
  }
  return "troupe";
}

std::optional<Baseline> parse_policy(std::string_view name) {
  for (auto b : {Baseline::none, Baseline::fifo, Baseline::fifo_backfill})
    if (name == policy_name(b)) return b;
  return std::nullopt;
}

}  // namespace troupe::policy

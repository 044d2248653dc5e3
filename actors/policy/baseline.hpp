// troupe-scheduler --policy: Troupe's policy, or a baseline to compare it
// with (policy/round.hpp plans both): strict FIFO, or FIFO with EASY
// backfill (Slurm's default behaviour). Pure.
#pragma once

#include <optional>
#include <string_view>

namespace troupe::policy {

enum class Baseline { none, fifo, fifo_backfill };
// "troupe", "fifo", "fifo-backfill".
const char* policy_name(Baseline b);
std::optional<Baseline> parse_policy(std::string_view name);

}  // namespace troupe::policy

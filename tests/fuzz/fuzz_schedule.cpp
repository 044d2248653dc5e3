// A schedule as `troupe schedule create` sends it (troupe.<team>.schedule):
// its cron or @every expression, time zone and name, read by the pure
// schedule policy the ScheduleKeeper uses (actors/policy/schedule.hpp), then
// its ticks. Input: expression '\n' zone '\n' name '\n' then bytes for the
// times. Invariants: an accepted @every is within its bounds; the next tick
// is after the time asked and before the year 3000; the first tick after
// (tick - 1 ms) is that tick; due() agrees with next_after; run_id is one
// subject token of at most 128 characters.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "actors/policy/schedule.hpp"
#include "tests/fuzz/walk.hpp"

namespace {

namespace sch = troupe::policy::schedule;
using troupe::fuzz::check;

// Zones with whole-hour, half-hour, 45-minute and historic (seconds) offsets
// and DST, beside the zone the input names.
const char* const kZones[] = {"",
                              "Europe/Amsterdam",
                              "America/New_York",
                              "Australia/Lord_Howe",
                              "Asia/Kathmandu",
                              "Pacific/Chatham"};

std::string_view line(std::string_view& in) {
  size_t n = in.find('\n');
  std::string_view l = in.substr(0, n);
  in.remove_prefix(n == std::string_view::npos ? in.size() : n + 1);
  return l;
}

int64_t time_from(std::string_view& in) {
  uint64_t v = 0;
  size_t n = std::min<size_t>(8, in.size());
  std::memcpy(&v, in.data(), n);
  in.remove_prefix(n);
  return static_cast<int64_t>(v % static_cast<uint64_t>(sch::kMaxTimeMs));
}

bool token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::string_view expr = line(in), tz = line(in), name = line(in);
  const int64_t after = time_from(in), anchor = time_from(in);
  const uint8_t pick = in.empty() ? 0 : static_cast<uint8_t>(in[0]);

  (void)sch::check_name(name);
  const std::string id = sch::run_id(name, name, after);
  check(!id.empty() && id.size() <= 128 && std::all_of(id.begin(), id.end(), token_char),
        "run_id is not one subject token of at most 128 characters");

  std::string err;
  auto cron = sch::parse(expr, &err);
  if (!cron) {
    check(!err.empty(), "an expression refused without a reason");
    return 0;
  }
  if (cron->is_every())
    check(cron->every_ms >= sch::kMinEveryMs && cron->every_ms <= sch::kMaxEveryMs,
          "@every accepted outside its bounds");
  const bool named_ok = sch::check_tz(tz).empty();
  const std::string_view zone = named_ok ? tz : std::string_view(kZones[pick % std::size(kZones)]);
  check(sch::check_tz(zone).empty(), "a zone of the system database refused");

  const int64_t t = sch::next_after(*cron, zone, after, anchor);
  if (t == -1) return 0;
  check(t > after && t < sch::kMaxTimeMs, "the next tick is not after the time asked");
  check(sch::next_after(*cron, zone, t - 1, anchor) == t,
        "the first tick after (tick - 1 ms) is not that tick");
  const sch::Missed m = pick & 1 ? sch::Missed::skip : sch::Missed::run_once;
  const sch::Due d = sch::due(*cron, zone, anchor, after, t, m);
  check(d.next_tick_ms == sch::next_after(*cron, zone, t, anchor),
        "due() and next_after disagree on the next tick");
  check(d.latest_tick_ms == -1 || (d.latest_tick_ms > after && d.latest_tick_ms <= t),
        "due() names a tick outside (last, now]");
  check(d.missed >= 0, "a negative count of missed ticks");
  return 0;
}

// Schedules (`troupe schedule create NAME --cron EXPR [--tz ZONE]`): the cron
// and `@every` expressions, when their ticks fall (in a time zone, across DST),
// which tick fires after a downtime (--missed run_once|skip), what a tick does
// while the last run is still active (--concurrency forbid|replace|allow), the
// schedule's name rule and the deterministic id of a tick's run. Pure: plain
// values in and out, no clock reads (times are int64 milliseconds since the
// Unix epoch, passed in); the time zones come from the system's database
// (/usr/share/zoneinfo, Howard Hinnant's date/tz). Unit tests:
// tests/unit/policy_schedule_test.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace troupe::policy::schedule {

// The longest expression accepted (characters, before trimming).
inline constexpr std::size_t kMaxExprLength = 256;
// `@every` bounds: 1 s to 366 days, whole seconds.
inline constexpr int64_t kMinEveryMs = 1000;
inline constexpr int64_t kMaxEveryMs = int64_t{366} * 86400 * 1000;
// next_after looks this far ahead (5 years and a day) before answering -1.
inline constexpr int64_t kHorizonDays = 5 * 366 + 1;
// Times outside [0, kMaxTimeMs) (1970-01-01 to 3000-01-01 UTC) have no ticks.
inline constexpr int64_t kMaxTimeMs = int64_t{32503680000} * 1000;
// With Missed::skip, a tick fires only when now - tick <= this grace.
inline constexpr int64_t kDefaultGraceMs = 60 * 1000;
// Due::missed of a cron schedule counts at most this many ticks (an @every
// schedule's count is exact).
inline constexpr int64_t kMissedCountCap = 10000;

// A parsed expression. Cron fields are bit sets over their values; an
// `@every` expression has every_ms > 0 and no fields.
struct Cron {
  int64_t every_ms = 0;   // > 0: "@every"; ticks at anchor + k * every_ms, k >= 1
  uint64_t minutes = 0;   // bit m: minute m (0-59)
  uint32_t hours = 0;     // bit h: hour h (0-23)
  uint32_t days = 0;      // bit d: day of month d (1-31)
  uint16_t months = 0;    // bit m: month m (1-12)
  uint8_t weekdays = 0;   // bit d: 0 = Sunday ... 6 = Saturday (7 reads as 0)
  bool dom_star = true;   // the day-of-month field starts with '*'
  bool dow_star = true;   // the day-of-week field starts with '*'
  bool hour_star = true;  // the hour field starts with '*'
  std::string expr;       // the expression as given, trimmed
  bool is_every() const { return every_ms > 0; }
};

// Parses `expr`: five fields "minute hour day-of-month month day-of-week"
// (each `*`, a number, `a-b`, `*/n`, `a-b/n`, `a/n` (= a-max/n), or a list of
// these `1,5,10-12`; months JAN-DEC, weekdays SUN-SAT, any case; weekday 7 is
// Sunday), a macro (@yearly, @annually, @monthly, @weekly, @daily, @midnight,
// @hourly), or `@every DURATION` (e.g. 30s, 5m, 2h, 1h30m, 1d; 1s to 366d).
// When both day fields are restricted (neither starts with '*', as in Vixie
// cron), a day matches if either does. An expression whose days can never
// occur ("0 0 30 2 *") is refused. nullopt and *err (when given) on error.
std::optional<Cron> parse(std::string_view expr, std::string* err = nullptr);

// "" when `tz` names a zone of the system database ("" means UTC), else why
// not. "localtime" (the host's own zone) is refused.
std::string check_tz(std::string_view tz);

// The first tick strictly after `after_ms`; -1 when there is none within
// kHorizonDays, when `tz` is not known, or `after_ms` is out of range.
// Cron fields match the zone's local wall time, ticks fall on whole minutes;
// a local time skipped by a DST change (spring forward) fires at the first
// instant after the gap; one that occurs twice (fall back) fires once, at its
// first occurrence, except when the hour field starts with '*' (as in
// "0 * * * *"): such a schedule keeps firing through the repeated hour.
// An `@every` tick is anchor_ms + k * every_ms, k >= 1 (anchor: the
// schedule's creation); anchor_ms is unused for cron.
// Note: the system database has transitions up to 2037 only; later years
// keep the zone's last offset (no DST).
int64_t next_after(const Cron& cron, std::string_view tz, int64_t after_ms, int64_t anchor_ms);

enum class Concurrency { forbid, replace, allow };
enum class Missed { run_once, skip };
// Parse --concurrency (forbid|replace|allow) and --missed (run_once|skip);
// nullopt and *err (when given) on anything else.
std::optional<Concurrency> parse_concurrency(std::string_view s, std::string* err = nullptr);
std::optional<Missed> parse_missed(std::string_view s, std::string* err = nullptr);
std::string_view to_string(Concurrency c);
std::string_view to_string(Missed m);

// What is due at now_ms, the last tick fired or skipped being last_tick_ms
// (the anchor when none yet): the ticks in (last_tick_ms, now_ms].
struct Due {
  int64_t fire_tick_ms = -1;    // the tick to run now; -1: none
  int64_t missed = 0;           // due ticks not run (cron: at most kMissedCountCap)
  int64_t next_tick_ms = -1;    // the first tick after now_ms (-1: none)
  int64_t latest_tick_ms = -1;  // the latest due tick, fired or not (-1: none due):
                                // the caller's next last_tick_ms
};
// run_once: when any tick is due, one run for the latest (the earlier ones are
// missed). skip: the latest fires only when now_ms - tick <= grace_ms; else
// none fires and all are missed.
Due due(const Cron& cron, std::string_view tz, int64_t anchor_ms, int64_t last_tick_ms,
        int64_t now_ms, Missed missed, int64_t grace_ms = kDefaultGraceMs);

// What a tick does given the last run: forbid + active: skip; replace +
// active: cancel it, then start; else start.
enum class Action { start, skip, replace_then_start };
Action on_tick(Concurrency c, bool last_run_active);

// "" when `name` can name a schedule (1-63 characters: lowercase letters,
// digits and '-', starting with a letter, not ending with '-'), else why not.
std::string check_name(std::string_view name);

// The id of the run a tick starts, the same on every scheduler (a failover
// never fires a tick twice): "s-<team>_<name>-<tick seconds>", one NATS
// subject token (letters, digits, '-', '_'; at most 128 characters). A team or
// name that does not fit (too long, other characters) is replaced by
// "h" + 16 hex digits of its hash.
std::string run_id(std::string_view team, std::string_view name, int64_t tick_ms);

}  // namespace troupe::policy::schedule

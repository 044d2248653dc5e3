// Unit tests for actors/policy/schedule: cron and @every parsing and their
// errors, the next tick in UTC and in Europe/Amsterdam (DST gap and overlap),
// the dom/dow OR rule, leap days, what is due after a downtime (run_once,
// skip), the concurrency table, schedule names and run ids.
#include <catch2/catch.hpp>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "actors/policy/schedule.hpp"
#include "messages/names.hpp"

using namespace troupe::policy::schedule;

namespace {

// Milliseconds since the epoch of a UTC civil time (Howard Hinnant's
// days_from_civil; independent of the code under test).
int64_t utc(int y, unsigned m, unsigned d, unsigned h = 0, unsigned mi = 0, unsigned s = 0) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  int64_t days = era * 146097 + static_cast<int64_t>(doe) - 719468;
  return ((days * 24 + h) * 60 + mi) * 60 * 1000 + int64_t{s} * 1000;
}

constexpr int64_t kMin = 60 * 1000;
constexpr int64_t kHour = 60 * kMin;
constexpr int64_t kDay = 24 * kHour;

Cron must(std::string_view expr) {
  std::string err;
  auto c = parse(expr, &err);
  INFO(std::string(expr) << ": " << err);
  REQUIRE(c.has_value());
  return *c;
}

std::string error_of(std::string_view expr) {
  std::string err;
  auto c = parse(expr, &err);
  INFO(std::string(expr));
  CHECK_FALSE(c.has_value());
  CHECK_FALSE(err.empty());
  return err;
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

uint64_t bits(std::initializer_list<int> vs) {
  uint64_t b = 0;
  for (int v : vs) b |= uint64_t{1} << v;
  return b;
}

double elapsed_s(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

TEST_CASE("schedule: the helper's instants are the real ones", "[unit][policy][schedule]") {
  CHECK(utc(2026, 7, 1) == 1782864000000);
  CHECK(utc(2026, 3, 29, 1) == 1774746000000);
  CHECK(utc(2028, 2, 29) == 1835395200000);
  CHECK(utc(1970, 1, 1) == 0);
}

TEST_CASE("schedule: five fields, each syntax", "[unit][policy][schedule]") {
  Cron all = must("* * * * *");
  CHECK(all.minutes == (uint64_t{1} << 60) - 1);
  CHECK(all.hours == (uint32_t{1} << 24) - 1);
  CHECK(all.days == 0xfffffffeu);
  CHECK(all.months == 0x1ffe);
  CHECK(all.weekdays == 0x7f);
  CHECK(all.dom_star);
  CHECK(all.dow_star);
  CHECK(all.hour_star);
  CHECK_FALSE(all.is_every());

  Cron c = must("0-10/5 */6 1,15 JAN-mar mon-FRI");
  CHECK(c.minutes == bits({0, 5, 10}));
  CHECK(c.hours == bits({0, 6, 12, 18}));
  CHECK(c.days == bits({1, 15}));
  CHECK(c.months == bits({1, 2, 3}));
  CHECK(c.weekdays == bits({1, 2, 3, 4, 5}));
  CHECK_FALSE(c.dom_star);
  CHECK_FALSE(c.dow_star);
  CHECK(c.hour_star);

  CHECK(must("10/20 * * * *").minutes == bits({10, 30, 50}));
  CHECK(must("1,5,10-12 * * * *").minutes == bits({1, 5, 10, 11, 12}));
  CHECK(must("59 23 31 12 6").minutes == bits({59}));
  CHECK(must("0 0 * * 7").weekdays == bits({0}));
  CHECK(must("0 0 * * 0").weekdays == bits({0}));
  CHECK(must("0 0 * * 5-7").weekdays == bits({0, 5, 6}));
  CHECK(must("0 0 * * sun,Sat").weekdays == bits({0, 6}));
  CHECK(must("0 0 * dec *").months == bits({12}));
  CHECK(must("0 3 * * *").hour_star == false);
  CHECK(must("  0  3\t* * *  ").expr == "0  3\t* * *");
  CHECK(must("*/1 * * * *").minutes == (uint64_t{1} << 60) - 1);
  // Both day fields restricted: either may match; "*/2" counts as '*'.
  CHECK_FALSE(must("0 0 1 * 1").dow_star);
  CHECK(must("0 0 */2 * 1").dom_star);
}

TEST_CASE("schedule: macros and @every", "[unit][policy][schedule]") {
  struct M {
    const char* macro;
    const char* five;
  };
  for (M m : {M{"@yearly", "0 0 1 1 *"}, M{"@annually", "0 0 1 1 *"}, M{"@monthly", "0 0 1 * *"},
              M{"@weekly", "0 0 * * 0"}, M{"@daily", "0 0 * * *"}, M{"@midnight", "0 0 * * *"},
              M{"@hourly", "0 * * * *"}, M{"@DAILY", "0 0 * * *"}}) {
    INFO(m.macro);
    Cron a = must(m.macro), b = must(m.five);
    CHECK(a.minutes == b.minutes);
    CHECK(a.hours == b.hours);
    CHECK(a.days == b.days);
    CHECK(a.months == b.months);
    CHECK(a.weekdays == b.weekdays);
    CHECK(a.dom_star == b.dom_star);
    CHECK(a.dow_star == b.dow_star);
    CHECK(a.hour_star == b.hour_star);
    CHECK_FALSE(a.is_every());
  }
  CHECK(must("@every 30s").every_ms == 30000);
  CHECK(must("@every 5m").every_ms == 300000);
  CHECK(must("@every 2h").every_ms == 7200000);
  CHECK(must("@every 1h30m").every_ms == 5400000);
  CHECK(must("@every 90s").every_ms == 90000);
  CHECK(must("@every 1d").every_ms == kDay);
  CHECK(must("@every 1s").every_ms == 1000);
  CHECK(must("@every 366d").every_ms == kMaxEveryMs);
  CHECK(must("@EVERY 1H").every_ms == kHour);
  CHECK(must("@every 1h30m").is_every());
}

TEST_CASE("schedule: every error says what is wrong", "[unit][policy][schedule]") {
  CHECK(has(error_of(""), "empty"));
  CHECK(has(error_of("   "), "empty"));
  CHECK(has(error_of("* * * *"), "5 fields"));
  CHECK(has(error_of("* * * *"), "got 4"));
  CHECK(has(error_of("* * * * * *"), "got 6"));
  CHECK(has(error_of("60 * * * *"), "minute field '60': '60' is out of range 0-59"));
  CHECK(has(error_of("* 24 * * *"), "hour field"));
  CHECK(has(error_of("* * 0 * *"), "out of range 1-31"));
  CHECK(has(error_of("* * 32 * *"), "out of range 1-31"));
  CHECK(has(error_of("* * * 13 *"), "out of range 1-12"));
  CHECK(has(error_of("* * * 0 *"), "month field"));
  CHECK(has(error_of("* * * * 8"), "out of range 0-7"));
  CHECK(has(error_of("99999999999999999999 * * * *"), "out of range"));
  CHECK(has(error_of("*/0 * * * *"), "step '0' is out of range 1-60"));
  CHECK(has(error_of("*/61 * * * *"), "step"));
  CHECK(has(error_of("*/ * * * *"), "step is missing"));
  CHECK(has(error_of("*/x * * * *"), "not a number"));
  CHECK(has(error_of("1,,2 * * * *"), "empty item"));
  CHECK(has(error_of(",1 * * * *"), "empty item"));
  CHECK(has(error_of("1, * * * *"), "empty item"));
  CHECK(has(error_of("* * * FOO *"), "unknown name 'FOO' (months are JAN-DEC)"));
  CHECK(has(error_of("* * * * FUN"), "weekdays are SUN-SAT"));
  CHECK(has(error_of("* * * * MONDAY"), "unknown name"));
  CHECK(has(error_of("* * JAN * *"), "day-of-month field"));
  CHECK(has(error_of("5-1 * * * *"), "starts after it ends"));
  CHECK(has(error_of("1-2-3 * * * *"), "not a number"));
  CHECK(has(error_of("/5 * * * *"), "missing"));
  CHECK(has(error_of("-5 * * * *"), "missing"));
  CHECK(has(error_of("a * * * *"), "not a number"));
  CHECK(has(error_of("? * * * *"), "not a number"));
  CHECK(has(error_of("@foo"), "unknown macro '@foo'"));
  CHECK(has(error_of("@daily 5"), "takes no fields"));
  CHECK(has(error_of("@every"), "one duration"));
  CHECK(has(error_of("@every 1h 30m"), "one duration"));
  CHECK(has(error_of("@every 0s"), "minimum of 1s"));
  CHECK(has(error_of("@every 367d"), "maximum of 366d"));
  CHECK(has(error_of("@every 999999999d"), "maximum"));
  CHECK(has(error_of("@every 9999999999s"), "too long"));
  CHECK(has(error_of("@every 500ms"), "whole seconds"));
  CHECK(has(error_of("@every 5"), "unit missing"));
  CHECK(has(error_of("@every 5w"), "unknown unit 'w'"));
  CHECK(has(error_of("@every h"), "expected a number"));
  CHECK(has(error_of("@every -5s"), "expected a number"));
  CHECK(has(error_of(std::string(257, '*')), "longer than 256"));
  CHECK(has(error_of("0 0 30 2 *"), "never fire"));
  CHECK(has(error_of("0 0 31 4,6,9,11 *"), "never fire"));
  CHECK(has(error_of(std::string("0 0 * * *\n")), "control character"));
  CHECK(has(error_of(std::string("0 0 * * \xc3\xa9")), "ASCII"));
  CHECK(has(error_of(std::string("0 0 \0 * *", 9)), "control character"));
  // Either day may match: the 30th never comes in February, Mondays do.
  CHECK(parse("0 0 30 2 1").has_value());
  CHECK(parse("0 0 29 2 *").has_value());
  CHECK(parse(std::string(256, ' ')) == std::nullopt);
}

TEST_CASE("schedule: random input never crashes, loops or gives a past tick",
          "[unit][policy][schedule]") {
  std::mt19937 rng(12345);
  const std::string alphabet = "0123456789*/-,@ \tjanJANmonsSUNevryhd7";
  auto start = std::chrono::steady_clock::now();
  int parsed = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    std::size_t len = rng() % 40;
    for (std::size_t k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
    if (i % 7 == 0) s = "@every " + std::to_string(rng() % 100) + "smhd"[rng() % 4];
    std::string err;
    auto c = parse(s, &err);
    CHECK(c.has_value() == err.empty());
    if (!c) continue;
    ++parsed;
    int64_t after = utc(2026, 1, 1) + int64_t(rng() % 1000) * kHour;
    for (const char* tz : {"", "Europe/Amsterdam"}) {
      int64_t t = next_after(*c, tz, after, after - 1);
      CHECK(t > after);
    }
  }
  // Random bytes of any value.
  for (int i = 0; i < 2000; ++i) {
    std::string s;
    std::size_t len = rng() % 300;
    for (std::size_t k = 0; k < len; ++k) s += static_cast<char>(rng() % 256);
    std::string err;
    auto c = parse(s, &err);
    if (c) CHECK(next_after(*c, "UTC", 0, 0) > 0);
  }
  CHECK(parsed > 10);
  CHECK(elapsed_s(start) < 10);
}

TEST_CASE("schedule: next tick agrees with a minute-by-minute search (UTC, Amsterdam summer)",
          "[unit][policy][schedule]") {
  std::mt19937 rng(777);
  auto field = [&](int lo, int hi) {
    switch (rng() % 5) {
      case 0:
        return std::string("*");
      case 1:
        return std::to_string(lo + static_cast<int>(rng() % (hi - lo + 1)));
      case 2:
        return "*/" + std::to_string(1 + rng() % 7);
      case 3: {
        int a = lo + static_cast<int>(rng() % (hi - lo + 1));
        int b = a + static_cast<int>(rng() % (hi - a + 1));
        return std::to_string(a) + "-" + std::to_string(b);
      }
      default:
        return std::to_string(lo + static_cast<int>(rng() % (hi - lo + 1))) + "," +
               std::to_string(lo + static_cast<int>(rng() % (hi - lo + 1)));
    }
  };
  int compared = 0;
  for (int i = 0; i < 300; ++i) {
    std::string expr = field(0, 59) + " " + field(0, 23) + " " + field(1, 31) + " " + field(1, 12) +
                       " " + field(0, 7);
    auto c = parse(expr);
    if (!c) continue;
    // July 2026: Amsterdam is UTC+2 all month.
    const int64_t after = utc(2026, 7, 3, 5, 17) + int64_t(rng() % 60000);
    for (int64_t off : {int64_t{0}, 2 * kHour}) {
      const char* tz = off ? "Europe/Amsterdam" : "";
      int64_t expect = -1;
      for (int64_t t = (after / kMin + 1) * kMin; t < utc(2026, 7, 25); t += kMin) {
        int64_t local = (t + off) / 1000;
        int mi = static_cast<int>(local / 60 % 60), h = static_cast<int>(local / 3600 % 24);
        int64_t days = local / 86400;
        int dom = static_cast<int>(days - utc(2026, 7, 1) / kDay) + 1;  // July only
        int dow = static_cast<int>((days + 4) % 7);                     // 1970-01-01: Thursday
        bool dm = c->days >> dom & 1, wm = c->weekdays >> dow & 1;
        bool day = (c->dom_star || c->dow_star) ? (dm && wm) : (dm || wm);
        if ((c->minutes >> mi & 1) && (c->hours >> h & 1) && (c->months >> 7 & 1) && day) {
          expect = t;
          break;
        }
      }
      if (expect == -1) continue;
      INFO(expr << " tz '" << tz << "'");
      CHECK(next_after(*c, tz, after, 0) == expect);
      ++compared;
    }
  }
  CHECK(compared > 100);
}

TEST_CASE("schedule: next tick in UTC", "[unit][policy][schedule]") {
  Cron every = must("* * * * *");
  CHECK(next_after(every, "", utc(2026, 7, 1, 10, 0, 30), 0) == utc(2026, 7, 1, 10, 1));
  CHECK(next_after(every, "", utc(2026, 7, 1, 10, 1), 0) == utc(2026, 7, 1, 10, 2));
  CHECK(next_after(every, "", utc(2026, 7, 1, 10, 1) - 1, 0) == utc(2026, 7, 1, 10, 1));
  CHECK(next_after(every, "UTC", utc(2026, 12, 31, 23, 59), 0) == utc(2027, 1, 1));

  Cron three = must("0 3 * * *");
  CHECK(next_after(three, "", utc(2026, 7, 1), 0) == utc(2026, 7, 1, 3));
  CHECK(next_after(three, "", utc(2026, 7, 1, 3), 0) == utc(2026, 7, 2, 3));
  CHECK(next_after(three, "Etc/UTC", utc(2026, 7, 1, 2, 59, 59), 0) == utc(2026, 7, 1, 3));

  CHECK(next_after(must("@hourly"), "", utc(2026, 7, 1, 10, 0, 1), 0) == utc(2026, 7, 1, 11));
  CHECK(next_after(must("@weekly"), "", utc(2026, 7, 1), 0) == utc(2026, 7, 5));  // a Sunday
  CHECK(next_after(must("@monthly"), "", utc(2026, 7, 1), 0) == utc(2026, 8, 1));
  CHECK(next_after(must("@yearly"), "", utc(2026, 7, 1), 0) == utc(2027, 1, 1));
  CHECK(next_after(must("*/20 9-17 * * MON-FRI"), "", utc(2026, 7, 3, 17, 40), 0) ==
        utc(2026, 7, 6, 9));  // Friday evening -> Monday 09:00
}

TEST_CASE("schedule: next tick in Europe/Amsterdam, with DST", "[unit][policy][schedule]") {
  CHECK(check_tz("Europe/Amsterdam").empty());
  Cron three = must("0 3 * * *");
  // Summer: 03:00 CEST is 01:00 UTC; winter: 03:00 CET is 02:00 UTC.
  CHECK(next_after(three, "Europe/Amsterdam", utc(2026, 6, 30, 12), 0) == utc(2026, 7, 1, 1));
  CHECK(next_after(three, "Europe/Amsterdam", utc(2026, 7, 1, 1), 0) == utc(2026, 7, 2, 1));
  CHECK(next_after(three, "Europe/Amsterdam", utc(2026, 1, 10, 12), 0) == utc(2026, 1, 11, 2));
  CHECK(next_after(three, "America/New_York", utc(2026, 7, 1), 0) == utc(2026, 7, 1, 7));

  // Spring forward, 2026-03-29: 02:00 CET -> 03:00 CEST (01:00 UTC). 02:30
  // does not exist: it fires at 03:00 CEST, once.
  Cron half_two = must("30 2 * * *");
  CHECK(next_after(half_two, "Europe/Amsterdam", utc(2026, 3, 28, 12), 0) == utc(2026, 3, 29, 1));
  CHECK(next_after(half_two, "Europe/Amsterdam", utc(2026, 3, 29, 1), 0) ==
        utc(2026, 3, 30, 0, 30));
  Cron in_gap = must("*/15 2 * * *");
  CHECK(next_after(in_gap, "Europe/Amsterdam", utc(2026, 3, 28, 12), 0) == utc(2026, 3, 29, 1));
  CHECK(next_after(in_gap, "Europe/Amsterdam", utc(2026, 3, 29, 1), 0) == utc(2026, 3, 30));
  Cron hourly = must("0 * * * *");
  CHECK(next_after(hourly, "Europe/Amsterdam", utc(2026, 3, 29, 0), 0) == utc(2026, 3, 29, 1));
  CHECK(next_after(hourly, "Europe/Amsterdam", utc(2026, 3, 29, 1), 0) == utc(2026, 3, 29, 2));

  // Fall back, 2026-10-25: 03:00 CEST -> 02:00 CET (01:00 UTC). 02:30 occurs
  // at 00:30 and 01:30 UTC: it fires once, at the first.
  CHECK(next_after(half_two, "Europe/Amsterdam", utc(2026, 10, 24, 12), 0) ==
        utc(2026, 10, 25, 0, 30));
  CHECK(next_after(half_two, "Europe/Amsterdam", utc(2026, 10, 25, 0, 30), 0) ==
        utc(2026, 10, 26, 1, 30));
  // A '*' hour keeps its rhythm through the repeated hour.
  Cron half_past = must("30 * * * *");
  CHECK(next_after(half_past, "Europe/Amsterdam", utc(2026, 10, 25, 0), 0) ==
        utc(2026, 10, 25, 0, 30));
  CHECK(next_after(half_past, "Europe/Amsterdam", utc(2026, 10, 25, 0, 30), 0) ==
        utc(2026, 10, 25, 1, 30));
  CHECK(next_after(half_past, "Europe/Amsterdam", utc(2026, 10, 25, 1, 30), 0) ==
        utc(2026, 10, 25, 2, 30));
  // Every minute: 60 s apart through both changes.
  Cron every = must("* * * * *");
  for (int64_t start : {utc(2026, 3, 28, 23), utc(2026, 10, 24, 23)}) {
    int64_t t = start;
    for (int i = 0; i < 300; ++i) {
      int64_t n = next_after(every, "Europe/Amsterdam", t, 0);
      REQUIRE(n == t + kMin);
      t = n;
    }
  }
}

TEST_CASE("schedule: day-of-month or day-of-week, leap days, never", "[unit][policy][schedule]") {
  // 2026-03-01 is a Sunday. The 13th or any Friday:
  Cron c = must("0 0 13 * 5");
  std::vector<int64_t> want = {utc(2026, 3, 6),  utc(2026, 3, 13), utc(2026, 3, 20),
                               utc(2026, 3, 27), utc(2026, 4, 3),  utc(2026, 4, 10),
                               utc(2026, 4, 13), utc(2026, 4, 17)};
  int64_t t = utc(2026, 3, 1);
  for (int64_t w : want) {
    t = next_after(c, "", t, 0);
    CHECK(t == w);
  }
  // A '*' day of week: the 13th only (and with "*/1" too, as in Vixie cron).
  CHECK(next_after(must("0 0 13 * *"), "", utc(2026, 3, 1), 0) == utc(2026, 3, 13));
  CHECK(next_after(must("0 0 13 * */1"), "", utc(2026, 3, 14), 0) == utc(2026, 4, 13));
  // Day of month '*', Friday: AND.
  CHECK(next_after(must("0 0 * * FRI"), "", utc(2026, 3, 7), 0) == utc(2026, 3, 13));

  Cron leap = must("0 0 29 2 *");
  CHECK(next_after(leap, "", utc(2026, 1, 1), 0) == utc(2028, 2, 29));
  CHECK(next_after(leap, "", utc(2028, 2, 29), 0) == utc(2032, 2, 29));
  CHECK(next_after(leap, "Europe/Amsterdam", utc(2026, 1, 1), 0) == utc(2028, 2, 28, 23));

  // "0 0 30 2 *" is refused by parse; a hand-made one has no tick (quickly).
  Cron never = must("0 0 30 * *");
  never.months = uint16_t{1} << 2;
  auto start = std::chrono::steady_clock::now();
  CHECK(next_after(never, "", utc(2026, 1, 1), 0) == -1);
  CHECK(next_after(never, "Europe/Amsterdam", utc(2026, 1, 1), 0) == -1);
  Cron never2 = must("* * 31 * *");
  never2.months = bits({4, 6, 9, 11});
  CHECK(next_after(never2, "Europe/Amsterdam", utc(2026, 1, 1), 0) == -1);
  CHECK(elapsed_s(start) < 1.0);
}

TEST_CASE("schedule: @every ticks from the anchor", "[unit][policy][schedule]") {
  Cron e = must("@every 1h30m");
  const int64_t a = utc(2026, 7, 1, 0, 0, 7) + 123;
  const int64_t p = 90 * kMin;
  CHECK(next_after(e, "", a, a) == a + p);
  CHECK(next_after(e, "Europe/Amsterdam", a, a) == a + p);  // no zone in it
  CHECK(next_after(e, "", a - kDay, a) == a + p);
  CHECK(next_after(e, "", a + 10 * p, a) == a + 11 * p);
  CHECK(next_after(e, "", a + 10 * p - 1, a) == a + 10 * p);
  CHECK(next_after(e, "", a + 10 * p + 1, a) == a + 11 * p);
}

TEST_CASE("schedule: time zones and out-of-range times", "[unit][policy][schedule]") {
  CHECK(check_tz("").empty());
  CHECK(check_tz("UTC").empty());
  CHECK(check_tz("Asia/Kolkata").empty());
  CHECK(has(check_tz("Mars/Olympus_Mons"), "unknown time zone 'Mars/Olympus_Mons'"));
  CHECK_FALSE(check_tz("localtime").empty());
  CHECK_FALSE(check_tz("../../etc/passwd").empty());
  CHECK_FALSE(check_tz("zone.tab").empty());
  CHECK_FALSE(check_tz(std::string(300, 'A')).empty());
  CHECK_FALSE(check_tz(std::string("Europe/Amsterdam\0", 17)).empty());
  Cron c = must("0 3 * * *");
  CHECK(next_after(c, "Mars/Olympus_Mons", utc(2026, 7, 1), 0) == -1);
  CHECK(next_after(c, "", -1, 0) == -1);
  CHECK(next_after(c, "", kMaxTimeMs, 0) == -1);
  CHECK(next_after(c, "", INT64_MAX, 0) == -1);
  CHECK(next_after(c, "", INT64_MIN, 0) == -1);
  CHECK(next_after(must("@every 1s"), "", 5, INT64_MIN) == -1);
  // Asia/Kolkata is UTC+05:30: 03:00 there is 21:30 UTC the day before.
  CHECK(next_after(c, "Asia/Kolkata", utc(2026, 7, 1), 0) == utc(2026, 7, 1, 21, 30));
}

TEST_CASE("schedule: due after a downtime, @every", "[unit][policy][schedule]") {
  Cron e = must("@every 1h");
  const int64_t a = utc(2026, 7, 1, 0, 0, 7);
  Due d = due(e, "", a, a, a + 30 * kMin, Missed::run_once);
  CHECK(d.fire_tick_ms == -1);
  CHECK(d.missed == 0);
  CHECK(d.latest_tick_ms == -1);
  CHECK(d.next_tick_ms == a + kHour);

  d = due(e, "", a, a, a + kHour + 10000, Missed::skip);
  CHECK(d.fire_tick_ms == a + kHour);
  CHECK(d.missed == 0);
  CHECK(d.next_tick_ms == a + 2 * kHour);

  // Down from 1h to 10h05m: ticks 2h..10h are due.
  d = due(e, "", a, a + kHour, a + 10 * kHour + 5 * kMin, Missed::run_once);
  CHECK(d.fire_tick_ms == a + 10 * kHour);
  CHECK(d.missed == 8);
  CHECK(d.latest_tick_ms == a + 10 * kHour);
  CHECK(d.next_tick_ms == a + 11 * kHour);
  d = due(e, "", a, a + kHour, a + 10 * kHour + 5 * kMin, Missed::skip);
  CHECK(d.fire_tick_ms == -1);
  CHECK(d.missed == 9);
  CHECK(d.latest_tick_ms == a + 10 * kHour);
  d = due(e, "", a, a + kHour, a + 10 * kHour + 30000, Missed::skip);
  CHECK(d.fire_tick_ms == a + 10 * kHour);
  CHECK(d.missed == 8);
  d = due(e, "", a, a + kHour, a + 10 * kHour + 90000, Missed::skip, 120000);
  CHECK(d.fire_tick_ms == a + 10 * kHour);
  // Nothing new since the last tick.
  d = due(e, "", a, a + 10 * kHour, a + 10 * kHour + 1, Missed::run_once);
  CHECK(d.fire_tick_ms == -1);
  CHECK(d.missed == 0);
  d = due(e, "", a, a + 10 * kHour, a + 5 * kHour, Missed::run_once);
  CHECK(d.fire_tick_ms == -1);

  // @every 1s, 30 days down: counted, not iterated.
  auto start = std::chrono::steady_clock::now();
  Cron s = must("@every 1s");
  d = due(s, "", a, a, a + 30 * kDay, Missed::run_once);
  CHECK(d.fire_tick_ms == a + 30 * kDay);
  CHECK(d.missed == 30 * 86400 - 1);
  CHECK(d.next_tick_ms == a + 30 * kDay + 1000);
  d = due(s, "", a, a, a + 30 * kDay + 500, Missed::skip);
  CHECK(d.fire_tick_ms == a + 30 * kDay);
  CHECK(d.missed == 30 * 86400 - 1);
  CHECK(elapsed_s(start) < 0.1);
}

TEST_CASE("schedule: due after a downtime, cron", "[unit][policy][schedule]") {
  Cron c = must("0 3 * * *");
  const char* tz = "Europe/Amsterdam";
  const int64_t last = utc(2026, 7, 1, 1);  // fired 2026-07-01 03:00 CEST
  Due d = due(c, tz, 0, last, utc(2026, 7, 5, 1, 0, 30), Missed::run_once);
  CHECK(d.fire_tick_ms == utc(2026, 7, 5, 1));
  CHECK(d.missed == 3);
  CHECK(d.latest_tick_ms == utc(2026, 7, 5, 1));
  CHECK(d.next_tick_ms == utc(2026, 7, 6, 1));
  d = due(c, tz, 0, last, utc(2026, 7, 5, 1, 0, 30), Missed::skip);
  CHECK(d.fire_tick_ms == utc(2026, 7, 5, 1));
  CHECK(d.missed == 3);
  d = due(c, tz, 0, last, utc(2026, 7, 5, 1, 2), Missed::skip);
  CHECK(d.fire_tick_ms == -1);
  CHECK(d.missed == 4);
  CHECK(d.latest_tick_ms == utc(2026, 7, 5, 1));
  d = due(c, tz, 0, last, utc(2026, 7, 5, 1, 2), Missed::run_once);
  CHECK(d.fire_tick_ms == utc(2026, 7, 5, 1));
  // Just before the next tick: nothing.
  d = due(c, tz, 0, last, utc(2026, 7, 2, 0, 59, 59), Missed::run_once);
  CHECK(d.fire_tick_ms == -1);
  CHECK(d.missed == 0);
  CHECK(d.next_tick_ms == utc(2026, 7, 2, 1));
  // The tick exactly at now is due.
  d = due(c, tz, 0, last, utc(2026, 7, 2, 1), Missed::skip);
  CHECK(d.fire_tick_ms == utc(2026, 7, 2, 1));
  CHECK(d.missed == 0);

  // Every minute, 30 days down: the count stops at the cap, the latest tick
  // is still found, quickly.
  auto start = std::chrono::steady_clock::now();
  Cron m = must("* * * * *");
  const int64_t t0 = utc(2026, 9, 10);
  d = due(m, tz, 0, t0, t0 + 30 * kDay + 1500, Missed::run_once);
  CHECK(d.fire_tick_ms == t0 + 30 * kDay);
  CHECK(d.missed == kMissedCountCap - 1);
  CHECK(d.next_tick_ms == t0 + 30 * kDay + kMin);
  d = due(m, tz, 0, t0, t0 + 30 * kDay + 1500, Missed::skip);
  CHECK(d.fire_tick_ms == t0 + 30 * kDay);
  d = due(must("0 12 * * *"), tz, 0, t0, t0 + 4 * 365 * kDay, Missed::skip);
  CHECK(d.fire_tick_ms == -1);
  CHECK(d.missed == 4 * 365);
  CHECK(elapsed_s(start) < 2.0);
}

TEST_CASE("schedule: concurrency and missed options, the tick table", "[unit][policy][schedule]") {
  CHECK(parse_concurrency("forbid") == Concurrency::forbid);
  CHECK(parse_concurrency("replace") == Concurrency::replace);
  CHECK(parse_concurrency("allow") == Concurrency::allow);
  std::string err;
  CHECK_FALSE(parse_concurrency("Forbid", &err).has_value());
  CHECK(has(err, "forbid, replace, allow"));
  CHECK_FALSE(parse_concurrency("").has_value());
  CHECK(parse_missed("run_once") == Missed::run_once);
  CHECK(parse_missed("skip") == Missed::skip);
  err.clear();
  CHECK_FALSE(parse_missed("run-once", &err).has_value());
  CHECK(has(err, "run_once, skip"));
  for (auto c : {Concurrency::forbid, Concurrency::replace, Concurrency::allow})
    CHECK(parse_concurrency(to_string(c)) == c);
  for (auto m : {Missed::run_once, Missed::skip}) CHECK(parse_missed(to_string(m)) == m);

  CHECK(on_tick(Concurrency::forbid, true) == Action::skip);
  CHECK(on_tick(Concurrency::forbid, false) == Action::start);
  CHECK(on_tick(Concurrency::replace, true) == Action::replace_then_start);
  CHECK(on_tick(Concurrency::replace, false) == Action::start);
  CHECK(on_tick(Concurrency::allow, true) == Action::start);
  CHECK(on_tick(Concurrency::allow, false) == Action::start);
}

TEST_CASE("schedule: names", "[unit][policy][schedule]") {
  CHECK(check_name("nightly-train").empty());
  CHECK(check_name("a").empty());
  CHECK(check_name("a1-b2").empty());
  CHECK(check_name("a" + std::string(62, 'b')).empty());
  CHECK(has(check_name(""), "empty"));
  CHECK(has(check_name("a" + std::string(63, 'b')), "at most 63"));
  CHECK(has(check_name("1abc"), "start with a lowercase letter"));
  CHECK(has(check_name("-abc"), "start with"));
  CHECK(has(check_name("Abc"), "start with"));
  CHECK(has(check_name("a_b"), "only lowercase"));
  CHECK(has(check_name("aB"), "only lowercase"));
  CHECK(has(check_name("a.b"), "only lowercase"));
  CHECK(has(check_name("a b"), "only lowercase"));
  CHECK(has(check_name("abc-"), "end with"));
}

TEST_CASE("schedule: run ids are deterministic subject tokens", "[unit][policy][schedule]") {
  const int64_t tick = utc(2026, 7, 1, 1);  // 1782867600 s
  CHECK(run_id("ml", "nightly", tick) == "s-ml_nightly-1782867600");
  CHECK(run_id("ml", "nightly", tick + 999) == "s-ml_nightly-1782867600");
  CHECK(run_id("ml", "nightly", tick) == run_id("ml", "nightly", tick));
  CHECK(run_id("ml", "nightly", tick) != run_id("ml", "nightly", tick + kMin));
  CHECK(run_id("ml", "nightly", tick) != run_id("vision", "nightly", tick));
  CHECK(run_id("a-b", "c", tick) != run_id("a", "b-c", tick));
  CHECK(run_id("a_b", "c", tick) != run_id("a", "b_c", tick));
  const std::string long_team(128, 't');
  std::vector<std::string> ids = {
      run_id(long_team, std::string(63, 'n'), tick),
      run_id(long_team, std::string(63, 'n'), INT64_MAX),
      run_id("", "", tick),
      run_id("team with spaces", "na.me", tick),
      run_id("ml", std::string(200, 'x'), tick),
      run_id("ml", "nightly", -1500),
      run_id("ml", "nightly", INT64_MIN),
      run_id(std::string("a\0b", 3), "x", 0),
  };
  for (const auto& id : ids) {
    INFO(id);
    CHECK(troupe::names::check_token(id).empty());
  }
  CHECK(run_id(long_team, "n", tick) == run_id(long_team, "n", tick));
  CHECK(run_id(long_team, "n", tick) != run_id(long_team + "x", "n", tick));
  CHECK(run_id("ml", "nightly", -1500) == "s-ml_nightly-n2");
}

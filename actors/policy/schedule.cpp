#include "actors/policy/schedule.hpp"

#include <date/date.h>
#include <date/tz.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <limits>
#include <vector>

#include "messages/names.hpp"

namespace troupe::policy::schedule {

namespace {

constexpr int64_t kNone = -1;

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

bool is_space(char c) {
  return c == ' ' || c == '\t';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_fields(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i])) ++i;
    std::size_t j = i;
    while (j < s.size() && !is_space(s[j])) ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// Quoted for messages: printable ASCII as is, anything else as '?'.
std::string quoted(std::string_view s) {
  std::string q = "'";
  for (char c : s) q += (c >= 0x20 && c < 0x7f) ? c : '?';
  return q + "'";
}

bool fail(std::string* err, std::string msg) {
  if (err) *err = std::move(msg);
  return false;
}

// --- cron fields ---------------------------------------------------------------

struct FieldSpec {
  const char* name;
  int min;
  int max;
  const char* const* names;  // names[i] is value min_name + i
  int names_count;
  int min_name;
};

constexpr const char* kMonthNames[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                       "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr const char* kDayNames[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

constexpr FieldSpec kFields[5] = {
    {"minute", 0, 59, nullptr, 0, 0},       {"hour", 0, 23, nullptr, 0, 0},
    {"day-of-month", 1, 31, nullptr, 0, 0}, {"month", 1, 12, kMonthNames, 12, 1},
    {"day-of-week", 0, 7, kDayNames, 7, 0},
};

// One value: a number within the field's range, or a name.
bool parse_value(const FieldSpec& f, std::string_view field, std::string_view v, int* out,
                 std::string* err) {
  std::string where = std::string(f.name) + " field " + quoted(field) + ": ";
  if (v.empty()) return fail(err, where + "a value is missing");
  if (v[0] >= '0' && v[0] <= '9') {
    int n = 0;
    for (char c : v) {
      if (c < '0' || c > '9') return fail(err, where + quoted(v) + " is not a number");
      n = n * 10 + (c - '0');
      if (n > 1000) break;
    }
    if (n < f.min || n > f.max)
      return fail(err, where + quoted(v) + " is out of range " + std::to_string(f.min) + "-" +
                           std::to_string(f.max));
    *out = n;
    return true;
  }
  for (int i = 0; i < f.names_count; ++i) {
    if (iequals(v, f.names[i])) {
      *out = f.min_name + i;
      return true;
    }
  }
  if (f.names)
    return fail(err, where + "unknown name " + quoted(v) +
                         (f.min_name == 1 ? " (months are JAN-DEC)" : " (weekdays are SUN-SAT)"));
  return fail(err, where + quoted(v) + " is not a number");
}

// One field into a bit set over [f.min, f.max].
bool parse_field(const FieldSpec& f, std::string_view field, uint64_t* bits, std::string* err) {
  std::string where = std::string(f.name) + " field " + quoted(field) + ": ";
  uint64_t set = 0;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = field.find(',', start);
    std::string_view item = field.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (item.empty()) return fail(err, where + "empty item in list");
    std::string_view range = item;
    int step = 1;
    bool has_step = false;
    std::size_t slash = item.find('/');
    if (slash != std::string_view::npos) {
      range = item.substr(0, slash);
      std::string_view s = item.substr(slash + 1);
      if (s.empty()) return fail(err, where + "step is missing after '/'");
      int n = 0;
      for (char c : s) {
        if (c < '0' || c > '9') return fail(err, where + "step " + quoted(s) + " is not a number");
        n = n * 10 + (c - '0');
        if (n > 1000) break;
      }
      int span = f.max - f.min + 1;
      if (n < 1 || n > span)
        return fail(err,
                    where + "step " + quoted(s) + " is out of range 1-" + std::to_string(span));
      step = n;
      has_step = true;
    }
    int lo = 0, hi = 0;
    if (range == "*") {
      lo = f.min;
      hi = f.max;
    } else {
      std::size_t dash = range.find('-');
      if (dash == std::string_view::npos) {
        if (!parse_value(f, field, range, &lo, err)) return false;
        hi = has_step ? f.max : lo;  // "a/n" is "a-max/n"
      } else {
        if (!parse_value(f, field, range.substr(0, dash), &lo, err)) return false;
        if (!parse_value(f, field, range.substr(dash + 1), &hi, err)) return false;
        if (lo > hi) return fail(err, where + "range " + quoted(range) + " starts after it ends");
      }
    }
    for (int v = lo; v <= hi; v += step) set |= uint64_t{1} << v;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  *bits = set;
  return true;
}

// Days 1-31 that can occur in `months` (February: up to the 29th).
bool days_can_occur(uint32_t days, uint16_t months) {
  static constexpr int kLast[13] = {0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  for (int m = 1; m <= 12; ++m) {
    if (!(months >> m & 1)) continue;
    uint32_t possible = static_cast<uint32_t>(((uint64_t{1} << (kLast[m] + 1)) - 1) & ~uint64_t{1});
    if (days & possible) return true;
  }
  return false;
}

bool parse_five(const std::vector<std::string_view>& fields, Cron* c, std::string* err) {
  uint64_t bits[5] = {};
  for (int i = 0; i < 5; ++i)
    if (!parse_field(kFields[i], fields[i], &bits[i], err)) return false;
  c->minutes = bits[0];
  c->hours = static_cast<uint32_t>(bits[1]);
  c->days = static_cast<uint32_t>(bits[2]);
  c->months = static_cast<uint16_t>(bits[3]);
  uint64_t dow = bits[4];
  if (dow >> 7 & 1) dow = (dow | 1) & 0x7f;  // 7 is Sunday
  c->weekdays = static_cast<uint8_t>(dow);
  c->hour_star = fields[1][0] == '*';
  c->dom_star = fields[2][0] == '*';
  c->dow_star = fields[4][0] == '*';
  // With a day-of-week restriction too, any weekday can match instead.
  if ((c->dom_star || c->dow_star) && !days_can_occur(c->days, c->months))
    return fail(err, "day-of-month field " + quoted(fields[2]) + " never occurs in month field " +
                         quoted(fields[3]) + ": the schedule would never fire");
  return true;
}

// "30s", "5m", "1h30m", "1d": whole seconds.
bool parse_duration(std::string_view s, int64_t* ms, std::string* err) {
  std::string where = "@every duration " + quoted(s) + ": ";
  if (s.empty()) return fail(err, "@every needs a duration, e.g. '@every 30s'");
  int64_t total_s = 0;
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t j = i;
    int64_t n = 0;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') {
      if (j - i >= 9) return fail(err, where + "number too long");
      n = n * 10 + (s[j] - '0');
      ++j;
    }
    if (j == i) return fail(err, where + "expected a number at " + quoted(s.substr(i)));
    if (j == s.size())
      return fail(err, where + "unit missing after " + quoted(s.substr(i)) + " (use s, m, h or d)");
    int64_t unit = names::unit_seconds(lower(s[j]));
    if (unit == 0)
      return fail(err, where + "unknown unit " + quoted(s.substr(j, 1)) + " (use s, m, h or d)");
    if (unit == 60 && j + 1 < s.size() && lower(s[j + 1]) == 's')
      return fail(err, where + "milliseconds are not supported (whole seconds only)");
    total_s += n * unit;  // n < 1e9, unit <= 86400: no overflow before the check
    if (total_s > kMaxEveryMs / 1000) return fail(err, where + "longer than the maximum of 366d");
    i = j + 1;
  }
  if (total_s * 1000 < kMinEveryMs) return fail(err, where + "shorter than the minimum of 1s");
  *ms = total_s * 1000;
  return true;
}

// --- time zones ------------------------------------------------------------------

// nullptr: UTC. Throws nothing; *ok = false when the zone is not known.
const date::time_zone* find_zone(std::string_view tz, bool* ok, std::string* why = nullptr) {
  *ok = true;
  if (tz.empty()) return nullptr;
  if (tz.size() > 128 || tz == "localtime") {
    *ok = false;
    if (why) *why = "unknown time zone " + quoted(tz);
    return nullptr;
  }
  try {
    const date::time_zone* z = date::locate_zone(std::string(tz));
    // A zone's data is read on first use: read it now, so that a file that is
    // no zone fails here.
    (void)z->get_info(date::sys_seconds{std::chrono::seconds{0}});
    return z;
  } catch (const std::exception& e) {
    *ok = false;
    if (why) {
      std::string what = e.what();
      if (what.find("not found") != std::string::npos)
        *why = "unknown time zone " + quoted(tz) + " (use an IANA name such as Europe/Amsterdam)";
      else
        *why = "time zone " + quoted(tz) + " could not be read: " + what;
    }
    return nullptr;
  }
}

int64_t offset_at(const date::time_zone* z, int64_t sys_s) {
  if (!z) return 0;
  return z->get_info(date::sys_seconds{std::chrono::seconds{sys_s}}).offset.count();
}

// --- cron ticks --------------------------------------------------------------------

bool day_matches(const Cron& c, const date::year_month_day& ymd, const date::weekday& wd) {
  bool dom = c.days >> static_cast<unsigned>(ymd.day()) & 1;
  bool dow = c.weekdays >> wd.c_encoding() & 1;
  if (c.dom_star || c.dow_star) return dom && dow;
  return dom || dow;
}

// The first matching time of the local day starting at local second
// `day_local` with a constant offset `off`, strictly after `after_s`.
int64_t first_fixed_offset(const Cron& c, int64_t day_local, int64_t off, int64_t after_s) {
  int64_t t = after_s + off - day_local;  // a time of day must exceed this
  if (t >= 86400) return kNone;
  for (int h = 0; h < 24; ++h) {
    if (!(c.hours >> h & 1)) continue;
    if (h * 3600 + 59 * 60 <= t) continue;
    for (int m = 0; m < 60; ++m) {
      if (!(c.minutes >> m & 1)) continue;
      int64_t tod = h * 3600 + m * 60;
      if (tod > t) return day_local + tod - off;
    }
  }
  return kNone;
}

// The first tick of the local day `day` (days since the epoch) strictly
// after `after_s`, or kNone.
int64_t first_on_day(const Cron& c, const date::time_zone* z, int64_t day, int64_t after_s) {
  int64_t day_local = day * 86400;
  if (!z) return first_fixed_offset(c, day_local, 0, after_s);
  auto start = z->get_info(date::local_seconds{std::chrono::seconds{day_local}});
  if (start.result == date::local_info::unique) {
    int64_t off = start.first.offset.count();
    int64_t end = start.first.end.time_since_epoch().count();
    if (end >= day_local - off + 86400) return first_fixed_offset(c, day_local, off, after_s);
  }
  // A day with an offset change: each matching time on its own.
  int64_t best = kNone;
  auto consider = [&](int64_t s) {
    if (s > after_s && (best == kNone || s < best)) best = s;
  };
  for (int h = 0; h < 24; ++h) {
    if (!(c.hours >> h & 1)) continue;
    for (int m = 0; m < 60; ++m) {
      if (!(c.minutes >> m & 1)) continue;
      int64_t local = day_local + h * 3600 + m * 60;
      auto li = z->get_info(date::local_seconds{std::chrono::seconds{local}});
      switch (li.result) {
        case date::local_info::unique:
          consider(local - li.first.offset.count());
          break;
        case date::local_info::nonexistent:  // in the gap: the first instant after it
          consider(li.second.begin.time_since_epoch().count());
          break;
        case date::local_info::ambiguous:  // twice: the first; both for '*' hours
          consider(local - li.first.offset.count());
          if (c.hour_star) consider(local - li.second.offset.count());
          break;
      }
    }
  }
  return best;
}

int64_t next_cron(const Cron& c, const date::time_zone* z, int64_t after_s) {
  int64_t first_day = floor_div(after_s + offset_at(z, after_s), 86400) - 1;
  int64_t last_day = first_day + kHorizonDays + 1;
  int64_t best = kNone;
  int64_t found_day = 0;
  for (int64_t day = first_day; day <= last_day; ++day) {
    // A day's ticks can follow the next day's only across an offset change:
    // look one day past the first day with a tick.
    if (best != kNone && day > found_day + 1) break;
    date::sys_days sd{date::days{day}};
    date::year_month_day ymd{sd};
    if (!(c.months >> static_cast<unsigned>(ymd.month()) & 1)) {
      date::year_month_day first{ymd.year() / ymd.month() / 1};
      date::sys_days next_month{date::year_month_day{first + date::months{1}}};
      day = next_month.time_since_epoch().count() - 1;
      continue;
    }
    if (!day_matches(c, ymd, date::weekday{sd})) continue;
    int64_t t = first_on_day(c, z, day, after_s);
    if (t == kNone) continue;
    if (best == kNone || t < best) {
      if (best == kNone) found_day = day;
      best = t;
    }
  }
  return best;
}

// The latest tick in (lo, hi], or kNone: searches back from hi over windows
// that double, then forward within the window found.
int64_t latest_cron(const Cron& c, const date::time_zone* z, int64_t lo, int64_t hi) {
  for (int64_t w = 3600;; w *= 2) {
    int64_t from = std::max(lo, hi - w);
    int64_t t = next_cron(c, z, from);
    if (t != kNone && t <= hi) {
      int64_t latest = t;
      while (true) {
        int64_t n = next_cron(c, z, latest);
        if (n == kNone || n > hi) break;
        latest = n;
      }
      return latest;
    }
    if (from == lo) return kNone;
  }
}

bool in_range(int64_t ms) {
  return ms >= 0 && ms < kMaxTimeMs;
}

std::string hash_token(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  char buf[20];
  std::snprintf(buf, sizeof buf, "h%016llx", static_cast<unsigned long long>(h));
  return buf;
}

bool token_chars(std::string_view s, bool allow_underscore) {
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || (allow_underscore && c == '_');
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::optional<Cron> parse(std::string_view expr, std::string* err) {
  if (expr.size() > kMaxExprLength) {
    fail(err, "expression is longer than " + std::to_string(kMaxExprLength) + " characters");
    return std::nullopt;
  }
  for (char c : expr) {
    if (static_cast<unsigned char>(c) < 0x20 && c != '\t') {
      fail(err, "expression holds a control character");
      return std::nullopt;
    }
    if (static_cast<unsigned char>(c) >= 0x7f) {
      fail(err, "expression holds a character that is not plain ASCII");
      return std::nullopt;
    }
  }
  std::string_view s = trim(expr);
  if (s.empty()) {
    fail(err, "expression is empty");
    return std::nullopt;
  }
  std::vector<std::string_view> fields = split_fields(s);
  Cron c;
  c.expr = std::string(s);
  if (fields[0][0] == '@') {
    std::string_view m = fields[0];
    if (iequals(m, "@every")) {
      if (fields.size() != 2) {
        fail(err, "@every takes one duration, e.g. '@every 30s' or '@every 1h30m'");
        return std::nullopt;
      }
      if (!parse_duration(fields[1], &c.every_ms, err)) return std::nullopt;
      return c;
    }
    const char* five = nullptr;
    if (iequals(m, "@yearly") || iequals(m, "@annually"))
      five = "0 0 1 1 *";
    else if (iequals(m, "@monthly"))
      five = "0 0 1 * *";
    else if (iequals(m, "@weekly"))
      five = "0 0 * * 0";
    else if (iequals(m, "@daily") || iequals(m, "@midnight"))
      five = "0 0 * * *";
    else if (iequals(m, "@hourly"))
      five = "0 * * * *";
    if (!five) {
      fail(err, "unknown macro " + quoted(m) +
                    " (use @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly "
                    "or @every DURATION)");
      return std::nullopt;
    }
    if (fields.size() != 1) {
      fail(err, "macro " + quoted(m) + " takes no fields");
      return std::nullopt;
    }
    if (!parse_five(split_fields(five), &c, err)) return std::nullopt;
    return c;
  }
  if (fields.size() != 5) {
    fail(err,
         "a cron expression has 5 fields (minute hour day-of-month month day-of-week), "
         "got " +
             std::to_string(fields.size()));
    return std::nullopt;
  }
  if (!parse_five(fields, &c, err)) return std::nullopt;
  return c;
}

std::string check_tz(std::string_view tz) {
  bool ok = true;
  std::string why;
  find_zone(tz, &ok, &why);
  return ok ? std::string() : why;
}

int64_t next_after(const Cron& cron, std::string_view tz, int64_t after_ms, int64_t anchor_ms) {
  if (!in_range(after_ms)) return kNone;
  if (cron.is_every()) {
    if (!in_range(anchor_ms)) return kNone;
    int64_t p = cron.every_ms;
    int64_t k = after_ms < anchor_ms + p ? 1 : floor_div(after_ms - anchor_ms, p) + 1;
    int64_t t = anchor_ms + k * p;
    return t < kMaxTimeMs ? t : kNone;
  }
  bool ok = true;
  const date::time_zone* z = find_zone(tz, &ok);
  if (!ok) return kNone;
  int64_t s = next_cron(cron, z, floor_div(after_ms, 1000));
  if (s == kNone || s * 1000 >= kMaxTimeMs) return kNone;
  return s * 1000;
}

Due due(const Cron& cron, std::string_view tz, int64_t anchor_ms, int64_t last_tick_ms,
        int64_t now_ms, Missed missed, int64_t grace_ms) {
  Due d;
  if (!in_range(now_ms) || !in_range(last_tick_ms)) return d;
  d.next_tick_ms = next_after(cron, tz, now_ms, anchor_ms);
  if (now_ms <= last_tick_ms) return d;
  int64_t count = 0;
  int64_t latest = kNone;
  if (cron.is_every()) {
    if (!in_range(anchor_ms)) return d;
    int64_t p = cron.every_ms;
    int64_t k_first = last_tick_ms < anchor_ms + p ? 1 : floor_div(last_tick_ms - anchor_ms, p) + 1;
    int64_t k_last = now_ms < anchor_ms + p ? 0 : floor_div(now_ms - anchor_ms, p);
    if (k_last >= k_first) {
      count = k_last - k_first + 1;
      latest = anchor_ms + k_last * p;
    }
  } else {
    bool ok = true;
    const date::time_zone* z = find_zone(tz, &ok);
    if (!ok) return d;
    int64_t lo = floor_div(last_tick_ms, 1000);
    int64_t hi = floor_div(now_ms, 1000);
    int64_t t = next_cron(cron, z, lo);
    while (t != kNone && t <= hi && count < kMissedCountCap) {
      latest = t;
      ++count;
      t = next_cron(cron, z, t);
    }
    if (t != kNone && t <= hi) latest = latest_cron(cron, z, t - 1, hi);  // past the cap
    if (latest != kNone) latest *= 1000;
  }
  if (count == 0) return d;
  d.latest_tick_ms = latest;
  if (missed == Missed::run_once || now_ms - latest <= grace_ms) {
    d.fire_tick_ms = latest;
    d.missed = count - 1;
  } else {
    d.missed = count;
  }
  return d;
}

std::optional<Concurrency> parse_concurrency(std::string_view s, std::string* err) {
  if (s == "forbid") return Concurrency::forbid;
  if (s == "replace") return Concurrency::replace;
  if (s == "allow") return Concurrency::allow;
  fail(err, "concurrency " + quoted(s) + " is not one of forbid, replace, allow");
  return std::nullopt;
}

std::optional<Missed> parse_missed(std::string_view s, std::string* err) {
  if (s == "run_once") return Missed::run_once;
  if (s == "skip") return Missed::skip;
  fail(err, "missed " + quoted(s) + " is not one of run_once, skip");
  return std::nullopt;
}

std::string_view to_string(Concurrency c) {
  switch (c) {
    case Concurrency::forbid:
      return "forbid";
    case Concurrency::replace:
      return "replace";
    case Concurrency::allow:
      return "allow";
  }
  return "forbid";
}

std::string_view to_string(Missed m) {
  return m == Missed::skip ? "skip" : "run_once";
}

Action on_tick(Concurrency c, bool last_run_active) {
  if (!last_run_active) return Action::start;
  switch (c) {
    case Concurrency::forbid:
      return Action::skip;
    case Concurrency::replace:
      return Action::replace_then_start;
    case Concurrency::allow:
      return Action::start;
  }
  return Action::skip;
}

std::string check_name(std::string_view name) {
  if (name.empty()) return "schedule name must not be empty";
  if (name.size() > 63)
    return "schedule name must be at most 63 characters (got " + std::to_string(name.size()) + ")";
  if (!(name[0] >= 'a' && name[0] <= 'z'))
    return "schedule name " + quoted(name) + " must start with a lowercase letter";
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok)
      return "schedule name " + quoted(name) + " may hold only lowercase letters, digits and '-'";
  }
  if (name.back() == '-') return "schedule name " + quoted(name) + " must not end with '-'";
  return {};
}

std::string run_id(std::string_view team, std::string_view name, int64_t tick_ms) {
  int64_t secs = floor_div(tick_ms, 1000);
  // A tick before 1970 (never made here) as "n<seconds before>": no '-' in it.
  std::string tail = secs >= 0 ? std::to_string(secs)
                               : "n" + std::to_string(static_cast<uint64_t>(-(secs + 1)) + 1);
  // Names hold no '_' (check_name), so the last '_' ends the team.
  std::string n = (!name.empty() && name.size() <= 63 && token_chars(name, false))
                      ? std::string(name)
                      : hash_token(name);
  std::size_t room = 128 - 2 - 1 - n.size() - 1 - tail.size();
  std::string t = (!team.empty() && team.size() <= room && token_chars(team, true))
                      ? std::string(team)
                      : hash_token(team);
  return "s-" + t + "_" + n + "-" + tail;
}

}  // namespace troupe::policy::schedule

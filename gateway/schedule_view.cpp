#include "gateway/schedule_view.hpp"

#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "gateway/format.hpp"
#include "messages/json_text.hpp"

namespace troupe::gateway {

using json = nlohmann::json;

std::string schedule_request(const std::string& op, const ScheduleArgs& a) {
  json r{{"op", op}};
  if (!a.name.empty()) r["name"] = a.name;
  if (op == "create") {
    r["cron"] = a.cron;
    if (!a.tz.empty()) r["tz"] = a.tz;
    if (!a.concurrency.empty()) r["concurrency"] = a.concurrency;
    if (!a.missed.empty()) r["missed"] = a.missed;
    r["spec"] = json_text::parse<json>(a.spec_json);
  }
  return r.dump();
}

namespace {

std::string str(const json& v, const char* k) {
  return v.contains(k) && v[k].is_string() ? v[k].get<std::string>() : std::string();
}
int64_t num(const json& v, const char* k) {
  return v.contains(k) && v[k].is_number_integer() ? v[k].get<int64_t>() : 0;
}

std::string when(int64_t ms, int64_t now_ms) {
  if (ms <= 0) return "-";
  std::string rel =
      ms >= now_ms ? "in " + format_duration(ms - now_ms) : format_duration(now_ms - ms) + " ago";
  return format_datetime(ms) + " (" + rel + ")";
}

std::string state_of(const json& v) {
  return v.value("suspended", false) ? "suspended" : "active";
}

}  // namespace

std::string schedule_text(const std::string& op, const std::string& reply, int64_t now_ms,
                          std::string* out) {
  json v = json_text::parse<json>(reply);
  if (!v.is_object()) return "unreadable reply: " + reply.substr(0, 200);
  if (v.contains("error")) return str(v, "error");
  if (op == "delete") {
    *out = "deleted schedule " + str(v, "deleted") + "\n";
    return {};
  }
  if (op == "list") {
    std::vector<std::vector<std::string>> rows;
    if (v.contains("schedules") && v["schedules"].is_array())
      for (const auto& s : v["schedules"])
        rows.push_back({str(s, "name"), str(s, "cron"), str(s, "tz"), str(s, "concurrency"),
                        num(s, "next_ms") > 0 ? format_datetime(num(s, "next_ms")) : "-",
                        str(s, "last_run").empty() ? "-" : str(s, "last_run"),
                        std::to_string(num(s, "runs")), state_of(s)});
    *out = render_table({"NAME", "CRON", "TZ", "CONCURRENCY", "NEXT", "LAST RUN", "RUNS", "STATE"},
                        rows);
    return {};
  }
  std::vector<std::pair<std::string, std::string>> lines = {
      {"schedule", str(v, "name")},
      {"team", str(v, "team")},
      {"cron", str(v, "cron")},
      {"tz", str(v, "tz")},
      {"concurrency", str(v, "concurrency")},
      {"missed", str(v, "missed")},
      {"state", state_of(v)},
      {"next run", when(num(v, "next_ms"), now_ms)},
      {"last tick", when(num(v, "last_tick_ms"), now_ms)},
      {"last run", str(v, "last_run").empty() ? "-" : str(v, "last_run")},
      {"runs", std::to_string(num(v, "runs"))},
      {"missed ticks", std::to_string(num(v, "missed_ticks"))},
      {"skipped ticks", std::to_string(num(v, "skipped_ticks"))}};
  if (!str(v, "last_error").empty()) lines.emplace_back("last error", str(v, "last_error"));
  size_t w = 0;
  for (const auto& [k, x] : lines) w = std::max(w, k.size());
  out->clear();
  for (const auto& [k, x] : lines) *out += k + std::string(w - k.size() + 2, ' ') + x + "\n";
  return {};
}

}  // namespace troupe::gateway

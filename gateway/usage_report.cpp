#include "gateway/usage_report.hpp"

#include <cctype>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <vector>

#include "gateway/format.hpp"
#include "gateway/usage.hpp"
#include "messages/json_text.hpp"

namespace troupe::gateway {

namespace {

std::string fixed(double v, int places) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", places, v);
  return buf;
}

std::vector<std::string> row(const std::string& key, const nlohmann::json& f) {
  auto jobs = f.value("jobs", nlohmann::json::object());
  auto n = [&](const char* state) { return std::to_string(jobs.value(state, int64_t{0})); };
  return {
      key,
      fixed(f.value("gpu_hours", 0.0), 3),
      fixed(f.value("gpu_hours_preempted", 0.0), 3),
      n("succeeded"),
      n("failed"),
      n("canceled"),
      f.value("ended", int64_t{0}) > 0 ? fixed(100 * f.value("success_rate", 0.0), 1) + "%" : "-",
      fixed(f.value("queue_wait_p50_s", 0.0), 1),
      fixed(f.value("queue_wait_p99_s", 0.0), 1)};
}

}  // namespace

std::optional<int64_t> parse_when_ms(std::string_view text, int64_t now_ms) {
  if (text == "now") return now_ms;
  if (auto d = parse_duration_s(text)) return now_ms - *d * 1000;
  std::tm tm{};
  std::string s(text);
  int used = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &used) != 3)
    return std::nullopt;
  if (static_cast<size_t>(used) != s.size()) {
    int more = 0;
    if (std::sscanf(s.c_str() + used, "T%2d:%2d%n", &tm.tm_hour, &tm.tm_min, &more) != 2)
      return std::nullopt;
    used += more;
    if (static_cast<size_t>(used) != s.size()) {
      if (std::sscanf(s.c_str() + used, ":%2d%n", &tm.tm_sec, &more) != 1) return std::nullopt;
      used += more;
    }
    if (static_cast<size_t>(used) != s.size()) return std::nullopt;
  }
  if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || tm.tm_sec > 60)
    return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(timegm(&tm)) * 1000;
}

std::string usage_request(int64_t since_ms, int64_t until_ms, const std::string& by) {
  return nlohmann::json{{"since_ms", since_ms}, {"until_ms", until_ms}, {"by", by}}.dump();
}

std::string usage_text(const std::string& report, bool csv) {
  auto j = json_text::parse(report);
  if (!j.is_object() || !j.contains("total")) return {};
  std::string by = j.value("by", std::string("none"));
  if (by == "none") by = "group";
  for (auto& c : by) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::vector<std::string> header = {by,          "GPU-HOURS",  "PREEMPTED-GPU-HOURS",
                                     "SUCCEEDED", "FAILED",     "CANCELED",
                                     "SUCCESS",   "WAIT-P50-S", "WAIT-P99-S"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& g : j.value("groups", nlohmann::json::array()))
    rows.push_back(row(g.value("key", std::string()), g));
  rows.push_back(row("TOTAL", j["total"]));
  if (!csv) return render_table(header, rows);
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
      std::string c = cells[i];
      if (c.find_first_of(",\"\n") != std::string::npos) {
        std::string q = "\"";
        for (char ch : c) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
        c = q + "\"";
      }
      out += (i ? "," : "") + c;
    }
    out += "\n";
  };
  line(header);
  for (const auto& r : rows) line(r);
  return out;
}

}  // namespace troupe::gateway

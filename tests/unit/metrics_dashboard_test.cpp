// The Grafana dashboard (docs/grafana/troupe.json) is valid JSON, and every
// PromQL query in it names only series troupe-scheduler exports
// (metrics::scheduler_series()) and only labels those series carry; and
// docs/metrics.md documents every exported series.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "actors/metrics/model.hpp"

namespace {

using troupe::metrics::node_series;
using troupe::metrics::sample_names;
using troupe::metrics::scheduler_series;
using troupe::metrics::SeriesInfo;

// The repository root, from this file's path (tests/unit/<this file>).
std::string repo_root() {
  std::string f = __FILE__;
  for (int i = 0; i < 3; ++i) f = f.substr(0, f.rfind('/'));
  return f;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every "expr" in the dashboard (panels, and panels nested in rows).
void collect_exprs(const nlohmann::json& j, std::vector<std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "expr" && it->is_string())
        out.push_back(it->get<std::string>());
      else
        collect_exprs(*it, out);
    }
  } else if (j.is_array()) {
    for (const auto& x : j) collect_exprs(x, out);
  }
}

struct Checked {
  std::vector<std::string> unknown_series;
  std::vector<std::string> unknown_labels;
  std::set<std::string> series;  // troupe_* sample names the expr uses
};

// Names every troupe_* identifier and label of a PromQL expression.
Checked check_expr(const std::string& expr) {
  std::map<std::string, const SeriesInfo*> samples;
  for (const auto& s : scheduler_series())
    for (const auto& n : sample_names(s)) samples[n] = &s;

  Checked c;
  std::string code = std::regex_replace(expr, std::regex(R"("([^"\\]|\\.)*")"), "\"\"");
  static const std::regex ident(R"([A-Za-z_:][A-Za-z0-9_:]*)");
  std::set<std::string> labels_known = {"__name__", "job", "instance"};
  for (auto it = std::sregex_iterator(code.begin(), code.end(), ident);
       it != std::sregex_iterator(); ++it) {
    std::string id = it->str();
    if (id.rfind("troupe_", 0) != 0) continue;
    auto s = samples.find(id);
    if (s == samples.end()) {
      c.unknown_series.push_back(id);
      continue;
    }
    c.series.insert(id);
    for (const auto& l : s->second->labels) labels_known.insert(l);
    if (id.size() > 7 && id.compare(id.size() - 7, 7, "_bucket") == 0) labels_known.insert("le");
  }
  // Labels in by (...) / without (...) / on (...) / ignoring (...) and in {...} matchers.
  std::vector<std::string> labels;
  static const std::regex grouping(R"(\b(by|without|on|ignoring)\s*\(([^)]*)\))");
  for (auto it = std::sregex_iterator(code.begin(), code.end(), grouping);
       it != std::sregex_iterator(); ++it) {
    std::string inner = (*it)[2].str();
    for (auto l = std::sregex_iterator(inner.begin(), inner.end(), ident);
         l != std::sregex_iterator(); ++l)
      labels.push_back(l->str());
  }
  static const std::regex matchers(R"(\{([^}]*)\})");
  static const std::regex matcher_label(R"(([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=))");
  for (auto it = std::sregex_iterator(code.begin(), code.end(), matchers);
       it != std::sregex_iterator(); ++it) {
    std::string inner = (*it)[1].str();
    for (auto l = std::sregex_iterator(inner.begin(), inner.end(), matcher_label);
         l != std::sregex_iterator(); ++l)
      labels.push_back((*l)[1].str());
  }
  for (const auto& l : labels)
    if (!labels_known.count(l)) c.unknown_labels.push_back(l);
  return c;
}

}  // namespace

TEST_CASE("dashboard checker catches unknown series and labels", "[metrics][dashboard]") {
  auto ok = check_expr(
      "histogram_quantile(0.99, sum by (team, le) (rate(troupe_queue_wait_seconds_bucket[5m])))");
  CHECK(ok.unknown_series.empty());
  CHECK(ok.unknown_labels.empty());
  CHECK(ok.series == std::set<std::string>{"troupe_queue_wait_seconds_bucket"});

  auto typo = check_expr("sum(troupe_gpus_totl)");
  CHECK(typo.unknown_series == std::vector<std::string>{"troupe_gpus_totl"});
  auto bare_histogram = check_expr("rate(troupe_queue_wait_seconds[5m])");
  CHECK(bare_histogram.unknown_series.size() == 1);
  auto bad_label = check_expr("sum by (team) (troupe_gpus_capacity)");
  CHECK(bad_label.unknown_labels == std::vector<std::string>{"team"});
  auto bad_matcher = check_expr("troupe_jobs_finished_total{status=\"ok\"}");
  CHECK(bad_matcher.unknown_labels == std::vector<std::string>{"status"});
  // Label values are strings, never series.
  CHECK(check_expr("troupe_jobs_finished_total{cause=\"troupe_x\"}").unknown_series.empty());
}

TEST_CASE("every dashboard query names only exported series and labels", "[metrics][dashboard]") {
  auto text = slurp(repo_root() + "/docs/grafana/troupe.json");
  REQUIRE_FALSE(text.empty());
  auto dash = nlohmann::json::parse(text, nullptr, false);
  REQUIRE_FALSE(dash.is_discarded());
  REQUIRE(dash.is_object());
  REQUIRE(dash.contains("panels"));
  REQUIRE(dash["panels"].is_array());
  CHECK(dash.value("title", "") == "Troupe");

  std::vector<std::string> exprs;
  collect_exprs(dash, exprs);
  REQUIRE(exprs.size() >= 10);
  std::set<std::string> used;
  for (const auto& e : exprs) {
    INFO(e);
    auto c = check_expr(e);
    CHECK(c.unknown_series.empty());
    CHECK(c.unknown_labels.empty());
    CHECK_FALSE(c.series.empty());  // every query is over Troupe's own series
    used.insert(c.series.begin(), c.series.end());
  }
  // The panels the issue asks for.
  for (const char* s : {"troupe_gpu_allocation_ratio", "troupe_queue_wait_seconds_bucket",
                        "troupe_team_gpus_in_use", "troupe_team_weight", "troupe_preemptions_total",
                        "troupe_gpus_fragmented", "troupe_placement_latency_seconds_bucket"}) {
    INFO(s);
    CHECK(used.count(s) == 1);
  }
  bool p50 = false, p99 = false;
  for (const auto& e : exprs) {
    if (e.find("troupe_queue_wait_seconds_bucket") == std::string::npos) continue;
    p50 = p50 || e.find("histogram_quantile(0.5,") != std::string::npos;
    p99 = p99 || e.find("histogram_quantile(0.99,") != std::string::npos;
  }
  CHECK(p50);
  CHECK(p99);
}

TEST_CASE("docs/metrics.md documents every exported series", "[metrics][dashboard]") {
  auto doc = slurp(repo_root() + "/docs/metrics.md");
  REQUIRE_FALSE(doc.empty());
  for (const auto* table : {&scheduler_series(), &node_series()})
    for (const auto& s : *table) {
      INFO(s.name);
      CHECK(doc.find("`" + s.name + "`") != std::string::npos);
    }
}

TEST_CASE("series names follow Prometheus conventions", "[metrics]") {
  std::set<std::string> names;
  for (const auto* table : {&scheduler_series(), &node_series()})
    for (const auto& s : *table) {
      INFO(s.name);
      CHECK(s.name.rfind("troupe_", 0) == 0);
      CHECK(std::regex_match(s.name, std::regex("[a-z_]+")));
      bool total = s.name.size() > 6 && s.name.compare(s.name.size() - 6, 6, "_total") == 0;
      CHECK(total == (s.type == troupe::metrics::Type::kCounter));
      if (s.type == troupe::metrics::Type::kHistogram) {
        CHECK_FALSE(s.buckets.empty());
        CHECK(std::is_sorted(s.buckets.begin(), s.buckets.end()));
      }
      CHECK_FALSE(s.help.empty());
      CHECK(names.insert(s.name).second);
    }
}

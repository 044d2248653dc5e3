// The Grafana dashboard (docs/grafana/troupe.json) is valid JSON, and every
// PromQL query in it names only series troupe-scheduler or troupe-node
// export (metrics::scheduler_series(), metrics::node_series()) and only labels
// those series carry; its variables (team, pool) exist, are read from exported
// series and labels, and are used by the panels; and docs/metrics.md
// documents every exported series.
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

using troupe::metrics::dispatch_series;
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
  for (const auto* table : {&scheduler_series(), &node_series(), &dispatch_series()})
    for (const auto& s : *table)
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

// The dashboard variables a query refers to ($name or ${name}; not Grafana's
// own $__interval and the like).
std::vector<std::string> variables_in(const std::string& expr) {
  std::vector<std::string> out;
  static const std::regex var(R"(\$\{?([A-Za-z_][A-Za-z0-9_]*))");
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), var); it != std::sregex_iterator();
       ++it)
    if ((*it)[1].str().rfind("__", 0) != 0) out.push_back((*it)[1].str());
  return out;
}

// How a variable is used: only as `label=~"$label"` (a multi-value variable
// with All is a regex), so that each filters its own label. The variables a
// query uses some other way.
std::vector<std::string> misused_variables(const std::string& expr) {
  static const std::regex matcher(
      R"(([A-Za-z_][A-Za-z0-9_]*)\s*=~\s*"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")");
  std::multiset<std::string> ok;
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), matcher);
       it != std::sregex_iterator(); ++it)
    if ((*it)[1].str() == (*it)[2].str()) ok.insert((*it)[1].str());
  std::vector<std::string> bad;
  for (const auto& v : variables_in(expr)) {
    auto at = ok.find(v);
    if (at == ok.end())
      bad.push_back(v);
    else
      ok.erase(at);
  }
  return bad;
}

nlohmann::json load_dashboard() {
  auto text = slurp(repo_root() + "/docs/grafana/troupe.json");
  return nlohmann::json::parse(text, nullptr, false);
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
  // The node agents' series count too, with their own labels.
  auto node = check_expr(
      "count((troupe_node_gpu_allocated == 1) and on (node, gpu) "
      "(troupe_node_gpu_utilization_ratio < 0.05))");
  CHECK(node.unknown_series.empty());
  CHECK(node.unknown_labels.empty());
  CHECK(check_expr("troupe_node_gpu_allocated{pool=~\"$pool\"}").unknown_labels ==
        std::vector<std::string>{"pool"});
  // Variables.
  CHECK(variables_in("sum(rate(x{team=~\"$team\"}[$__rate_interval])) + y{pool=~\"${pool}\"}") ==
        std::vector<std::string>{"team", "pool"});
  CHECK(misused_variables("x{team=~\"$team\", pool=~\"${pool}\"}").empty());
  CHECK(misused_variables("x{pool=~\"$team\"}") == std::vector<std::string>{"team"});
  CHECK(misused_variables("x{team=\"$team\"}") == std::vector<std::string>{"team"});
}

TEST_CASE("every dashboard query names only exported series and labels", "[metrics][dashboard]") {
  auto dash = load_dashboard();
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

TEST_CASE("dashboard variables team and pool exist and filter the panels", "[metrics][dashboard]") {
  auto dash = load_dashboard();
  REQUIRE_FALSE(dash.is_discarded());
  REQUIRE(dash.contains("templating"));
  std::map<std::string, nlohmann::json> vars;
  for (const auto& v : dash["templating"].value("list", nlohmann::json::array()))
    vars[v.value("name", "")] = v;
  REQUIRE(vars.count("datasource") == 1);

  // Each query variable reads label_values(<exported series>, <its label>),
  // and its name is that label.
  static const std::regex label_values(
      R"(^label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)$)");
  for (const char* name : {"team", "pool"}) {
    INFO(name);
    REQUIRE(vars.count(name) == 1);
    const auto& v = vars[name];
    CHECK(v.value("type", "") == "query");
    CHECK(v.value("multi", false));
    CHECK(v.value("includeAll", false));
    CHECK(v.value("allValue", "") == ".*");
    std::string q = v.contains("query") && v["query"].is_object() ? v["query"].value("query", "")
                                                                  : v.value("query", "");
    CHECK(v.value("definition", "") == q);
    std::smatch m;
    REQUIRE(std::regex_match(q, m, label_values));
    CHECK(m[2].str() == name);
    auto c = check_expr(m[1].str() + "{" + m[2].str() + "=\"\"}");
    CHECK(c.unknown_series.empty());
    CHECK(c.unknown_labels.empty());
    CHECK(c.series.size() == 1);
  }

  // Every variable a query refers to exists and is used as label=~"$label";
  // each query variable is used by some panel.
  std::vector<std::string> exprs;
  collect_exprs(dash["panels"], exprs);
  std::map<std::string, int> uses;
  for (const auto& e : exprs) {
    INFO(e);
    for (const auto& v : variables_in(e)) {
      CHECK(vars.count(v) == 1);
      ++uses[v];
    }
    CHECK(misused_variables(e).empty());
  }
  for (const auto& [name, v] : vars) {
    if (v.value("type", "") != "query") continue;
    INFO(name);
    CHECK(uses[name] >= 3);
  }
}

TEST_CASE("dashboard shows GPU utilization against allocation", "[metrics][dashboard]") {
  auto dash = load_dashboard();
  REQUIRE_FALSE(dash.is_discarded());
  const nlohmann::json* panel = nullptr;
  for (const auto& p : dash["panels"])
    if (p.value("title", "") == "GPU utilization vs allocation") panel = &p;
  REQUIRE(panel != nullptr);
  std::vector<std::string> exprs;
  collect_exprs(*panel, exprs);
  std::set<std::string> used;
  bool idle = false;
  for (const auto& e : exprs) {
    auto c = check_expr(e);
    used.insert(c.series.begin(), c.series.end());
    // Allocated-but-idle: allocated GPUs under 5 % busy, joined per GPU.
    idle = idle || (e.find("troupe_node_gpu_allocated == 1") != std::string::npos &&
                    e.find("on (node, gpu)") != std::string::npos &&
                    e.find("troupe_node_gpu_utilization_ratio < 0.05") != std::string::npos);
  }
  CHECK(used.count("troupe_node_gpu_allocated") == 1);
  CHECK(used.count("troupe_node_gpu_utilization_ratio") == 1);
  CHECK(idle);
}

TEST_CASE("docs/metrics.md documents every exported series", "[metrics][dashboard]") {
  auto doc = slurp(repo_root() + "/docs/metrics.md");
  REQUIRE_FALSE(doc.empty());
  for (const auto* table : {&scheduler_series(), &node_series(), &dispatch_series()})
    for (const auto& s : *table) {
      INFO(s.name);
      CHECK(doc.find("`" + s.name + "`") != std::string::npos);
    }
}

TEST_CASE("series names follow Prometheus conventions", "[metrics]") {
  std::set<std::string> names;
  for (const auto* table : {&scheduler_series(), &node_series(), &dispatch_series()})
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

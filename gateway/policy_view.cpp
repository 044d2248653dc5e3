// Reading and printing the policy replies (see policy_view.hpp).
#include "gateway/policy_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "gateway/format.hpp"
#include "messages/json_text.hpp"

namespace troupe::gateway {

using nlohmann::json;

namespace {

std::string short_body(std::string_view body) {
  std::string s(body.substr(0, 200));
  if (body.size() > 200) s += "...";
  return s;
}

// An object, or the reason it is not one (including the server's {"error"}).
std::string object_of(std::string_view body, const char* what, json* out) {
  json j = json_text::parse<json>(body.begin(), body.end());
  if (j.is_discarded() || !j.is_object())
    return std::string("unreadable ") + what + " reply: " + short_body(body);
  if (auto it = j.find("error"); it != j.end())
    return it->is_string() ? it->get<std::string>() : it->dump();
  *out = std::move(j);
  return {};
}

// Numbers may come as JSON numbers or (protobuf int64 style) as strings.
double num(const json& j, const char* key, double dflt) {
  auto it = j.find(key);
  if (it == j.end()) return dflt;
  if (it->is_number()) return it->get<double>();
  if (it->is_string()) {
    try {
      return std::stod(it->get<std::string>());
    } catch (const std::exception&) {
      return dflt;
    }
  }
  return dflt;
}

int64_t num64(const json& j, const char* key, int64_t dflt) {
  auto it = j.find(key);
  if (it == j.end()) return dflt;
  if (it->is_number_integer()) return it->get<int64_t>();
  return static_cast<int64_t>(std::llround(num(j, key, static_cast<double>(dflt))));
}

int num32(const json& j, const char* key, int dflt) {
  return static_cast<int>(num64(j, key, dflt));
}

std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool flag(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

}  // namespace

std::string parse_queues(std::string_view body, QueuesView* out) {
  json j;
  if (auto err = object_of(body, "queues", &j); !err.empty()) return err;
  QueuesView q;
  if (auto it = j.find("pools"); it != j.end() && it->is_array()) {
    for (const auto& p : *it) {
      if (!p.is_object()) continue;
      PoolView v;
      v.cluster = str(p, "cluster");
      v.pool = str(p, "pool");
      v.gpus_total = num32(p, "gpus_total", 0);
      v.gpus_free = num32(p, "gpus_free", 0);
      if (auto h = p.find("hold"); h != p.end() && h->is_object()) {
        v.has_hold = true;
        v.hold.job_id = str(*h, "job_id");
        if (auto n = h->find("nodes"); n != h->end() && n->is_array())
          for (const auto& name : *n)
            if (name.is_string()) v.hold.nodes.push_back(name.get<std::string>());
        v.hold.start_ms = num64(*h, "start_ms", -1);
        v.hold.idle_gpus = num32(*h, "idle_gpus", 0);
      }
      q.pools.push_back(std::move(v));
    }
  }
  if (auto it = j.find("teams"); it != j.end() && it->is_array()) {
    for (const auto& t : *it) {
      if (!t.is_object()) continue;
      TeamPoolView v;
      v.team = str(t, "team");
      v.cluster = str(t, "cluster");
      v.pool = str(t, "pool");
      v.weight = num(t, "weight", 1.0);
      v.borrow = flag(t, "borrow");
      v.guaranteed = num32(t, "guaranteed", 0);
      v.limit = num32(t, "limit", -1);
      v.in_use = num32(t, "in_use", 0);
      v.borrowed = num32(t, "borrowed", 0);
      v.pending_jobs = num32(t, "pending_jobs", 0);
      v.pending_gpus = num32(t, "pending_gpus", 0);
      v.dominant_share = num(t, "dominant_share", 0);
      v.weighted_share = num(t, "weighted_share", 0);
      q.teams.push_back(std::move(v));
    }
  }
  q.reserved_idle_gpu_seconds = num(j, "reserved_idle_gpu_seconds", 0);
  q.grants = num64(j, "grants", 0);
  q.policy = str(j, "policy");
  q.preemptions = num64(j, "preemptions", 0);
  q.gpu_seconds_lost = num(j, "gpu_seconds_lost", 0);
  if (j.contains("retries") && j["retries"].is_object())
    for (const auto& [k, v] : j["retries"].items())
      if (v.is_number_integer()) q.retries[k] = v.get<int64_t>();
  if (auto c = j.find("cluster"); c != j.end() && c->is_string()) q.cluster = c->get<std::string>();
  if (auto u = j.find("unanswered"); u != j.end() && u->is_array())
    for (const auto& name : *u)
      if (name.is_string()) q.unanswered.push_back(name.get<std::string>());
  *out = std::move(q);
  return {};
}

std::string queues_request(const std::string& cluster) {
  return cluster.empty() ? std::string("{}") : json{{"cluster", cluster}}.dump();
}

std::string check_queues_cluster(const QueuesView& q, const std::string& cluster) {
  if (cluster.empty() || q.cluster == cluster) return {};
  if (q.cluster.empty()) return kNoFrontDoorFilter;
  return "the front door answered for cluster " + q.cluster + ", not " + cluster;
}

std::string parse_why(std::string_view body, WhyView* out) {
  json j;
  if (auto err = object_of(body, "why", &j); !err.empty()) return err;
  WhyView w;
  w.job_id = str(j, "job_id");
  w.state = str(j, "state");
  w.pending = flag(j, "pending");
  w.code = str(j, "code");
  w.reason = str(j, "reason");
  if (w.code.empty() && w.reason.empty())
    return "why reply has no code nor reason: " + short_body(body);
  *out = std::move(w);
  return {};
}

std::string format_weight(double w) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", w);
  std::string s = buf;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

std::string format_percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", fraction * 100.0);
  return buf;
}

namespace {

// A pool's name as shown: "c1/default" at a front door.
template <typename Row>
std::string pool_label(const Row& r) {
  if (r.cluster.empty()) return r.pool;
  return r.cluster + "/" + (r.pool.empty() ? "-" : r.pool);
}

}  // namespace

std::string queues_text(const QueuesView& q, int64_t now_ms) {
  std::vector<const TeamPoolView*> rows;
  for (const auto& t : q.teams) rows.push_back(&t);
  std::stable_sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) {
    if (pool_label(*a) != pool_label(*b)) return pool_label(*a) < pool_label(*b);
    return a->team < b->team;
  });
  std::vector<std::vector<std::string>> cells;
  for (const auto* t : rows) {
    const std::string pool = pool_label(*t);
    cells.push_back({t->team, pool.empty() ? "-" : pool, format_weight(t->weight),
                     std::to_string(t->guaranteed), t->limit < 0 ? "-" : std::to_string(t->limit),
                     std::to_string(t->in_use), std::to_string(t->borrowed),
                     std::to_string(t->pending_jobs), std::to_string(t->pending_gpus),
                     format_percent(t->weighted_share)});
  }
  std::string out = render_table({"TEAM", "POOL", "WEIGHT", "GUARANTEED", "LIMIT", "IN USE",
                                  "BORROWED", "PENDING", "PENDING GPUS", "SHARE"},
                                 cells);
  if (!q.pools.empty()) out += '\n';
  std::vector<const PoolView*> pools;
  for (const auto& p : q.pools) pools.push_back(&p);
  std::stable_sort(pools.begin(), pools.end(),
                   [](const auto* a, const auto* b) { return pool_label(*a) < pool_label(*b); });
  for (const auto* p : pools) {
    std::string line = "pool " + pool_label(*p) + ": " + std::to_string(p->gpus_total) + " GPUs, " +
                       std::to_string(p->gpus_free) + " free";
    if (p->has_hold) {
      line += "; hold for " + p->hold.job_id;
      if (!p->hold.nodes.empty()) {
        line += " on ";
        for (size_t i = 0; i < p->hold.nodes.size(); ++i) line += (i ? "," : "") + p->hold.nodes[i];
      }
      if (p->hold.start_ms > 0) {
        line += " from " + format_clock(p->hold.start_ms);
        int64_t in = p->hold.start_ms - now_ms;
        line += in > 0 ? " (in " + format_duration(in) + ")" : " (due now)";
      } else {
        line += " from an unknown time";
      }
      line += ", " + std::to_string(p->hold.idle_gpus) + " GPU" +
              (p->hold.idle_gpus == 1 ? "" : "s") + " idle on it";
    } else {
      line += "; no hold";
    }
    out += line + '\n';
  }
  if (!q.cluster.empty()) out += "cluster: " + q.cluster + " (its own counters below)\n";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", q.reserved_idle_gpu_seconds);
  out += std::string("reserved-idle GPU-seconds: ") + buf + '\n';
  std::snprintf(buf, sizeof buf, "%.1f", q.gpu_seconds_lost);
  out += "preemptions: " + std::to_string(q.preemptions) + " (GPU-seconds lost: " + buf + ")\n";
  std::string retries;
  for (const auto& [cause, n] : q.retries)
    retries += (retries.empty() ? "" : ", ") + cause + " " + std::to_string(n);
  out += "retries by cause: " + (retries.empty() ? std::string("none") : retries) + '\n';
  if (!q.policy.empty() && q.policy != "troupe") out += "policy: " + q.policy + '\n';
  if (!q.unanswered.empty()) {
    std::string names;
    for (const auto& n : q.unanswered) names += (names.empty() ? "" : ", ") + n;
    out += "not shown (unreachable): " + names + '\n';
  }
  return out;
}

std::string why_text(const WhyView& w) {
  std::vector<std::pair<std::string, std::string>> lines;
  lines.emplace_back("job", w.job_id);
  if (!w.state.empty()) lines.emplace_back("state", w.state);
  lines.emplace_back("pending", w.pending ? "yes" : "no");
  if (!w.code.empty()) lines.emplace_back("code", w.code);
  lines.emplace_back("reason", w.reason.empty() ? "-" : localize_times(w.reason));
  size_t width = 0;
  for (const auto& [k, v] : lines) width = std::max(width, k.size());
  std::string out;
  for (const auto& [k, v] : lines) out += k + std::string(width - k.size() + 2, ' ') + v + '\n';
  return out;
}

}  // namespace troupe::gateway

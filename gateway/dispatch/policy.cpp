// The front door's rules (see policy.hpp).
#include "gateway/dispatch/policy.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <tuple>

#include "messages/ids.hpp"
#include "messages/json_number.hpp"
#include "messages/json_text.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"

namespace troupe::dispatch {
namespace {

using Json = nlohmann::json;

// What a cluster reports is summed here: a hostile or broken one's numbers
// saturate rather than overflow (undefined behaviour).
int64_t add_sat(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

using json_number::whole;

bool fail(std::string* error, std::string text) {
  if (error) *error = std::move(text);
  return false;
}

std::string str(const YAML::Node& n, const char* key) {
  auto v = n[key];
  return v && v.IsScalar() ? v.as<std::string>() : std::string();
}

bool read_clusters(const YAML::Node& list, Config& cfg, std::string* error) {
  if (!list || !list.IsSequence() || list.size() == 0)
    return fail(error, "clusters: a list of at least one {name, nats} is required");
  std::set<std::string> names;
  for (const auto& c : list) {
    if (!c.IsMap()) return fail(error, "clusters: each entry is a map {name, nats, ...}");
    ClusterEntry e{str(c, "name"), str(c, "region"), str(c, "nats"), str(c, "creds"),
                   str(c, "tls_ca")};
    if (auto err = names::check_token(e.name); !err.empty())
      return fail(error, "clusters: name: " + err);
    if (!e.region.empty())
      if (auto err = names::check_token(e.region); !err.empty())
        return fail(error, "clusters: " + e.name + ": region: " + err);
    if (e.nats.empty()) return fail(error, "clusters: " + e.name + ": nats (its URLs) is required");
    if (!names.insert(e.name).second)
      return fail(error, "clusters: " + e.name + " is listed twice");
    cfg.clusters.push_back(std::move(e));
  }
  return true;
}

bool read_teams(const YAML::Node& teams, Config& cfg, std::string* error) {
  if (!teams) return true;
  if (!teams.IsMap()) return fail(error, "teams: a map team -> {clusters, quota}");
  std::set<std::string> known;
  for (const auto& c : cfg.clusters) known.insert(c.name);
  for (const auto& t : teams) {
    std::string team = t.first.as<std::string>();
    if (!names::valid_team(team)) return fail(error, "teams: " + team + " is not a team name");
    TeamRule rule;
    const auto& v = t.second;
    if (v["clusters"]) {
      if (!v["clusters"].IsSequence()) return fail(error, "teams: " + team + ": clusters: a list");
      for (const auto& c : v["clusters"]) {
        auto name = c.as<std::string>();
        if (!known.count(name))
          return fail(error, "teams: " + team + ": clusters: no cluster " + name);
        rule.clusters.push_back(name);
      }
    }
    if (v["quota"]) {
      if (!v["quota"].IsMap())
        return fail(error, "teams: " + team + ": quota: a map cluster -> GPUs");
      for (const auto& q : v["quota"]) {
        auto name = q.first.as<std::string>();
        if (!known.count(name))
          return fail(error, "teams: " + team + ": quota: no cluster " + name);
        auto gpus = q.second.as<int64_t>();
        if (gpus < 0) return fail(error, "teams: " + team + ": quota: " + name + " must be >= 0");
        rule.quota[name] = gpus;
      }
    }
    cfg.teams[team] = std::move(rule);
  }
  return true;
}

bool read_number(const YAML::Node& root, const char* key, int64_t lo, int64_t hi, int64_t* out,
                 std::string* error) {
  if (!root[key]) return true;
  auto v = root[key].as<int64_t>();
  if (v < lo || v > hi)
    return fail(error, std::string(key) + " must be in [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "] (got " + std::to_string(v) + ")");
  *out = v;
  return true;
}

bool allowed(const Config& cfg, const std::string& team, const std::string& cluster) {
  auto it = cfg.teams.find(team);
  if (it == cfg.teams.end() || it->second.clusters.empty()) return true;
  const auto& l = it->second.clusters;
  return std::find(l.begin(), l.end(), cluster) != l.end();
}

int64_t quota_of(const Config& cfg, const std::string& team, const std::string& cluster) {
  auto it = cfg.teams.find(team);
  if (it == cfg.teams.end()) return -1;
  auto q = it->second.quota.find(cluster);
  return q == it->second.quota.end() ? -1 : q->second;
}

}  // namespace

std::optional<Config> parse_config(std::string_view text, std::string* error) {
  Config cfg;
  try {
    YAML::Node root = YAML::Load(std::string(text));
    if (!root.IsMap()) {
      fail(error, "the dispatch config is a map with `clusters`");
      return std::nullopt;
    }
    if (root["name"]) cfg.name = root["name"].as<std::string>();
    if (auto err = names::check_token(cfg.name); !err.empty()) {
      fail(error, "name: " + err);
      return std::nullopt;
    }
    if (!read_clusters(root["clusters"], cfg, error) || !read_teams(root["teams"], cfg, error) ||
        !read_number(root, "spill_after_s", 0, 7 * 24 * 3600, &cfg.spill_after_s, error) ||
        !read_number(root, "poll_ms", 100, 60000, &cfg.poll_ms, error) ||
        !read_number(root, "unreachable_after_ms", 500, 600000, &cfg.unreachable_after_ms, error) ||
        !read_number(root, "job_retention_s", 0, 10LL * 365 * 24 * 3600, &cfg.job_retention_s,
                     error) ||
        !read_number(root, "events_max_age_s", 0, 10LL * 365 * 24 * 3600, &cfg.events_max_age_s,
                     error) ||
        !read_number(root, "events_max_bytes", 0, 1LL << 50, &cfg.events_max_bytes, error))
      return std::nullopt;
    if (const YAML::Node keep = root["keep_events"];
        keep && !YAML::convert<bool>::decode(keep, cfg.keep_events)) {
      fail(error, "keep_events: true or false");
      return std::nullopt;
    }
  } catch (const std::exception& e) {
    fail(error, std::string("the dispatch config does not read: ") + e.what());
    return std::nullopt;
  }
  return cfg;
}

bool read_capacity(std::string_view nodes_json, std::string_view queues_json, ClusterState* out,
                   std::string* error) {
  Json nodes = json_text::parse<Json>(nodes_json);
  Json queues = json_text::parse<Json>(queues_json);
  if (!nodes.is_object() || !nodes.contains("nodes") || !nodes["nodes"].is_array())
    return fail(error, "troupe.sys.nodes answered without a nodes list");
  if (!queues.is_object() || !queues.contains("teams") || !queues["teams"].is_array())
    return fail(error, "troupe.sys.queues answered without a teams list");
  out->types.clear();
  out->running = 0;
  // A count (GPUs, jobs): never below 0; an int64 as protobuf's JSON writes
  // it is read too (strtoll saturates).
  auto num = [](const Json& j, const char* k) -> int64_t {
    if (!j.contains(k)) return 0;
    const auto& v = j[k];
    int64_t n = 0;
    if (v.is_number_integer())
      n = whole(v).value_or(0);
    else if (v.is_string())
      n = std::strtoll(v.get<std::string>().c_str(), nullptr, 10);
    return std::max<int64_t>(0, n);
  };
  for (const auto& n : nodes["nodes"]) {
    if (!n.is_object()) continue;
    out->running = add_sat(out->running, num(n, "running"));
    if (auto a = n.find("alive"); a == n.end() || !a->is_boolean() || !a->get<bool>()) continue;
    auto& t = out->types[string_of(n, "gpu_type")];
    t.total = add_sat(t.total, num(n, "gpus_total"));
    t.free = add_sat(t.free, num(n, "gpus_free"));
  }
  out->queued = 0;
  for (const auto& t : queues["teams"])
    if (t.is_object()) out->queued = add_sat(out->queued, num(t, "pending_jobs"));
  out->nodes_reply = std::make_shared<const Json>(std::move(nodes));
  out->queues_reply = std::make_shared<const Json>(std::move(queues));
  return true;
}

namespace {

// Each reachable cluster's rows of `list` in `reply_in(cluster)`, each with
// its `cluster`; the others named in `unanswered`.
template <typename ReplyOf>
Json rows_of(const std::vector<ClusterState>& clusters, const char* list, ReplyOf reply_in,
             Json& unanswered) {
  Json rows = Json::array();
  for (const auto& c : clusters) {
    const Json& r = reply_in(c);
    auto l = r.is_object() ? r.find(list) : r.end();
    if (!c.reachable || !r.is_object() || l == r.end() || !l->is_array()) {
      unanswered.push_back(c.name);
      continue;
    }
    for (Json row : *l) {
      if (!row.is_object()) continue;
      row["cluster"] = c.name;
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

Json with_unanswered(Json reply, Json unanswered) {
  // (a cluster named twice, once per list, is named once)
  std::vector<std::string> names;
  for (const auto& n : unanswered)
    if (n.is_string() && std::find(names.begin(), names.end(), n.get<std::string>()) == names.end())
      names.push_back(n.get<std::string>());
  if (!names.empty()) {
    reply["partial"] = true;
    reply["unanswered"] = names;
  }
  return reply;
}

const Json& reply_of(const std::shared_ptr<const Json>& reply) {
  static const Json kNone;  // (const: no state)
  return reply ? *reply : kNone;
}

}  // namespace

Json merge_nodes(const std::vector<ClusterState>& clusters) {
  Json unanswered = Json::array();
  Json nodes = rows_of(
      clusters, "nodes",
      [](const ClusterState& c) -> const Json& { return reply_of(c.nodes_reply); }, unanswered);
  return with_unanswered(Json{{"nodes", std::move(nodes)}}, std::move(unanswered));
}

Json merge_queues(const std::vector<ClusterState>& clusters) {
  auto of = [](const ClusterState& c) -> const Json& { return reply_of(c.queues_reply); };
  Json unanswered = Json::array();
  Json pools = rows_of(clusters, "pools", of, unanswered);
  Json teams = rows_of(clusters, "teams", of, unanswered);
  Json reply{{"pools", std::move(pools)}, {"teams", std::move(teams)}};
  std::map<std::string, double> sums;  // (whole numbers stay whole below)
  std::map<std::string, bool> fractional;
  std::map<std::string, int64_t> retries;
  std::set<std::string> policies;
  for (const auto& c : clusters) {
    const Json& q = reply_of(c.queues_reply);
    if (!c.reachable || !q.is_object()) continue;
    for (const char* k :
         {"grants", "preemptions", "reclaims", "gpu_seconds_lost", "reserved_idle_gpu_seconds"}) {
      auto v = q.find(k);
      if (v == q.end()) continue;
      if (v->is_number()) {
        sums[k] += v->get<double>();
        if (v->is_number_float()) fractional[k] = true;
      } else if (v->is_string()) {  // an int64 as protobuf's JSON writes it
        const std::string text = v->get<std::string>();
        char* end = nullptr;
        const long long n = std::strtoll(text.c_str(), &end, 10);
        if (!text.empty() && end != nullptr && *end == '\0') sums[k] += static_cast<double>(n);
      }
    }
    if (auto r = q.find("retries"); r != q.end() && r->is_object())
      for (const auto& [cause, n] : r->items())
        if (n.is_number_integer()) retries[cause] = add_sat(retries[cause], *whole(n));
    if (auto p = q.find("policy"); p != q.end() && p->is_string())
      policies.insert(p->get<std::string>());
  }
  for (const auto& [k, v] : sums) {
    if (fractional[k])
      reply[k] = v;
    else  // (a double sum of int64s may be out of range)
      reply[k] = whole(Json(v)).value_or(v > 0 ? std::numeric_limits<int64_t>::max()
                                               : std::numeric_limits<int64_t>::min());
  }
  reply["retries"] = retries;
  if (!policies.empty()) reply["policy"] = policies.size() == 1 ? *policies.begin() : "mixed";
  return with_unanswered(std::move(reply), std::move(unanswered));
}

Json queues_reply(const std::vector<ClusterState>& clusters, std::string_view body,
                  std::string* code) {
  auto refuse = [code](std::string c, std::string error) {
    *code = c;
    return Json{{"error", std::move(error)}, {"code", std::move(c)}};
  };
  code->clear();
  Json req = body.empty() ? Json::object() : json_text::parse<Json>(body);
  if (!req.is_object())
    return refuse("bad_request", "troupe.sys.queues: the body is not a JSON object");
  auto c = req.find("cluster");
  if (c == req.end() || (c->is_string() && c->get_ref<const std::string&>().empty()))
    return merge_queues(clusters);
  if (!c->is_string()) return refuse("bad_request", "troupe.sys.queues: cluster must be a string");
  const std::string& name = c->get_ref<const std::string&>();
  for (const auto& cs : clusters)
    if (cs.name == name) {
      Json reply = merge_queues({cs});
      reply["cluster"] = name;
      return reply;
    }
  return refuse("not_found", "no cluster " + name.substr(0, 128));
}

std::vector<std::string> clusters_with_node(const std::vector<ClusterState>& clusters,
                                            const std::string& node) {
  std::vector<std::string> found;
  for (const auto& c : clusters) {
    const Json& r = reply_of(c.nodes_reply);
    auto l = r.is_object() ? r.find("nodes") : r.end();
    if (!c.reachable || !r.is_object() || l == r.end() || !l->is_array()) continue;
    for (const auto& n : *l)
      if (n.is_object() && string_of(n, "node") == node) {
        found.push_back(c.name);
        break;
      }
  }
  return found;
}

Json find_reply(const Json& row) {
  Json r = Json::object();
  for (const char* k : {"job_id", "team", "state", "cluster", "cluster_job_id"})
    if (auto v = row.find(k); v != row.end()) r[k] = *v;
  return r;
}

Needs needs_of(const std::string& team, const pb::JobSpec& s) {
  Needs n;
  n.team = team;
  const auto& r = s.resources();
  if (!r.gpu_type().empty()) n.types.push_back(r.gpu_type());
  for (const auto& t : r.gpu_types())
    if (std::find(n.types.begin(), n.types.end(), t) == n.types.end()) n.types.push_back(t);
  int64_t workers = s.has_workers() ? s.workers() : 1;
  int64_t tasks = std::max<int64_t>(1, spec::array_tasks(s));
  n.gpus_per_worker = r.gpus();
  n.gpus = r.gpus() * workers * tasks;
  n.cluster = r.cluster();
  n.region = r.region();
  n.hard = r.locality() != spec::kLocalitySoft;
  return n;
}

Choice choose(const Config& cfg, const std::vector<ClusterState>& clusters, const Needs& needs,
              const std::map<std::string, int64_t>& used, const std::set<std::string>& exclude) {
  Choice c;
  // Why the last filter dropped a candidate: the reply names the one that
  // got furthest.
  int furthest = -1;
  auto drop = [&](int stage, std::string code, std::string why) {
    if (stage < furthest) return;
    furthest = stage;
    c.code = std::move(code);
    c.error = std::move(why);
  };
  // (locality missed, fits now, the rank of the first acceptable type it
  // fits in now, queued per GPU, the rank of its first acceptable type,
  // name): smallest first. So the job goes where it starts now, the type
  // it lists first on a tie (as a cluster's any-type job goes to its first
  // candidate pool where it fits now), else where it would wait least.
  std::vector<std::tuple<bool, bool, size_t, double, size_t, std::string>> ranked;
  auto rank_of = [&](const std::string& type) {
    return static_cast<size_t>(std::find(needs.types.begin(), needs.types.end(), type) -
                               needs.types.begin());
  };
  for (const auto& st : clusters) {
    if (exclude.count(st.name)) continue;
    if (!allowed(cfg, needs.team, st.name)) {
      drop(0, "not_allowed", "team " + needs.team + " may not use cluster " + st.name);
      continue;
    }
    bool in_place = (needs.cluster.empty() || needs.cluster == st.name) &&
                    (needs.region.empty() || needs.region == st.region);
    if (!in_place && needs.hard) {
      drop(1, "no_cluster_in_locality",
           "no cluster" + (needs.cluster.empty() ? std::string() : " " + needs.cluster) +
               (needs.region.empty() ? std::string() : " in region " + needs.region) +
               " the team may use");
      continue;
    }
    if (!st.reachable) {
      drop(2, "no_cluster_reachable", "cluster " + st.name + " is unreachable");
      continue;
    }
    // Its GPUs of an acceptable type: the job must fit the cluster at all.
    int64_t total = 0, free = 0, largest = 0;
    size_t first_rank = needs.types.size(), now_rank = needs.types.size();
    for (const auto& [type, cap] : st.types) {
      const size_t rank = needs.types.empty() ? 0 : rank_of(type);
      if (rank == needs.types.size() && !needs.types.empty()) continue;
      total += cap.total;
      free += cap.free;
      largest = std::max(largest, cap.total);
      if (cap.total >= needs.gpus_per_worker) first_rank = std::min(first_rank, rank);
      if (cap.free >= needs.gpus) now_rank = std::min(now_rank, rank);
    }
    if ((needs.gpus > 0 && largest < needs.gpus_per_worker) || (needs.gpus > 0 && total == 0)) {
      std::string types;
      for (const auto& t : needs.types) types += (types.empty() ? "" : "/") + t;
      drop(3, "no_cluster_of_type",
           "no cluster has " + (types.empty() ? std::string("GPUs") : types + " GPUs") +
               " for the job (" + std::to_string(needs.gpus_per_worker) + " per worker)");
      continue;
    }
    int64_t quota = quota_of(cfg, needs.team, st.name);
    auto u = used.find(st.name);
    int64_t in_use = u == used.end() ? 0 : u->second;
    if (quota >= 0 && in_use + needs.gpus > quota) {
      drop(4, "over_cluster_quota",
           "team " + needs.team + " has " + std::to_string(in_use) + "/" + std::to_string(quota) +
               " GPUs in cluster " + st.name + ", the job needs " + std::to_string(needs.gpus));
      continue;
    }
    double depth =
        static_cast<double>(st.queued) / static_cast<double>(std::max<int64_t>(1, total));
    const bool fits = free >= needs.gpus;
    ranked.emplace_back(!in_place, !fits, fits ? now_rank : 0, depth, first_rank, st.name);
  }
  std::sort(ranked.begin(), ranked.end());
  for (const auto& r : ranked) c.order.push_back(std::get<5>(r));
  if (!c.order.empty()) {
    c.code.clear();
    c.error.clear();
  } else if (c.code.empty()) {
    c.code = "no_cluster_reachable";
    c.error = "no other cluster to send the job to";
  }
  return c;
}

Choice choose_for_pipeline(const Config& cfg, const std::vector<ClusterState>& clusters,
                           const std::vector<Needs>& members,
                           const std::map<std::string, int64_t>& used,
                           const std::set<std::string>& exclude) {
  Choice out;
  if (members.empty()) {
    out.code = "no_cluster_for_pipeline";
    out.error = "a pipeline has at least one job";
    return out;
  }
  std::vector<Choice> choices;
  int64_t gpus = 0;
  for (const auto& m : members) {
    choices.push_back(choose(cfg, clusters, m, used, exclude));
    gpus += m.gpus;
  }
  for (size_t i = 0; i < choices.size(); ++i)
    if (choices[i].order.empty()) {
      out.code = choices[i].code;
      out.error = "jobs[" + std::to_string(i) + "]: " + choices[i].error;
      return out;
    }
  const std::string& team = members.front().team;
  for (const auto& c : choices.front().order) {
    bool all = true;
    for (const auto& other : choices)
      all = all && std::find(other.order.begin(), other.order.end(), c) != other.order.end();
    if (!all) continue;
    const int64_t quota = quota_of(cfg, team, c);
    auto u = used.find(c);
    const int64_t in_use = u == used.end() ? 0 : u->second;
    if (quota >= 0 && in_use + gpus > quota) {
      if (out.code.empty()) {
        out.code = "over_cluster_quota";
        out.error = "team " + team + " has " + std::to_string(in_use) + "/" +
                    std::to_string(quota) + " GPUs in cluster " + c + ", the pipeline needs " +
                    std::to_string(gpus);
      }
      continue;
    }
    out.order = {c};
    out.code.clear();
    out.error.clear();
    return out;
  }
  if (out.code.empty()) {
    out.code = "no_cluster_for_pipeline";
    out.error = "no cluster may take every job of the pipeline";
  }
  return out;
}

bool should_spill(const Config& cfg, int64_t sent_ms, int64_t now_ms) {
  return cfg.spill_after_s > 0 && now_ms - sent_ms >= cfg.spill_after_s * 1000;
}

std::string front_job_id(int64_t start_ms, uint64_t number) {
  std::string id = "j-x";
  ids::append_base36(id, static_cast<uint64_t>(std::max<int64_t>(0, start_ms)), 8);
  ids::append_base36(id, number, 5);
  return id;
}

std::string to_json(const JobPlace& p) {
  Json j{{"job_id", p.job_id},   {"team", p.team},
         {"cluster", p.cluster}, {"cluster_job_id", p.cluster_job_id},
         {"state", p.state},     {"spec", p.spec_json},
         {"sent_ms", p.sent_ms}, {"gpus", p.gpus},
         {"tried", p.tried},     {"withdrawn", p.withdrawn}};
  if (!p.last_state.empty()) j["last_state"] = p.last_state;
  if (p.ended_ms != 0) j["ended_ms"] = p.ended_ms;
  if (p.started_ms != 0) j["started_ms"] = p.started_ms;
  if (p.pinned) j["pinned"] = true;
  if (!p.pipeline_key.empty()) j["pipeline_key"] = p.pipeline_key;
  return dump_json(j);
}

namespace {

bool id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

std::string put_back_in(const std::string& s, const std::map<std::string, std::string>& ids) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    // An id starts where no id character stands before it.
    if (id_char(s[i]) && (i == 0 || !id_char(s[i - 1]))) {
      size_t end = i;
      while (end < s.size() && id_char(s[end])) ++end;
      auto it = ids.find(s.substr(i, end - i));
      out += it != ids.end() ? it->second : s.substr(i, end - i);
      i = end;
      continue;
    }
    out += s[i++];
  }
  return out;
}

}  // namespace

void put_back_ids(nlohmann::json& j, const std::map<std::string, std::string>& ids) {
  if (ids.empty()) return;
  if (j.is_string()) {
    j = put_back_in(j.get<std::string>(), ids);
  } else if (j.is_structured()) {
    for (auto& v : j) put_back_ids(v, ids);
  }
}

Upstreams resolve_upstreams(const std::string& team, pb::JobSpec& spec,
                            const std::function<const JobPlace*(const std::string&)>& place_of) {
  Upstreams u;
  std::string first;  // the upstream whose cluster the others must share
  for (auto& d : *spec.mutable_depends_on()) {
    if (d.job().empty()) continue;  // (by name: the cluster judges it)
    const JobPlace* p = place_of(d.job());
    if (p == nullptr || p->team != team) {
      u.code = "invalid_spec";
      u.error = "depends_on: no job " + d.job() + " in team " + team +
                " (a job of the same team, submitted before and not yet forgotten)";
      return u;
    }
    if (p->cluster.empty() || p->cluster_job_id.empty()) {
      u.code = "invalid_spec";
      u.error = "depends_on: job " + d.job() + " is in no cluster (withdrawn and taken nowhere)";
      return u;
    }
    if (u.cluster.empty()) {
      u.cluster = p->cluster;
      first = d.job();
    } else if (p->cluster != u.cluster) {
      u.code = "invalid_spec";
      u.error = "depends_on: jobs " + first + " (cluster " + u.cluster + ") and " + d.job() +
                " (cluster " + p->cluster +
                ") are in different clusters; through the front door a job waits only for jobs "
                "of one cluster";
      u.cluster.clear();
      return u;
    }
    if (std::find(u.upstreams.begin(), u.upstreams.end(), d.job()) == u.upstreams.end())
      u.upstreams.push_back(d.job());
    d.set_job(p->cluster_job_id);
  }
  return u;
}

bool past_retention(const JobPlace& p, int64_t now_ms, int64_t retention_ms) {
  if (retention_ms <= 0 || (p.state != "ended" && p.state != "withdrawn")) return false;
  return now_ms - (p.ended_ms != 0 ? p.ended_ms : p.sent_ms) >= retention_ms;
}

std::string string_of(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<JobPlace> place_from_json(std::string_view json) {
  Json j = json_text::parse<Json>(json);
  if (!j.is_object()) return std::nullopt;
  try {
    JobPlace p;
    p.job_id = j.at("job_id").get<std::string>();
    p.team = j.at("team").get<std::string>();
    p.cluster = j.value("cluster", std::string());
    p.cluster_job_id = j.value("cluster_job_id", std::string());
    p.state = j.value("state", std::string("sent"));
    p.spec_json = j.value("spec", std::string());
    // A number that is not a whole int64 (a damaged value): not a place.
    auto number = [&j](const char* key) -> int64_t {
      auto v = j.find(key);
      if (v == j.end()) return 0;
      if (auto n = whole(*v)) return *n;
      throw std::invalid_argument(std::string(key) + " is not a whole number");
    };
    p.sent_ms = number("sent_ms");
    p.gpus = number("gpus");
    p.tried = j.value("tried", std::vector<std::string>());
    p.withdrawn = j.value("withdrawn", std::vector<std::string>());
    p.last_state = j.value("last_state", std::string());
    p.ended_ms = number("ended_ms");
    p.started_ms = number("started_ms");
    p.pinned = j.value("pinned", false);
    p.pipeline_key = j.value("pipeline_key", std::string());
    if (p.job_id.empty() || p.team.empty()) return std::nullopt;
    return p;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

ClaimAnswer answer_claim(const JobPlace* p, const std::string& cluster, const std::string& id,
                         int64_t copy_age_ms, int64_t retention_ms) {
  ClaimAnswer a;
  if (p == nullptr) {
    if (retention_ms > 0 && copy_age_ms >= retention_ms) {
      a.withdrawn = true;
      a.reason = "job " + id + " of cluster " + cluster + " was taken " +
                 std::to_string(copy_age_ms / 1000) +
                 " s ago and the front door no longer knows it (retention " +
                 std::to_string(retention_ms / 1000) +
                 " s): a copy left behind, its job ended or sent elsewhere";
      return a;
    }
    a.reason = "the front door does not know job " + id + " of cluster " + cluster + " (yet)";
    return a;
  }
  const std::string remote = cluster + "/" + id;
  if (std::find(p->withdrawn.begin(), p->withdrawn.end(), remote) != p->withdrawn.end() ||
      p->state == "withdrawn") {
    a.withdrawn = true;
    a.reason = "job " + p->job_id + " was sent to " +
               (p->cluster.empty() ? std::string("no cluster") : "cluster " + p->cluster);
    return a;
  }
  if (p->cluster != cluster || p->cluster_job_id != id) {
    a.reason = "job " + p->job_id + " is not this copy";
    return a;
  }
  a.granted = true;  // sent (now started), or started already: the same answer again
  return a;
}

bool is_live(const JobPlace& p) {
  return p.state == "sent" || p.state == "started";
}

void TeamUse::recount(const JobPlace& p, Counted* counted, bool gone) {
  if (!counted->cluster.empty()) {
    if (auto t = use_.find(p.team); t != use_.end()) {
      if (auto c = t->second.find(counted->cluster);
          c != t->second.end() && (c->second -= counted->gpus) <= 0)
        t->second.erase(c);
      if (t->second.empty()) use_.erase(t);
    }
    *counted = Counted{};
  }
  if (gone || !is_live(p) || p.cluster.empty()) return;
  use_[p.team][p.cluster] += p.gpus;
  *counted = Counted{p.cluster, p.gpus};
}

std::map<std::string, int64_t> TeamUse::of(const std::string& team) const {
  auto t = use_.find(team);
  return t == use_.end() ? std::map<std::string, int64_t>{} : t->second;
}

int64_t event_ms(const Json& event) {
  auto t = event.is_object() ? event.find("ts_ms") : event.end();
  if (!event.is_object() || t == event.end()) return 0;
  if (t->is_number_integer()) return t->get<int64_t>();
  if (!t->is_string()) return 0;
  const std::string& s = t->get_ref<const std::string&>();
  int64_t ms = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), ms);
  return ec == std::errc() && end == s.data() + s.size() && ms > 0 ? ms : 0;
}

Json job_view(const JobPlace& p, const Json& last, bool cluster_reachable) {
  std::string state = string_of(last, "state");
  if (state.empty()) state = p.last_state;
  if (state.empty())
    state = p.state == "started"     ? std::string(names::kRunning)
            : p.state == "withdrawn" ? std::string(names::kCanceled)
                                     : std::string(names::kQueued);
  if (p.state == "withdrawn") state = names::kCanceled;
  if (!cluster_reachable && !names::is_terminal(state)) state = "unreachable";
  Json spec = json_text::parse<Json>(p.spec_json);
  auto from = [&](const char* key) {
    std::string v = string_of(last, key);
    return v.empty() ? string_of(spec, key) : v;
  };
  Json v{{"job_id", p.job_id},     {"team", p.team},       {"state", state},
         {"kind", from("kind")},   {"name", from("name")}, {"gpus", p.gpus},
         {"submit_ms", p.sent_ms}, {"cluster", p.cluster}, {"cluster_job_id", p.cluster_job_id}};
  if (auto a = last.is_object() ? last.find("attempt") : last.end();
      last.is_object() && a != last.end() && a->is_number_integer())
    v["attempt"] = a->get<int64_t>();
  if (auto r = string_of(last, "reason"); !r.empty()) v["reason"] = r;
  // As a cluster's row: when it started and ended, its exit code, and what
  // it asked for (its spec).
  if (p.started_ms > 0) v["start_ms"] = p.started_ms;
  if (names::is_terminal(state)) {
    if (int64_t end = event_ms(last); end > 0 || p.ended_ms > 0)
      v["end_ms"] = end > 0 ? end : p.ended_ms;
    if (auto x = last.is_object() ? last.find("exit_code") : last.end();
        last.is_object() && x != last.end() && x->is_number_integer())
      v["exit_code"] = x->get<int64_t>();
  }
  if (auto w = spec.is_object() ? spec.find("workers") : spec.end();
      spec.is_object() && w != spec.end() && w->is_number_integer())
    v["workers"] = w->get<int64_t>();
  if (auto pr = string_of(spec, "priority"); !pr.empty()) v["priority"] = pr;
  if (auto r = spec.is_object() ? spec.find("resources") : spec.end();
      spec.is_object() && r != spec.end() && r->is_object())
    if (auto t = string_of(*r, "gpu_type"); !t.empty()) v["gpu_type"] = t;
  // Where it runs (or ran): its last event's workers, as its cluster said.
  if (auto w = last.is_object() ? last.find("workers") : last.end();
      last.is_object() && w != last.end() && w->is_array() && !w->empty())
    v["placement"] = *w;
  if (auto l = spec.is_object() ? spec.find("labels") : spec.end();
      spec.is_object() && l != spec.end() && l->is_object())
    v["labels"] = *l;
  return v;
}

Json merge_history(const std::string& job_id, const std::vector<HistoryPart>& parts) {
  Json events = Json::array();
  Json unanswered = Json::array();
  bool truncated = false;
  for (const auto& part : parts) {
    const auto slash = part.copy.find('/');
    const std::string cluster = part.copy.substr(0, slash);
    const std::string id = slash == std::string::npos ? std::string() : part.copy.substr(slash + 1);
    if (!part.reply || !part.reply->is_object() || part.reply->contains("error")) {
      unanswered.push_back(cluster);
      continue;
    }
    truncated = truncated || part.reply->value("truncated", false) == true;
    auto e = part.reply->find("events");
    if (e == part.reply->end() || !e->is_array()) continue;
    for (Json ev : *e) {
      if (!ev.is_object()) continue;
      ev["job_id"] = job_id;
      ev["cluster"] = cluster;
      ev["cluster_job_id"] = id;
      events.push_back(std::move(ev));
    }
  }
  Json reply{{"job_id", job_id}, {"events", std::move(events)}};
  if (truncated) reply["truncated"] = true;
  if (!unanswered.empty()) {
    reply["partial"] = true;
    reply["unanswered"] = std::move(unanswered);
  }
  return reply;
}

Json jobs_page(const std::vector<Json>& rows, const Json& request) {
  auto bad = [](const std::string& why) { return Json{{"error", why}, {"code", "bad_request"}}; };
  if (!request.is_object()) return bad("the request is not a JSON object");
  int64_t limit = 1000;
  if (auto l = request.find("limit"); l != request.end()) {
    if (!l->is_number_integer() || l->get<int64_t>() < 1)
      return bad("limit must be a whole number from 1 to 5000");
    limit = std::min<int64_t>(l->get<int64_t>(), 5000);
  }
  for (const char* key : {"after", "state", "pipeline", "schedule", "label", "cluster"})
    if (request.contains(key) && !request[key].is_string())
      return bad(std::string(key) + " must be a string");
  const std::string after = string_of(request, "after");
  const std::string state = string_of(request, "state");
  const std::string cluster = string_of(request, "cluster");
  // A label key=value (a pipeline's: troupe.pipeline=ID; a schedule's runs:
  // troupe.schedule=NAME), as on a cluster.
  if (request.contains("pipeline") + request.contains("schedule") + request.contains("label") > 1)
    return bad("give one of pipeline, schedule or label");
  std::string label_key, label_value;
  if (request.contains("pipeline")) {
    label_key = names::kPipelineLabel;
    label_value = string_of(request, "pipeline");
  } else if (request.contains("schedule")) {
    label_key = names::kScheduleLabel;
    label_value = string_of(request, "schedule");
  } else if (request.contains("label")) {
    const std::string l = string_of(request, "label");
    const auto eq = l.find('=');
    if (eq == std::string::npos || eq == 0) return bad("label must be written key=value");
    label_key = l.substr(0, eq);
    label_value = l.substr(eq + 1);
  }
  auto passes = [&](const Json& row) {
    if (!state.empty() && string_of(row, "state") != state) return false;
    if (!cluster.empty() && string_of(row, "cluster") != cluster) return false;
    if (label_key.empty()) return true;
    auto l = row.find("labels");
    if (l == row.end() || !l->is_object()) return false;
    auto v = l->find(label_key);
    return v != l->end() && v->is_string() && v->get<std::string>() == label_value;
  };
  size_t i = 0;
  if (!after.empty()) {
    while (i < rows.size() && string_of(rows[i], "job_id") != after) ++i;
    if (i == rows.size()) return bad("after: " + after + " is not a job of this list");
    ++i;
  }
  Json page = Json::array();
  std::string last_id;
  for (; i < rows.size(); ++i) {
    if (!passes(rows[i])) continue;
    if (static_cast<int64_t>(page.size()) == limit) break;
    page.push_back(rows[i]);
    last_id = string_of(rows[i], "job_id");
  }
  Json reply{{"jobs", page}};
  if (i < rows.size() && !last_id.empty()) {
    // More rows remain; "next" only if one of them passes the filter.
    for (size_t k = i; k < rows.size(); ++k)
      if (passes(rows[k])) {
        reply["next"] = last_id;
        break;
      }
  }
  return reply;
}

}  // namespace troupe::dispatch

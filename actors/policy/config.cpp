#include "actors/policy/config.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "config.pb.h"
#include "messages/names.hpp"
#include "messages/spec.hpp"

namespace troupe::policy {

const TeamCfg* ClusterConfig::team(std::string_view name) const {
  for (const auto& t : teams)
    if (t.name == name) return &t;
  return nullptr;
}
const ClassCfg* ClusterConfig::cls(std::string_view name) const {
  for (const auto& c : classes)
    if (c.name == name) return &c;
  return nullptr;
}
const PoolCfg* ClusterConfig::pool(std::string_view name) const {
  for (const auto& p : pools)
    if (p.name == name) return &p;
  return nullptr;
}

TeamCfg ClusterConfig::team_or_default(std::string_view name) const {
  if (auto* t = team(name)) return *t;
  TeamCfg t;
  t.name = std::string(name);
  t.borrow = true;
  return t;
}

std::vector<std::string> ClusterConfig::class_names() const {
  std::vector<std::string> out;
  for (const auto& c : classes) out.push_back(c.name);
  return out;
}

std::string ClusterConfig::pool_of_node(std::string_view named_pool,
                                        std::string_view gpu_type) const {
  if (open) return kDefaultPool;
  if (!named_pool.empty()) return pool(named_pool) ? std::string(named_pool) : std::string();
  for (const auto& p : pools)
    if (p.gpu_type == gpu_type) return p.name;
  return {};
}

namespace {
// The largest uid run_as may name: uid_t is 32 bits and (uid_t)-1 means "no change".
constexpr int64_t kMaxUid = 4294967294;

// A team's own key, else the cluster default's, else `none`.
template <class T>
T first_of(const std::optional<T>* own, const std::optional<T>& fallback, T none) {
  if (own != nullptr && own->has_value()) return **own;
  return fallback.value_or(none);
}
}  // namespace

TeamLimits ClusterConfig::limits_of(std::string_view name) const {
  const TeamCfg* t = team(name);
  const LimitKeys* own = t ? &t->limits : nullptr;
  const LimitKeys& d = default_limits;
  TeamLimits l;
  l.max_queued_jobs =
      first_of<int64_t>(own ? &own->max_queued_jobs : nullptr, d.max_queued_jobs, -1);
  l.submit_rate = first_of<double>(own ? &own->submit_rate : nullptr, d.submit_rate, 0.0);
  l.submit_burst = first_of<double>(own ? &own->submit_burst : nullptr, d.submit_burst, 0.0);
  l.max_gpus_per_job =
      first_of<int>(own ? &own->max_gpus_per_job : nullptr, d.max_gpus_per_job, -1);
  // A rate without a burst: one second's worth, at least one submission.
  if (l.submit_rate > 0 && l.submit_burst < 1) l.submit_burst = std::max(1.0, l.submit_rate);
  l.request_rate =
      first_of<double>(own ? &own->request_rate : nullptr, d.request_rate, kDefaultRequestRate);
  l.request_burst = first_of<double>(own ? &own->request_burst : nullptr, d.request_burst, 0.0);
  if (l.request_rate > 0 && l.request_burst < 1)
    l.request_burst = std::max(1.0, 2 * l.request_rate);
  return l;
}

LogLimits ClusterConfig::logs_of(std::string_view name, const LogLimits& flags) const {
  const TeamCfg* t = team(name);
  const LogKeys* own = t ? &t->logs : nullptr;
  const LogKeys& d = default_logs;
  LogLimits l;
  l.max_age_s = first_of<int64_t>(own ? &own->max_age_s : nullptr, d.max_age_s, flags.max_age_s);
  l.max_bytes = first_of<int64_t>(own ? &own->max_bytes : nullptr, d.max_bytes, flags.max_bytes);
  return l;
}

namespace {
// `logs:` / `default_logs:` -> LogKeys; "" or what is wrong (`where` names it).
std::string load_logs(const pb::LogRetention& p, const std::string& where, LogKeys& out) {
  LogKeys k;
  if (p.has_max_age_s()) {
    if (p.max_age_s() < 0)
      return "config: " + where + ": max_age_s must be >= 0 seconds (0: forever), not " +
             std::to_string(p.max_age_s());
    k.max_age_s = p.max_age_s();
  }
  if (p.has_max_bytes()) {
    if (p.max_bytes() < 0)
      return "config: " + where +
             ": max_bytes must be >= 0 (0: the scheduler's automatic bound), not " +
             std::to_string(p.max_bytes());
    k.max_bytes = p.max_bytes();
  }
  out = k;
  return {};
}

// `limits:` / `default_limits:` -> LimitKeys; "" or what is wrong (`where` names it).
std::string load_limits(const pb::AdmissionLimits& p, const std::string& where, LimitKeys& out) {
  LimitKeys k;
  if (p.has_max_queued_jobs()) {
    if (p.max_queued_jobs() < -1)
      return "config: " + where + ": max_queued_jobs must be >= 0 or -1 (no limit), not " +
             std::to_string(p.max_queued_jobs());
    k.max_queued_jobs = p.max_queued_jobs();
  }
  if (p.has_submit_rate()) {
    if (!std::isfinite(p.submit_rate()) || p.submit_rate() < 0)
      return "config: " + where + ": submit_rate must be >= 0 per second (0: no limit)";
    k.submit_rate = p.submit_rate();
  }
  if (p.has_submit_burst()) {
    if (!std::isfinite(p.submit_burst()) || p.submit_burst() < 1)
      return "config: " + where + ": submit_burst must be >= 1";
    k.submit_burst = p.submit_burst();
  }
  if (p.has_request_rate()) {
    if (!std::isfinite(p.request_rate()) || p.request_rate() < 0)
      return "config: " + where + ": request_rate must be >= 0 per second (0: no limit)";
    k.request_rate = p.request_rate();
  }
  if (p.has_request_burst()) {
    if (!std::isfinite(p.request_burst()) || p.request_burst() < 1)
      return "config: " + where + ": request_burst must be >= 1";
    k.request_burst = p.request_burst();
  }
  if (p.has_max_gpus_per_job()) {
    if (p.max_gpus_per_job() < -1)
      return "config: " + where + ": max_gpus_per_job must be >= 0 or -1 (no limit), not " +
             std::to_string(p.max_gpus_per_job());
    k.max_gpus_per_job = p.max_gpus_per_job();
  }
  out = k;
  return {};
}
}  // namespace

std::string load_config_or_open(std::string_view text, ClusterConfig& out) {
  ClusterConfig cfg = open_config();
  if (!text.empty())
    if (auto err = load_config(text, cfg); !err.empty()) return err;
  out = std::move(cfg);
  return {};
}

ClusterConfig open_config() {
  ClusterConfig c;
  c.open = true;
  c.pools = {{kDefaultPool, "", false}};
  c.classes = {{"high", 100, false}, {"normal", 50, true}, {"low", 10, true}};
  return c;
}

std::string load_config(std::string_view text, ClusterConfig& out) {
  pb::ClusterConfig pbc;
  if (auto err = spec::parse_text(text, pbc); !err.empty()) return "config: " + err;
  ClusterConfig c;
  c.open = false;
  std::set<std::string> seen;
  for (const auto& p : pbc.pools()) {
    if (auto e = names::check_token(p.name()); !e.empty()) return "config: pool name " + e;
    if (!seen.insert(p.name()).second) return "config: pool '" + p.name() + "' defined twice";
    if (p.gpu_type().empty()) return "config: pool '" + p.name() + "' needs a gpu_type";
    c.pools.push_back({p.name(), p.gpu_type(), p.share_gpus_across_teams()});
  }
  if (c.pools.empty()) return "config: at least one pool is required";
  seen.clear();
  for (const auto& t : pbc.teams()) {
    if (!names::valid_team(t.name())) return "config: team name '" + t.name() + "' is not allowed";
    if (!seen.insert(t.name()).second) return "config: team '" + t.name() + "' defined twice";
    TeamCfg tc;
    tc.name = t.name();
    tc.weight = t.has_weight() ? t.weight() : 1.0;
    if (!(tc.weight > 0)) return "config: team '" + t.name() + "' needs a weight > 0";
    tc.borrow = t.has_borrow() ? t.borrow() : true;  // a team that never may borrow is explicit
    for (const auto& [pool, q] : t.quotas()) {
      if (!c.pool(pool))
        return "config: team '" + t.name() + "' has a quota for unknown pool '" + pool + "'";
      QuotaCfg qc{q.guaranteed(), q.has_limit() ? q.limit() : -1};
      if (qc.guaranteed < 0) return "config: team '" + t.name() + "': guaranteed must be >= 0";
      if (qc.limit >= 0 && qc.limit < qc.guaranteed)
        return "config: team '" + t.name() + "': limit " + std::to_string(qc.limit) +
               " is below guaranteed " + std::to_string(qc.guaranteed);
      tc.quotas[pool] = qc;
    }
    if (auto err = load_limits(t.limits(), "team '" + t.name() + "' limits", tc.limits);
        !err.empty())
      return err;
    if (auto err = load_logs(t.logs(), "team '" + t.name() + "' logs", tc.logs); !err.empty())
      return err;
    if (t.has_run_as()) {
      if (t.run_as() <= 0 || t.run_as() > kMaxUid)
        return "config: team '" + t.name() + "': run_as must be a uid from 1 to " +
               std::to_string(kMaxUid) + " (jobs never run as root), not " +
               std::to_string(t.run_as());
      tc.run_as = t.run_as();
    }
    std::set<std::string> preferred;
    for (const auto& pool : t.pool_preference()) {
      if (!c.pool(pool))
        return "config: team '" + t.name() + "': pool_preference names unknown pool '" + pool + "'";
      if (!preferred.insert(pool).second)
        return "config: team '" + t.name() + "': pool_preference names '" + pool + "' twice";
      tc.pool_preference.push_back(pool);
    }
    if (t.order() == "las")
      tc.las = true;
    else if (t.order() == "sjf")
      tc.sjf = true;
    else if (!t.order().empty() && t.order() != "fifo")
      return "config: team '" + t.name() + "': order must be fifo, las or sjf, not '" + t.order() +
             "'";
    c.teams.push_back(std::move(tc));
  }
  seen.clear();
  for (const auto& k : pbc.priority_classes()) {
    if (auto e = names::check_token(k.name()); !e.empty())
      return "config: priority class name " + e;
    if (!seen.insert(k.name()).second)
      return "config: priority class '" + k.name() + "' defined twice";
    c.classes.push_back({k.name(), k.value(), k.preemptible()});
  }
  if (c.classes.empty()) c.classes = open_config().classes;
  c.default_class = pbc.default_priority_class().empty() ? "normal" : pbc.default_priority_class();
  if (!c.cls(c.default_class)) c.default_class = c.classes.front().name;
  const auto& pr = pbc.preemption();
  if (pr.has_max_per_minute()) c.preemption.max_per_minute = pr.max_per_minute();
  if (pr.has_protect_after()) c.preemption.protect_after = pr.protect_after();
  if (pr.has_window_s()) c.preemption.window_s = pr.window_s();
  if (pr.has_protect_s()) c.preemption.protect_s = pr.protect_s();
  if (pr.has_infra_requeue_cap()) c.preemption.infra_requeue_cap = pr.infra_requeue_cap();
  if (pr.has_max_grace_s()) {
    if (pr.max_grace_s() < 0)
      return "config: preemption: max_grace_s must be >= 0 seconds (0: no cap), not " +
             std::to_string(pr.max_grace_s());
    c.preemption.max_grace_s = pr.max_grace_s();
  }
  if (const auto& d = pbc.job_defaults(); d.has_memory_mb()) {
    if (d.memory_mb() < 0)
      return "config: job_defaults: memory_mb must be >= 0 (0: the node agent's default), not " +
             std::to_string(d.memory_mb());
    c.job_defaults.memory_mb = d.memory_mb();
  }
  if (pbc.has_las()) {
    const auto& l = pbc.las();
    if (l.thresholds_gpu_s_size() > 0) {
      c.las.thresholds_gpu_s.clear();
      for (double t : l.thresholds_gpu_s()) {
        if (!std::isfinite(t) || t <= 0 ||
            (!c.las.thresholds_gpu_s.empty() && t <= c.las.thresholds_gpu_s.back()))
          return "config: las: thresholds_gpu_s must be positive and increasing";
        c.las.thresholds_gpu_s.push_back(t);
      }
      if (c.las.thresholds_gpu_s.size() > 16) return "config: las: at most 16 thresholds";
    }
    if (l.has_promote_after_s()) {
      if (l.promote_after_s() < 0)
        return "config: las: promote_after_s must be >= 0 seconds (0: never)";
      c.las.promote_after_s = l.promote_after_s();
    }
  }
  if (pbc.has_sjf() && pbc.sjf().has_promote_after_s()) {
    if (pbc.sjf().promote_after_s() < 0 || pbc.sjf().promote_after_s() > kMaxSjfPromoteS)
      return "config: sjf: promote_after_s must be 0 (never) to " +
             std::to_string(kMaxSjfPromoteS) + " seconds (10 years), not " +
             std::to_string(pbc.sjf().promote_after_s());
    c.sjf.promote_after_s = pbc.sjf().promote_after_s();
  }
  for (const auto& n : pbc.nodes()) {
    std::string_view name(n);
    if (!name.empty() && name.back() == '*') name.remove_suffix(1);
    if (name.empty() || !names::check_token(name).empty())
      return "nodes: '" + n + "' is not a node name (or a prefix ending in '*')";
    c.nodes.push_back(n);
  }
  if (auto err = load_limits(pbc.default_limits(), "default_limits", c.default_limits);
      !err.empty())
    return err;
  if (auto err = load_logs(pbc.default_logs(), "default_logs", c.default_logs); !err.empty())
    return err;
  out = std::move(c);
  return {};
}

bool ClusterConfig::node_allowed(std::string_view name) const {
  if (nodes.empty()) return true;
  for (const auto& n : nodes) {
    if (!n.empty() && n.back() == '*') {
      if (name.substr(0, n.size() - 1) == std::string_view(n).substr(0, n.size() - 1)) return true;
    } else if (name == n) {
      return true;
    }
  }
  return false;
}

bool TeamCfg::may_use(const std::string& pool) const {
  QuotaCfg q = quota(pool);
  return q.limit != 0 && (q.guaranteed > 0 || borrow);
}

std::vector<std::string> ClusterConfig::pools_for(std::string_view team_name,
                                                  const std::vector<std::string>& types) const {
  TeamCfg t = team_or_default(team_name);
  std::vector<std::string> order = t.pool_preference;  // then the config's order
  for (const auto& p : pools)
    if (std::find(order.begin(), order.end(), p.name) == order.end()) order.push_back(p.name);
  std::vector<std::string> out;
  auto take = [&](const std::string& name) {
    if (t.may_use(name) && std::find(out.begin(), out.end(), name) == out.end())
      out.push_back(name);
  };
  if (types.empty()) {
    for (const auto& name : order) take(name);
  } else {
    for (const auto& type : types)
      for (const auto& name : order)
        if (pool(name)->gpu_type == type) take(name);
  }
  return out;
}

Admission admit(const ClusterConfig& cfg, std::string_view team, std::string_view pool,
                std::string_view gpu_type, int gpus, std::string_view priority,
                const std::vector<std::string>& gpu_types) {
  Admission a;
  if (!cfg.open && !cfg.team(team)) {
    a.error = "unknown team '" + std::string(team) + "' (not in the cluster config)";
    return a;
  }
  std::string_view cls_name = priority.empty() ? std::string_view(cfg.default_class) : priority;
  const ClassCfg* k = cfg.cls(cls_name);
  if (!k) {
    a.error = "unknown priority class '" + std::string(cls_name) + "'";
    return a;
  }
  a.priority_value = k->value;
  a.preemptible = k->preemptible;
  if (cfg.open) {
    if (!pool.empty() && pool != kDefaultPool) {
      a.error = "unknown pool '" + std::string(pool) +
                "' (no cluster config: the only pool is 'default')";
      return a;
    }
    a.pool = kDefaultPool;
    return a;
  }
  if (!pool.empty()) {
    const PoolCfg* p = cfg.pool(pool);
    if (!p) {
      a.error = "unknown pool '" + std::string(pool) + "'";
      return a;
    }
    if (!gpu_type.empty() && gpus > 0 && p->gpu_type != gpu_type) {
      a.error = "pool '" + std::string(pool) + "' has GPU type " + p->gpu_type + ", not " +
                std::string(gpu_type);
      return a;
    }
    a.pool = p->name;
    return a;
  }
  // The acceptable types in order: gpu_type first, then gpu_types.
  std::vector<std::string> types;
  if (!gpu_type.empty()) types.emplace_back(gpu_type);
  for (const auto& t : gpu_types)
    if (std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
  if (!types.empty()) {
    for (const auto& t : types) {
      bool known = std::any_of(cfg.pools.begin(), cfg.pools.end(),
                               [&](const PoolCfg& p) { return p.gpu_type == t; });
      if (!known) {
        a.error = "no pool has GPU type '" + t + "'";
        return a;
      }
    }
    a.pools = cfg.pools_for(team, types);
    if (a.pools.empty()) {
      // No quota there and no borrowing: the pool of the first type, where
      // the round tells why it waits (as before any-type jobs).
      for (const auto& p : cfg.pools)
        if (p.gpu_type == types.front()) a.pools = {p.name};
    }
  } else if (cfg.pools.size() == 1 || gpus == 0) {
    a.pools = {cfg.pools.front().name};
  } else {
    a.pools = cfg.pools_for(team, {});
    if (a.pools.empty()) {
      a.error = "team '" + std::string(team) +
                "' may use no pool (no guarantee there, and it may not borrow): name "
                "resources.gpu_type or pool";
      return a;
    }
  }
  a.pool = a.pools.front();
  if (a.pools.size() == 1) a.pools.clear();
  return a;
}

int64_t events_bytes_for(int64_t account_limit, int64_t free_bytes) {
  constexpr int64_t kMiB = 1024 * 1024;
  int64_t bytes = account_limit > 0 ? account_limit / 2
                  : free_bytes > 0  ? free_bytes / 4
                                    : 1024 * kMiB;
  return std::clamp<int64_t>(bytes, 64 * kMiB, 1024 * kMiB);
}

}  // namespace troupe::policy

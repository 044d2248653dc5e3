// The cluster config as plain values, and the admission of a job spec against
// it (team known, pool, priority class). Pure; the proto mapping and file
// loading live in config.cpp. Unit tests: tests/unit/policy_config_test.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::policy {

inline constexpr const char* kDefaultPool = "default";

struct QuotaCfg {
  int guaranteed = 0;
  int limit = -1;  // -1: no hard limit
};

// Admission limits as written in the config (a team's `limits:` or the
// cluster's `default_limits:`): each key may be absent.
struct LimitKeys {
  std::optional<int64_t> max_queued_jobs;
  std::optional<double> submit_rate;
  std::optional<double> submit_burst;
  std::optional<int> max_gpus_per_job;
  std::optional<double> request_rate;
  std::optional<double> request_burst;
};

// A team's requests other than submissions (status, cancel, logs, jobs, why,
// history, usage, schedule) per second at one scheduler, when no config says:
// a person, a console or a service polling has room; a flood of one team's
// requests no longer starves the scheduler for every other team (as Slurm's
// slurmctld rate limits each user's RPCs).
inline constexpr double kDefaultRequestRate = 100;

// Workers' output kept for a team (its stream subjects::logs_stream(team)) as
// written in the config (a team's `logs:` or the cluster's `default_logs:`):
// each key may be absent.
struct LogKeys {
  std::optional<int64_t> max_age_s;  // 0: forever
  std::optional<int64_t> max_bytes;  // 0: the automatic bound (as --logs-max-bytes 0)
};

// A team's log retention once resolved (ClusterConfig::logs_of).
struct LogLimits {
  int64_t max_age_s = 7 * 24 * 3600;  // 0: forever
  int64_t max_bytes = 0;              // 0: automatic (sized by the scheduler)
};

// A team's admission limits once resolved (docs/admission.md). The defaults
// limit no submission: a cluster without `limits:` admits as before; a
// team's other requests are kept to kDefaultRequestRate.
struct TeamLimits {
  int64_t max_queued_jobs = -1;  // -1: no limit
  double submit_rate = 0;        // submissions per second; 0: no limit
  double submit_burst = 0;       // token bucket size (resolved: >= 1 when a rate is set)
  int max_gpus_per_job = -1;     // -1: no limit
  double request_rate = kDefaultRequestRate;  // requests per second; 0: no limit
  double request_burst = 0;  // token bucket size (resolved: two seconds' worth, >= 1)
};

struct TeamCfg {
  std::string name;
  double weight = 1.0;
  bool borrow = false;
  std::map<std::string, QuotaCfg> quotas;  // by pool
  LimitKeys limits;                        // its own `limits:` (absent keys: default_limits)
  LogKeys logs;                            // its own `logs:` (absent keys: default_logs)
  // `run_as:` the uid its jobs run as on every node (> 0: never root);
  // absent: the system user troupe-<team> (the node agent's choice).
  std::optional<int64_t> run_as;
  // `pool_preference:` where its any-type jobs go first (pool names, in order).
  std::vector<std::string> pool_preference;
  // `order: las`: least attained service first within a priority class
  // (policy/las.hpp); `order: sjf`: shortest declared work first
  // (policy/sjf.hpp); else fifo (submit order). At most one is set.
  bool las = false;
  bool sjf = false;
  // Whether it may be granted GPUs in `pool` at all: a guarantee there, or
  // borrowing, and a limit that is not 0.
  bool may_use(const std::string& pool) const;
  // A team with no quota for a pool has guarantee 0 and no limit there.
  QuotaCfg quota(const std::string& pool) const {
    auto it = quotas.find(pool);
    return it == quotas.end() ? QuotaCfg{} : it->second;
  }
};

struct PoolCfg {
  std::string name;
  std::string gpu_type;
  bool share_gpus_across_teams = false;  // shared GPUs: jobs of any team on one GPU
};

struct ClassCfg {
  std::string name;
  int value = 50;
  bool preemptible = true;
};

struct PreemptionCfg {
  int max_per_minute = 10;  // per pool
  int protect_after = 3;    // preempted this many times within window_s ...
  int window_s = 600;
  int protect_s = 600;  // ... then not again for protect_s
  int infra_requeue_cap = 10;
  int max_grace_s = 600;  // caps any job's grace_s (its time to checkpoint); 0: no cap
};

// `job_defaults:` what a job gets when its spec names none (per worker).
struct JobDefaultsCfg {
  int64_t memory_mb = 0;  // its cgroup's memory limit; 0: the node agent's default
};

// `las:` the bands of `order: las` teams (policy/las.hpp).
struct LasCfg {
  std::vector<double> thresholds_gpu_s = {3600, 36000};
  int64_t promote_after_s = 3600;  // 0: never
};

// `sjf:` the starvation guard of `order: sjf` teams (policy/sjf.hpp). The
// default, 3 days, is in the spirit of Slurm's PriorityMaxAge (7 days): an
// age that outranks any job size.
struct SjfCfg {
  int64_t promote_after_s = 259200;  // 0: never
};
inline constexpr int64_t kMaxSjfPromoteS = int64_t{3650} * 86400;

struct ClusterConfig {
  // No --config: any team is accepted (weight 1, may borrow), one pool
  // "default" holds every node, and the classes are high/normal/low.
  bool open = true;
  std::vector<PoolCfg> pools;
  std::vector<TeamCfg> teams;
  std::vector<ClassCfg> classes;
  std::string default_class = "normal";
  PreemptionCfg preemption;
  JobDefaultsCfg job_defaults;
  LasCfg las;
  SjfCfg sjf;
  // The node roster (`nodes:`): names, or prefixes ending in '*'; empty: any.
  std::vector<std::string> nodes;
  bool node_allowed(std::string_view name) const;
  LimitKeys default_limits;  // `default_limits:`, for teams without their own key
  LogKeys default_logs;      // `default_logs:`, for teams without their own key

  const TeamCfg* team(std::string_view name) const;
  const ClassCfg* cls(std::string_view name) const;
  const PoolCfg* pool(std::string_view name) const;
  // The team's settings; for an open config, the defaults for any name.
  TeamCfg team_or_default(std::string_view name) const;
  std::vector<std::string> class_names() const;
  // The team's admission limits: each key from its own `limits:`, else from
  // `default_limits:`, else no limit. Also for a team absent from the config.
  TeamLimits limits_of(std::string_view team) const;
  // The team's log retention: each key from its own `logs:`, else from
  // `default_logs:`, else from `flags` (--logs-max-age, --logs-max-bytes).
  // Also for a team absent from the config.
  LogLimits logs_of(std::string_view team, const LogLimits& flags) const;
  // The pool a node joins: its --pool when named, else the pool of its GPU
  // type; "" when none (nothing is placed there).
  std::string pool_of_node(std::string_view named_pool, std::string_view gpu_type) const;
  // The pools an any-type job of `team` may go to, in the order tried: the
  // team's pool_preference, then the config's order; only pools of `types`
  // (taken type by type, in order) when given; only pools the team may use.
  std::vector<std::string> pools_for(std::string_view team,
                                     const std::vector<std::string>& types) const;
};

ClusterConfig open_config();

// Parses (YAML or JSON) and checks a config; returns "" or what is wrong.
std::string load_config(std::string_view text, ClusterConfig& out);
// The same, with "" read as the open config (no --config): `out` is set only
// when the text is good.
std::string load_config_or_open(std::string_view text, ClusterConfig& out);

// What a job spec resolves to under a config.
struct Admission {
  std::string error;  // "" when admitted
  std::string pool;   // where it waits (an any-type job: its first candidate)
  // An any-type job's candidate pools in order (pool is the first); empty
  // when it has only `pool`.
  std::vector<std::string> pools;
  int priority_value = 50;
  bool preemptible = true;
};

// An empty pool and GPU type with several pools: any pool the team may use
// (ClusterConfig::pools_for); `gpu_types` lists acceptable types in order.
Admission admit(const ClusterConfig& cfg, std::string_view team, std::string_view pool,
                std::string_view gpu_type, int gpus, std::string_view priority,
                const std::vector<std::string>& gpu_types = {});

// The events stream's size bound when --events-max-bytes is not given:
// half of the account's JetStream storage limit when it has one, else a
// quarter of the free space where `troupe up` keeps the server's store
// ($TROUPE_HOME; `free_bytes` 0: unknown), between 64 MiB and 1 GiB
// (nats-server reserves a stream's max_bytes from its storage up front, so a
// larger default would starve the other streams and buckets). So 10,000 jobs
// a second cannot fill the disk, whatever --events-max-age says.
int64_t events_bytes_for(int64_t account_limit, int64_t free_bytes);

}  // namespace troupe::policy

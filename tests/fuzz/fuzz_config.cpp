// The cluster config (troupe-scheduler --config FILE, YAML or JSON):
// policy::load_config, then what the router and the pool arbiter ask of it.
// A config that loads has a pool, a class and a default class that exists
// (admit and pool_of_node rely on all three).
#include <cstddef>
#include <cstdint>
#include <string>

#include "actors/policy/config.hpp"
#include "tests/fuzz/walk.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace troupe;
  policy::ClusterConfig cfg = policy::open_config();
  std::string err = policy::load_config(fuzz::text(data, size), cfg);
  if (!err.empty()) {
    fuzz::check(cfg.open, "a refused config changed the config in force");
    return 0;
  }
  fuzz::check(!cfg.open && !cfg.pools.empty() && !cfg.classes.empty(), "a loaded config is empty");
  fuzz::check(cfg.cls(cfg.default_class) != nullptr, "the default class is not a class");
  size_t n = cfg.class_names().size();
  for (const auto& p : cfg.pools) {
    fuzz::check(cfg.pool_of_node(p.name, "") == p.name, "a node naming a pool is not in it");
    n += cfg.pool_of_node("", p.gpu_type).size();
  }
  for (const auto& t : cfg.teams) {
    fuzz::check(t.weight > 0, "a team with weight <= 0");
    for (const auto& p : cfg.pools) {
      auto q = t.quota(p.name);
      fuzz::check(q.guaranteed >= 0 && (q.limit < 0 || q.limit >= q.guaranteed), "a bad quota");
      auto a = policy::admit(cfg, t.name, p.name, p.gpu_type, 1, "");
      fuzz::check(a.error.empty() && a.pool == p.name, "a known team refused in its pool");
    }
    n += policy::admit(cfg, t.name, "", "", 0, "").error.size();
  }
  n += cfg.team_or_default("nobody").name.size();
  volatile size_t sink = n;
  (void)sink;
  return 0;
}

#include "actors/policy/dependencies.hpp"

#include <algorithm>
#include <map>

#include "messages/names.hpp"
#include "messages/spec.hpp"

namespace troupe::policy::deps {

namespace {

std::string_view on_or_default(std::string_view on) {
  return on.empty() ? spec::kOnSucceeded : on;
}

// "succeed", "fail", "finish": what the upstream must do, as a verb.
std::string verb(std::string_view on) {
  on = on_or_default(on);
  if (on == spec::kOnSucceeded) return "succeed";
  if (on == spec::kOnFailed) return "fail";
  return "finish";
}

}  // namespace

Status status_of(std::string_view on, std::string_view upstream_state) {
  if (upstream_state.empty()) return Status::never;  // unknown: it will never end
  if (!names::is_terminal(upstream_state)) return Status::waiting;
  on = on_or_default(on);
  if (on == spec::kOnFinished) return Status::met;
  if (on == spec::kOnSucceeded)
    return upstream_state == names::kSucceeded ? Status::met : Status::never;
  if (on == spec::kOnFailed) return upstream_state == names::kFailed ? Status::met : Status::never;
  return Status::never;  // an `on` no spec passes validation with
}

Verdict judge(const std::vector<Dependency>& deps, const StateOf& state_of) {
  Verdict v;
  bool all_met = true;
  for (const auto& d : deps) {
    auto state = state_of(d.job);
    auto s = status_of(d.on, state);
    if (s == Status::never) return Verdict{Status::never, d.job, state};
    if (s == Status::waiting) all_met = false;
  }
  v.status = all_met ? Status::met : Status::waiting;
  return v;
}

std::string failed_reason(const Verdict& v, std::string_view on) {
  std::string what = v.upstream_state.empty() ? "is not known (never submitted, or forgotten)"
                                              : "ended " + v.upstream_state;
  return std::string(kDependencyFailed) + ": job " + v.upstream + " " + what +
         "; this job needed it to " + verb(on);
}

std::string why_blocked(const std::vector<Dependency>& deps, const StateOf& state_of) {
  std::string text;
  for (const auto& d : deps) {
    auto state = state_of(d.job);
    if (status_of(d.on, state) == Status::met) continue;
    text += (text.empty() ? "waiting for " : ", ") + d.job + " (" +
            (state.empty() ? std::string("unknown") : state) + ") to " + verb(d.on);
  }
  return text.empty() ? "its dependencies are met; it is being queued" : text;
}

std::vector<std::string> find_cycle(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& graph) {
  std::map<std::string, const std::vector<std::string>*> edges;
  for (const auto& [name, after] : graph) edges[name] = &after;
  enum class Mark { none, open, done };
  std::map<std::string, Mark> mark;
  std::vector<std::string> path;
  std::vector<std::string> cycle;
  std::function<bool(const std::string&)> visit = [&](const std::string& n) {
    auto& m = mark[n];
    if (m == Mark::done) return false;
    if (m == Mark::open) {
      auto from = std::find(path.begin(), path.end(), n);
      cycle.assign(from, path.end());
      cycle.push_back(n);
      return true;
    }
    m = Mark::open;
    path.push_back(n);
    if (auto it = edges.find(n); it != edges.end())
      for (const auto& up : *it->second)
        if (visit(up)) return true;
    path.pop_back();
    mark[n] = Mark::done;
    return false;
  };
  for (const auto& [name, after] : graph)
    if (visit(name)) return cycle;
  return {};
}

}  // namespace troupe::policy::deps

// Owns the reading of a replay's (or simulation's) traces into a plan: parse,
// merge, order, --limit, the fit of each job on the fleet (too wide, GPU type
// missing), priority classes, --skip-idle and the default deadline.
#include "load/plan.hpp"

#include <algorithm>
#include <fstream>

namespace troupe::load {

std::vector<FleetGroup> groups_of(const ReplayOptions& opt) {
  if (!opt.fleet.empty()) return opt.fleet;
  return {FleetGroup{opt.gpu_type, opt.nodes, opt.gpus_per_node}};
}

Json fleet_json(const std::vector<FleetGroup>& groups) {
  Json out = Json::array();
  for (const auto& g : groups)
    out.push_back(
        Json{{"gpu_type", g.gpu_type}, {"nodes", g.nodes}, {"gpus_per_node", g.gpus_per_node}});
  return out;
}

int make_plan(const ReplayOptions& opt, Plan& plan, std::ostream& err) {
  std::vector<TraceJob> jobs;
  for (const auto& path : opt.traces) {
    std::ifstream f(path);
    if (!f) {
      err << "troupe-load: cannot read " << path << "\n";
      return 2;
    }
    TraceParse p = parse_trace(f, opt.format, team_from_path(path));
    if (!p.error.empty()) {
      err << "troupe-load: " << path << ": " << p.error << "\n";
      return 2;
    }
    plan.skipped_rows += p.skipped;
    plan.priority_unknown += p.priority_unknown;
    if (!p.priority_column.empty())
      plan.priority_columns.push_back(path + ": " + p.priority_column);
    plan.zero_gpu_rows += p.zero_gpu;
    plan.bad_rows += p.bad;
    if (p.bad > 0) {
      std::string lines;
      for (size_t l : p.bad_lines) {
        lines += (lines.empty() ? "" : ", ") + std::to_string(l);
        plan.bad_lines.push_back(path + ":" + std::to_string(l));
      }
      err << "troupe-load: " << path << ": " << p.bad << " row(s) could not be read and are "
          << "not replayed (line" << (p.bad_lines.size() > 1 ? "s " : " ") << lines
          << (p.bad > p.bad_lines.size() ? ", ..." : "") << ")\n";
    }
    for (auto& j : p.jobs) jobs.push_back(std::move(j));
  }
  order_trace(jobs, opt.limit);
  if (jobs.empty()) {
    err << "troupe-load: the trace has no job to replay\n";
    return 2;
  }
  plan.trace_jobs = jobs.size();
  // Jobs wider than the fleet, or of a GPU type it lacks, would wait forever:
  // left out and counted.
  const std::vector<FleetGroup> fleet = groups_of(opt);
  // Without --fleet, a job of no type asks for --gpu-type (the fleet's), as
  // before; with it, for none.
  const std::string untyped = opt.fleet_given ? std::string() : opt.gpu_type;
  double gpu_seconds = 0, max_duration = 0;
  for (auto& j : jobs) {
    FleetFit fit = fit_on_fleet(gpus_to_submit(j.gpus), j.gpu_type, untyped, fleet);
    if (fit.type_missing) {
      ++plan.type_missing;
      continue;
    }
    if (!fit.fits) {
      ++plan.too_wide;
      continue;
    }
    const JobShape s = fit.shape;
    j.submit_gpus = s.total_gpus();
    if (opt.ignore_priority) j.priority.clear();
    if (j.priority == "high")
      ++plan.by_priority_high;
    else if (j.priority == "normal")
      ++plan.by_priority_normal;
    else if (j.priority == "low")
      ++plan.by_priority_low;
    else
      ++plan.by_priority_none;
    if (!j.gpu_type.empty()) ++plan.typed;
    plan.fits.push_back(std::move(fit));
    if (gpus_rounded(j.gpus)) ++plan.gpus_rounded;
    if (j.censored) ++plan.censored;
    gpu_seconds += s.total_gpus() * j.duration_s;
    max_duration = std::max(max_duration, j.duration_s);
    plan.runnable.push_back(std::move(j));
  }
  if (plan.runnable.empty()) {
    err << "troupe-load: no job can run on the fleet: " << plan.too_wide
        << " need more nodes than their GPU type's group has, " << plan.type_missing
        << " ask for a GPU type the fleet lacks (see --fleet)\n";
    return 2;
  }
  const double total_gpus = static_cast<double>(fleet_gpus(fleet));
  if (opt.skip_idle)
    plan.idle = skip_idle(plan.runnable, opt.idle_gap_s, total_gpus, opt.gpus_per_node);
  plan.last_arrival = plan.runnable.back().arrival_s;
  // Default deadline: the work spread on the whole fleet, the longest job and
  // a margin, all in wall time.
  plan.deadline_s =
      opt.deadline_s > 0
          ? opt.deadline_s
          : (gpu_seconds / std::max(1.0, total_gpus) + max_duration) / opt.speedup * 2 + 60;
  return 0;
}

Json plan_trace_json(const ReplayOptions& opt, const Plan& plan) {
  return Json{
      {"trace_jobs", plan.trace_jobs},
      {"trace_rows_skipped", plan.skipped_rows},
      {"trace_rows_zero_gpu", plan.zero_gpu_rows},
      {"trace_rows_bad", plan.bad_rows},
      {"trace_bad_lines", plan.bad_lines},
      {"jobs_too_wide_skipped", plan.too_wide},
      {"jobs_gpu_type_missing_skipped", plan.type_missing},
      {"jobs_gpu_typed", plan.typed},
      {"priority_columns", plan.priority_columns},
      {"ignore_priority", opt.ignore_priority},
      {"trace_rows_priority_unknown", plan.priority_unknown},
      {"jobs_by_priority", Json{{"high", plan.by_priority_high},
                                {"normal", plan.by_priority_normal},
                                {"low", plan.by_priority_low},
                                {"default", plan.by_priority_none}}},
      {"jobs_gpus_rounded", plan.gpus_rounded},
      {"jobs_censored", plan.censored},
      {"skip_idle", Json{{"enabled", opt.skip_idle},
                         {"idle_gap_s", opt.skip_idle ? Json(opt.idle_gap_s) : Json(nullptr)},
                         {"gaps_shortened", plan.idle.gaps},
                         {"trace_s_removed", plan.idle.removed_s}}},
      {"trace_span_s", plan.last_arrival}};
}

Json plan_config_json(const ReplayOptions& opt, const Plan& plan) {
  const std::vector<FleetGroup> groups = groups_of(opt);
  Json c{{"traces", opt.traces},
         {"format", trace_format_name(opt.format)},
         {"nodes", fleet_nodes(groups)},
         {"gpus_per_node", opt.fleet_given ? Json(nullptr) : Json(opt.gpus_per_node)},
         {"fleet_groups", fleet_json(groups)},
         {"fleet_gpus", fleet_gpus(groups)},
         {"limit", opt.limit},
         {"runtime_limit_factor", opt.runtime_limit_factor}};
  c.update(plan_trace_json(opt, plan));
  return c;
}

}  // namespace troupe::load

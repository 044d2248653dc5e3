// The pure half of `troupe pipeline` (see pipeline_view.hpp).
#include "gateway/pipeline_view.hpp"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "gateway/format.hpp"
#include "gateway/replies.hpp"
#include "messages/json_text.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"

namespace troupe::gateway {

namespace {

using json = nlohmann::json;

// The cause (and the reason's first word) of a job canceled because of a
// job it depended on (actors/policy/dependencies.hpp kDependencyFailed).
constexpr std::string_view kDependencyFailedCause = "dependency_failed";

// "jobs[1] (train)": a member as a user finds it in the file.
std::string member_name(int i, const pb::JobSpec& s) {
  return "jobs[" + std::to_string(i) + "]" + (s.name().empty() ? "" : " (" + s.name() + ")");
}

}  // namespace

PipelineFile parse_pipeline_file(std::string_view text) {
  PipelineFile f;
  f.error = spec::parse_text(text, f.pipeline);
  if (!f.error.empty()) return f;
  if (f.pipeline.jobs_size() == 0) {
    f.error = "the pipeline has no jobs (jobs: a list of job specs)";
    return f;
  }
  f.ok = true;
  return f;
}

std::string pipeline_team(const std::string& flag, const pb::Pipeline& p, std::string* team) {
  std::string t = flag;
  if (t.empty()) t = p.team();
  if (t.empty() && p.jobs_size() > 0) t = p.jobs(0).team();
  if (t.empty())
    return "team is required (--team T, team: in the pipeline file, or team: of its first job)";
  for (int i = 0; i < p.jobs_size(); ++i) {
    const auto& s = p.jobs(i);
    if (!s.team().empty() && s.team() != t)
      return member_name(i, s) + " is of team " + s.team() + ", the pipeline of team " + t +
             " (a pipeline's jobs are of one team; leave team: out of its jobs)";
  }
  *team = t;
  return {};
}

std::string pipeline_request(const pb::Pipeline& p, const std::string& team) {
  pb::Pipeline copy = p;
  copy.set_team(team);
  return spec::view_json(copy);
}

PipelineReply parse_pipeline_reply(std::string_view body) {
  PipelineReply r;
  if (auto e = reply_error_of(body)) {
    r.code = e->code;
    r.error = *reply_error(body);
    return r;
  }
  auto j = json_text::parse<json>(body.begin(), body.end());
  if (j.is_discarded() || !j.is_object() || !j.contains("pipeline_id") ||
      !j["pipeline_id"].is_string() || j["pipeline_id"].get<std::string>().empty()) {
    r.error = "unreadable reply: " + std::string(body.substr(0, 200));
    return r;
  }
  r.pipeline_id = j["pipeline_id"].get<std::string>();
  if (j.contains("jobs") && j["jobs"].is_array())
    for (const auto& m : j["jobs"])
      if (m.is_object())
        r.jobs.push_back(
            PipelineMember{m.value("name", std::string()), m.value("job_id", std::string())});
  return r;
}

std::string pipeline_submit_text(const PipelineReply& r) {
  size_t width = 0;
  for (const auto& m : r.jobs) width = std::max(width, m.name.size());
  std::string out = r.pipeline_id + "\n";
  for (const auto& m : r.jobs) {
    std::string name = m.name.empty() ? "-" : m.name;
    out +=
        name + std::string(std::max(width, name.size()) - name.size() + 2, ' ') + m.job_id + "\n";
  }
  return out;
}

std::string jobs_filter_request(int64_t limit, const std::string& after, const JobsFilter& f) {
  std::string base = jobs_request(limit, after, f.state);
  if (f.pipeline.empty() && f.label.empty() && f.schedule.empty() && f.cluster.empty()) return base;
  auto j = json::parse(base);
  if (!f.cluster.empty()) j["cluster"] = f.cluster;
  if (!f.pipeline.empty()) j["pipeline"] = f.pipeline;
  if (!f.label.empty()) j["label"] = f.label;
  if (!f.schedule.empty()) j["schedule"] = f.schedule;
  return j.dump();
}

std::string check_label_filter(const std::string& label) {
  auto eq = label.find('=');
  if (eq == std::string::npos || eq == 0)
    return "--label expects KEY=VALUE (e.g. " + std::string(names::kPipelineLabel) +
           "=p-...), got '" + label + "'";
  return {};
}

std::vector<pb::JobView> pipeline_members(const pb::JobList& list, const std::string& pipeline_id) {
  std::vector<pb::JobView> out;
  const std::string key(names::kPipelineLabel);
  for (const auto& j : list.jobs()) {
    auto it = j.labels().find(key);
    if (it != j.labels().end() && it->second == pipeline_id) out.push_back(j);
  }
  return out;
}

std::string pipeline_state(const std::vector<std::string>& states) {
  if (states.empty()) return {};
  auto any = [&](std::initializer_list<std::string_view> which) {
    return std::any_of(states.begin(), states.end(), [&](const std::string& s) {
      return std::find(which.begin(), which.end(), s) != which.end();
    });
  };
  if (std::all_of(states.begin(), states.end(),
                  [](const std::string& s) { return s == names::kSucceeded; }))
    return std::string(names::kSucceeded);
  if (any({names::kFailed, names::kCanceled})) return std::string(names::kFailed);
  if (any({names::kStarting, names::kRunning})) return std::string(names::kRunning);
  return "pending";
}

bool dependency_failed(const pb::JobView& j) {
  return j.state() == names::kCanceled && j.reason().rfind(kDependencyFailedCause, 0) == 0;
}

namespace {

std::vector<std::string> states_of(const std::vector<pb::JobView>& jobs) {
  std::vector<std::string> s;
  for (const auto& j : jobs) s.push_back(j.state());
  return s;
}

// Counts by state, in the order of names::kStates (then any other state).
std::vector<std::pair<std::string, int>> counts_of(const std::vector<pb::JobView>& jobs) {
  std::map<std::string, int> n;
  for (const auto& j : jobs) ++n[j.state()];
  std::vector<std::pair<std::string, int>> out;
  for (auto s : names::kStates) {
    auto it = n.find(std::string(s));
    if (it == n.end()) continue;
    out.emplace_back(it->first, it->second);
    n.erase(it);
  }
  for (const auto& [s, c] : n) out.emplace_back(s, c);
  return out;
}

}  // namespace

std::string pipeline_status_text(const std::string& pipeline_id,
                                 const std::vector<pb::JobView>& jobs) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& j : jobs) {
    bool ended_badly = j.state() == names::kFailed || j.state() == names::kCanceled;
    rows.push_back({j.name().empty() ? "-" : j.name(), j.job_id(), j.state(),
                    ended_badly && !j.reason().empty() ? j.reason() : ""});
  }
  std::string out = render_table({"NAME", "JOB", "STATE", "REASON"}, rows);
  std::string counts;
  for (const auto& [s, n] : counts_of(jobs))
    counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + s;
  out += "\npipeline " + pipeline_id + ": " + pipeline_state(states_of(jobs)) + " (" +
         std::to_string(jobs.size()) + (jobs.size() == 1 ? " job: " : " jobs: ") + counts + ")\n";
  return out;
}

std::string pipeline_status_json(const std::string& pipeline_id,
                                 const std::vector<pb::JobView>& jobs) {
  // In this order, and each view's fields in the .proto's order.
  using ordered = nlohmann::ordered_json;
  ordered counts = ordered::object();
  for (const auto& [s, n] : counts_of(jobs)) counts[s] = n;
  ordered views = ordered::array();
  for (const auto& j : jobs) views.push_back(ordered::parse(spec::view_json(j)));
  ordered out = {{"pipeline_id", pipeline_id},
                 {"state", pipeline_state(states_of(jobs))},
                 {"counts", counts},
                 {"jobs", views}};
  return out.dump();
}

std::vector<pb::JobView> cancel_order(const std::vector<pb::JobView>& jobs) {
  std::vector<pb::JobView> out;
  for (auto it = jobs.rbegin(); it != jobs.rend(); ++it)
    if (!names::is_terminal(it->state())) out.push_back(*it);
  return out;
}

}  // namespace troupe::gateway

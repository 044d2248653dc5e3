#include "actors/views.hpp"

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>
#include <tuple>

#include "actors/job_record.hpp"
#include "actors/policy/sjf.hpp"
#include "messages/json_text.hpp"

namespace troupe::views {

using nlohmann::json;

std::string band_text(bool las, int band, double attained_gpu_s, int64_t promote_at_ms) {
  if (!las && band == 0) return {};
  std::string out = las ? "; order las: band " + std::to_string(band) + " (" +
                              std::to_string(static_cast<int64_t>(attained_gpu_s)) +
                              " GPU-seconds had so far)"
                        : "; order sjf: " + policy::sjf_band_text(band);
  if (band > 0 && promote_at_ms > 0)
    out += "; band 0 at " + rfc3339(promote_at_ms) + " if still waiting";
  return out;
}

Queues merge(std::vector<Queues> parts) {
  Queues all;
  for (auto& q : parts) {
    if (q.policy != Queues{}.policy) all.policy = q.policy;  // a baseline, when one plans
    std::move(q.pools.begin(), q.pools.end(), std::back_inserter(all.pools));
    std::move(q.teams.begin(), q.teams.end(), std::back_inserter(all.teams));
    all.reserved_idle_gpu_seconds += q.reserved_idle_gpu_seconds;
    all.grants += q.grants;
    all.preemptions += q.preemptions;
    all.reclaims += q.reclaims;
    all.gpu_seconds_lost += q.gpu_seconds_lost;
    for (const auto& [cause, n] : q.retries) all.retries[cause] += n;
  }
  std::sort(all.pools.begin(), all.pools.end(),
            [](const PoolRow& a, const PoolRow& b) { return a.pool < b.pool; });
  std::sort(all.teams.begin(), all.teams.end(), [](const TeamRow& a, const TeamRow& b) {
    return std::tie(a.team, a.pool) < std::tie(b.team, b.pool);
  });
  return all;
}

std::string queues_json(const Queues& q) {
  json pools = json::array();
  for (const auto& p : q.pools) {
    json pj{{"pool", p.pool}, {"gpus_total", p.gpus_total}, {"gpus_free", p.gpus_free}};
    if (p.has_hold)
      pj["hold"] = {{"job_id", p.hold.job_id},
                    {"nodes", p.hold.nodes},
                    {"start_ms", p.hold.start_ms},
                    {"idle_gpus", p.hold.idle_gpus}};
    pools.push_back(std::move(pj));
  }
  json rows = json::array();
  for (const auto& t : q.teams) {
    json shapes = json::array();
    for (const auto& s : t.pending_shapes)
      shapes.push_back({{"gpus", s.gpus}, {"gpu_type", s.gpu_type}, {"pool", s.pool}});
    json row = {{"team", t.team},
                {"pending_shapes", std::move(shapes)},
                {"pool", t.pool},
                {"weight", t.weight},
                {"borrow", t.borrow},
                {"guaranteed", t.guaranteed},
                {"limit", t.limit},
                {"in_use", t.in_use},
                {"in_use_shared", t.in_use_shared},
                {"borrowed", t.borrowed},
                {"pending_jobs", t.pending_jobs},
                {"pending_gpus", t.pending_gpus},
                {"pending_flexible", t.pending_flexible},
                {"dominant_share", t.dominant_share},
                {"weighted_share", t.weighted_share}};
    if (t.restore_count > 0)
      row["guarantee_restore"] = {
          {"buckets", t.restore_buckets}, {"sum_s", t.restore_sum_s}, {"count", t.restore_count}};
    rows.push_back(std::move(row));
  }
  return json{
      {"policy", q.policy},       {"pools", std::move(pools)},
      {"teams", std::move(rows)}, {"reserved_idle_gpu_seconds", q.reserved_idle_gpu_seconds},
      {"grants", q.grants},       {"preemptions", q.preemptions},
      {"reclaims", q.reclaims},   {"gpu_seconds_lost", q.gpu_seconds_lost},
      {"retries", q.retries}}
      .dump();
}

std::string stats_json(const Counters& n, int64_t bus_out,
                       const std::vector<std::string>& refusal_codes, const std::string& extra) {
  json j{{"submitted", n.submitted},
         {"accepted", n.accepted},
         {"rejected", n.rejected},
         {"malformed", n.malformed},
         {"duplicates", n.duplicates},
         {"intake_errors", n.intake_errors},
         {"handed_off", n.handed_off},
         {"bus_messages_in", n.bus_in},
         {"other_shard", n.other_shard},
         {"handed_over", n.handed_over},
         {"recorded_for_owner", n.recorded_for_owner},
         {"hand_timeouts", n.hand_timeouts},
         {"enqueued_retried", n.enqueued_retried},
         {"key_asks", n.key_asks},
         {"key_ask_timeouts", n.key_ask_timeouts},
         {"other_pool_agent_messages", n.other_pool_agent},
         {"bus_messages_out", bus_out},
         {"restarts", n.restarts}};
  for (const char* k : {"job", "queue", "node", "gang"})
    if (!j["restarts"].contains(k)) j["restarts"][k] = 0;
  j["refused"] = n.refused;
  for (const auto& code : refusal_codes)
    if (!j["refused"].contains(code)) j["refused"][code] = 0;
  j["refused_by_team"] = n.refused_by_team;
  j["requests_rate_limited"] = n.requests_rate_limited;
  j["requests_rate_limited_by_team"] = n.requests_rate_limited_by_team;
  j["distrusted"] = n.distrusted;
  for (const char* k :
       {"node_not_in_roster", "register_capacity_change", "agent_message_not_from_node"})
    if (!j["distrusted"].contains(k)) j["distrusted"][k] = 0;
  if (!extra.empty()) {
    auto more = json_text::parse<json>(extra);
    if (more.is_object()) j.update(more);
  }
  return j.dump();
}

std::string why_json(const std::string& job_id, std::string_view state, bool pending,
                     std::string_view code, const std::string& reason) {
  return json{{"job_id", job_id},
              {"state", state},
              {"pending", pending},
              {"code", code},
              {"reason", reason}}
      .dump();
}

std::string job_state_json(const std::string& job_id, std::string_view state,
                           const std::string& team) {
  json j{{"job_id", job_id}};
  if (!team.empty()) j["team"] = team;
  j["state"] = state;
  return j.dump();
}

std::string submit_json(const std::string& job_id, const std::string& error,
                        const std::string& code) {
  return error.empty() ? json{{"job_id", job_id}}.dump()
                       : json{{"error", error}, {"code", code}}.dump();
}

std::string pipeline_json(const std::string& pipeline_id,
                          const std::vector<std::pair<std::string, std::string>>& jobs) {
  json j{{"pipeline_id", pipeline_id}, {"jobs", json::array()}};
  for (const auto& [name, id] : jobs) j["jobs"].push_back({{"name", name}, {"job_id", id}});
  return j.dump();
}

}  // namespace troupe::views

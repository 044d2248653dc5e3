#include "actors/policy/schedule_book.hpp"

#include <algorithm>

#include "messages/event_json.hpp"
#include "messages/json_text.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"

namespace troupe::policy::schedule {

using json = nlohmann::json;

namespace {

Missed missed_of(const pb::ScheduleRecord& r) {
  return parse_missed(r.missed()).value_or(Missed::run_once);
}

// A new schedule from a create request: "" and `out`, or why not.
std::string make(const json& req, const std::string& team, int64_t now, pb::ScheduleRecord& out) {
  auto str = [&](const char* k) {
    return req.contains(k) && req[k].is_string() ? req[k].get<std::string>() : std::string();
  };
  out.set_team(team);
  out.set_name(str("name"));
  if (auto e = check_name(out.name()); !e.empty()) return "name: " + e;
  out.set_cron(str("cron"));
  std::string err;
  if (!parse(out.cron(), &err)) return "cron: " + err;
  out.set_tz(str("tz"));
  if (auto e = check_tz(out.tz()); !e.empty()) return "tz: " + e;
  out.set_concurrency(str("concurrency").empty() ? "allow" : str("concurrency"));
  if (!parse_concurrency(out.concurrency(), &err)) return "concurrency: " + err;
  out.set_missed(str("missed").empty() ? "run_once" : str("missed"));
  if (!parse_missed(out.missed(), &err)) return "missed: " + err;
  if (!req.contains("spec") || !req["spec"].is_object())
    return "spec is required: the job spec each run submits";
  auto parsed = spec::from_json(req["spec"].dump());
  if (!parsed.ok) return "spec: " + parsed.error;
  auto& s = parsed.spec;
  if (s.team().empty()) s.set_team(team);
  if (s.team() != team) return "spec: team '" + s.team().substr(0, 64) + "' is not " + team;
  if (!s.idempotency_key().empty())
    return "spec: a schedule's spec has no idempotency_key (each tick's run gets its own)";
  for (const auto& [k, v] : s.labels())
    if (k.rfind(names::kReservedLabelPrefix, 0) == 0)
      return "spec: label " + k.substr(0, 64) + ": keys starting 'troupe.' are the scheduler's";
  if (s.name().empty()) s.set_name(out.name());
  pb::JobSpec checked = s;
  spec::apply_defaults(checked);
  spec::Limits lim;
  lim.priority_classes = {checked.priority()};  // the class is checked at each run
  if (auto v = spec::check(checked, lim); !v.ok()) return "spec: " + v.error;
  *out.mutable_spec() = std::move(s);
  out.set_created_ms(now);
  out.set_anchor_ms(now);
  out.set_last_tick_ms(now);
  return {};
}

}  // namespace

json view_of(const pb::ScheduleRecord& r, int64_t now_ms) {
  json v{{"name", r.name()},
         {"team", r.team()},
         {"cron", r.cron()},
         {"tz", r.tz().empty() ? "UTC" : r.tz()},
         {"concurrency", r.concurrency()},
         {"missed", r.missed()},
         {"suspended", r.suspended()},
         {"runs", r.runs()},
         {"missed_ticks", r.missed_ticks()},
         {"skipped_ticks", r.skipped_ticks()},
         {"created_ms", r.created_ms()},
         {"spec", json_text::parse<json>(spec::view_json(r.spec()))}};
  if (!r.last_run().empty()) v["last_run"] = r.last_run();
  if (r.last_tick_ms() > r.anchor_ms()) v["last_tick_ms"] = r.last_tick_ms();
  if (!r.last_error().empty()) v["last_error"] = r.last_error();
  if (auto cron = parse(r.cron()); cron && !r.suspended()) {
    int64_t next = next_after(*cron, r.tz(), std::max(now_ms, r.last_tick_ms()), r.anchor_ms());
    if (next > 0) {
      v["next_ms"] = next;
      v["next"] = spec::rfc3339(next);
    }
  }
  return v;
}

void pass_over(pb::ScheduleRecord& r, const Due& d, bool forbidden) {
  r.set_last_tick_ms(std::max(r.last_tick_ms(), d.latest_tick_ms));
  r.set_missed_ticks(r.missed_ticks() + d.missed);
  if (forbidden) r.set_skipped_ticks(r.skipped_ticks() + 1);
}

void record_run(pb::ScheduleRecord& r, int64_t tick_ms, int64_t missed, const std::string& job,
                const std::string& error) {
  r.set_last_tick_ms(std::max(r.last_tick_ms(), tick_ms));
  r.set_missed_ticks(r.missed_ticks() + missed);
  if (!job.empty()) {
    r.set_last_run(job);
    r.set_runs(r.runs() + 1);
    r.clear_last_error();
  } else {
    r.set_last_error(error);
  }
}

pb::JobSpec run_spec(const pb::ScheduleRecord& r, int64_t tick_ms) {
  pb::JobSpec s = r.spec();
  s.set_idempotency_key(run_id(r.team(), r.name(), tick_ms));
  return s;
}

Due due_now(const pb::ScheduleRecord& r, int64_t now_ms) {
  auto cron = parse(r.cron());
  if (r.suspended() || !cron) return {};
  return due(*cron, r.tz(), r.anchor_ms(), r.last_tick_ms(), now_ms, missed_of(r));
}

bool Book::restore(pb::ScheduleRecord r) {
  if (!names::valid_team(r.team()) || !check_name(r.name()).empty() || !parse(r.cron()) ||
      !check_tz(r.tz()).empty())
    return false;
  Key k{r.team(), r.name()};
  records_[k] = std::move(r);
  return true;
}

Book::Answer Book::request(const std::string& team, const std::string& body, int64_t now) {
  Answer a;
  auto fail = [&](Fault f, std::string why) {
    a.fault = f;
    a.error = std::move(why);
    return a;
  };
  json req = json_text::parse<json>(body);
  if (!req.is_object())
    return fail(Fault::bad_request, "a schedule request is a JSON object with an op");
  std::string op = req.contains("op") && req["op"].is_string() ? req["op"].get<std::string>() : "";
  std::string name =
      req.contains("name") && req["name"].is_string() ? req["name"].get<std::string>() : "";
  if (op == "list") {
    json list = json::array();
    for (auto it = records_.lower_bound({team, ""});
         it != records_.end() && it->first.first == team; ++it)
      list.push_back(view_of(it->second, now));
    a.reply = json{{"schedules", list}};
    return a;
  }
  if (op == "create") {
    pb::ScheduleRecord r;
    if (auto e = make(req, team, now, r); !e.empty()) return fail(Fault::bad_request, e);
    if (records_.count({team, r.name()}) != 0)
      return fail(Fault::bad_request,
                  "schedule " + r.name() + " exists in team " + team + " (delete it first)");
    size_t mine = 0;
    for (auto it = records_.lower_bound({team, ""});
         it != records_.end() && it->first.first == team; ++it)
      ++mine;
    if (mine >= kMaxSchedulesPerTeam)
      return fail(Fault::bad_request, "team " + team + " has " + std::to_string(mine) +
                                          " schedules (at most " +
                                          std::to_string(kMaxSchedulesPerTeam) + ")");
    a.reply = view_of(r, now);
    a.put = r;
    records_.emplace(Key{team, r.name()}, std::move(r));
    return a;
  }
  if (op != "show" && op != "delete" && op != "suspend" && op != "resume")
    return fail(Fault::bad_request, "op must be create, list, show, delete, suspend or resume");
  auto it = records_.find({team, name});
  if (it == records_.end())
    return fail(Fault::not_found, "no schedule " + name.substr(0, 64) + " in team " + team);
  auto& r = it->second;
  if (op == "delete") {
    a.reply = json{{"deleted", name}, {"team", team}};
    a.purged = it->first;
    records_.erase(it);
    return a;
  }
  if (op == "suspend" || op == "resume") {
    bool suspend = op == "suspend";
    if (r.suspended() != suspend) {
      r.set_suspended(suspend);
      // Resumed: the ticks while suspended are passed over, not run.
      if (!suspend) {
        if (auto cron = parse(r.cron())) {
          auto d = due(*cron, r.tz(), r.anchor_ms(), r.last_tick_ms(), now, Missed::skip, 0);
          if (d.latest_tick_ms > r.last_tick_ms()) r.set_last_tick_ms(d.latest_tick_ms);
        }
      }
      a.put = r;
    }
  }
  a.reply = view_of(r, now);
  return a;
}

}  // namespace troupe::policy::schedule

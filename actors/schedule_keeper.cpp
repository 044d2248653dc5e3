// The schedule keeper: what it owns and handles is in schedule_keeper.hpp.
#include "actors/schedule_keeper.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "actors/errors.hpp"
#include "actors/job_record.hpp"
#include "actors/policy/schedule.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"
#include "records.pb.h"

namespace troupe {

using namespace troupe::atoms;
namespace sch = policy::schedule;
using json = nlohmann::json;

namespace {

constexpr auto kTickEvery = std::chrono::seconds(1);
constexpr size_t kMaxSchedulesPerTeam = 100;

using Key = std::pair<std::string, std::string>;  // (team, name)

struct KeeperState {
  Wiring w;
  OutboxPtr out;
  SnapshotStorePtr store;
  std::map<Key, pb::ScheduleRecord> schedules;
  // Ticks being fired (awaiting the router) or judged (awaiting a job's
  // state): none of these is looked at again until it is answered.
  std::set<Key> busy;
  std::map<Key, int64_t> missed;  // of the tick being fired: the ticks it stands for
  bool restored = false;          // nothing fires before the stored schedules are back
  bool ticking = false;
  static inline const char* name = "schedule_keeper";
};

using Self = ScheduleKeeperActor::stateful_pointer<KeeperState>;

void keep(Self self, const pb::ScheduleRecord& r) {
  if (self->state.store)
    self->state.store->put(schedule_key(r.team(), r.name()), r.SerializeAsString());
}

sch::Missed missed_of(const pb::ScheduleRecord& r) {
  return sch::parse_missed(r.missed()).value_or(sch::Missed::run_once);
}

// The schedule as users read it (troupe schedule show|list).
json view_of(const pb::ScheduleRecord& r, int64_t now) {
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
         {"spec", json::parse(spec::view_json(r.spec()), nullptr, false)}};
  if (!r.last_run().empty()) v["last_run"] = r.last_run();
  if (r.last_tick_ms() > r.anchor_ms()) v["last_tick_ms"] = r.last_tick_ms();
  if (!r.last_error().empty()) v["last_error"] = r.last_error();
  if (auto cron = sch::parse(r.cron()); cron && !r.suspended()) {
    int64_t next = sch::next_after(*cron, r.tz(), std::max(now, r.last_tick_ms()), r.anchor_ms());
    if (next > 0) {
      v["next_ms"] = next;
      v["next"] = rfc3339(next);
    }
  }
  return v;
}

void answer(Self self, const std::string& reply, const std::string& body) {
  if (!reply.empty()) self->state.out->publish(reply, body);
}

void refuse(Self self, const std::string& reply, std::string_view code, const std::string& why) {
  answer(self, reply, errors::error_json(code, why));
}

// A new schedule from a create request: "" and `out`, or why not.
std::string make(const json& req, const std::string& team, int64_t now, pb::ScheduleRecord& out) {
  auto str = [&](const char* k) {
    return req.contains(k) && req[k].is_string() ? req[k].get<std::string>() : std::string();
  };
  out.set_team(team);
  out.set_name(str("name"));
  if (auto e = sch::check_name(out.name()); !e.empty()) return "name: " + e;
  out.set_cron(str("cron"));
  std::string err;
  if (!sch::parse(out.cron(), &err)) return "cron: " + err;
  out.set_tz(str("tz"));
  if (auto e = sch::check_tz(out.tz()); !e.empty()) return "tz: " + e;
  out.set_concurrency(str("concurrency").empty() ? "allow" : str("concurrency"));
  if (!sch::parse_concurrency(out.concurrency(), &err)) return "concurrency: " + err;
  out.set_missed(str("missed").empty() ? "run_once" : str("missed"));
  if (!sch::parse_missed(out.missed(), &err)) return "missed: " + err;
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

void on_request(Self self, const std::string& team, const std::string& body,
                const std::string& reply) {
  auto& st = self->state;
  const int64_t now = st.w.now_ms();
  json req = json::parse(body, nullptr, false);
  if (!req.is_object()) {
    refuse(self, reply, errors::kBadRequest, "a schedule request is a JSON object with an op");
    return;
  }
  std::string op = req.contains("op") && req["op"].is_string() ? req["op"].get<std::string>() : "";
  std::string name =
      req.contains("name") && req["name"].is_string() ? req["name"].get<std::string>() : "";
  if (op == "list") {
    json list = json::array();
    for (auto it = st.schedules.lower_bound({team, ""});
         it != st.schedules.end() && it->first.first == team; ++it)
      list.push_back(view_of(it->second, now));
    answer(self, reply, json{{"schedules", list}}.dump());
    return;
  }
  if (op == "create") {
    pb::ScheduleRecord r;
    if (auto e = make(req, team, now, r); !e.empty()) {
      refuse(self, reply, errors::kBadRequest, e);
      return;
    }
    if (st.schedules.count({team, r.name()}) != 0) {
      refuse(self, reply, errors::kBadRequest,
             "schedule " + r.name() + " exists in team " + team + " (delete it first)");
      return;
    }
    size_t mine = 0;
    for (auto it = st.schedules.lower_bound({team, ""});
         it != st.schedules.end() && it->first.first == team; ++it)
      ++mine;
    if (mine >= kMaxSchedulesPerTeam) {
      refuse(self, reply, errors::kBadRequest,
             "team " + team + " has " + std::to_string(mine) + " schedules (at most " +
                 std::to_string(kMaxSchedulesPerTeam) + ")");
      return;
    }
    keep(self, r);
    answer(self, reply, view_of(r, now).dump());
    st.schedules.emplace(Key{team, r.name()}, std::move(r));
    return;
  }
  if (op != "show" && op != "delete" && op != "suspend" && op != "resume") {
    refuse(self, reply, errors::kBadRequest,
           "op must be create, list, show, delete, suspend or resume");
    return;
  }
  auto it = st.schedules.find({team, name});
  if (it == st.schedules.end()) {
    refuse(self, reply, errors::kNotFound,
           "no schedule " + name.substr(0, 64) + " in team " + team);
    return;
  }
  auto& r = it->second;
  if (op == "delete") {
    if (st.store) st.store->purge(schedule_key(team, name));
    answer(self, reply, json{{"deleted", name}, {"team", team}}.dump());
    st.schedules.erase(it);
    st.busy.erase({team, name});
    return;
  }
  if (op == "suspend" || op == "resume") {
    bool suspend = op == "suspend";
    if (r.suspended() != suspend) {
      r.set_suspended(suspend);
      // Resumed: the ticks while suspended are passed over, not run.
      if (!suspend) {
        if (auto cron = sch::parse(r.cron())) {
          auto d =
              sch::due(*cron, r.tz(), r.anchor_ms(), r.last_tick_ms(), now, sch::Missed::skip, 0);
          if (d.latest_tick_ms > r.last_tick_ms()) r.set_last_tick_ms(d.latest_tick_ms);
        }
      }
      keep(self, r);
    }
  }
  answer(self, reply, view_of(r, now).dump());
}

// Fires `r`'s tick: the run goes to the router as the team's job.
void fire(Self self, const pb::ScheduleRecord& r, int64_t tick) {
  auto& st = self->state;
  pb::JobSpec s = r.spec();
  s.set_idempotency_key(sch::run_id(r.team(), r.name(), tick));
  self->send(st.w.router, fire_atom_v, r.team(), r.name(), tick, spec::to_json(s));
}

// Passes over a tick (skip, or forbid while the last run is active).
void pass_over(Self self, pb::ScheduleRecord& r, const sch::Due& d, bool forbidden) {
  r.set_last_tick_ms(std::max(r.last_tick_ms(), d.latest_tick_ms));
  r.set_missed_ticks(r.missed_ticks() + d.missed);
  if (forbidden) r.set_skipped_ticks(r.skipped_ticks() + 1);
  keep(self, r);
}

void look_at(Self self, const Key& key, int64_t now) {
  auto& st = self->state;
  auto it = st.schedules.find(key);
  if (it == st.schedules.end() || it->second.suspended() || st.busy.count(key) != 0) return;
  auto& r = it->second;
  auto cron = sch::parse(r.cron());
  if (!cron) return;
  auto d = sch::due(*cron, r.tz(), r.anchor_ms(), r.last_tick_ms(), now, missed_of(r));
  if (d.fire_tick_ms < 0) {
    if (d.latest_tick_ms > r.last_tick_ms()) pass_over(self, r, d, false);
    return;
  }
  auto conc = sch::parse_concurrency(r.concurrency()).value_or(sch::Concurrency::allow);
  st.busy.insert(key);
  st.missed[key] = d.missed;
  if (r.last_run().empty() || conc == sch::Concurrency::allow) {
    fire(self, r, d.fire_tick_ms);
    return;
  }
  // forbid or replace: is the last run still going?
  self->request(st.w.jobs, caf::infinite, state_atom_v, r.last_run())
      .then([=](const std::string& state) {
        auto& st = self->state;
        auto it = st.schedules.find(key);
        if (it == st.schedules.end()) {
          st.busy.erase(key);
          return;
        }
        auto& r = it->second;
        bool active = !state.empty() && !names::is_terminal(state);
        switch (sch::on_tick(conc, active)) {
          case sch::Action::skip:
            st.busy.erase(key);
            pass_over(self, r, d, true);
            return;
          case sch::Action::replace_then_start:
            self->send(st.w.jobs, cancel_atom_v, r.last_run(), r.team(), std::string(), false);
            [[fallthrough]];
          case sch::Action::start:
            fire(self, r, d.fire_tick_ms);
            return;
        }
      });
}

void tick(Self self) {
  auto& st = self->state;
  const int64_t now = st.w.now_ms();
  std::vector<Key> keys;
  for (const auto& [k, r] : st.schedules) keys.push_back(k);
  for (const auto& k : keys) look_at(self, k, now);
  self->delayed_send(self, kTickEvery, tick_atom_v);
}

ScheduleKeeperActor::behavior_type keeper(Self self, OutboxPtr out, SnapshotStorePtr store) {
  self->state.out = std::move(out);
  self->state.store = std::move(store);
  return {
      [=](const Wiring& w) { self->state.w = w; },
      [=](schedule_atom, const std::string& team, const std::string& body,
          const std::string& reply) {
        if (!self->state.restored) {
          refuse(self, reply, errors::kUnavailable, "the scheduler is starting; retry");
          return;
        }
        on_request(self, team, body, reply);
      },
      [=](restore_atom, const std::vector<std::string>& records) {
        auto& st = self->state;
        for (const auto& bytes : records) {
          pb::ScheduleRecord r;
          if (!r.ParseFromString(bytes) || !names::valid_team(r.team()) ||
              !sch::check_name(r.name()).empty() || !sch::parse(r.cron()) ||
              !sch::check_tz(r.tz()).empty()) {
            spdlog::warn("schedule keeper: an unreadable stored schedule was skipped");
            continue;
          }
          st.schedules[{r.team(), r.name()}] = std::move(r);
        }
        st.restored = true;
        if (!st.ticking) {
          st.ticking = true;
          tick(self);
        }
      },
      [=](fired_atom, const std::string& team, const std::string& name, int64_t tick_ms,
          const std::string& job, const std::string& error) {
        auto& st = self->state;
        Key key{team, name};
        st.busy.erase(key);
        int64_t missed = st.missed[key];
        st.missed.erase(key);
        auto it = st.schedules.find(key);
        if (it == st.schedules.end()) return;
        auto& r = it->second;
        r.set_last_tick_ms(std::max(r.last_tick_ms(), tick_ms));
        r.set_missed_ticks(r.missed_ticks() + missed);
        if (!job.empty()) {
          r.set_last_run(job);
          r.set_runs(r.runs() + 1);
          r.clear_last_error();
        } else {
          r.set_last_error(error);
          spdlog::warn("schedule {}/{}: the run of tick {} was refused: {}", team, name, tick_ms,
                       error);
        }
        keep(self, r);
      },
      [=](tick_atom) { tick(self); },
  };
}

}  // namespace

ScheduleKeeperActor spawn_schedule_keeper(caf::actor_system& sys, OutboxPtr out,
                                          SnapshotStorePtr store) {
  return sys.spawn(keeper, std::move(out), std::move(store));
}

}  // namespace troupe

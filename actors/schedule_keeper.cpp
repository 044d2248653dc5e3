// The schedule keeper: what it owns and handles is in schedule_keeper.hpp.
#include "actors/schedule_keeper.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <set>
#include <utility>

#include "actors/errors.hpp"
#include "actors/job_record.hpp"
#include "actors/policy/schedule_book.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"
#include "records.pb.h"

namespace troupe {

using namespace troupe::atoms;
namespace sch = policy::schedule;

namespace {

constexpr auto kTickEvery = std::chrono::seconds(1);

using sch::Key;

struct KeeperState {
  Wiring w;
  OutboxPtr out;
  SnapshotStorePtr store;
  sch::Book book;  // every team's schedules (actors/policy/schedule_book.hpp)
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

void answer(Self self, const std::string& reply, const std::string& body) {
  if (!reply.empty()) self->state.out->publish(reply, body);
}

void refuse(Self self, const std::string& reply, std::string_view code, const std::string& why) {
  answer(self, reply, errors::error_json(code, why));
}

void on_request(Self self, const std::string& team, const std::string& body,
                const std::string& reply) {
  auto& st = self->state;
  auto a = st.book.request(team, body, st.w.now_ms());
  if (a.fault != sch::Book::Fault::none) {
    refuse(self, reply,
           a.fault == sch::Book::Fault::not_found ? errors::kNotFound : errors::kBadRequest,
           a.error);
    return;
  }
  if (a.put) keep(self, *a.put);
  if (a.purged) {
    if (st.store) st.store->purge(schedule_key(a.purged->first, a.purged->second));
    st.busy.erase(*a.purged);
  }
  answer(self, reply, a.reply.dump());
}

// Fires `r`'s tick: the run goes to the router as the team's job.
void fire(Self self, const pb::ScheduleRecord& r, int64_t tick) {
  self->send(self->state.w.router, fire_atom_v, r.team(), r.name(), tick,
             spec::to_json(sch::run_spec(r, tick)));
}

// Passes over a tick (skip, or forbid while the last run is active).
void pass_over(Self self, pb::ScheduleRecord& r, const sch::Due& d, bool forbidden) {
  sch::pass_over(r, d, forbidden);
  keep(self, r);
}

void look_at(Self self, const Key& key, int64_t now) {
  auto& st = self->state;
  auto* found = st.book.find(key);
  if (found == nullptr || found->suspended() || st.busy.count(key) != 0) return;
  auto& r = *found;
  auto d = sch::due_now(r, now);
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
        auto* found = st.book.find(key);
        if (found == nullptr) {
          st.busy.erase(key);
          return;
        }
        auto& r = *found;
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
  for (const auto& [k, r] : st.book.records()) keys.push_back(k);
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
          if (!r.ParseFromString(bytes) || !st.book.restore(std::move(r)))
            spdlog::warn("schedule keeper: an unreadable stored schedule was skipped");
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
        auto* r = st.book.find(key);
        if (r == nullptr) return;
        sch::record_run(*r, tick_ms, missed, job, error);
        if (job.empty())
          spdlog::warn("schedule {}/{}: the run of tick {} was refused: {}", team, name, tick_ms,
                       error);
        keep(self, *r);
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

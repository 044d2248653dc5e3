// The schedules of every team, as whoever fires them keeps them: a
// cluster's schedule keeper (actors/schedule_keeper.cpp) and the front door
// (gateway/dispatch/front.cpp). The requests on troupe.<team>.schedule
// (create, list, show, delete, suspend, resume: docs/api.md "Schedules"),
// the schedule as users read it, and what a tick's outcome writes in the
// record. Pure: records and times in, replies and changes out; storing a
// change and firing a run are the caller's. Unit tests:
// tests/unit/policy_schedule_book_test.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "actors/policy/schedule.hpp"
#include "records.pb.h"

namespace troupe::policy::schedule {

inline constexpr size_t kMaxSchedulesPerTeam = 100;

using Key = std::pair<std::string, std::string>;  // (team, name)

// The schedule as users read it (troupe schedule show|list); `now_ms` for its next tick.
nlohmann::json view_of(const pb::ScheduleRecord& r, int64_t now_ms);

// What a tick that was not run writes: passed over (skip, or a `forbid`
// tick while the last run is active: `forbidden`).
void pass_over(pb::ScheduleRecord& r, const Due& d, bool forbidden);
// What a tick's run writes: its job (`job`), or why it was refused (`error`).
void record_run(pb::ScheduleRecord& r, int64_t tick_ms, int64_t missed, const std::string& job,
                const std::string& error);
// The spec a tick's run submits: the schedule's, with the tick's idempotency key.
pb::JobSpec run_spec(const pb::ScheduleRecord& r, int64_t tick_ms);
// What tick `now_ms` brings `r` (none while suspended or unreadable).
Due due_now(const pb::ScheduleRecord& r, int64_t now_ms);

class Book {
 public:
  enum class Fault { none, bad_request, not_found };
  struct Answer {
    nlohmann::json reply;  // when fault is none
    Fault fault = Fault::none;
    std::string error;
    // What to store: a record written, or the key of one deleted.
    std::optional<pb::ScheduleRecord> put;
    std::optional<Key> purged;
  };
  // A request of `team` on troupe.<team>.schedule (its body as sent).
  Answer request(const std::string& team, const std::string& body, int64_t now_ms);
  // A stored record back (false: unreadable, skipped).
  bool restore(pb::ScheduleRecord r);
  std::map<Key, pb::ScheduleRecord>& records() { return records_; }
  pb::ScheduleRecord* find(const Key& k) {
    auto it = records_.find(k);
    return it == records_.end() ? nullptr : &it->second;
  }

 private:
  std::map<Key, pb::ScheduleRecord> records_;
};

}  // namespace troupe::policy::schedule

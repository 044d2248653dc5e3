#include "actors/intake_reader.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "actors/policy/admission.hpp"
#include "actors/policy/config.hpp"
#include "actors/policy/shards.hpp"
#include "actors/submission.hpp"
#include "bus/subjects.hpp"

namespace troupe {

using namespace troupe::atoms;

namespace {

constexpr size_t kMaxBuckets = 4096;  // full buckets are forgotten past this many
// A shard reports what it admitted this often (while it admits any).
constexpr auto kRateReport = std::chrono::milliseconds(250);

struct ReaderState {
  RouterActor router;
  ClockPtr clock;
  policy::ShardScope shards;
  policy::ClusterConfig cfg = policy::open_config();
  spec::Limits limits;
  std::unordered_map<std::string, policy::TokenBucket> buckets;  // by team (rate-limited ones)
  // A shard: what it admitted per team since its last report, published on
  // troupe.sys.shard.rate by `out` under `shard_id` (empty: not a shard).
  OutboxPtr out;
  std::string shard_id;
  std::unordered_map<std::string, double> taken;
  bool reporting = false;  // a report is due (a tick_atom is on its way)
  // A shard: every pool's room as last told (its own pools' by their
  // arbiters, the others' by their shards' reports), each job sent to a
  // pool counted there until the next report.
  policy::PoolRooms rooms;
  static inline const char* name = "intake_reader";
};

using Self = IntakeReaderActor::stateful_pointer<ReaderState>;

policy::TokenBucket& bucket_of(ReaderState& st, const std::string& team, int64_t now) {
  if (st.buckets.size() >= kMaxBuckets && st.buckets.count(team) == 0)
    policy::forget_full_buckets(st.buckets, now, [&](const std::string& t) {
      auto l = st.cfg.limits_of(t);
      return std::pair{l.submit_rate, l.submit_burst};
    });
  return st.buckets[team];
}

// The team's submit rate: one token, or the refusal in `c`. A shard counts
// the token for its next report to the others, unless every shard takes
// one for it anyway (`shared`: a pipeline, heard by every shard).
bool take_rate(Self self, submission::Checked& c, bool shared = false) {
  auto& st = self->state;
  auto lim = st.cfg.limits_of(c.team);
  if (lim.submit_rate <= 0) return true;
  int64_t now = st.clock->now_ms();  // a clock that goes back refills nothing (take_token)
  c.verdict = policy::check_rate(bucket_of(st, c.team, now), lim, c.team, now);
  if (c.verdict.ok() && !shared && st.out && !st.shard_id.empty()) {
    st.taken[c.team] += 1;
    if (!st.reporting) {
      st.reporting = true;
      self->delayed_send(self, kRateReport, tick_atom_v);
    }
  }
  return c.verdict.ok();
}

// A shard's report of what it admitted since the last one; none when it
// admitted nothing (no timer then either).
void report_rate(Self self) {
  auto& st = self->state;
  st.reporting = false;
  if (st.taken.empty()) return;
  submission::ShardReport r;
  r.shard = st.shard_id;
  r.taken.assign(st.taken.begin(), st.taken.end());
  st.taken.clear();
  st.out->publish(subjects::kShardRate, submission::shard_report(r));
}

// A room not told again within this long counts for nothing (its shard may
// be gone): reports come every second at least.
constexpr int64_t kRoomStaleMs = 2500;
constexpr int64_t kOwnRoom = std::numeric_limits<int64_t>::max() / 4;

// A shard: an any-type job whose candidates are not all its own goes to the
// shard of the pool with room for it now, else of the one where it would
// wait least (policy::pick_pool); handed over, to the pool it was handed for. That
// pool becomes its first candidate (it waits there, counted; a guest in the
// others' lines). Its idempotency key holds across the shards: the router
// asks the other candidates' owners before it records one (key_ask).
void pick_pool(ReaderState& st, const Inbound& in, submission::Checked& c) {
  auto& pools = c.adm.pools;
  if (!st.shards.sharded() || !c.verdict.ok() || pools.size() < 2) return;
  size_t i = 0;
  if (auto handed = subjects::shard_submit_pool(in.subject); !handed.empty()) {
    i = static_cast<size_t>(std::find(pools.begin(), pools.end(), handed) - pools.begin());
  } else {
    if (std::all_of(pools.begin(), pools.end(),
                    [&](const std::string& p) { return st.shards.owns_pool(p); }))
      return;
    const int workers = std::max(c.spec.workers(), 1), gpus = c.spec.resources().gpus();
    i = policy::pick_pool(st.rooms, pools, workers, gpus, st.clock->now_ms(), kRoomStaleMs);
    if (auto it = st.rooms.find(pools[i]); it != st.rooms.end() && i != 0)
      it->second.pending_gpus += workers * gpus;  // until its owner tells again
  }
  if (i == 0 || i >= pools.size()) return;
  policy::put_first(pools, i);
  c.adm.pool = pools.front();
}

// The stateless checks of submission::open and read (or read_handed), with
// the team's rate before the parse (a shard's: after it, for its own pools).
void check(Self self, Inbound& in, submission::Checked& c) {
  auto& st = self->state;
  const bool handed = !subjects::shard_submit_team(in.subject).empty();
  const bool pipeline = subjects::token(in.subject, 2) == subjects::kPipeline;
  // A shard counts a submission's rate once it knows the pool (below): the
  // owner counts it, whichever shard of the queue group read it. Every
  // shard hears a pipeline, so each counts it.
  const bool rate_after = st.shards.sharded() && !pipeline;
  if (subjects::is_shard_read(in.subject)) {  // another shard read it: checked again
    auto h = submission::read_handed(in.subject, in.data, st.cfg, st.limits);
    c.team = h.opened.team;
    c.flatbuffers = h.opened.flatbuffers;
    c.verdict = h.opened.verdict.ok() ? std::move(h.read.verdict) : h.opened.verdict;
    c.spec = std::move(h.read.spec);
    c.adm = std::move(h.read.adm);
    in.data = std::move(h.original);  // the client's bytes, as if it came from the client
  } else {
    auto opened = submission::open(in.subject, in.data);
    c.team = opened.team;
    c.flatbuffers = opened.flatbuffers;
    c.verdict = opened.verdict;
    if (!c.verdict.ok()) return;
    if (!rate_after && !take_rate(self, c, pipeline))
      return;        // a flood refused before it is parsed
    if (pipeline) {  // one submission for the rate
      c.pipeline = submission::read_pipeline(opened, in.data, st.cfg, st.limits);
      c.verdict = c.pipeline->verdict;
      return;
    }
    auto read = submission::read(opened, in.data, st.cfg, st.limits, in.stream_seq, in.msg_id);
    c.verdict = std::move(read.verdict);
    c.spec = std::move(read.spec);
    c.adm = std::move(read.adm);
  }
  pick_pool(st, in, c);
  if (rate_after && c.verdict.ok() && (handed || st.shards.owns_submission(st.cfg, c.adm.pool)))
    take_rate(self, c);
}

IntakeReaderActor::behavior_type reader_behavior(Self self, RouterActor router, ClockPtr clock,
                                                 policy::ShardScope shards, OutboxPtr out,
                                                 std::string shard_id) {
  self->state.router = std::move(router);
  self->state.shards = std::move(shards);
  self->state.out = std::move(out);
  self->state.shard_id = std::move(shard_id);
  self->state.clock = clock ? std::move(clock) : std::make_shared<SystemClock>();
  return {
      [=](Inbound& in) {
        auto c = std::make_shared<submission::Checked>();
        try {
          check(self, in, *c);
        } catch (const std::exception& e) {
          // Bad input must never take a reader down; the router answers it.
          c->verdict = {policy::Refusal::malformed, std::string("bad request: ") + e.what()};
        }
        self->send(self->state.router, ReadSubmission{in, std::move(c)});
      },
      [=](config_atom, const std::string& text) {
        auto& st = self->state;
        if (!policy::load_config_or_open(text, st.cfg).empty()) return;  // the router logs it
        st.limits.priority_classes = st.cfg.class_names();
      },
      [=](debit_atom, const std::string& team, double tokens) {
        auto& st = self->state;
        auto lim = st.cfg.limits_of(team);
        if (lim.submit_rate <= 0) return;
        int64_t now = st.clock->now_ms();
        policy::debit_tokens(bucket_of(st, team, now), tokens, lim.submit_rate, lim.submit_burst,
                             now);
      },
      [=](tick_atom) { report_rate(self); },
      [=](room_atom, const std::string& pool, int32_t free, int32_t largest, int32_t waiting,
          int32_t total) {
        auto& st = self->state;
        if (!st.cfg.pool(pool)) return;  // a report of no pool of ours: kept nowhere
        auto& r = st.rooms[pool];
        r.free_gpus = free;
        r.largest_free = largest;
        r.pending_gpus = waiting;
        r.total_gpus = total;
        // Its own pools' arbiters tell every change: never stale. Another
        // shard's pool is told again every second while its shard lives.
        r.at_ms = st.shards.owns_pool(pool) ? kOwnRoom : st.clock->now_ms();
      },
  };
}

}  // namespace

IntakeReaderActor spawn_intake_reader(caf::local_actor* parent, RouterActor router, ClockPtr clock,
                                      policy::ShardScope shards, OutboxPtr out,
                                      std::string shard_id) {
  return parent->spawn<caf::linked>(reader_behavior, std::move(router), std::move(clock),
                                    std::move(shards), std::move(out), std::move(shard_id));
}

}  // namespace troupe

#include "actors/intake_reader.hpp"

#include <spdlog/spdlog.h>

#include <unordered_map>

#include "actors/policy/admission.hpp"
#include "actors/policy/config.hpp"
#include "actors/submission.hpp"
#include "bus/subjects.hpp"

namespace troupe {

using namespace troupe::atoms;

namespace {

constexpr size_t kMaxBuckets = 4096;  // full buckets are forgotten past this many

struct ReaderState {
  RouterActor router;
  ClockPtr clock;
  policy::ShardScope shards;
  policy::ClusterConfig cfg = policy::open_config();
  spec::Limits limits;
  std::unordered_map<std::string, policy::TokenBucket> buckets;  // by team (rate-limited ones)
  static inline const char* name = "intake_reader";
};

using Self = IntakeReaderActor::stateful_pointer<ReaderState>;

policy::TokenBucket& bucket_of(ReaderState& st, const std::string& team, int64_t now) {
  if (st.buckets.size() >= kMaxBuckets && st.buckets.count(team) == 0) {
    for (auto it = st.buckets.begin(); it != st.buckets.end();) {
      auto l = st.cfg.limits_of(it->first);
      it = policy::bucket_full(it->second, l.submit_rate, l.submit_burst, now)
               ? st.buckets.erase(it)
               : std::next(it);
    }
  }
  return st.buckets[team];
}

// The team's submit rate: one token, or the refusal in `c`.
bool take_rate(ReaderState& st, submission::Checked& c) {
  auto lim = st.cfg.limits_of(c.team);
  if (lim.submit_rate <= 0) return true;
  int64_t now = st.clock->now_ms();  // a clock that goes back refills nothing (take_token)
  c.verdict = policy::check_rate(bucket_of(st, c.team, now), lim, c.team, now);
  return c.verdict.ok();
}

// The stateless checks of submission::open and read (or read_handed), with
// the team's rate before the parse (a shard's: after it, for its own pools).
void check(ReaderState& st, Inbound& in, submission::Checked& c) {
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
    if (!rate_after && !take_rate(st, c)) return;  // a flood refused before it is parsed
    if (pipeline) {                                // one submission for the rate
      c.pipeline = submission::read_pipeline(opened, in.data, st.cfg, st.limits);
      c.verdict = c.pipeline->verdict;
      return;
    }
    auto read = submission::read(opened, in.data, st.cfg, st.limits, in.stream_seq, in.msg_id);
    c.verdict = std::move(read.verdict);
    c.spec = std::move(read.spec);
    c.adm = std::move(read.adm);
  }
  if (rate_after && c.verdict.ok() && (handed || st.shards.owns_submission(st.cfg, c.adm.pool)))
    take_rate(st, c);
}

IntakeReaderActor::behavior_type reader_behavior(Self self, RouterActor router, ClockPtr clock,
                                                 policy::ShardScope shards) {
  self->state.router = std::move(router);
  self->state.shards = std::move(shards);
  self->state.clock = clock ? std::move(clock) : std::make_shared<SystemClock>();
  return {
      [=](Inbound& in) {
        auto c = std::make_shared<submission::Checked>();
        try {
          check(self->state, in, *c);
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
  };
}

}  // namespace

IntakeReaderActor spawn_intake_reader(caf::local_actor* parent, RouterActor router, ClockPtr clock,
                                      policy::ShardScope shards) {
  return parent->spawn<caf::linked>(reader_behavior, std::move(router), std::move(clock),
                                    std::move(shards));
}

}  // namespace troupe

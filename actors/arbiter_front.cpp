#include "actors/arbiter_front.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>

#include "actors/policy/config.hpp"
#include "actors/policy/why.hpp"
#include "actors/pool_arbiter.hpp"
#include "actors/views.hpp"
#include "job_spec.pb.h"
#include "messages/names.hpp"
#include "messages/spec.hpp"

namespace troupe {

using namespace troupe::atoms;

namespace {

// A pool arbiter that does not give its rows within this is left out of a view.
constexpr auto kViewTimeout = std::chrono::seconds(5);

struct FrontState {
  OutboxPtr out;
  policy::Baseline baseline = policy::Baseline::none;
  int64_t round_gap_us = 0;
  std::optional<Wiring> w;
  std::optional<std::string> config_text;
  policy::ClusterConfig cfg = policy::open_config();
  std::map<std::string, ArbiterActor> pools;
  struct Node {
    policy::NodeCapacity capacity;
    NodeActor actor;
  };
  std::unordered_map<std::string, Node> nodes;  // each node's last report, by name
  std::map<std::string, int64_t> retries;       // by "kind:cause"
  static inline const char* name = "arbiter_front";
};

using Self = ArbiterActor::stateful_pointer<FrontState>;

// The arbiter of `pool`, spawned on first use and given what the others
// were given (in this order: its wiring, the config, the nodes).
const ArbiterActor& arbiter_of(Self self, const std::string& pool) {
  auto& st = self->state;
  if (auto it = st.pools.find(pool); it != st.pools.end()) return it->second;
  auto a = spawn_pool_arbiter(self, st.out, st.baseline, st.round_gap_us, pool);
  if (st.w) self->send(a, *st.w);
  if (st.config_text) self->send(a, config_atom_v, *st.config_text);
  for (const auto& [name, n] : st.nodes) self->send(a, capacity_atom_v, n.capacity, n.actor);
  return st.pools.emplace(pool, std::move(a)).first->second;
}

template <class... Ts>
void to_all(Self self, const Ts&... xs) {
  for (const auto& [pool, a] : self->state.pools) self->send(a, xs...);
}

// The pool's arbiter, or every one when the sender did not know the pool.
template <class... Ts>
void to_pool(Self self, const std::string& pool, const Ts&... xs) {
  if (pool.empty())
    to_all(self, xs...);
  else
    self->send(arbiter_of(self, pool), xs...);
}

// Every pool's rows and figures, put together, then `done(view)`.
template <class Done>
void gather(Self self, Done done) {
  struct Pending {
    std::vector<views::Queues> parts;
    size_t left = 0;
    Done done;
  };
  auto& st = self->state;
  views::Queues own;
  own.policy = policy::policy_name(st.baseline);
  own.retries = st.retries;
  auto p = std::make_shared<Pending>(Pending{{std::move(own)}, st.pools.size(), std::move(done)});
  auto finish = [p] {
    if (--p->left == 0) p->done(views::merge(std::move(p->parts)));
  };
  if (p->left == 0) {
    p->left = 1;
    finish();
    return;
  }
  for (const auto& [pool, a] : st.pools)
    self->request(a, kViewTimeout, queues_atom_v)
        .then(
            [p, finish](views::Queues& q) {
              p->parts.push_back(std::move(q));
              finish();
            },
            [pool = pool, finish](const caf::error& e) {
              spdlog::warn("arbiter front: pool {} gave no rows: {}", pool, caf::to_string(e));
              finish();
            });
}

// `troupe why` of an any-type job: each candidate pool's reason, in order.
// The code is its first pool's (or `placing` when one pool is placing it);
// with no reason anywhere yet, its first pool answers as for any job.
void why_any_type(Self self, const std::string& job, const std::string& team,
                  const std::string& pool_list, const std::string& to) {
  struct Part {
    std::string pool, code, text;
  };
  struct Pending {
    std::vector<Part> parts;
    size_t left = 0;
  };
  auto p = std::make_shared<Pending>();
  for (size_t at = 0; at <= pool_list.size();) {
    size_t comma = std::min(pool_list.find(',', at), pool_list.size());
    p->parts.push_back({pool_list.substr(at, comma - at), {}, {}});
    at = comma + 1;
  }
  p->left = p->parts.size();
  auto finish = [self, p, job, team, to] {
    if (--p->left > 0) return;
    const auto& first = p->parts.front();
    std::string code = first.code, text;
    for (const auto& part : p->parts) {
      if (part.code == policy::why::kNegotiating) code = part.code;
      if (part.code.empty()) continue;
      text += (text.empty() ? "" : "; ") + ("pool " + part.pool + ": " + part.text);
    }
    if (first.code.empty() && code.empty()) {
      self->send(arbiter_of(self, first.pool), why_atom_v, job, team, first.pool, to);
      return;
    }
    if (code.empty()) code = policy::why::kNotYetConsidered;
    self->state.out->publish(to, views::why_json(job, names::kQueued, true, code,
                                                 "an any-type job, one reason per pool it may "
                                                 "use, in its order: " +
                                                     text));
  };
  for (size_t i = 0; i < p->parts.size(); ++i) {
    const auto& pool = p->parts[i].pool;
    self->request(arbiter_of(self, pool), kViewTimeout, why_atom_v, job, team, pool)
        .then(
            [p, i, finish](std::string& code, std::string& text) {
              p->parts[i].code = std::move(code);
              p->parts[i].text = std::move(text);
              finish();
            },
            [finish](const caf::error&) { finish(); });
  }
}

void apply_config(Self self, const std::string& text) {
  auto& st = self->state;
  if (auto err = policy::load_config_or_open(text, st.cfg); !err.empty()) {
    spdlog::error("arbiter front: config refused: {}", err);
    return;
  }
  st.config_text = text;
  to_all(self, config_atom_v, text);
  for (const auto& p : st.cfg.pools) arbiter_of(self, p.name);
}

ArbiterActor::behavior_type front_behavior(Self self, OutboxPtr out, policy::Baseline baseline,
                                           int64_t round_gap_us) {
  self->state.out = std::move(out);
  self->state.baseline = baseline;
  self->state.round_gap_us = round_gap_us;
  for (const auto& p : self->state.cfg.pools) arbiter_of(self, p.name);
  return {
      [=](const Wiring& w) {
        self->state.w = w;
        to_all(self, w);
      },
      [=](capacity_atom, policy::NodeCapacity& c, const NodeActor& node) {
        auto& st = self->state;
        auto pool = st.cfg.pool_of_node(c.pool, c.gpu_type);
        if (!pool.empty()) arbiter_of(self, pool);
        to_all(self, capacity_atom_v, c, node);
        st.nodes[c.name] = FrontState::Node{std::move(c), node};
      },
      [=](remove_atom, const std::string& node) {
        self->state.nodes.erase(node);
        to_all(self, remove_atom_v, node);
      },
      [=](demand_atom, const std::string& team, const std::string& pool,
          std::vector<JobTicket>& added, std::vector<std::string>& removed, bool full, int32_t jobs,
          int32_t gpus, int32_t flexible, const TeamQueueActor& queue) {
        self->send(arbiter_of(self, pool), demand_atom_v, team, pool, std::move(added),
                   std::move(removed), full, jobs, gpus, flexible, queue);
      },
      [=](placed_atom, const std::string& team, const Assignment& a) {
        to_pool(self, a.pool, placed_atom_v, team, a);
      },
      [=](unplaced_atom, const std::string& team, const std::string& pool, const std::string& job) {
        to_pool(self, pool, unplaced_atom_v, team, pool, job);
      },
      [=](done_atom, const std::string& job, const std::string& pool) {
        to_pool(self, pool, done_atom_v, job, pool);
      },
      [=](checkpoint_atom, const std::string& job, const std::string& pool, int64_t ts) {
        to_pool(self, pool, checkpoint_atom_v, job, pool, ts);
      },
      [=](retried_atom, const std::string& cause, const std::string& kind) {
        ++self->state.retries[kind + ":" + cause];
      },
      [=](config_atom, const std::string& text) { apply_config(self, text); },
      [=](why_atom, const std::string& job, const std::string& team,
          const std::string& pool) -> caf::result<std::string, std::string> {
        if (!self->state.pools.count(pool)) return {std::string(), std::string()};
        return self->delegate(self->state.pools.at(pool), why_atom_v, job, team, pool);
      },
      [=](why_atom, const std::string& job, const std::string& team, const std::string& pool,
          const std::string& to) {
        auto& st = self->state;
        if (pool.find(',') != std::string::npos) {
          why_any_type(self, job, team, pool, to);
          return;
        }
        if (st.pools.count(pool)) {
          self->send(st.pools.at(pool), why_atom_v, job, team, pool, to);
          return;
        }
        st.out->publish(to,
                        views::why_json(job, names::kQueued, true, policy::why::kNotYetConsidered,
                                        "not yet considered by the scheduler; ask again in a "
                                        "moment"));
      },
      [=](queues_atom, const std::string& to) {
        if (to.empty()) return;
        auto out = self->state.out;
        gather(self,
               [out, to](const views::Queues& q) { out->publish(to, views::queues_json(q)); });
      },
      [=](list_atom, const std::string& to) {
        auto& st = self->state;
        if (!st.pools.empty()) {
          self->send(st.pools.begin()->second, list_atom_v, to);
          return;
        }
        if (!to.empty()) st.out->publish(to, spec::to_json(pb::NodeList{}));
      },
      [=](round_atom) {},
      [=](tick_atom) {},
      [=](queues_atom) {
        auto rp = self->make_response_promise<views::Queues>();
        gather(self, [rp](views::Queues q) mutable { rp.deliver(std::move(q)); });
        return rp;
      },
  };
}

}  // namespace

ArbiterActor spawn_arbiter_front(caf::actor_system& sys, OutboxPtr out, policy::Baseline baseline,
                                 int64_t round_gap_us) {
  return sys.spawn(front_behavior, std::move(out), baseline, round_gap_us);
}

}  // namespace troupe

#include "actors/pool_arbiter.hpp"

#include <unordered_map>

#include "actors/policy/placement.hpp"
#include "job_spec.pb.h"
#include "messages/spec.hpp"

namespace troupe {

using namespace troupe::atoms;

namespace {

constexpr size_t kMaxCandidates = 4;

struct ArbiterState {
  OutboxPtr out;
  std::vector<policy::NodeCapacity> caps;
  std::vector<caf::actor> actors;
  std::unordered_map<std::string, size_t> index;
  std::vector<caf::actor> waiters;
  static inline const char* name = "pool_arbiter";
};

using Self = caf::stateful_actor<ArbiterState>;

void wake_all(Self* self) {
  for (auto& q : self->state.waiters) self->send(q, wake_atom_v);
  self->state.waiters.clear();
}

caf::behavior arbiter_behavior(Self* self, OutboxPtr out) {
  self->state.out = std::move(out);
  return {
      [=](capacity_atom, const policy::NodeCapacity& c, const caf::actor& node) {
        auto& st = self->state;
        auto it = st.index.find(c.name);
        bool more = true;
        if (it == st.index.end()) {
          st.index.emplace(c.name, st.caps.size());
          st.caps.push_back(c);
          st.actors.push_back(node);
        } else {
          auto& old = st.caps[it->second];
          more = c.gpus_free > old.gpus_free || c.cpus_free > old.cpus_free ||
                 c.memory_free_mb > old.memory_free_mb || (c.alive && !old.alive);
          old = c;
          st.actors[it->second] = node;
        }
        if (more && !st.waiters.empty()) wake_all(self);
      },
      [=](candidates_atom, const policy::PlacementRequest& req) -> CandidateList {
        auto& st = self->state;
        auto found = req.workers > 1 ? policy::gang_assignment(st.caps, req)
                                     : policy::single_candidates(st.caps, req, kMaxCandidates);
        CandidateList out;
        if (!found.ok()) {
          out.reason = found.reason;
          auto sender = caf::actor_cast<caf::actor>(self->current_sender());
          if (sender) st.waiters.push_back(sender);
          return out;
        }
        for (size_t i : found.nodes) {
          out.names.push_back(st.caps[i].name);
          out.hosts.push_back(st.caps[i].host);
          out.actors.push_back(st.actors[i]);
        }
        // Overlay: what we just handed out is not free for the next asker
        // until the node actor reports again.
        if (req.workers > 1) {
          for (size_t i : found.nodes) st.caps[i].gpus_free -= req.gpus;
        } else {
          st.caps[found.nodes.front()].gpus_free -= req.gpus;
        }
        return out;
      },
      [=](list_atom, const std::string& reply) {
        pb::NodeList list;
        for (const auto& c : self->state.caps) {
          auto* v = list.add_nodes();
          v->set_node(c.name);
          v->set_host(c.host);
          v->set_gpu_type(c.gpu_type);
          v->set_gpus_total(c.gpus_total);
          v->set_gpus_free(c.gpus_total - c.gpus_reserved - c.gpus_allocated);
          v->set_gpus_reserved(c.gpus_reserved);
          v->set_gpus_allocated(c.gpus_allocated);
          v->set_cpus(c.cpus_total);
          v->set_memory_mb(c.memory_total_mb);
          v->set_alive(c.alive);
          v->set_last_heartbeat_ms(c.last_heartbeat_ms);
          v->set_running(c.running);
        }
        self->state.out->publish(reply, spec::to_json(list));
      },
  };
}

}  // namespace

caf::actor spawn_pool_arbiter(caf::actor_system& sys, OutboxPtr out) {
  return sys.spawn(arbiter_behavior, std::move(out));
}

}  // namespace troupe

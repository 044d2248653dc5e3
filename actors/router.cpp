#include "actors/router.hpp"

#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "actors/policy/config.hpp"
#include "bus/subjects.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"
#include "messages/wire.hpp"
#include "records.pb.h"

namespace troupe {

using namespace troupe::atoms;
using nlohmann::json;

namespace {

struct Waiter {
  std::string reply;
  bool flatbuffers = false;
};

struct Pending {
  pb::JobRecord rec;
  std::string key;  // idempotency key ("" when none)
  std::vector<Waiter> waiters;
  uint64_t stream_seq = 0;  // from the enqueue consumer: acknowledged once recorded
};

struct Counters {
  int64_t submitted = 0;
  int64_t accepted = 0;
  int64_t rejected = 0;    // valid message, impossible or wrong spec
  int64_t malformed = 0;   // not JSON / not a verifiable FlatBuffer
  int64_t duplicates = 0;  // answered from an idempotency key
  int64_t intake_errors = 0;
  int64_t bus_in = 0;                       // every message the scheduler received
  std::map<std::string, int64_t> restarts;  // by actor kind, as the supervisors report
};

struct RouterState {
  Wiring w;
  OutboxPtr out;
  IntakePtr intake;
  SchedulerOptions opts;
  Counters n;
  policy::ClusterConfig cfg = policy::open_config();
  spec::Limits limits;
  std::string id_prefix;
  uint64_t next_seq = 0;
  std::unordered_map<std::string, std::string> keys;          // team/key -> job id
  std::unordered_map<std::string, Pending> pending;           // job id -> awaiting intake ack
  std::unordered_map<std::string, std::string> pending_keys;  // team/key -> job id
  static inline const char* name = "router";
};

using Self = caf::stateful_actor<RouterState>;

void log_bad(Self* self, const std::string& what, int64_t count) {
  // Logged, but not one line per message when someone floods us.
  if (count <= 10 || count % 1000 == 0)
    aout(self) << "dropped bad input (" << count << " so far): " << what << "\n";
}

void reply_submit(Self* self, const Waiter& w, const std::string& job_id,
                  const std::string& error) {
  if (w.reply.empty()) return;
  if (w.flatbuffers) {
    flatbuffers::FlatBufferBuilder fbb;
    auto body = wire::CreateSubmitReply(fbb, fbb.CreateString(job_id), fbb.CreateString(error));
    self->state.out->publish(w.reply, wire::seal(fbb, body));
  } else {
    self->state.out->publish(
        w.reply, error.empty() ? json{{"job_id", job_id}}.dump() : json{{"error", error}}.dump());
  }
}

void reject(Self* self, const Waiter& w, const std::string& error, bool malformed) {
  auto& n = self->state.n;
  int64_t c = malformed ? ++n.malformed : ++n.rejected;
  if (malformed) log_bad(self, error, c);
  reply_submit(self, w, {}, error);
}

std::string new_job_id(Self* self) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%06llx", static_cast<unsigned long long>(++self->state.next_seq));
  return self->state.id_prefix + buf;
}

// Acknowledges a consumer-delivered submission on every way out of submit()
// except the one that hands it to the intake stream (acknowledged there).
struct ConsumerAck {
  Intake& intake;
  uint64_t seq;
  bool handed_on = false;
  ~ConsumerAck() {
    if (seq != 0 && !handed_on) intake.ack(seq);
  }
};

void submit(Self* self, const Inbound& in) {
  auto& st = self->state;
  ++st.n.submitted;
  ConsumerAck consumer{*st.intake, in.stream_seq};
  std::string team(subjects::token(in.subject, subjects::kTeamToken));
  Waiter w{in.reply, false};
  if (!subjects::valid_team(team)) {
    reject(self, w, "team name '" + team + "' is not allowed", false);
    return;
  }
  spec::Parsed p;
  auto first =
      std::find_if(in.data.begin(), in.data.end(), [](uint8_t c) { return !std::isspace(c); });
  if (first != in.data.end() && *first == '{') {
    p = spec::from_json(
        std::string_view(reinterpret_cast<const char*>(in.data.data()), in.data.size()));
    if (!p.ok) {
      reject(self, w, p.error, true);
      return;
    }
  } else {
    auto* e = wire::open(in.data);
    if (e == nullptr || e->body_as_SubmitRequest() == nullptr) {
      reject(self, w,
             "malformed submission: neither a JSON job spec nor a FlatBuffers SubmitRequest", true);
      return;
    }
    w.flatbuffers = true;
    p = spec::from_wire(e->body_as_SubmitRequest()->spec());
    if (!p.ok) {
      reject(self, w, p.error, false);
      return;
    }
  }
  auto& s = p.spec;
  if (s.team().empty()) s.set_team(team);
  if (in.stream_seq != 0 && s.idempotency_key().empty())
    s.set_idempotency_key(in.msg_id.empty() ? "enqueue-" + std::to_string(in.stream_seq)
                                            : in.msg_id);
  if (s.team() != team) {
    reject(self, w, "spec team '" + s.team() + "' does not match subject team '" + team + "'",
           false);
    return;
  }
  if (s.priority().empty()) s.set_priority(st.cfg.default_class);
  spec::apply_defaults(s);
  if (auto err = spec::validate(s, st.limits); !err.empty()) {
    reject(self, w, err, false);
    return;
  }
  auto adm = policy::admit(st.cfg, s.team(), s.pool(), s.resources().gpu_type(),
                           s.resources().gpus(), s.priority());
  if (!adm.error.empty()) {
    reject(self, w, adm.error, false);
    return;
  }
  std::string key = s.idempotency_key().empty() ? std::string() : team + "/" + s.idempotency_key();
  if (!key.empty()) {
    if (auto it = st.keys.find(key); it != st.keys.end()) {
      ++st.n.duplicates;
      reply_submit(self, w, it->second, {});
      return;
    }
    if (auto it = st.pending_keys.find(key); it != st.pending_keys.end()) {
      ++st.n.duplicates;
      st.pending[it->second].waiters.push_back(w);
      return;
    }
  }
  auto job_id = new_job_id(self);
  Pending pend;
  pend.rec.set_job_id(job_id);
  *pend.rec.mutable_spec() = std::move(s);
  pend.rec.set_seq(st.next_seq);
  pend.rec.set_submit_ms(now_ms());
  pend.rec.set_pool(adm.pool);
  pend.rec.set_priority_value(adm.priority_value);
  pend.rec.set_preemptible(adm.preemptible);
  pend.rec.set_infra_cap(st.cfg.preemption.infra_requeue_cap);
  if (!st.opts.checkpoint_root.empty())
    pend.rec.set_checkpoint_dir(st.opts.checkpoint_root + "/" + job_id);
  pend.key = key;
  pend.waiters.push_back(w);
  pend.stream_seq = in.stream_seq;
  consumer.handed_on = true;
  std::string bytes;
  pend.rec.SerializeToString(&bytes);
  if (!key.empty()) st.pending_keys[key] = job_id;
  st.pending.emplace(job_id, std::move(pend));
  caf::actor me{self};
  st.intake->append(subjects::intake(team), std::vector<uint8_t>(bytes.begin(), bytes.end()),
                    key.empty() ? job_id : key,
                    [me, job_id](bool ok, bool, const std::string& error) {
                      caf::anon_send(me, intake_atom_v, job_id, ok, error);
                    });
}

void on_intake(Self* self, const std::string& job_id, bool ok, const std::string& error) {
  auto& st = self->state;
  auto it = st.pending.find(job_id);
  if (it == st.pending.end()) return;
  Pending pend = std::move(it->second);
  st.pending.erase(it);
  if (!pend.key.empty()) st.pending_keys.erase(pend.key);
  if (!ok) {
    ++st.n.intake_errors;  // a consumer-delivered one is redelivered (not acknowledged)
    for (const auto& w : pend.waiters)
      reply_submit(self, w, {}, "submission not recorded (intake stream: " + error + "); retry");
    return;
  }
  ++st.n.accepted;
  if (pend.stream_seq != 0) st.intake->ack(pend.stream_seq);
  if (!pend.key.empty()) st.keys[pend.key] = job_id;
  std::string bytes;
  pend.rec.SerializeToString(&bytes);
  self->send(st.w.jobs, spawn_atom_v, job_id, std::move(bytes));
  for (const auto& w : pend.waiters) reply_submit(self, w, job_id, {});
}

// Parses a small JSON request; replies with an error and returns false when bad.
bool parse_request(Self* self, const Inbound& in, json& out) {
  out = json::parse(in.data.begin(), in.data.end(), nullptr, false);
  if (in.data.empty()) out = json::object();
  if (out.is_discarded() || !out.is_object()) {
    log_bad(self, "bad JSON request on " + in.subject, ++self->state.n.malformed);
    if (!in.reply.empty())
      self->state.out->publish(in.reply, json{{"error", "request is not a JSON object"}}.dump());
    return false;
  }
  return true;
}

bool job_id_of(Self* self, const Inbound& in, const json& req, std::string& id) {
  if (req.contains("job_id") && req["job_id"].is_string()) {
    id = req["job_id"].get<std::string>();
    if (subjects::check_token(id).empty()) return true;
  }
  ++self->state.n.rejected;
  if (!in.reply.empty())
    self->state.out->publish(in.reply, json{{"error", "job_id is required"}}.dump());
  return false;
}

void on_inbound(Self* self, const Inbound& in) {
  auto& st = self->state;
  auto team_tok = subjects::token(in.subject, subjects::kTeamToken);
  auto verb = subjects::token(in.subject, 2);
  if (team_tok == names::kSysToken) {
    if (in.stream_seq != 0) st.intake->ack(in.stream_seq);  // troupe.sys.enqueue: refused
    if (verb == "agent") {
      std::string node(subjects::token(in.subject, subjects::kAgentNodeToken));
      auto* e = wire::open(in.data);
      if (e == nullptr || !subjects::check_token(node).empty()) {
        log_bad(self, "malformed agent message on " + in.subject, ++st.n.malformed);
        return;
      }
      self->send(st.w.nodes, route_atom_v, node, caf::make_message(Envelope{in.data}));
      return;
    }
    if (in.subject == subjects::kSysCordon || in.subject == subjects::kSysUncordon ||
        in.subject == subjects::kSysDrain) {
      json req;
      if (!parse_request(self, in, req)) return;
      std::string node = req.value("node", std::string());
      if (!subjects::check_token(node).empty()) {
        ++st.n.rejected;
        if (!in.reply.empty())
          st.out->publish(in.reply, json{{"error", "node is required"}}.dump());
        return;
      }
      bool on = in.subject != subjects::kSysUncordon;
      self->send(st.w.nodes, cordon_atom_v, node, on, in.subject == subjects::kSysDrain, in.reply);
      return;
    }
    if (in.subject == subjects::kSysDebugCrash) {
      json req;
      if (!parse_request(self, in, req)) return;
      std::string kind = req.value("kind", std::string());
      std::string id = req.value("id", std::string());
      caf::actor sup = kind == "job"     ? st.w.jobs
                       : kind == "queue" ? st.w.queues
                       : kind == "node"  ? st.w.nodes
                                         : caf::actor{};
      std::string error = !st.opts.debug_crash
                              ? "debug requests are off (troupe-scheduler --debug-crash)"
                          : !sup                               ? "kind must be job, queue or node"
                          : !subjects::check_token(id).empty() ? "id is required"
                                                               : "";
      if (!error.empty()) {
        ++st.n.rejected;
        if (!in.reply.empty()) st.out->publish(in.reply, json{{"error", error}}.dump());
        return;
      }
      self->send(sup, crash_atom_v, id);
      if (!in.reply.empty()) st.out->publish(in.reply, json{{"crashed", kind + " " + id}}.dump());
      return;
    }
    if (in.subject == subjects::kSysQueues) {
      self->send(st.w.arbiter, queues_atom_v, in.reply);
      return;
    }
    if (in.subject == subjects::kSysNodes) {
      self->send(st.w.arbiter, list_atom_v, in.reply);
      return;
    }
    if (in.subject == subjects::kSysStats) {
      json j{{"submitted", st.n.submitted},    {"accepted", st.n.accepted},
             {"rejected", st.n.rejected},      {"malformed", st.n.malformed},
             {"duplicates", st.n.duplicates},  {"intake_errors", st.n.intake_errors},
             {"bus_messages_in", st.n.bus_in}, {"bus_messages_out", st.out->published()},
             {"restarts", st.n.restarts}};
      for (const char* k : {"job", "queue", "node", "gang"})
        if (!j["restarts"].contains(k)) j["restarts"][k] = 0;
      if (st.opts.extra_stats) {
        auto more = json::parse(st.opts.extra_stats(), nullptr, false);
        if (more.is_object()) j.update(more);
      }
      st.out->publish(in.reply, j.dump());
      return;
    }
    if (verb == subjects::kJobs) {
      self->send(st.w.jobs, list_atom_v, std::string(names::kSysToken), in.reply);
      return;
    }
    if (verb == subjects::kSubmit) {
      reject(self, Waiter{in.reply, false}, "team name 'sys' is reserved", false);
      return;
    }
    return;
  }
  std::string team(team_tok);
  if (verb == subjects::kSubmit || verb == subjects::kEnqueue) {
    submit(self, in);
    return;
  }
  json req;
  if (!parse_request(self, in, req)) return;
  if (verb == subjects::kJobs) {
    self->send(st.w.jobs, list_atom_v, team, in.reply);
    return;
  }
  std::string id;
  if (!job_id_of(self, in, req, id)) return;
  if (verb == subjects::kStatus) {
    self->send(st.w.jobs, status_atom_v, id, team, in.reply);
  } else if (verb == subjects::kWhy) {
    self->send(st.w.jobs, why_atom_v, id, team, in.reply);
  } else if (verb == subjects::kCancel) {
    self->send(st.w.jobs, cancel_atom_v, id, team, in.reply);
  } else if (verb == subjects::kLogs) {
    int32_t rank = req.value("rank", 0);
    int64_t offset = req.value("offset", int64_t{0});
    int64_t max_bytes = req.value("max_bytes", int64_t{65536});
    self->send(st.w.jobs, logs_atom_v, id, team, rank, offset, max_bytes, in.reply);
  }
}

caf::behavior router_behavior(Self* self, OutboxPtr out, IntakePtr intake, SchedulerOptions opts) {
  auto& st = self->state;
  st.opts = std::move(opts);
  st.out = std::move(out);
  st.intake = std::move(intake);
  char buf[32];
  std::snprintf(buf, sizeof buf, "j-%llx-", static_cast<unsigned long long>(now_ms()));
  st.id_prefix = buf;
  return {
      [=](const Wiring& w) { self->state.w = w; },
      [=](const Inbound& in) {
        ++self->state.n.bus_in;
        try {
          on_inbound(self, in);
        } catch (const std::exception& e) {
          // Bad input must never take the router down.
          log_bad(self, std::string("request failed: ") + e.what(), ++self->state.n.malformed);
          if (!in.reply.empty())
            self->state.out->publish(
                in.reply, json{{"error", std::string("bad request: ") + e.what()}}.dump());
        }
      },
      [=](config_atom, const std::string& text) {
        policy::ClusterConfig cfg = policy::open_config();
        if (!text.empty()) {
          if (auto err = policy::load_config(text, cfg); !err.empty()) {
            aout(self) << "router: config refused: " << err << "\n";
            return;
          }
        }
        self->state.cfg = std::move(cfg);
        self->state.limits.priority_classes = self->state.cfg.class_names();
      },
      [=](restore_atom, const std::vector<std::string>& keys, uint64_t next_seq) {
        // After a scheduler restart: idempotency keys (team/key, job id pairs)
        // and the submit order go on from the restored jobs.
        auto& st = self->state;
        for (size_t i = 0; i + 1 < keys.size(); i += 2) st.keys[keys[i]] = keys[i + 1];
        st.next_seq = std::max(st.next_seq, next_seq);
      },
      [=](stats_atom, const std::string& kind, int64_t restarts) {
        self->state.n.restarts[kind] = restarts;
      },
      [=](why_atom, const std::string& reply, const std::string& body) {
        if (!reply.empty()) self->state.out->publish(reply, body);
      },
      [=](intake_atom, const std::string& job_id, bool ok, const std::string& error) {
        on_intake(self, job_id, ok, error);
      },
  };
}

}  // namespace

caf::actor spawn_router(caf::actor_system& sys, OutboxPtr out, IntakePtr intake,
                        SchedulerOptions opts) {
  return sys.spawn(router_behavior, std::move(out), std::move(intake), std::move(opts));
}

}  // namespace troupe

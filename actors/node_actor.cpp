#include "actors/node_actor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <map>
#include <optional>
#include <set>

#include "actors/errors.hpp"
#include "actors/policy/ledger.hpp"
#include "bus/subjects.hpp"
#include "messages/spec.hpp"
#include "messages/wire.hpp"
#include "records.pb.h"

namespace troupe {

using namespace troupe::atoms;

namespace {

// Whether its agent speaks (one phase at a time):
//   unknown --register or snapshot--> silent|alive
//   alive --no heartbeat for heartbeat_timeout_ms--> silent (lost: its workers end)
//   silent --heartbeat--> alive ("is back"); a register --> alive
// `unknown`: no ledger yet (neither its agent nor a snapshot told its shape).
// `silent`: a ledger, but no heartbeat lately (lost, or not yet heard since
// this actor started from a snapshot).
enum class Liveness { unknown, alive, silent };

// Whether it takes new work: schedulable, cordoned (takes none), draining
// (cordoned by drain: running work finishes). Kept in its snapshot as the
// record's cordoned/draining flags.
enum class Work { schedulable, cordoned, draining };

struct NodeState {
  std::string node;
  std::string host;
  std::string gpu_type;
  std::string pool;  // as the agent named it (--pool); the arbiter resolves it
  std::string rack;
  std::string runtime;  // its agent's container runtime (--runtime); "": it runs no image
  policy::Ledger ledger;
  Liveness life = Liveness::unknown;
  Work work = Work::schedulable;
  std::string reason;        // why it was cordoned or drained ("" when schedulable)
  bool shape_known = false;  // its inventory came from its agent (now or before a restart)
  bool lost_once = false;  // lost at least once in this scheduler's life: fence what it still runs
  bool dirty = false;
  int64_t last_heartbeat_ms = 0;
  // Launches not yet reported started: sent when, and the bytes to send again
  // (a Launch can be lost around a nats-server restart; agents ignore duplicates).
  std::unordered_map<std::string, std::pair<int64_t, std::vector<uint8_t>>> unstarted;
  int64_t last_resync_ms = 0;  // last hello sent because a heartbeat disagreed
  // Forgets (purged jobs' checkpoint dirs: job id, dir) that came while the
  // agent was not heard: sent once it is, with this actor's epoch. Kept in
  // its record (the store's too: a scheduler restart does not lose them),
  // kMaxHeldForgets and kMaxHeldForgetBytes at most.
  std::vector<std::pair<std::string, std::string>> held_forgets;
  size_t held_forget_bytes = 0;
  uint64_t dropped_forgets = 0;                  // past those (warned every 1000th)
  std::optional<policy::NodeCapacity> reported;  // the arbiter's view: what was last sent
  int64_t reported_ms = 0;                       // and when
  Wiring w;
  OutboxPtr out;
  NodeOptions opts;
  static inline const char* name = "node";
};

using Self = NodeActor::stateful_pointer<NodeState>;

// An unchanged node's capacity is told again this often: for `troupe nodes`'
// LAST HEARTBEAT column, and so that a grant the arbiter counted on this node
// but that never reached it (its overlay) lasts at most this long.
constexpr int64_t kRefreshReportMs = 5000;

// Tells the arbiter the node's capacity when it differs from what the arbiter
// was told last, when `force`d (a refused Reserve or Commit: the arbiter
// counted on room that is not there), or after kRefreshReportMs. A tick of an
// idle node sends nothing. `changed`: the ledger changed (to be saved).
void report(Self self, bool changed = true, bool force = false) {
  auto& st = self->state;
  policy::NodeCapacity c;
  c.name = st.node;
  c.host = st.host;
  c.gpu_type = st.gpu_type;
  c.pool = st.pool;
  c.rack = st.rack;
  c.runtime = st.runtime;
  c.gpus_total = st.ledger.gpus_total;
  c.gpus_free = st.ledger.gpus_free();
  c.gpus_reserved = st.ledger.gpus_reserved();
  c.gpus_allocated = st.ledger.gpus_allocated();
  c.cpus_total = st.ledger.cpus_total;
  c.cpus_free = st.ledger.cpus_free();
  c.memory_total_mb = st.ledger.memory_total_mb;
  c.memory_free_mb = st.ledger.memory_free_mb();
  c.alive = st.life == Liveness::alive;
  c.schedulable = st.work == Work::schedulable;
  c.draining = st.work == Work::draining;
  c.reason = st.reason;
  c.last_heartbeat_ms = st.last_heartbeat_ms;
  c.gpu_memory_mb = st.ledger.gpu_memory_mb;
  c.shared = st.ledger.shared_gpus();
  int running = 0;
  c.holds.reserve(st.ledger.holds.size());
  for (const auto& [id, h] : st.ledger.holds) {
    running += h.launched && !h.exited ? 1 : 0;
    c.holds.push_back(id);
  }
  c.running = running;
  if (changed) st.dirty = true;
  int64_t now = st.w.now_ms();
  if (!force && st.reported && policy::same_report(*st.reported, c) &&
      now - st.reported_ms < kRefreshReportMs)
    return;
  st.reported = c;
  st.reported_ms = now;
  self->send(st.w.arbiter, capacity_atom_v, std::move(c), NodeActor{self});
}

void to_agent(Self self, std::string_view kind, const std::vector<uint8_t>& bytes) {
  self->state.out->publish(subjects::scheduler_to_agent(self->state.node, kind), bytes);
}

// The held Forgets a node's record keeps: so many, and so many bytes of
// ids and paths (the record is one KV value, under NATS' max_payload).
constexpr size_t kMaxHeldForgets = 10000;
constexpr size_t kMaxHeldForgetBytes = 256 * 1024;

void save(Self self);

// A Forget goes to a live agent now; to a silent or unknown one once it is
// heard again (a core publish to an agent that is down is lost), and its
// record keeps it meanwhile.
void forget(Self self, const wire::Forget& f, const std::vector<uint8_t>& bytes_as_sent) {
  auto& st = self->state;
  if (st.life == Liveness::alive) {
    to_agent(self, subjects::kForget, bytes_as_sent);
    return;
  }
  std::string job = wire::str(f.job_id()), dir = wire::str(f.checkpoint_dir());
  const size_t bytes = job.size() + dir.size();
  if (st.held_forgets.size() < kMaxHeldForgets &&
      st.held_forget_bytes + bytes <= kMaxHeldForgetBytes) {
    st.held_forgets.emplace_back(std::move(job), std::move(dir));
    st.held_forget_bytes += bytes;
    save(self);
  } else if (++st.dropped_forgets % 1000 == 1) {
    spdlog::warn(
        "node {}: {} Forgets dropped ({} wait for its agent already): their "
        "checkpoint dirs stay",
        st.node, st.dropped_forgets, st.held_forgets.size());
  }
}

void send_held_forgets(Self self) {
  auto& st = self->state;
  if (st.held_forgets.empty()) return;
  for (const auto& [job, dir] : st.held_forgets)
    to_agent(self, subjects::kForget, wire::forget(job, dir, st.w.epoch));
  spdlog::info("node {}: {} purged jobs' checkpoint dirs sent to its agent to remove", st.node,
               st.held_forgets.size());
  st.held_forgets.clear();
  st.held_forgets.shrink_to_fit();
  st.held_forget_bytes = 0;
  save(self);
}

void save(Self self) {
  auto& st = self->state;
  pb::NodeRecord rec;
  rec.set_node(st.node);
  rec.set_host(st.host);
  rec.set_gpu_type(st.gpu_type);
  rec.set_pool(st.pool);
  rec.set_rack(st.rack);
  rec.set_runtime(st.runtime);
  rec.set_gpus(st.ledger.gpus_total);
  rec.set_cpus(st.ledger.cpus_total);
  rec.set_memory_mb(st.ledger.memory_total_mb);
  rec.set_gpu_memory_mb(st.ledger.gpu_memory_mb);
  rec.set_cordoned(st.work != Work::schedulable);
  rec.set_draining(st.work == Work::draining);
  rec.set_reason(st.reason);
  for (const auto& [id, h] : st.ledger.holds) {
    if (!h.committed) continue;  // leases do not survive a restart
    auto* r = rec.add_holds();
    r->set_id(id);
    r->set_job_id(h.job_id);
    for (int g : h.gpus) r->add_gpus(g);
    r->set_cpus(h.cpus);
    r->set_memory_mb(h.memory_mb);
    r->set_committed(true);
    r->set_launched(h.launched);
    r->set_exited(h.exited);
    r->set_exit_code(h.exit_code);
    r->set_signal(h.signal);
    r->set_exit_reason(h.exit_reason);
    r->set_gpu_memory_mb(h.gpu_memory_mb);
    r->set_share_key(h.share_key);
  }
  for (const auto& [job, dir] : st.held_forgets) {
    auto* f = rec.add_forgets();
    f->set_job_id(job);
    f->set_checkpoint_dir(dir);
  }
  std::string bytes;
  rec.SerializeToString(&bytes);
  self->send(st.w.nodes, snapshot_atom_v, st.node, std::move(bytes));
  st.dirty = false;
}

void restore(Self self, const std::string& snapshot) {
  pb::NodeRecord rec;
  if (snapshot.empty() || !rec.ParseFromString(snapshot)) return;
  auto& st = self->state;
  st.host = rec.host();
  st.gpu_type = rec.gpu_type();
  st.pool = rec.pool();
  st.rack = rec.rack();
  st.runtime = rec.runtime();
  st.ledger.resize(rec.gpus(), rec.cpus(), rec.memory_mb());
  st.ledger.gpu_memory_mb = rec.gpu_memory_mb();
  st.shape_known = rec.gpus() > 0 || rec.cpus() > 0 || rec.memory_mb() > 0;
  for (const auto& r : rec.holds()) {
    policy::Hold h;
    h.job_id = r.job_id();
    h.gpus.assign(r.gpus().begin(), r.gpus().end());
    h.cpus = r.cpus();
    h.memory_mb = r.memory_mb();
    h.committed = true;
    h.launched = r.launched();
    h.started = r.launched();
    h.exited = r.exited();
    h.exit_code = r.exit_code();
    h.signal = r.signal();
    h.exit_reason = r.exit_reason();
    h.changed_ms = self->state.w.now_ms();
    h.gpu_memory_mb = h.gpus.size() == 1 ? std::max<int64_t>(0, r.gpu_memory_mb()) : 0;
    h.share_key = r.share_key();
    policy::claim(st.ledger, r.id(), std::move(h));
  }
  st.work = !rec.cordoned() ? Work::schedulable : rec.draining() ? Work::draining : Work::cordoned;
  st.reason = rec.reason();
  st.held_forgets.clear();
  st.held_forget_bytes = 0;
  for (const auto& f : rec.forgets()) {
    st.held_forgets.emplace_back(f.job_id(), f.checkpoint_dir());
    st.held_forget_bytes += f.job_id().size() + f.checkpoint_dir().size();
  }
  st.life = Liveness::silent;  // the next heartbeat confirms liveness
  if (rec.restored()) {
    // Rebuilt after a scheduler restart: the agent is the ground truth. Until
    // it registers, count it alive from now (lost after the usual timeout);
    // what it runs that this ledger does not hold is fenced.
    st.life = Liveness::alive;
    st.lost_once = true;
    st.last_heartbeat_ms = self->state.w.now_ms();
  }
}

Envelope accept(const std::string& node, const std::string& id, const std::vector<int>& gpus,
                int64_t expires) {
  return Envelope{wire::accept(node, id, gpus, expires)};
}

Envelope reject(const std::string& node, const std::string& id, const std::string& reason) {
  return Envelope{wire::reject(node, id, reason)};
}

// Commit of a reserved hold: answered Accept with its GPUs as allocated.
Envelope on_commit(Self self, const std::string& id) {
  auto& st = self->state;
  auto v = policy::commit(st.ledger, id, st.w.now_ms());
  report(self, true, !v.ok);
  if (v.ok) {
    st.ledger.holds[id].changed_ms = st.w.now_ms();
    save(self);
  }
  return v.ok ? accept(st.node, id, v.gpus, 0) : reject(st.node, id, v.reason);
}

// Reserve (answered with the lease's expiry), or with `allocate` reserve and
// commit at once (a single worker's one round trip; answered as a Commit).
Envelope on_reserve(Self self, const std::string& id, const std::string& job_id,
                    const std::string& team, bool share_across, const wire::Resources* res,
                    int64_t lease_ms, bool allocate) {
  auto& st = self->state;
  if (st.life != Liveness::alive) {
    report(self, false, true);
    return reject(st.node, id, "node is not alive");
  }
  policy::Hold want;
  want.job_id = job_id;
  int gpus = res ? res->gpus() : 0;
  want.gpus.assign(static_cast<size_t>(gpus > 0 ? gpus : 0), 0);
  want.cpus = res ? res->cpus() : 0;
  want.memory_mb = res ? res->memory_mb() : 0;
  // A shared worker: part of one GPU, joined only by its team's shared
  // workers unless the pool shares across teams (the Reserve says).
  want.gpu_memory_mb = res && gpus == 1 ? std::max<int64_t>(0, res->gpu_memory_mb()) : 0;
  want.share_key = share_across ? "*" : team;
  if (res && res->gpu_type() && res->gpu_type()->size() > 0 && gpus > 0 &&
      res->gpu_type()->str() != st.gpu_type) {
    report(self, false, true);
    return reject(st.node, id, "GPU type " + st.gpu_type + " is not " + res->gpu_type()->str());
  }
  int64_t now = self->state.w.now_ms();
  auto v = policy::reserve(st.ledger, id, want, now, lease_ms);
  if (!v.ok) {
    report(self, true, true);
    return reject(st.node, id, v.reason);
  }
  if (allocate) return on_commit(self, id);
  report(self);
  self->delayed_send(self, std::chrono::milliseconds(lease_ms + 10), lease_atom_v);
  return accept(st.node, id, v.gpus, now + lease_ms);
}

void to_job(Self self, const std::string& job_id, Envelope env) {
  self->send(self->state.w.jobs, route_atom_v, job_id, std::move(env));
}

// Tells the job of hold `id` that its worker ended, and how.
void tell_exit(Self self, const std::string& id, int exit_code, int signal,
               const std::string& reason) {
  std::string job;
  int attempt = 0, rank = 0;
  if (!policy::parse_hold_id(id, &job, &attempt, &rank)) return;
  to_job(self, job,
         Envelope{wire::exited(self->state.node, job, attempt, rank, exit_code, signal, reason)});
}
// ... as the hold remembers it.
void tell_exit(Self self, const std::string& id, const policy::Hold& h) {
  tell_exit(self, id, h.exit_code, h.signal, h.exit_reason);
}

// Tells a job that one of its workers runs here.
void tell_started(Self self, const std::string& job_id, int attempt, int rank) {
  to_job(self, job_id, Envelope{wire::started(self->state.node, job_id, attempt, rank, 0)});
}

// Marks a hold's worker ended, remembering how (until the hold is released).
void mark_exited(Self self, policy::Hold& h, int exit_code, int signal, std::string reason) {
  h.exited = true;
  h.exit_code = exit_code;
  h.signal = signal;
  h.exit_reason = std::move(reason);
  h.changed_ms = self->state.w.now_ms();
  self->state.dirty = true;
}

// Ends a worker the agent can no longer report on: marks its hold exited and
// tells its job, as an Exited the retry policy counts as infrastructure.
void end_worker(Self self, const std::string& id, policy::Hold& h, const std::string& reason) {
  mark_exited(self, h, -1, 0, reason);
  tell_exit(self, id, h);
}

// The node is lost: every worker it ran ends for its job as "node lost".
void lose_workers(Self self) {
  auto& st = self->state;
  for (auto& [id, h] : st.ledger.holds) {
    if (!h.launched || h.exited) continue;
    end_worker(self, id, h, "node lost: no heartbeat from " + st.node);
  }
}

// An agent registers (it restarted, or answers a hello — after a scheduler
// restart too). For every worker this ledger holds as launched:
//  - the agent runs it: adopted (its job hears Started again; duplicates are ignored);
//  - the agent saw it end (`ended`): its job gets that Exited, real exit code;
//  - neither: it died with an old agent ("agent lost"). Workers not yet
//    reported started may still be on their way; they are left.
using Running = flatbuffers::Vector<flatbuffers::Offset<wire::WorkerRef>>;

// The hold ids of the workers an agent says it runs.
std::set<std::string> running_ids(const Running* running) {
  std::set<std::string> ids;
  if (running != nullptr)
    for (const auto* w : *running)
      ids.insert(policy::hold_id(wire::str(w->job_id()), w->attempt(), w->rank()));
  return ids;
}

void adopt_or_lose(Self self, const wire::NodeRegister* r) {
  auto& st = self->state;
  auto alive = running_ids(r->running());
  if (auto* running = r->running())
    for (const auto* w : *running) {
      auto id = policy::hold_id(wire::str(w->job_id()), w->attempt(), w->rank());
      auto it = st.ledger.holds.find(id);
      if (it == st.ledger.holds.end() || !it->second.committed || it->second.exited) continue;
      // A hold restored from a snapshot taken before its Launch: the agent runs it.
      if (!it->second.launched) st.dirty = true;
      it->second.launched = true;
      it->second.started = true;
      tell_started(self, wire::str(w->job_id()), w->attempt(), w->rank());
    }
  std::map<std::string, const wire::Exited*> ended;
  if (auto* e = r->ended())
    for (const auto* x : *e)
      ended[policy::hold_id(wire::str(x->job_id()), x->attempt(), x->rank())] = x;
  for (auto& [id, h] : st.ledger.holds) {
    if (!h.committed || h.exited || alive.count(id)) continue;
    if (auto it = ended.find(id); it != ended.end()) {
      // (Also a hold this actor's snapshot had as unlaunched: the agent ran it.)
      const auto* x = it->second;
      h.launched = true;
      mark_exited(self, h, x->exit_code(), x->signal(), wire::str(x->reason()));
      tell_exit(self, id, h);
      continue;
    }
    if (!h.launched || !h.started) continue;
    end_worker(self, id, h, "agent lost: " + st.node + " restarted without this worker");
  }
}

// Fencing: a node that comes back may still run workers whose attempt moved
// on while it was gone. Anything it runs that this ledger does not hold as a
// live launched worker is told to stop.
void fence(Self self, const Running* running) {
  auto& st = self->state;
  if (!st.lost_once || running == nullptr) return;
  for (const auto* w : *running) {
    auto job = wire::str(w->job_id());
    auto id = policy::hold_id(job, w->attempt(), w->rank());
    auto it = st.ledger.holds.find(id);
    if (it != st.ledger.holds.end() && it->second.launched && !it->second.exited) continue;
    to_agent(
        self, subjects::kStop,
        wire::stop(job, w->attempt(), w->rank(), 5,
                   "fenced: this attempt moved while the node was lost", SIGKILL, 1, st.w.epoch));
  }
}

// A heartbeat lists what the agent runs. Against the ledger:
//  - launched, not reported started, not running after kLaunchResendMs: the
//    Launch (or its Started) was lost — the Launch goes again;
//  - reported started, not exited, not running: its Exited was lost (the
//    agent published it before this heartbeat) — the agent is asked to
//    register again, which re-sends what ended recently (adopt_or_lose).
constexpr int64_t kLaunchResendMs = 3000;
constexpr int64_t kResyncMs = 2000;

void reconcile(Self self, const Running* running) {
  auto& st = self->state;
  auto alive = running_ids(running);
  int64_t now = self->state.w.now_ms();
  bool lost_exit = false;
  for (const auto& [id, h] : st.ledger.holds) {
    if (!h.launched || h.exited || alive.count(id)) continue;
    if (h.started) {
      lost_exit = true;
      continue;
    }
    auto u = st.unstarted.find(id);
    if (u == st.unstarted.end() || now - u->second.first < kLaunchResendMs) continue;
    spdlog::warn("node {}: {} not started {} ms after its launch; sending it again", st.node, id,
                 now - u->second.first);
    u->second.first = now;
    to_agent(self, subjects::kLaunch, u->second.second);
  }
  if (lost_exit && now - st.last_resync_ms >= kResyncMs) {
    st.last_resync_ms = now;
    to_agent(self, subjects::kHello, {});
  }
}

// A job restarted from its snapshot asks about one of its ranks here: what it
// may have missed (Started, Exited) is told again. A rank this ledger does not
// hold must not run: its worker is stopped and the rank ends (infrastructure).
void sync_rank(Self self, const std::string& job_id, int attempt, int rank) {
  auto& st = self->state;
  auto id = policy::hold_id(job_id, attempt, rank);
  auto it = st.ledger.holds.find(id);
  if (it != st.ledger.holds.end()) {
    const auto& h = it->second;
    if (h.exited) {
      tell_exit(self, id, h);
    } else if (h.started) {
      tell_started(self, job_id, attempt, rank);
    }
    return;
  }
  if (st.life == Liveness::unknown) return;  // no ledger yet: the agent's register reconciles
  spdlog::warn("node {}: {} has no allocation here; ending it", st.node, id);
  to_agent(self, subjects::kStop,
           wire::stop(job_id, attempt, rank, 5, "fenced: no allocation on this node", SIGKILL, 1,
                      st.w.epoch));
  tell_exit(self, id, -1, 0, "agent lost: " + st.node + " holds no allocation for " + id);
}

// Holds that wait too long (policy::hold_needs_check): the job is asked about
// each; an exited one's Exited goes first (the job may have lost it).
void check_holds(Self self) {
  auto& st = self->state;
  int64_t now = self->state.w.now_ms();
  for (auto& [id, h] : st.ledger.holds) {
    if (!policy::hold_needs_check(h, now, st.opts.hold_check_ms)) continue;
    std::string job;
    int attempt = 0, rank = 0;
    if (!policy::parse_hold_id(id, &job, &attempt, &rank)) continue;
    h.checked_ms = now;
    if (h.exited) tell_exit(self, id, h);
    self->send(st.w.jobs, hold_atom_v, job, st.node, id, static_cast<int32_t>(attempt),
               static_cast<int32_t>(rank),
               h.launched || h.exited);  // an exited one is not launched again
  }
}

// Each GPU's memory as the agent declares it: the smallest of its GPUs'
// (what a shared worker can count on on any of them); 0 (no sharing) when
// one is unknown or out of range.
int64_t gpu_memory_of(const wire::NodeRegister* r) {
  if (r->gpus() == nullptr || r->gpus()->size() == 0) return 0;
  int64_t least = spec::kMaxGpuMemoryMb;
  for (const auto* g : *r->gpus()) {
    if (g == nullptr || g->memory_mb() <= 0 || g->memory_mb() > spec::kMaxGpuMemoryMb) return 0;
    least = std::min<int64_t>(least, g->memory_mb());
  }
  return least;
}

Envelope handle(Self self, const Envelope& env) {
  auto& st = self->state;
  auto* e = wire::open(env.bytes);
  if (e == nullptr) return {};
  switch (e->body_type()) {
    case wire::Body::NodeRegister: {
      auto* r = e->body_as_NodeRegister();
      int gpus = r->gpus() ? static_cast<int>(r->gpus()->size()) : 0;
      int64_t gpu_mb = gpu_memory_of(r);
      if (st.life != Liveness::unknown && st.shape_known && !st.ledger.holds.empty() &&
          (gpus != st.ledger.gpus_total || r->cpus() != st.ledger.cpus_total ||
           (st.ledger.gpu_memory_mb != 0 && gpu_mb != st.ledger.gpu_memory_mb) ||
           r->memory_mb() != st.ledger.memory_total_mb || wire::str(r->gpu_type()) != st.gpu_type ||
           wire::str(r->pool()) != st.pool || wire::str(r->runtime()) != st.runtime)) {
        // A node does not change its shape under running work: a register
        // that would (0 GPUs, or 1,000; another container runtime, under jobs
        // placed for the one it had) is refused and counted; the node keeps
        // its ledger. Drain it first, then restart its agent.
        spdlog::warn(
            "node {}: register refused: it changes the node's capacity ({} -> {} GPUs, runtime "
            "'{}' -> '{}') while {} holds are on it",
            st.node, st.ledger.gpus_total, gpus, st.runtime, wire::str(r->runtime()),
            st.ledger.holds.size());
        self->send(st.w.router, distrust_atom_v, std::string("register_capacity_change"));
        return {};
      }
      st.host = wire::str(r->host());
      st.gpu_type = wire::str(r->gpu_type());
      st.pool = wire::str(r->pool());
      st.rack = wire::str(r->rack());
      st.runtime = wire::str(r->runtime());
      st.ledger.resize(gpus, r->cpus(), r->memory_mb());
      st.ledger.gpu_memory_mb = gpu_mb;
      st.shape_known = true;
      st.life = Liveness::alive;
      st.last_heartbeat_ms = self->state.w.now_ms();
      fence(self, r->running());
      adopt_or_lose(self, r);
      send_held_forgets(self);
      report(self);
      return {};
    }
    case wire::Body::Heartbeat:
      st.last_heartbeat_ms = self->state.w.now_ms();
      if (st.life == Liveness::unknown) {
        to_agent(self, subjects::kHello, {});
      } else if (st.life == Liveness::silent) {
        st.life = Liveness::alive;
        spdlog::info("node {} is back", st.node);
        report(self);
      }
      // Held ones (none: nothing), also those a restored record kept for an
      // agent counted alive since.
      if (st.life == Liveness::alive) send_held_forgets(self);
      fence(self, e->body_as_Heartbeat()->running());
      reconcile(self, e->body_as_Heartbeat()->running());
      return {};
    case wire::Body::Checkpointed: {
      // Only about a worker this node holds: a node speaks for its own work.
      auto* x = e->body_as_Checkpointed();
      if (st.ledger.holds.count(policy::hold_id(wire::str(x->job_id()), x->attempt(), x->rank())))
        to_job(self, wire::str(x->job_id()), env);
      return {};
    }
    case wire::Body::Started: {
      auto* x = e->body_as_Started();
      auto id = policy::hold_id(wire::str(x->job_id()), x->attempt(), x->rank());
      auto it = st.ledger.holds.find(id);
      // A worker this node does not hold is not its to report (a late or
      // forged report): the job never hears of it.
      if (it == st.ledger.holds.end()) return {};
      it->second.started = true;
      if (!it->second.launched && it->second.committed) {
        it->second.launched = true;  // its Launch predates this actor's snapshot
        save(self);
      }
      st.unstarted.erase(id);
      to_job(self, wire::str(x->job_id()), env);
      return {};
    }
    case wire::Body::Exited: {
      auto* x = e->body_as_Exited();
      auto id = policy::hold_id(wire::str(x->job_id()), x->attempt(), x->rank());
      auto it = st.ledger.holds.find(id);
      if (it == st.ledger.holds.end()) return {};  // not its worker (see Started)
      mark_exited(self, it->second, x->exit_code(), x->signal(), wire::str(x->reason()));
      save(self);
      st.unstarted.erase(id);
      to_job(self, wire::str(x->job_id()), env);
      return {};
    }
    case wire::Body::Reserve: {
      auto* p = e->body_as_Reserve();
      return on_reserve(self, wire::str(p->reservation_id()), wire::str(p->job_id()),
                        wire::str(p->team()), p->share_across_teams(), p->resources(),
                        p->lease_ms(), p->allocate());
    }
    case wire::Body::Commit:
      return on_commit(self, wire::str(e->body_as_Commit()->reservation_id()));
    case wire::Body::Release: {
      auto* x = e->body_as_Release();
      auto id = wire::str(x->reservation_id());
      auto it = st.ledger.holds.find(id);
      if (it == st.ledger.holds.end()) return {};
      if (x->if_unlaunched() && it->second.launched) {
        spdlog::info("node {}: kept {} (launched) against a release: {}", st.node, id,
                     wire::str(x->reason()));
        return {};
      }
      st.unstarted.erase(id);
      policy::release(st.ledger, id);
      report(self);
      save(self);
      return {};
    }
    case wire::Body::Launch: {
      auto* l = e->body_as_Launch();
      auto id = policy::hold_id(wire::str(l->job_id()), l->attempt(), l->rank());
      auto it = st.ledger.holds.find(id);
      if (it == st.ledger.holds.end() || !it->second.committed) {
        // Its hold was handed back meanwhile (an orphan check that raced the
        // placement): the attempt ends as an infrastructure failure and is requeued.
        spdlog::warn("node {}: launch for {} without allocation", st.node, id);
        tell_exit(self, id, -1, 0, "launch failed: no allocation for " + id + " on " + st.node);
        return {};
      }
      if (it->second.exited) {  // stopped before this Launch came: it never runs
        tell_exit(self, id, it->second);
        return {};
      }
      it->second.launched = true;
      it->second.changed_ms = self->state.w.now_ms();
      st.unstarted[id] = {self->state.w.now_ms(), env.bytes};
      to_agent(self, subjects::kLaunch, env.bytes);
      report(self);
      save(self);
      return {};
    }
    case wire::Body::Stop: {
      // A rank stopped before its Launch ends here: it is told to its job as
      // exited, and its hold stays until the job releases it, after the job
      // has announced how the attempt ended. Freed now, its GPUs could be
      // announced as another job's before that end (two jobs on one GPU in
      // the events stream).
      auto* s = e->body_as_Stop();
      auto job = wire::str(s->job_id());
      bool changed = false;
      for (auto& [id, h] : st.ledger.holds) {
        if (h.job_id != job || !h.committed || h.launched || h.exited) continue;
        std::string of_job;
        int attempt = 0, rank = 0;
        if (!policy::parse_hold_id(id, &of_job, &attempt, &rank) || attempt != s->attempt() ||
            (s->rank() >= 0 && rank != s->rank()))
          continue;
        end_worker(self, id, h, "stopped before its launch: " + wire::str(s->reason()));
        changed = true;
      }
      to_agent(self, subjects::kStop, env.bytes);
      if (changed) save(self);
      return {};
    }
    case wire::Body::Forget:
      // A job forgotten for good: its agent removes its checkpoint dir.
      forget(self, *e->body_as_Forget(), env.bytes);
      return {};
    default:
      spdlog::warn("node {}: unexpected {}", st.node, wire::body_name(e->body_type()));
      return {};
  }
}

NodeActor::behavior_type node_behavior(Self self, Wiring w, OutboxPtr out, std::string name,
                                       std::string snapshot, NodeOptions opts) {
  auto& st = self->state;
  st.w = std::move(w);
  st.out = std::move(out);
  st.node = std::move(name);
  st.opts = opts;
  restore(self, snapshot);
  if (st.life != Liveness::unknown) report(self);
  // Ask the agent for its inventory and what it runs (after a restart this
  // refreshes what the snapshot holds).
  to_agent(self, subjects::kHello, {});
  self->delayed_send(self, std::chrono::milliseconds(opts.tick_ms), tick_atom_v);
  return {
      [=](const Envelope& env) -> Envelope { return handle(self, env); },
      [=](lease_atom) {
        if (!policy::expire(self->state.ledger, self->state.w.now_ms()).empty()) report(self);
      },
      [=](tick_atom) {
        auto& st = self->state;
        if (st.life == Liveness::alive &&
            self->state.w.now_ms() - st.last_heartbeat_ms > st.opts.heartbeat_timeout_ms) {
          st.life = Liveness::silent;
          st.lost_once = true;
          spdlog::warn("node {} lost: no heartbeat for {} ms; its workers are requeued", st.node,
                       self->state.w.now_ms() - st.last_heartbeat_ms);
          lose_workers(self);
          report(self);
        }
        if (!policy::expire(st.ledger, self->state.w.now_ms()).empty()) st.dirty = true;
        check_holds(self);
        if (st.dirty) save(self);
        if (st.life != Liveness::unknown) report(self, false);
        self->delayed_send(self, std::chrono::milliseconds(st.opts.tick_ms), tick_atom_v);
      },
      [=](cordon_atom, bool on, bool drain, const std::string& reason, const std::string& reply) {
        auto& st = self->state;
        st.work = !on ? Work::schedulable : drain ? Work::draining : Work::cordoned;
        st.reason = reason;
        save(self);
        report(self);
        int running = 0;
        for (const auto& [id, h] : st.ledger.holds) running += h.launched && !h.exited ? 1 : 0;
        std::string state = !on       ? "schedulable"
                            : !drain  ? "cordoned"
                            : running ? "draining"
                                      : "drained";
        if (!reply.empty())
          st.out->publish(reply, "{\"node\":\"" + st.node + "\",\"state\":\"" + state +
                                     "\",\"running\":" + std::to_string(running) + "}");
      },
      [=](remove_atom) -> caf::result<std::string, std::string, Strings> {
        // Removed for good only when lost (its agent silent) and nothing is
        // held there: its jobs were requeued when it was lost. Then it
        // quits normally (its supervisor forgets it); the checkpoint dirs
        // of the Forgets it held go back, for the operator to remove.
        auto& st = self->state;
        if (st.life == Liveness::alive)
          return {std::string(errors::kNodeAlive),
                  "node " + st.node + " is alive (its agent was heard " +
                      std::to_string(st.w.now_ms() - st.last_heartbeat_ms) +
                      " ms ago): stop its agent first (troupe drain lets its work end); a node is "
                      "removed once it is lost",
                  Strings{}};
        if (!st.ledger.holds.empty())
          return {std::string(errors::kNodeBusy),
                  "node " + st.node + " still holds " + std::to_string(st.ledger.holds.size()) +
                      " worker(s) of jobs not yet moved off it; ask again once they are",
                  Strings{}};
        Strings dirs;
        for (const auto& held : st.held_forgets) dirs.push_back(held.second);
        spdlog::info("node {}: removed", st.node);
        self->quit();
        return {std::string(), std::string(), std::move(dirs)};
      },
      [=](sync_atom, const std::string& job_id, int32_t attempt, int32_t rank) {
        sync_rank(self, job_id, attempt, rank);
      },
      [=](crash_atom) { self->quit(caf::sec::runtime_error); },
  };
}

}  // namespace

NodeActor spawn_node(caf::local_actor* parent, Wiring w, OutboxPtr out, std::string name,
                     std::string snapshot, NodeOptions opts) {
  return parent->spawn(node_behavior, std::move(w), std::move(out), std::move(name),
                       std::move(snapshot), opts);
}

}  // namespace troupe

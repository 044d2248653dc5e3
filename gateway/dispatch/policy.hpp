// The front door's rules (troupe-dispatch, docs/clusters.md), pure over plain
// values: its config, what each cluster reports (capacity by GPU type, queue
// depth), which clusters a job may go to and in what order, the front door's
// job ids and the record it keeps per job. The shell (gateway/dispatch/front.*)
// carries messages; everything it decides is decided here, unit-tested in
// tests/unit/dispatch_policy_test.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "job_spec.pb.h"

namespace troupe::dispatch {

// One cluster behind the front door: its own NATS (JetStream), schedulers and
// agents. `nats` is its URL list; `creds`/`tls_ca` the identity the front
// door connects with ("" for an open cluster).
struct ClusterEntry {
  std::string name;
  std::string region;
  std::string nats;
  std::string creds;
  std::string tls_ca;
};

// A team's rule: the clusters it may use (empty: all) and, per cluster, the
// most GPUs its jobs sent there may ask for at once (jobs not ended; absent:
// no bound).
struct TeamRule {
  std::vector<std::string> clusters;
  std::map<std::string, int64_t> quota;
};

struct Config {
  // The front door's name: set as a job's `dispatch`, so that its cluster
  // asks this front door for leave to start it (troupe.sys.dispatch.claim).
  std::string name = "front";
  std::vector<ClusterEntry> clusters;
  std::map<std::string, TeamRule> teams;  // a team not listed may use every cluster
  // A job still queued this long after it was sent to a cluster may go to
  // another allowed one (0: never).
  int64_t spill_after_s = 60;
  int64_t poll_ms = 1000;  // how often each cluster is asked for its capacity
  // A cluster that has not answered for this long is unreachable.
  int64_t unreachable_after_ms = 5000;
  // A job ended (or withdrawn and taken nowhere) this long ago is forgotten:
  // its place leaves memory and TROUPE_DISPATCH (0: kept forever).
  int64_t job_retention_s = 7 * 24 * 3600;
  // The events it publishes (under its ids) are kept this long in
  // TROUPE_FRONT_EVENTS, and at most this many bytes (0: sized to the
  // server's storage, as a scheduler's events stream), for troupe usage.
  int64_t events_max_age_s = 7 * 24 * 3600;
  int64_t events_max_bytes = 0;
  // false: those events are not kept (no TROUPE_FRONT_EVENTS; troupe usage
  // through the front door is answered `not_kept`: ask each cluster). They
  // are still published, for subscribers.
  bool keep_events = true;
};

// YAML or JSON text; nullopt and `error` when it is not a valid config.
std::optional<Config> parse_config(std::string_view text, std::string* error);

// What a cluster reported last (troupe.sys.nodes and troupe.sys.queues).
struct TypeCapacity {
  int64_t total = 0;
  int64_t free = 0;
};
struct ClusterState {
  std::string name;
  std::string region;
  bool reachable = false;
  int64_t answered_ms = 0;                    // when it last answered, 0: never
  std::map<std::string, TypeCapacity> types;  // alive nodes' GPUs by type
  int64_t queued = 0;                         // jobs waiting to start
  int64_t running = 0;                        // jobs running
  // The replies themselves, as read (troupe.sys.nodes and troupe.sys.queues
  // at the front door put them together: merge_nodes, merge_queues); null
  // before any. Shared, so that a copy of a state (one per submission's
  // choice) does not copy every node.
  std::shared_ptr<const nlohmann::json> nodes_reply, queues_reply;
};
// The capacity part of a state from the JSON replies of troupe.sys.nodes and
// troupe.sys.queues (kept in nodes_reply and queues_reply); false and
// `error` when they do not read.
bool read_capacity(std::string_view nodes_json, std::string_view queues_json, ClusterState* out,
                   std::string* error);

// What the front door needs to know of a job to send it somewhere.
struct Needs {
  std::string team;
  std::vector<std::string> types;  // acceptable GPU types in order; empty: any
  int64_t gpus = 0;                // all workers and tasks together
  int64_t gpus_per_worker = 0;
  std::string cluster, region;
  bool hard = true;  // locality: only there
};
Needs needs_of(const std::string& team, const pb::JobSpec& spec);

// The clusters a job may go to, best first. `used` is the GPUs the team's
// unended jobs ask for in each cluster; `exclude` the clusters not to use
// (the one a job spills over from). Empty `order`: nowhere, `code` and
// `error` say why (not_allowed, no_cluster_of_type, over_cluster_quota,
// no_cluster_reachable, no_cluster_in_locality).
struct Choice {
  std::vector<std::string> order;
  std::string code;
  std::string error;
};
Choice choose(const Config& cfg, const std::vector<ClusterState>& clusters, const Needs& needs,
              const std::map<std::string, int64_t>& used, const std::set<std::string>& exclude);

// Where a whole pipeline goes: the first cluster of the first member's order
// that every member may go to and where the team's quota holds all the
// members' GPUs together (`used` as for choose). Empty `order` and the
// reason when none: the first member no cluster takes (`jobs[i]: ...`, its
// code), over_cluster_quota, else no_cluster_for_pipeline. One cluster in
// `order` otherwise.
Choice choose_for_pipeline(const Config& cfg, const std::vector<ClusterState>& clusters,
                           const std::vector<Needs>& members,
                           const std::map<std::string, int64_t>& used,
                           const std::set<std::string>& exclude);

// Whether a job sent to a cluster at `sent_ms` and not started there should
// go elsewhere at `now_ms`.
bool should_spill(const Config& cfg, int64_t sent_ms, int64_t now_ms);

// The front door's job ids: "j-x" (not a scheduler's "j-"), the front
// door's start (ms, base 36) and a number (base 36, at least 5 digits).
std::string front_job_id(int64_t start_ms, uint64_t number);

// The record the front door keeps per job (KV TROUPE_DISPATCH, key job.<id>).
struct JobPlace {
  std::string job_id;  // the front door's
  std::string team;
  std::string cluster;         // where it is now ("" once nowhere)
  std::string cluster_job_id;  // its id there
  std::string state = "sent";  // sent | started | ended | withdrawn
  std::string spec_json;       // to send it elsewhere
  int64_t sent_ms = 0;
  int64_t gpus = 0;
  std::vector<std::string> tried;  // clusters it was sent to before, oldest first
  // The copies it left behind ("cluster/id"): a claim of one is answered
  // withdrawn, so a cluster that was cut off cancels its copy.
  std::vector<std::string> withdrawn;
  // The state of the last event its cluster published ("" before any);
  // stored when `state` changes, so an ended job keeps how it ended.
  std::string last_state;
  int64_t ended_ms = 0;  // when it ended or was withdrawn for good (0: not yet, or not known)
  // When its last attempt began running, as its cluster's event said (0: not
  // yet, or not known).
  int64_t started_ms = 0;
  // In a dependency (it waits for jobs, or jobs wait for it): it stays in
  // its cluster, never spilled over or re-dispatched (its dependents there
  // wait for this copy).
  bool pinned = false;
  // A pipeline member's: its pipeline's key (team/pipeline/<idempotency_key>;
  // "" none). Restored, it sends a retry of the pipeline where the first went.
  std::string pipeline_key;
};
std::string to_json(const JobPlace& p);

// A submission's `depends_on` through the front door: each entry's `job` is
// a front-door id of the same team, and every such upstream is in one
// cluster now, where the job then goes. Rewrites the entries to the
// upstreams' ids there. `place_of` finds a front-door id's place (null:
// unknown). Empty `error` when it may go: to `cluster` ("" when no entry
// names a job), `upstreams` their front-door ids. The refusal of an
// unknown job and of another team's job is the same text (as a cluster's).
struct Upstreams {
  std::string cluster;
  std::vector<std::string> upstreams;
  std::string code, error;
};
// Replaces each id of `ids` (a cluster's -> the front door's) wherever it
// stands as a whole id in a string of `j` (values, at any depth).
void put_back_ids(nlohmann::json& j, const std::map<std::string, std::string>& ids);
Upstreams resolve_upstreams(const std::string& team, pb::JobSpec& spec,
                            const std::function<const JobPlace*(const std::string&)>& place_of);
// Past the retention (Config::job_retention_s, in ms here; 0: never): ended
// or withdrawn for good that long ago (a place stored before ended_ms was
// kept: since it was sent).
bool past_retention(const JobPlace& p, int64_t now_ms, int64_t retention_ms);
std::optional<JobPlace> place_from_json(std::string_view json);
// JSON text of `j` whatever it holds: bytes that are not UTF-8 (a hostile
// spec's, echoed in an error) become U+FFFD instead of an exception.
std::string dump_json(const nlohmann::json& j);
// j[key] when j is an object and that is a string, else "" (never throws).
std::string string_of(const nlohmann::json& j, const char* key);
// --- troupe.<team>.jobs at the front door ------------------------------------

// A job's row: the JobView JSON fields its place and its last mirrored event
// (`last`, null before any) give: job_id (the front door's), team, state,
// kind, name, attempt, gpus, submit_ms, reason, cluster, cluster_job_id,
// placement (the last event's workers, where it said any), start_ms (the
// place's started_ms), end_ms and exit_code (once ended: its last event's),
// and the spec's workers, priority and gpu_type.
// The state is the last event's; else what the place says (sent: queued,
// started: running, withdrawn: canceled); `unreachable` while its cluster is
// and it has not ended (as status says).
nlohmann::json job_view(const JobPlace& p, const nlohmann::json& last, bool cluster_reachable);
// An event's `ts_ms` (a number, or its decimal string as protobuf's JSON
// writes int64); 0 when it has none or it is not a positive number.
int64_t event_ms(const nlohmann::json& event);

// One page of a team's jobs from their rows in submit order (the front
// door's ids sort so), for a request {"limit","after","state"} as
// docs/api.md "jobs: pages" says, `pipeline` and `label` included (a row's
// `labels`, from its spec).
// The reply {"jobs":[...],"next"?}, or {"error","code"}.
nlohmann::json jobs_page(const std::vector<nlohmann::json>& rows, const nlohmann::json& request);

// A job's history through the front door: the events of each copy it had,
// oldest copy first (the ones it left behind, JobPlace::withdrawn, then
// where it is now), each event with the front door's `job_id` and its
// `cluster` and `cluster_job_id`. A part is a copy ("cluster/id") and its
// cluster's history reply, or null when that cluster did not answer: the
// reply then says `"partial": true` and names it in `"unanswered"`.
struct HistoryPart {
  std::string copy;  // "cluster/id"
  std::optional<nlohmann::json> reply;
};
nlohmann::json merge_history(const std::string& job_id, const std::vector<HistoryPart>& parts);

// troupe.sys.nodes and troupe.sys.queues at the front door: the last reply
// of each reachable cluster (polled every poll_ms), every node, pool and
// team row with its `cluster`. A cluster unreachable, or not heard from yet,
// is named in "unanswered" with "partial": true, and none of its rows is
// shown (its nodes may be fine; the front door cannot say). Queues: the
// counters (grants, preemptions, GPU-seconds, retries by cause) are the sum
// of the clusters', `policy` theirs when they agree, else "mixed".
nlohmann::json merge_nodes(const std::vector<ClusterState>& clusters);
nlohmann::json merge_queues(const std::vector<ClusterState>& clusters);
// troupe.sys.queues at the front door, its request body read: {} (or
// none) is every cluster's (merge_queues); {"cluster": NAME} is that
// cluster's alone, its own counters (not the sum), the reply naming it in
// "cluster" (troupe queues --cluster: a cluster's scheduler leaves the key
// out, so a client tells the front door's answer from one cluster's).
// An error sets `code`: "bad_request" (not an object, a cluster that is
// not a string) or "not_found" (no cluster of that name; echoed at most
// 128 characters), and the reply is {"error", "code"}.
nlohmann::json queues_reply(const std::vector<ClusterState>& clusters, std::string_view body,
                            std::string* code);

// Cordon, uncordon, drain at the front door: the clusters whose last
// troupe.sys.nodes reply (reachable now) lists `node`. The request goes to
// the one; where several have a node of that name it must name its cluster.
std::vector<std::string> clusters_with_node(const std::vector<ClusterState>& clusters,
                                            const std::string& node);

// troupe.sys.find at the front door: {"job_id","team","state","cluster",
// "cluster_job_id"} of a job it knows, as a cluster answers (plus where it
// went); the job's row as job_view makes it.
nlohmann::json find_reply(const nlohmann::json& job_row);

inline std::string place_key(const std::string& job_id) {
  return "job." + job_id;
}

// What the front door answers a cluster's claim of the copy `remote`
// ("cluster/id") of a job whose place is `p` (nullptr: a copy it does not
// know, or not yet): granted (and the place becomes started), withdrawn, or
// neither (ask again later).
struct ClaimAnswer {
  bool granted = false;
  bool withdrawn = false;
  std::string reason;
};
// A copy it does not know whose job its cluster took `copy_age_ms` ago (-1:
// not said) is withdrawn once that is `retention_ms` (> 0) or more: the
// front door forgets a job only once it ended or was taken nowhere and its
// retention passed, so such a copy was left behind before that (its cluster
// cut off all along) and never runs; a younger one is asked about again.
ClaimAnswer answer_claim(const JobPlace* p, const std::string& cluster, const std::string& id,
                         int64_t copy_age_ms = -1, int64_t retention_ms = 0);

// A place not known ended: sent, or started (its GPUs count against its
// team's quota in its cluster).
bool is_live(const JobPlace& p);

// The GPUs the front door's live jobs ask for, by team and cluster, kept as
// their places change (a submission's choice reads it, not every job).
class TeamUse {
 public:
  // What a place counts now (its cluster and GPUs while live; kept with it).
  struct Counted {
    std::string cluster;  // "" counts nothing
    int64_t gpus = 0;
  };
  // After a change of `p`'s state, cluster or GPUs, and before it is
  // forgotten (`gone`): takes back what `counted` says it counted and
  // counts it as it is now.
  void recount(const JobPlace& p, Counted* counted, bool gone = false);
  // The team's GPUs per cluster (empty: none).
  std::map<std::string, int64_t> of(const std::string& team) const;

 private:
  std::map<std::string, std::map<std::string, int64_t>> use_;
};

}  // namespace troupe::dispatch

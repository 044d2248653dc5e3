// Several clusters behind one front door (issue 19, part 3): two clusters,
// each its own nats-server (JetStream, operator mode, TLS), scheduler and
// agent (c1: a100, c2: h100), and a third nats-server where users submit,
// served by troupe-dispatch (gateway/dispatch/), with a leaf node link to
// each cluster bound to that cluster's link account (docs/clusters.md). Jobs land by GPU type; an
// any-type job waiting in a full cluster spills over to the other once it
// has room (withdrawn with a conditional cancel, so it never runs in two);
// status, cancel, logs and history work through the front door, and the
// front door publishes each job's events under its own id.
#include <httplib.h>

#include <catch2/catch.hpp>
#include <condition_variable>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bus/nats.hpp"
#include "bus/requester.hpp"
#include "bus/subjects.hpp"
#include "harness.hpp"
#include "messages/names.hpp"
#include "messages/spec.hpp"
#include "messages/wire.hpp"
#include "tcp_proxy.hpp"

using namespace troupe;
using namespace troupe::it;

namespace {

Json typed(const std::vector<std::string>& command, int gpus, Json resources_extra) {
  Json spec = job_spec("t1", command, gpus);
  for (auto& [k, v] : resources_extra.items()) spec["resources"][k] = v;
  return spec;
}

// A cluster's entry in the dispatch config when the front door reaches it
// through the front NATS's leaf node link (link account link-<name>).
std::string linked_entry(const std::string& name, Cluster& front) {
  return "  - {name: " + name + ", nats: \"" + front.url() + "\", creds: \"" + front.auth_dir() +
         "/link-" + name + ".creds\", tls_ca: \"" + front.tls_ca() + "\"}\n";
}

// ... and when it connects to the cluster's NATS itself, as `dispatch`.
std::string direct_entry(const std::string& name, Cluster& c) {
  return "  - {name: " + name + ", nats: \"" + c.url() + "\", creds: \"" + c.creds("dispatch") +
         "\", tls_ca: \"" + c.tls_ca() + "\"}\n";
}

// troupe-dispatch on `front` with this config text (`name`: its files'
// names, another for a second front door; `extra`: more arguments).
std::unique_ptr<Process> start_dispatch(Cluster& front, const std::string& config,
                                        const std::string& name = "dispatch",
                                        std::vector<std::string> extra = {}) {
  const std::string path = front.file(name + ".yaml");
  {
    std::ofstream f(path);
    f << config;
  }
  std::vector<std::string> argv = {bin_dir() + "/troupe-dispatch", "--config", path, "--nats",
                                   front.url()};
  for (auto& a : front.identity_args("scheduler")) argv.push_back(a);
  for (auto& a : extra) argv.push_back(a);
  auto p =
      std::make_unique<Process>(name, argv, front.file(name + ".out"), front.file(name + ".err"));
  front.dump().add(name + " stderr", p->err_path());
  return p;
}

// Polls another process's log until it holds `text`.
bool wait_file_contains(const std::string& path, const std::string& text, Clock::duration timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (read_file(path).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(50ms);  // polling another process's log
  }
  return false;
}

// Polls a job's status through the front door until `pred` holds for it.
bool wait_status(Cluster& front, const std::string& id,
                 const std::function<bool(const Json&)>& pred, Clock::duration timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (pred(front.status("t1", id))) return true;
    std::this_thread::sleep_for(100ms);  // polling the front door's view
  }
  return false;
}

// Polls troupe.sys.clusters until `pred` holds for its reply.
bool wait_view(Cluster& front, const std::function<bool(const Json&)>& pred,
               Clock::duration timeout, Json* last) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    auto r = front.request_raw(subjects::kSysClusters, {'{', '}'}, 2s);
    if (r) {
      *last = Json::parse(r->begin(), r->end(), nullptr, false);
      if (last->is_object() && pred(*last)) return true;
    }
    std::this_thread::sleep_for(100ms);  // polling another process's view
  }
  return false;
}

std::string cluster_state(const Json& view, const std::string& name) {
  for (const auto& c : view.value("clusters", Json::array()))
    if (c.value("name", "") == name) return c.value("state", "");
  return {};
}

// The front door's troupe.sys.clusters reply once every cluster is reachable
// with its GPUs counted.
Json wait_clusters(Cluster& front, Clock::duration timeout) {
  auto deadline = Clock::now() + timeout;
  Json last;
  while (Clock::now() < deadline) {
    std::string err;
    auto r = front.request_raw(subjects::kSysClusters, {'{', '}'}, 2s, &err);
    if (r) {
      last = Json::parse(r->begin(), r->end(), nullptr, false);
      bool all = last.is_object() && last.contains("clusters") && last["clusters"].size() == 2;
      if (all)
        for (const auto& c : last["clusters"])
          all = all && c.value("state", "") == "reachable" && c.value("gpus_total", 0) == 2;
      if (all) return last;
    }
    std::this_thread::sleep_for(100ms);  // polling another process's view
  }
  INFO("troupe.sys.clusters last answered " << last.dump());
  FAIL("the front door did not see both clusters");
  return last;
}

// c1 (one agent, a100 x2) and c2 (h100 x2), each its own nats-server and
// scheduler, each accepting leaf node links; and the front NATS (no
// scheduler: troupe-dispatch serves it) with a leaf node link to each, the
// one to c1 through a TCP proxy the test can cut.
// `advertise`: the address its leaf node links reconnect to ("" its own).
// `simulate`: its agent runs `command: ["simulated"]` jobs without a process.
ClusterOptions member(const std::string& node, const std::string& type,
                      const std::string& advertise = {}, bool simulate = false) {
  ClusterOptions o;
  o.node(node, 2, simulate, type);
  o.leaf_listen = true;
  o.leaf_advertise = advertise;
  return o;
}
int port_of(const std::string& url) {
  return std::stoi(url.substr(url.rfind(':') + 1));
}
struct TwoClusters {
  // The front NATS's leaf node link to c1; c1 tells the link to reconnect
  // to the proxy, not past it (else a cut lasts until its first reconnect).
  TcpProxy link;
  Cluster c1;
  Cluster c2;
  std::unique_ptr<Cluster> front_;
  explicit TwoClusters(bool simulate = false)
      : c1(member("a1", "a100", "127.0.0.1:" + std::to_string(link.port()), simulate)),
        c2(member("h1", "h100", {}, simulate)) {
    link.set_target(port_of(c1.leaf_url()));
    REQUIRE(c1.wait_nodes_alive(1, 20s));
    REQUIRE(c2.wait_nodes_alive(1, 20s));
    ClusterOptions o;
    o.scheduler = false;
    o.leaf_remotes = {
        {"c1", "tls://127.0.0.1:" + std::to_string(link.port()), c1.creds("dispatch"), c1.tls_ca()},
        {"c2", c2.leaf_url(), c2.creds("dispatch"), c2.tls_ca()}};
    front_ = std::make_unique<Cluster>(o);
  }
  Cluster& front() { return *front_; }
};

}  // namespace

TEST_CASE(
    "two clusters behind a front door: jobs land by GPU type, a waiting any-type job spills over "
    "to the other cluster without running in two, cancel, logs, history and events work through "
    "the front door",
    "[integration][clusters]") {
  TwoClusters all;
  Cluster &c1 = all.c1, &c2 = all.c2, &front = all.front();

  // c1 through the front NATS's leaf node link, c2 straight (both work).
  auto dispatch = start_dispatch(
      front,
      "clusters:\n" + linked_entry("c1", front) + direct_entry("c2", c2) +
          "teams:\n  t1: {clusters: [c1, c2]}\n  t3: {clusters: [c1], quota: {c1: 2}}\n"
          "spill_after_s: 1\npoll_ms: 200\n",
      "dispatch", {"--metrics", "127.0.0.1:0"});
  wait_clusters(front, 30s);

  // By type: an a100 job goes to c1, an h100 job to c2; both fill their cluster.
  Json a_reply = front.submit_json("t1", typed({"sleep", "60"}, 2, {{"gpu_type", "a100"}}));
  INFO("a100 submission: " << a_reply.dump());
  REQUIRE(a_reply.contains("job_id"));
  CHECK(a_reply.value("cluster", "") == "c1");
  const std::string a = a_reply["job_id"];
  Json h_reply = front.submit_json("t1", typed({"sleep", "60"}, 2, {{"gpu_type", "h100"}}));
  INFO("h100 submission: " << h_reply.dump());
  REQUIRE(h_reply.contains("job_id"));
  CHECK(h_reply.value("cluster", "") == "c2");
  const std::string h = h_reply["job_id"];
  // The front door's events carry its own ids.
  INFO("front events: " << front.events().describe());
  REQUIRE(front.events().wait_state(a, std::string(names::kRunning), 30s));
  REQUIRE(front.events().wait_state(h, std::string(names::kRunning), 30s));
  Json a_status = front.status("t1", a);
  CHECK(a_status.value("job_id", "") == a);
  CHECK(a_status.value("cluster", "") == "c1");
  CHECK(a_status.value("state", "") == "running");

  // The whole picture through the front door: a job's team and cluster
  // (troupe.sys.find), every cluster's nodes and queues, each row with its
  // cluster.
  Json found = front.request(subjects::kSysFind, Json{{"job_id", h}});
  INFO("troupe.sys.find: " << found.dump());
  CHECK(found.value("team", "") == "t1");
  CHECK(found.value("cluster", "") == "c2");
  CHECK(front.request(subjects::kSysFind, Json{{"job_id", "j-x0"}}).value("code", "") ==
        "not_found");
  CHECK(front.request_text(subjects::kSysFind, "[").value("code", "") == "malformed");
  // JSON nested 100,000 deep (200 KB): refused where the front door reads it
  // (messages/json_text.hpp), and it keeps serving (what follows).
  {
    const std::string deep = R"({"command":["true"],"job_id":"j-x0","x":)" +
                             std::string(100000, '[') + std::string(100000, ']') + "}";
    for (const std::string& subject :
         {subjects::team_submit("t1"), subjects::team_status("t1"), subjects::team_jobs("t1"),
          subjects::team_cancel("t1"), std::string(subjects::kSysFind)}) {
      Json r = front.request_text(subject, deep);
      INFO("deep JSON on " << subject << ": " << r.dump().substr(0, 300));
      CHECK(r.contains("error"));
      CHECK_FALSE(r.contains("job_id"));
    }
  }
  Json nodes = front.request(subjects::kSysNodes, Json::object());
  INFO("troupe.sys.nodes: " << nodes.dump());
  std::map<std::string, std::string> node_cluster;
  for (const auto& n : nodes.value("nodes", Json::array()))
    node_cluster[n.value("node", "")] = n.value("cluster", "");
  CHECK(node_cluster == std::map<std::string, std::string>{{"a1", "c1"}, {"h1", "c2"}});
  CHECK_FALSE(nodes.contains("partial"));
  Json queues = front.request(subjects::kSysQueues, Json::object());
  INFO("troupe.sys.queues: " << queues.dump());
  std::set<std::string> pool_clusters;
  for (const auto& p : queues.value("pools", Json::array()))
    pool_clusters.insert(p.value("cluster", ""));
  CHECK(pool_clusters == std::set<std::string>{"c1", "c2"});
  // The CLI, unchanged: `troupe status ID` finds the job's team by itself;
  // `troupe nodes` has a CLUSTER column.
  RunResult st = front.run_cli({"status", a});
  INFO("troupe status: " << describe(st));
  CHECK(st.exit_code == 0);
  CHECK(st.out.find("\ncluster ") != std::string::npos);
  CHECK(st.out.find(" c1 (as j-") != std::string::npos);
  RunResult nd = front.run_cli({"nodes"});
  INFO("troupe nodes: " << describe(nd));
  CHECK(nd.exit_code == 0);
  CHECK(nd.out.rfind("CLUSTER  NODE", 0) == 0);
  // Cordon and uncordon through the front door: handed on to the node's
  // cluster; an unknown node or cluster is not found.
  RunResult cordoned = front.run_cli({"cordon", "a1", "--reason", "maintenance"});
  INFO("troupe cordon: " << describe(cordoned));
  CHECK(cordoned.exit_code == 0);
  CHECK(cordoned.out.find("cordoned") != std::string::npos);
  CHECK(cordoned.out.find("in cluster c1") != std::string::npos);
  auto a1_view = [&c1] {
    for (const auto& n :
         c1.request(subjects::kSysNodes, Json::object()).value("nodes", Json::array()))
      if (n.value("node", "") == "a1") return n;
    return Json();
  };
  CHECK(a1_view().value("schedulable", true) == false);
  CHECK(a1_view().value("reason", "") == "maintenance");
  CHECK(front.request(subjects::kSysUncordon, Json{{"node", "a1"}, {"cluster", "c1"}})
            .value("cluster", "") == "c1");
  CHECK(a1_view().value("schedulable", false) == true);
  CHECK(front.request(subjects::kSysCordon, Json{{"node", "a9"}}).value("code", "") == "not_found");
  CHECK(front.request(subjects::kSysCordon, Json{{"node", "a1"}, {"cluster", "c9"}})
            .value("code", "") == "not_found");
  CHECK(front.request(subjects::kSysDrain, Json::object()).value("code", "") == "bad_request");
  // remove-node too: handed on, and c1 refuses its alive node.
  RunResult kept = front.run_cli({"remove-node", "a1"});
  INFO("troupe remove-node through the front door: " << describe(kept));
  CHECK(kept.exit_code != 0);
  CHECK(kept.err.find("alive") != std::string::npos);
  CHECK(front.request(subjects::kSysRemoveNode, Json{{"node", "a1"}, {"cluster", "c1"}})
            .value("code", "") == "node_alive");

  // A job no cluster can run is refused by the front door with its reason.
  Json none = front.submit_json("t1", typed({"true"}, 1, {{"gpu_type", "v100"}}));
  CHECK(none.value("code", "") == "no_cluster_of_type");

  // Both full: an any-type job waits in one of them (c1: the first by name).
  Json x_reply = front.submit_json(
      "t1", typed({"sh", "-c", "echo spilled-over-ok"}, 2, {{"gpu_types", {"a100", "h100"}}}));
  INFO("any-type submission: " << x_reply.dump());
  REQUIRE(x_reply.contains("job_id"));
  const std::string x = x_reply["job_id"];
  const std::string first = x_reply.value("cluster", "");
  REQUIRE((first == "c1" || first == "c2"));
  Json x_first = front.status("t1", x);
  const std::string first_id = x_first.value("cluster_job_id", "");
  REQUIRE_FALSE(first_id.empty());
  CHECK(x_first.value("state", "") == "queued");

  // The other cluster frees up (cancel through the front door): the job
  // spills over there and runs; it never ran where it waited first.
  Cluster& waited = first == "c1" ? c1 : c2;
  const std::string freed = first == "c1" ? h : a;
  Json canceled = front.cancel("t1", freed);
  INFO("cancel through the front door: " << canceled.dump());
  CHECK(canceled.value("job_id", "") == freed);
  CHECK(front.events().wait_state(freed, std::string(names::kCanceled), 30s));
  auto end = front.events().wait_state(x, names::is_terminal, 60s);
  INFO("events of the any-type job at the front: " << front.events().describe(x));
  REQUIRE(end);
  CHECK(end->state == names::kSucceeded);
  Json x_status = front.status("t1", x);
  CHECK(x_status.value("cluster", "") == (first == "c1" ? "c2" : "c1"));
  CHECK(x_status.value("cluster_job_id", "") != first_id);
  INFO("its events where it waited first: " << waited.events().describe(first_id));
  for (const auto& e : waited.events().of_job(first_id))
    CHECK((e.state != names::kStarting && e.state != names::kRunning));
  auto withdrawn = waited.events().wait_state(first_id, std::string(names::kCanceled), 10s);
  CHECK(withdrawn);
  // The front door's stream of the job never shows the withdrawal.
  for (const auto& e : front.events().of_job(x)) CHECK(e.state != names::kCanceled);

  // Its /metrics (troupe-dispatch --metrics): both clusters up with their
  // GPUs, and the spill-over counted.
  {
    const std::string out = front.file("dispatch.out");
    REQUIRE(wait_file_contains(out, "metrics on http://", 10s));
    std::smatch m;
    const std::string text = read_file(out);
    REQUIRE(
        std::regex_search(text, m, std::regex(R"(metrics on (http://[0-9.]+:[0-9]+)/metrics)")));
    httplib::Client scraper(m[1].str());
    std::string body;
    auto value_of = [&body](const std::string& sample) {
      auto at = body.find("\n" + sample + " ");
      return at == std::string::npos ? -1.0 : std::stod(body.substr(at + sample.size() + 2));
    };
    const std::string spilled = R"(troupe_dispatch_actions_total{action="spilled"})";
    for (auto deadline = Clock::now() + 10s; Clock::now() < deadline;) {
      auto r = scraper.Get("/metrics");
      body = r && r->status == 200 ? r->body : std::string();
      if (value_of(spilled) >= 1) break;
      std::this_thread::sleep_for(200ms);  // the exporter samples every second
    }
    INFO("troupe-dispatch /metrics:\n" << body);
    CHECK(value_of(spilled) >= 1);
    CHECK(value_of(R"(troupe_dispatch_cluster_up{cluster="c1"})") == 1);
    CHECK(value_of(R"(troupe_dispatch_cluster_up{cluster="c2"})") == 1);
    CHECK(value_of(R"(troupe_dispatch_cluster_gpus{cluster="c1",gpu_type="a100"})") == 2);
    CHECK(value_of(R"(troupe_dispatch_cluster_gpus{cluster="c2",gpu_type="h100"})") == 2);
    CHECK(value_of(R"(troupe_dispatch_actions_total{action="sent"})") >= 3);
  }

  // Logs and history through the front door.
  auto log = front.logs("t1", x);
  INFO("logs: " << log.error);
  CHECK(log.ok);
  CHECK(log.data.find("spilled-over-ok") != std::string::npos);
  Json hist = front.request(subjects::team_history("t1"), Json{{"job_id", x}});
  INFO("history: " << hist.dump());
  REQUIRE(hist.contains("events"));
  CHECK(hist.value("job_id", "") == x);
  for (const auto& e : hist["events"]) CHECK(e.value("job_id", "") == x);
  // ... of both its copies: where it waited first (queued, then withdrawn),
  // then where it ran.
  std::set<std::string> hist_clusters;
  for (const auto& e : hist["events"]) hist_clusters.insert(e.value("cluster", ""));
  CHECK(hist_clusters == std::set<std::string>{"c1", "c2"});
  REQUIRE_FALSE(hist["events"].empty());
  CHECK(hist["events"].front().value("cluster_job_id", "") == first_id);
  CHECK(hist["events"].back().value("state", "") == std::string(names::kSucceeded));
  CHECK_FALSE(hist.contains("partial"));
  // Another team's job or an unknown id: not found.
  CHECK(front.request(subjects::team_status("t2"), Json{{"job_id", x}}).value("code", "") ==
        "not_found");
  CHECK(front.request(subjects::team_status("t1"), Json{{"job_id", "j-x0"}}).value("code", "") ==
        "not_found");
  // Bad input: an error, and the front door keeps serving.
  CHECK(front.request_text(subjects::team_submit("t1"), "{not json").contains("error"));

  // A FlatBuffers SubmitRequest (as services send): a FlatBuffers SubmitReply
  // with the front door's id; the job runs in its type's cluster. Truncated:
  // a FlatBuffers error reply.
  {
    pb::JobSpec fs;
    fs.set_team("t1");
    fs.set_kind("training");
    fs.add_command("true");
    fs.mutable_resources()->set_gpus(1);
    // (of the cluster freed above, where the any-type job ran and ended)
    const std::string other = first == "c1" ? "c2" : "c1";
    fs.mutable_resources()->set_gpu_type(first == "c1" ? "h100" : "a100");
    flatbuffers::FlatBufferBuilder fbb;
    auto bytes = wire::seal(fbb, wire::CreateSubmitRequest(fbb, spec::to_wire(fbb, fs)));
    std::string err;
    auto r = front.request_raw(subjects::team_submit("t1"), bytes, 10s, &err);
    INFO("FlatBuffers submission through the front door: " << err);
    REQUIRE(r);
    const auto* env = wire::open(*r);
    REQUIRE(env != nullptr);
    REQUIRE(env->body_as_SubmitReply() != nullptr);
    INFO("its error: " << wire::str(env->body_as_SubmitReply()->error()));
    const std::string fb_id = wire::str(env->body_as_SubmitReply()->job_id());
    REQUIRE(fb_id.rfind("j-x", 0) == 0);
    auto fb_end = front.events().wait_state(fb_id, names::is_terminal, 60s);
    REQUIRE(fb_end);
    CHECK(fb_end->state == names::kSucceeded);
    CHECK(front.status("t1", fb_id).value("cluster", "") == other);
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(bytes.size() / 2));
    auto bad = front.request_raw(subjects::team_submit("t1"), cut, 10s, &err);
    REQUIRE(bad);
    CHECK(std::string(bad->begin(), bad->end()).find("error") != std::string::npos);
  }

  // A spec naming its pool: the front door sends it on the pool's subject
  // (troupe.<team>.submit.<pool>, where a sharded cluster's owner reads it),
  // seen by a listener of our own on the cluster's NATS; it runs there. A
  // pool that is no subject token never becomes part of a subject: the
  // cluster refuses the spec.
  {
    const std::string other = first == "c1" ? "c2" : "c1";
    Cluster& there = first == "c1" ? c2 : c1;
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::string> seen;  // subjects of the submissions heard
    auto listen = [&](Inbound&& in) {
      std::lock_guard<std::mutex> g(mu);
      seen.push_back(in.subject);
      cv.notify_all();
    };
    auto on_pool = there.conn().subscribe(subjects::team_submit_to("t1", "*"), listen);
    REQUIRE(on_pool);
    REQUIRE(there.conn().flush());
    Json pooled = typed({"true"}, 1, {{"gpu_type", other == "c1" ? "a100" : "h100"}});
    pooled["pool"] = "default";
    Json p_reply = front.submit_json("t1", pooled);
    INFO("pooled submission: " << p_reply.dump());
    REQUIRE(p_reply.contains("job_id"));
    CHECK(p_reply.value("cluster", "") == other);
    auto p_end = front.events().wait_state(p_reply["job_id"], names::is_terminal, 60s);
    REQUIRE(p_end);
    CHECK(p_end->state == names::kSucceeded);
    {
      std::unique_lock<std::mutex> g(mu);
      REQUIRE(cv.wait_for(g, 10s, [&] { return !seen.empty(); }));
      CHECK(seen == std::vector<std::string>{subjects::team_submit_to("t1", "default")});
    }
    for (const char* pool : {"*", ">", "a.b"}) {
      Json hostile = pooled;
      hostile["pool"] = pool;
      Json h_reply = front.submit_json("t1", hostile);
      INFO("pool '" << pool << "': " << h_reply.dump());
      CHECK(h_reply.contains("error"));
      CHECK_FALSE(h_reply.contains("job_id"));
    }
    std::lock_guard<std::mutex> g(mu);
    CHECK(seen.size() == 1);
  }

  // Hostile bodies on every verb the front door serves: an error reply each
  // (none for a bad submission's spec goes to a cluster), and it keeps serving.
  for (const char* verb : {"submit", "status", "cancel", "logs", "why", "history"}) {
    for (std::string body : {std::string(), std::string("\xFF\xFE\x00\x01", 4), std::string("[]"),
                             std::string(R"({"job_id":5})"), std::string(R"({"job_id":"\u0000"})"),
                             std::string(100000, '{')}) {
      std::string err;
      auto r = front.request_raw(subjects::team_verb("t1", verb),
                                 std::vector<uint8_t>(body.begin(), body.end()), 10s, &err);
      INFO(verb << " with a hostile body of " << body.size() << " bytes: " << err);
      REQUIRE(r);
      Json j = Json::parse(r->begin(), r->end(), nullptr, false);
      CHECK((j.is_object() && j.contains("error") && !j.contains("job_id")));
    }
  }
  CHECK(dispatch->running());

  // troupe.<team>.jobs through the front door: its own ids, in submit order,
  // with each job's cluster and state; pages; another team sees none of them.
  {
    Json all_jobs = front.request(subjects::team_jobs("t1"), Json::object());
    INFO("jobs at the front door: " << all_jobs.dump());
    REQUIRE(all_jobs.contains("jobs"));
    std::vector<std::string> ids;
    for (const auto& j : all_jobs["jobs"]) ids.push_back(j.value("job_id", ""));
    REQUIRE(ids.size() >= 3);
    CHECK(ids[0] == a);
    CHECK(ids[1] == h);
    CHECK(ids[2] == x);
    CHECK(all_jobs["jobs"][2].value("state", "") == "succeeded");
    CHECK(all_jobs["jobs"][0].value("cluster", "") == "c1");
    Json first_page = front.request(subjects::team_jobs("t1"), Json{{"limit", 1}});
    REQUIRE(first_page.contains("next"));
    Json second =
        front.request(subjects::team_jobs("t1"), Json{{"limit", 1}, {"after", first_page["next"]}});
    REQUIRE(second.contains("jobs"));
    REQUIRE(second["jobs"].size() == 1);
    CHECK(second["jobs"][0].value("job_id", "") == h);
    Json succeeded =
        front.request(subjects::team_jobs("t1"), Json{{"state", "succeeded"}, {"limit", 100}});
    for (const auto& j : succeeded.value("jobs", Json::array()))
      CHECK(j.value("state", "") == "succeeded");
    CHECK(front.request(subjects::team_jobs("t2"), Json::object())["jobs"].empty());
    auto listed = front.run_cli({"jobs", "--team", "t1"});
    INFO("troupe jobs through the front door: " << listed.out << listed.err);
    CHECK(listed.exit_code == 0);
    CHECK(listed.out.find(x) != std::string::npos);
    // One cluster's jobs (troupe jobs --cluster, ?cluster=): the h100 job in
    // c2, not the a100 one in c1; a cluster the front door does not know.
    auto in_c2 = front.run_cli({"jobs", "--team", "t1", "--cluster", "c2", "-o", "json"});
    INFO("troupe jobs --cluster c2: " << in_c2.out << in_c2.err);
    CHECK(in_c2.exit_code == 0);
    CHECK(in_c2.out.find(h) != std::string::npos);
    CHECK(in_c2.out.find(a) == std::string::npos);
    Json nowhere = front.request(subjects::team_jobs("t1"), Json{{"cluster", "c9"}});
    CHECK(nowhere.value("code", "") == "not_found");
    auto nodes_c2 = front.run_cli({"nodes", "--cluster", "c2"});
    INFO("troupe nodes --cluster c2: " << nodes_c2.out << nodes_c2.err);
    CHECK(nodes_c2.exit_code == 0);
    CHECK(nodes_c2.out.find("h1") != std::string::npos);
    CHECK(nodes_c2.out.find("a1") == std::string::npos);
    // One cluster's queues: c2's pools and its own counters, not the sum.
    auto queues_c2 = front.run_cli({"queues", "--cluster", "c2", "--json"});
    INFO("troupe queues --cluster c2: " << queues_c2.out << queues_c2.err);
    REQUIRE(queues_c2.exit_code == 0);
    Json q2 = Json::parse(queues_c2.out, nullptr, false);
    CHECK(q2.value("cluster", "") == "c2");
    REQUIRE_FALSE(q2.value("pools", Json::array()).empty());
    for (const auto& p : q2["pools"]) CHECK(p.value("cluster", "") == "c2");
    auto queues_c9 = front.run_cli({"queues", "--cluster", "c9"});
    CHECK(queues_c9.exit_code != 0);
    CHECK(queues_c9.err.find("no cluster c9") != std::string::npos);
  }

  // A team's quota holds while its submissions are sent at once (the front
  // door sends several at a time): of 6 one-GPU jobs for c1 with a quota of
  // 2 GPUs there, at most 2 are taken, the others refused with the code.
  {
    Json t3_spec = typed({"sleep", "300"}, 1, {{"gpu_type", "a100"}});
    t3_spec["team"] = "t3";
    const std::string body = t3_spec.dump();
    std::vector<std::string> replies(6);
    std::vector<std::thread> senders;
    for (size_t i = 0; i < replies.size(); ++i)
      senders.emplace_back([&, i] {
        auto r = front.request_raw(subjects::team_submit("t3"),
                                   std::vector<uint8_t>(body.begin(), body.end()), 10s, nullptr);
        if (r) replies[i].assign(r->begin(), r->end());
      });
    for (auto& t : senders) t.join();
    int taken = 0, over = 0;
    std::string all_replies;
    for (const auto& r : replies) all_replies += r + "\n";
    INFO("the t3 submissions' replies:\n" << all_replies);
    for (const auto& r : replies) {
      Json j = Json::parse(r, nullptr, false);
      REQUIRE(j.is_object());
      taken += j.contains("job_id") ? 1 : 0;
      over += j.value("code", "") == "over_cluster_quota" ? 1 : 0;
    }
    CHECK(taken >= 1);
    CHECK(taken <= 2);
    CHECK(taken + over == 6);
  }

  // Usage through the front door, from the events it published: each job
  // once, by its end there (the any-type job that moved counts once, as
  // succeeded; its copy withdrawn from the first cluster is no cancel).
  {
    std::map<std::string, std::string> ended;  // t1's jobs by final state, from the events
    for (const auto& e : front.events().all())
      if (e.subject.rfind("troupe.t1.", 0) == 0 && names::is_terminal(e.state))
        ended[e.job_id] = e.state;
    std::map<std::string, int64_t> by_state;
    for (const auto& [id, state] : ended) ++by_state[state];
    REQUIRE(ended.count(x) == 1);
    Json usage = front.request(subjects::team_verb("t1", subjects::kUsage), Json{{"by", "none"}});
    INFO("troupe.t1.usage at the front door: " << usage.dump());
    REQUIRE(usage.contains("total"));
    std::map<std::string, int64_t> counted;
    const Json jobs = usage["total"].value("jobs", Json::object());
    for (const auto& [state, n] : jobs.items()) counted[state] = n.get<int64_t>();
    CHECK(counted == by_state);
    CHECK(usage["total"].value("gpu_hours", 0.0) > 0);
    // Another team's report has none of t1's jobs; a bad window is refused.
    Json t2 = front.request(subjects::team_verb("t2", subjects::kUsage), Json::object());
    INFO("troupe.t2.usage at the front door: " << t2.dump());
    REQUIRE(t2.contains("total"));
    CHECK(t2["total"].value("ended", -1) == 0);
    CHECK(front.request(subjects::team_verb("t1", subjects::kUsage), Json{{"since_ms", "x"}})
              .value("code", "") == "bad_request");
    RunResult u = front.run_cli({"usage", "--team", "t1"});
    INFO("troupe usage: " << describe(u));
    CHECK(u.exit_code == 0);
    CHECK(u.out.find("t1") != std::string::npos);
  }

  // troupe clusters: a row per cluster.
  auto cli = front.run_cli({"clusters"});
  INFO("troupe clusters: " << cli.out << cli.err);
  CHECK(cli.exit_code == 0);
  CHECK(cli.out.find("c1") != std::string::npos);
  CHECK(cli.out.find("h100") != std::string::npos);
  CHECK(cli.out.find("reachable") != std::string::npos);
  CHECK(dispatch->running());
}

// A front door over the two clusters (config `extra` added), both full, an
// any-type job `y` waiting in c1; then c1's link is cut: c1 turns
// unreachable, its running job `a` shows so, and `y` goes to c2 (where it
// waits for `h`), its copy `y_c1` left behind in c1; `a` is canceled inside
// c1, where `y_c1` is then placed and asks for leave to start.
struct CutOff {
  std::unique_ptr<Process> dispatch;
  std::string a, h, y, y_c1, a_c1;
};
CutOff cut_off_c1(TwoClusters& all, const std::string& extra) {
  Cluster& front = all.front();
  CutOff r;
  r.dispatch =
      start_dispatch(front, "clusters:\n" + linked_entry("c1", front) + linked_entry("c2", front) +
                                "spill_after_s: 0\npoll_ms: 200\n"
                                "unreachable_after_ms: 1000\n" +
                                extra);
  wait_clusters(front, 30s);

  // Both clusters full; the any-type job waits in c1 (a tie goes by name).
  r.a = front.submit_ok("t1", typed({"sleep", "120"}, 2, {{"gpu_type", "a100"}}));
  r.h = front.submit_ok("t1", typed({"sleep", "120"}, 2, {{"gpu_type", "h100"}}));
  REQUIRE(front.events().wait_state(r.a, std::string(names::kRunning), 30s));
  REQUIRE(front.events().wait_state(r.h, std::string(names::kRunning), 30s));
  Json y_reply = front.submit_json(
      "t1", typed({"sh", "-c", "echo redispatched-ok"}, 2, {{"gpu_types", {"a100", "h100"}}}));
  INFO("any-type submission: " << y_reply.dump());
  REQUIRE(y_reply.value("cluster", "") == "c1");
  r.y = y_reply["job_id"];
  r.y_c1 = front.status("t1", r.y).value("cluster_job_id", "");
  r.a_c1 = front.status("t1", r.a).value("cluster_job_id", "");
  REQUIRE_FALSE(r.y_c1.empty());
  REQUIRE_FALSE(r.a_c1.empty());

  all.link.cut();
  Json view;
  INFO("troupe.sys.clusters: " << view.dump());
  REQUIRE(wait_view(
      front, [](const Json& v) { return cluster_state(v, "c1") == "unreachable"; }, 20s, &view));
  CHECK(front.status("t1", r.a).value("state", "") == "unreachable");
  REQUIRE(wait_status(
      front, r.y, [](const Json& st) { return st.value("cluster", "") == "c2"; }, 20s));

  // Inside c1 the GPUs free up (its own users go on): the copy left behind
  // is placed, asks the front door for leave, gets no answer, never starts.
  Json c1_cancel = all.c1.cancel("t1", r.a_c1);
  INFO("cancel in c1: " << c1_cancel.dump());
  REQUIRE(all.c1.events().wait_state(r.a_c1, std::string(names::kCanceled), 20s));
  return r;
}

// c1 is back (its link mended): the copy left behind asks its front door
// again, is told it was withdrawn, and ends canceled without ever starting.
void mend_and_check_withdrawn(TwoClusters& all, const CutOff& r) {
  Cluster &c1 = all.c1, &front = all.front();
  all.link.mend();
  Json view;
  REQUIRE(wait_view(
      front, [](const Json& v) { return cluster_state(v, "c1") == "reachable"; }, 20s, &view));
  auto gone = c1.events().wait_state(r.y_c1, std::string(names::kCanceled), 30s);
  INFO("the copy in c1: " << c1.events().describe(r.y_c1));
  CHECK(gone);
  for (const auto& e : c1.events().of_job(r.y_c1))
    CHECK((e.state != names::kStarting && e.state != names::kRunning));
  REQUIRE(wait_view(
      front, [](const Json& v) { return v["counters"].value("claims_withdrawn", 0) >= 1; }, 10s,
      &view));
  int runs = 0;
  for (const auto& e : front.events().of_job(r.y)) runs += e.state == names::kRunning ? 1 : 0;
  CHECK(runs == 1);
  CHECK(r.dispatch->running());
}

TEST_CASE(
    "depends_on through the front door: the job goes to its upstream's cluster and waits for it "
    "there, neither is spilled over (a twin without dependents is), unknown and split upstreams "
    "are refused",
    "[integration][clusters]") {
  TwoClusters all;
  Cluster &c1 = all.c1, &front = all.front();
  auto dispatch = start_dispatch(
      front, "clusters:\n" + linked_entry("c1", front) + linked_entry("c2", front) +
                 "teams:\n  t1: {clusters: [c1, c2]}\nspill_after_s: 1\npoll_ms: 200\n");
  wait_clusters(front, 30s);
  auto either = [](const std::string& command) {
    // Either type, c1 preferred (soft): waits in c1 when c1 is full.
    return typed({"sh", "-c", command}, 1,
                 {{"gpu_types", {"a100", "h100"}}, {"cluster", "c1"}, {"locality", "soft"}});
  };
  auto after = [](Json spec, const std::string& upstream) {
    spec["depends_on"] = Json::array({Json{{"job", upstream}}});
    return spec;
  };

  // c1 full; `up` waits there, its dependent `down` goes there too (c2 is
  // free), and a twin of `up` without dependents.
  const std::string blocker =
      front.submit_ok("t1", typed({"sleep", "120"}, 2, {{"gpu_type", "a100"}}));
  REQUIRE(front.events().wait_state(blocker, std::string(names::kRunning), 30s));
  const std::string up = front.submit_ok("t1", either("sleep 1; echo up-ok"));
  Json up_first = front.status("t1", up);
  CHECK(up_first.value("cluster", "") == "c1");
  const std::string up_c1 = up_first.value("cluster_job_id", "");
  Json down_reply = front.submit_json("t1", after(either("echo down-ok"), up));
  INFO("dependent submission: " << down_reply.dump());
  REQUIRE(down_reply.contains("job_id"));
  CHECK(down_reply.value("cluster", "") == "c1");
  const std::string down = down_reply["job_id"];
  const std::string twin = front.submit_ok("t1", either("echo twin-ok"));

  // The twin spills over to c2 and runs there; `up` and `down` stay.
  auto twin_end = front.events().wait_state(twin, names::is_terminal, 60s);
  REQUIRE(twin_end);
  CHECK(twin_end->state == names::kSucceeded);
  CHECK(front.status("t1", twin).value("cluster", "") == "c2");
  Json down_status = front.status("t1", down);
  INFO("dependent's status: " << down_status.dump());
  CHECK(down_status.value("cluster", "") == "c1");
  CHECK(down_status.value("state", "") == std::string(names::kBlocked));
  // Its upstream named by the front door's id, in its status and its why.
  CHECK(down_status.value("depends_on", Json::array()).dump().find(up) != std::string::npos);
  CHECK(down_status.dump().find(up_c1) == std::string::npos);
  const std::string down_why = front.why("t1", down).dump();
  INFO("why: " << down_why);
  CHECK(down_why.find("waiting for " + up) != std::string::npos);
  CHECK(down_why.find(up_c1) == std::string::npos);

  // Refused: an unknown upstream (a cluster's text), upstreams in two
  // clusters, a dependent of a type its upstream's cluster has not.
  Json unknown = front.submit_json("t1", after(either("true"), "j-xnope"));
  CHECK(unknown.value("code", "") == "invalid_spec");
  CHECK(unknown.value("error", "").find("no job j-xnope in team t1") != std::string::npos);
  Json split = either("true");
  split["depends_on"] = Json::array({Json{{"job", up}}, Json{{"job", twin}}});
  Json split_reply = front.submit_json("t1", split);
  CHECK(split_reply.value("code", "") == "invalid_spec");
  CHECK(split_reply.value("error", "").find("different clusters") != std::string::npos);
  Json typed_reply = front.submit_json("t1", after(typed({"true"}, 1, {{"gpu_type", "h100"}}), up));
  INFO("an h100 dependent of a job in c1: " << typed_reply.dump());
  CHECK_FALSE(typed_reply.contains("job_id"));
  CHECK(typed_reply.value("error", "").find("upstream jobs are in cluster c1") !=
        std::string::npos);

  // c1 frees up: `up` runs where it waited, then `down` after it.
  CHECK(front.cancel("t1", blocker).value("job_id", "") == blocker);
  auto up_end = front.events().wait_state(up, names::is_terminal, 60s);
  REQUIRE(up_end);
  CHECK(up_end->state == names::kSucceeded);
  auto down_end = front.events().wait_state(down, names::is_terminal, 60s);
  INFO("dependent's events: " << front.events().describe(down));
  REQUIRE(down_end);
  CHECK(down_end->state == names::kSucceeded);
  Json up_status = front.status("t1", up);
  CHECK(up_status.value("cluster", "") == "c1");
  CHECK(up_status.value("cluster_job_id", "") == up_c1);
  CHECK(front.logs("t1", down).data.find("down-ok") != std::string::npos);
  // In c1 (its scheduler's events, in the order it published them), `down`
  // started after `up` ended.
  const std::string down_c1 = front.status("t1", down).value("cluster_job_id", "");
  auto up_done = c1.events().wait_state(up_c1, names::is_terminal, 10s);
  auto down_started = c1.events().wait_state(down_c1, std::string(names::kStarting), 10s);
  REQUIRE(up_done);
  REQUIRE(down_started);
  CHECK(down_started->seq > up_done->seq);
  // One job spilled over: the twin.
  Json view;
  REQUIRE(wait_view(
      front, [](const Json&) { return true; }, 10s, &view));
  CHECK(view["counters"].value("spilled", 0) == 1);
}

TEST_CASE(
    "a pipeline through the front door goes whole to the one cluster every member may use, its "
    "jobs get front-door ids and run in order there, a retry gets the same ids, one no cluster "
    "can take whole is refused with nothing made",
    "[integration][clusters]") {
  TwoClusters all;
  Cluster &c1 = all.c1, &front = all.front();
  const std::string config = "clusters:\n" + linked_entry("c1", front) + linked_entry("c2", front) +
                             "teams:\n  t1: {clusters: [c1, c2]}\n  t4: {quota: {c2: 1}}\n"
                             "poll_ms: 200\n";
  auto dispatch = start_dispatch(front, config);
  wait_clusters(front, 30s);
  auto member = [](const std::string& name, const std::string& command, Json resources,
                   Json depends_on = Json::array()) {
    Json m = {{"name", name}, {"command", {"sh", "-c", command}}, {"resources", resources}};
    m["resources"]["gpus"] = 1;
    if (!depends_on.empty()) m["depends_on"] = depends_on;
    return m;
  };
  // prep needs an a100 (only c1), train either type, eval after train.
  Json pipeline = {{"name", "nightly"},
                   {"idempotency_key", "nightly-1"},
                   {"jobs",
                    {member("prep", "echo prep-ok", {{"gpu_type", "a100"}}),
                     member("train", "echo train-ok", {{"gpu_types", {"a100", "h100"}}},
                            Json::array({Json{{"name", "prep"}}})),
                     member("eval", "echo eval-ok", {{"gpu_type", "a100"}},
                            Json::array({Json{{"name", "train"}, {"on", "finished"}}}))}}};
  Json r = front.request(subjects::team_pipeline("t1"), pipeline);
  INFO("pipeline through the front door: " << r.dump());
  REQUIRE(r.contains("pipeline_id"));
  CHECK(r.value("cluster", "") == "c1");
  REQUIRE(r["jobs"].size() == 3);
  std::map<std::string, std::string> ids, there;  // name -> front id, its id in c1
  for (const auto& j : r["jobs"]) {
    ids[j.value("name", "")] = j.value("job_id", "");
    there[j.value("name", "")] = j.value("cluster_job_id", "");
    CHECK(j.value("job_id", "").rfind("j-x", 0) == 0);
  }
  REQUIRE(ids.size() == 3);
  for (const auto& [name, id] : ids) {
    auto end = front.events().wait_state(id, names::is_terminal, 60s);
    INFO(name << ": " << front.events().describe(id));
    REQUIRE(end);
    CHECK(end->state == names::kSucceeded);
    CHECK(front.logs("t1", id).data.find(name + "-ok") != std::string::npos);
    CHECK(front.status("t1", id).value("cluster", "") == "c1");
  }
  // In c1, each started after its upstream ended.
  auto ended = [&](const std::string& n) {
    return c1.events().wait_state(there[n], names::is_terminal, 10s);
  };
  auto started = [&](const std::string& n) {
    return c1.events().wait_state(there[n], std::string(names::kStarting), 10s);
  };
  REQUIRE((ended("prep") && started("train") && ended("train") && started("eval")));
  CHECK(started("train")->seq > ended("prep")->seq);
  CHECK(started("eval")->seq > ended("train")->seq);
  // Its jobs listed by the pipeline's id at the front door.
  Json listed = front.request(subjects::team_jobs("t1"),
                              Json{{"pipeline", r["pipeline_id"].get<std::string>()}});
  INFO("jobs of the pipeline: " << listed.dump());
  CHECK(listed.value("jobs", Json::array()).size() == 3);

  // Sent again with its key: the same ids, nothing more made.
  Json again = front.request(subjects::team_pipeline("t1"), pipeline);
  INFO("the retry: " << again.dump());
  REQUIRE(again.contains("jobs"));
  for (const auto& j : again["jobs"]) CHECK(ids[j.value("name", "")] == j.value("job_id", ""));

  // A pipeline whose member waits for a job by its front-door id: to that
  // job's cluster (c2 is freer), with its id there; it runs.
  Json later = {{"jobs",
                 {member("post", "echo post-ok", {{"gpu_types", {"h100", "a100"}}},
                         Json::array({Json{{"job", ids["eval"]}, {"on", "finished"}}}))}}};
  Json later_reply = front.request(subjects::team_pipeline("t1"), later);
  INFO("a pipeline after a front-door job: " << later_reply.dump());
  REQUIRE(later_reply.contains("jobs"));
  CHECK(later_reply.value("cluster", "") == "c1");
  const std::string post = later_reply["jobs"][0].value("job_id", "");
  auto post_end = front.events().wait_state(post, names::is_terminal, 60s);
  REQUIRE(post_end);
  CHECK(post_end->state == names::kSucceeded);

  // No cluster has both types: refused, no job made; a malformed body too.
  Json split = {
      {"jobs",
       {member("a", "true", {{"gpu_type", "a100"}}), member("h", "true", {{"gpu_type", "h100"}})}}};
  Json refused = front.request(subjects::team_pipeline("t1"), split);
  INFO("a pipeline no cluster can take whole: " << refused.dump());
  CHECK(refused.value("code", "") == "no_cluster_for_pipeline");
  CHECK_FALSE(refused.contains("pipeline_id"));
  CHECK(front.request_text(subjects::team_pipeline("t1"), "{not json").contains("error"));
  CHECK(front.request(subjects::team_pipeline("t1"), Json{{"jobs", Json::array()}})
            .contains("error"));
  // The team's quota in a cluster holds the whole pipeline: t4 may have 1
  // GPU in c2, the only h100 cluster; each of two 1-GPU h100 jobs fits
  // alone, the two together do not: refused, nothing made. One alone goes.
  Json pair = {{"jobs",
                {member("h1", "true", {{"gpu_type", "h100"}}),
                 member("h2", "true", {{"gpu_type", "h100"}})}}};
  Json over = front.request(subjects::team_pipeline("t4"), pair);
  INFO("a pipeline over the team's quota: " << over.dump());
  CHECK(over.value("code", "") == "over_cluster_quota");
  CHECK_FALSE(over.contains("pipeline_id"));
  CHECK(front.request(subjects::team_jobs("t4"), Json::object())
            .value("jobs", Json::array())
            .empty());
  pair["jobs"].erase(1);
  Json one = front.request(subjects::team_pipeline("t4"), pair);
  INFO("a pipeline within it: " << one.dump());
  CHECK(one.value("cluster", "") == "c2");
  Json after_all = front.request(subjects::team_jobs("t1"), Json::object());
  CHECK(after_all.value("jobs", Json::array()).size() == 4);

  // Its key outlives a front door restart: a retry goes where the first
  // went (and gets the same ids), though that cluster is full now (the job
  // takes both its GPUs) and the other free.
  Json whole = member("hold", "sleep 120", {{"gpu_types", {"a100", "h100"}}});
  whole["resources"]["gpus"] = 2;
  Json held = {{"idempotency_key", "hold-1"}, {"jobs", {whole}}};
  Json first = front.request(subjects::team_pipeline("t1"), held);
  INFO("the held pipeline: " << first.dump());
  REQUIRE(first.contains("jobs"));
  const std::string where = first.value("cluster", "");
  const std::string hold = first["jobs"][0].value("job_id", "");
  REQUIRE(front.events().wait_state(hold, std::string(names::kRunning), 30s));
  dispatch->stop();
  dispatch = start_dispatch(front, config);
  Json view;
  REQUIRE(wait_view(
      front,
      [&](const Json& v) {
        bool seen = v["clusters"].size() == 2;
        for (const auto& c : v["clusters"])
          seen = seen && c.value("state", "") == "reachable" &&
                 c.value("gpus_free", -1) == (c.value("name", "") == where ? 0 : 2);
        return seen;
      },
      30s, &view));
  Json retry = front.request(subjects::team_pipeline("t1"), held);
  INFO("its retry after a restart: " << retry.dump());
  CHECK(retry.value("cluster", "") == where);
  REQUIRE(retry.contains("jobs"));
  CHECK(retry["jobs"][0].value("job_id", "") == hold);
  front.cancel("t1", hold);
  CHECK(dispatch->running());
}

TEST_CASE(
    "a cluster cut off from the front door: its running jobs show unreachable, its unstarted job "
    "is re-dispatched and runs elsewhere, and the copy left behind never starts",
    "[integration][clusters]") {
  TwoClusters all;
  Cluster& front = all.front();
  auto cut = cut_off_c1(all, "");
  const std::string &h = cut.h, &y = cut.y;
  // c2 frees up: the job runs there, once.
  front.cancel("t1", h);
  auto end = front.events().wait_state(y, names::is_terminal, 60s);
  INFO("the job's events at the front: " << front.events().describe(y));
  REQUIRE(end);
  CHECK(end->state == names::kSucceeded);
  auto log = front.logs("t1", y);
  CHECK(log.data.find("redispatched-ok") != std::string::npos);

  mend_and_check_withdrawn(all, cut);
}

TEST_CASE(
    "a copy left behind in a cluster cut off for longer than the front door's job_retention_s is "
    "withdrawn when its cluster is back (its job was forgotten meanwhile), never started, and with "
    "keep_events: false the front door keeps no events, still publishes them, and answers usage "
    "not_kept",
    "[integration][clusters]") {
  TwoClusters all;
  Cluster &c1 = all.c1, &front = all.front();
  auto cut = cut_off_c1(all, "job_retention_s: 3\nkeep_events: false\n");
  // No stream keeps the front door's events; usage says why. (The events
  // this test waits on below are heard live on the front NATS.)
  Json info = front.request("$JS.API.STREAM.INFO." + std::string(subjects::kDispatchEventsStream),
                            Json::object());
  INFO("TROUPE_FRONT_EVENTS: " << info.dump());
  CHECK(info.contains("error"));
  CHECK_FALSE(info.contains("config"));
  Json usage = front.request(subjects::team_verb("t1", subjects::kUsage), Json{{"by", "none"}});
  INFO("troupe.t1.usage at the front door: " << usage.dump());
  CHECK(usage.value("code", "") == "not_kept");
  // c2 frees up: the job runs there and ends; past the retention the front
  // door forgets it, and with it which copy was left behind.
  front.cancel("t1", cut.h);
  REQUIRE(front.events().wait_state(cut.y, std::string(names::kSucceeded), 60s));
  REQUIRE(wait_status(
      front, cut.y, [](const Json& st) { return st.value("code", "") == "not_found"; }, 30s));
  // Its copy in c1 was taken before then: older than the retention, unknown,
  // it is withdrawn (not asked about again every 2 s for ever).
  mend_and_check_withdrawn(all, cut);
  std::string why;
  for (const auto& e : c1.events().of_job(cut.y_c1))
    if (e.state == names::kCanceled) why = e.json.value("reason", "");
  INFO("the copy's end: " << why);
  CHECK(why.find("left behind") != std::string::npos);
}

TEST_CASE(
    "two front doors: one serves and the other waits, the standby takes over from one paused past "
    "its lease, which stays silent and exits 3, jobs sent before are found and none is sent twice, "
    "an enqueued job is sent on once",
    "[integration][clusters]") {
  TwoClusters all;
  Cluster &c1 = all.c1, &front = all.front();
  const std::string config =
      "clusters:\n" + linked_entry("c1", front) + linked_entry("c2", front) + "poll_ms: 200\n";
  const std::vector<std::string> ttl = {"--lease-ttl-ms", "1000"};
  auto first = start_dispatch(front, config, "dispatch", ttl);
  wait_clusters(front, 30s);
  auto second = start_dispatch(front, config, "dispatch2", ttl);
  REQUIRE(wait_file_contains(second->err_path(), "waiting as a standby", 20s));

  // Served by the first: each submission sent to one cluster, once.
  const std::string a = front.submit_ok("t1", typed({"sleep", "120"}, 1, {{"gpu_type", "a100"}}));
  REQUIRE(front.events().wait_state(a, std::string(names::kRunning), 30s));
  const std::string a_c1 = front.status("t1", a).value("cluster_job_id", "");
  REQUIRE_FALSE(a_c1.empty());

  // The first stops (paused, as a process cut off or stalled would be): the
  // second serves within the ttl and what it restores of the first's.
  REQUIRE(first->signal(SIGSTOP));
  const auto paused = Clock::now();
  REQUIRE(wait_file_contains(second->err_path(), "dispatch: serving", 10s));
  wait_clusters(front, 10s);  // (the new one polls every cluster before it listens)
  const auto took = Clock::now() - paused;
  INFO("the standby answered after "
       << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
  CHECK(took < 5s);
  Json st = front.status("t1", a);
  INFO("status through the new front door: " << st.dump());
  CHECK(st.value("state", "") == std::string(names::kRunning));
  CHECK(st.value("cluster", "") == "c1");
  const std::string b =
      front.submit_ok("t1", typed({"sh", "-c", "echo after-takeover"}, 1, {{"gpu_type", "h100"}}));
  auto b_end = front.events().wait_state(b, names::is_terminal, 60s);
  REQUIRE(b_end);
  CHECK(b_end->state == names::kSucceeded);
  CHECK(front.logs("t1", b).data.find("after-takeover") != std::string::npos);

  // The first wakes: it finds its lease another's, answers nothing, exits 3.
  REQUIRE(first->signal(SIGCONT));
  REQUIRE(first->wait_exit(Clock::now() + 10s));
  CHECK(first->exit_status() == 3);

  // Enqueued with JetStream on the front NATS (troupe.<team>.enqueue): sent
  // on like a submission, once, its Nats-Msg-Id its idempotency key.
  {
    std::string err;
    auto js = bus::JetStream::open(front.conn(), &err);
    REQUIRE(js);
    Json spec = typed({"sh", "-c", "echo enqueued-ok"}, 1, {{"gpu_type", "h100"}});
    spec["name"] = "enq-front";
    const std::string body = spec.dump();
    REQUIRE(js->publish(subjects::team_verb("t1", subjects::kEnqueue), body.data(), body.size(),
                        "enq-front-key") == "");
    std::set<std::string> ids;
    bool done = front.events().wait_for(
        [&](const std::vector<Event>& events) {
          ids.clear();
          bool ok = false;
          for (const auto& e : events) {
            if (e.json.value("name", "") != "enq-front") continue;
            ids.insert(e.job_id);
            ok = ok || e.state == names::kSucceeded;
          }
          return ok;
        },
        60s);
    INFO("the enqueued job's ids at the front: " << Json(ids).dump());
    REQUIRE(done);
    CHECK(ids.size() == 1);
    const std::string e = *ids.begin();
    CHECK(front.status("t1", e).value("cluster", "") == "c2");
    CHECK(front.logs("t1", e).data.find("enqueued-ok") != std::string::npos);
    // Again under another message id, the spec naming the same key: a
    // duplicate, acknowledged, no second job.
    spec["idempotency_key"] = "enq-front-key";
    const std::string again = spec.dump();
    REQUIRE(js->publish(subjects::team_verb("t1", subjects::kEnqueue), again.data(), again.size(),
                        "enq-front-again") == "");
    Json view;
    REQUIRE(wait_view(
        front, [](const Json& v) { return v["counters"].value("duplicates", 0) >= 1; }, 20s,
        &view));
    std::set<std::string> named;
    for (const auto& ev : front.events().all())
      if (ev.json.value("name", "") == "enq-front") named.insert(ev.job_id);
    CHECK(named == ids);
  }
  front.cancel("t1", a);
  REQUIRE(c1.events().wait_state(a_c1, std::string(names::kCanceled), 20s));
  // One job in c1 for the one a100 submission: none was sent twice.
  std::set<std::string> in_c1;
  for (const auto& e : c1.events().all()) in_c1.insert(e.job_id);
  INFO("jobs in c1: " << in_c1.size());
  CHECK(in_c1.size() == 1);
  CHECK(second->running());
}

TEST_CASE(
    "through the front door, 300 submissions out at once each get a job of their own, and 20 "
    "at once with one idempotency key get one job",
    "[integration][clusters]") {
  TwoClusters all;
  Cluster& front = all.front();
  auto dispatch = start_dispatch(front, "clusters:\n" + linked_entry("c1", front) +
                                            linked_entry("c2", front) + "poll_ms: 200\n");
  wait_clusters(front, 30s);
  std::string err;
  auto requester = bus::Requester::open(front.conn(), &err);
  INFO(err);
  REQUIRE(requester);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Json> distinct, keyed;
  auto on = [&](std::vector<Json>* into) {
    return [&, into](std::optional<std::vector<uint8_t>> r, const std::string& e) {
      std::lock_guard<std::mutex> lock(mu);
      into->push_back(r ? Json::parse(r->begin(), r->end(), nullptr, false) : Json{{"error", e}});
      cv.notify_all();
    };
  };
  const std::string subject = subjects::team_submit("t1");
  // Sent all at once: the keyed ones between the others.
  for (int i = 0; i < 300; ++i) {
    Json spec = typed({"sleep", "60"}, 1, {{"gpu_type", i % 2 == 0 ? "a100" : "h100"}});
    spec["name"] = "many-" + std::to_string(i);
    requester->request(subject, spec.dump(), 30000, on(&distinct));
    if (i % 15 == 0) {
      Json k = typed({"sleep", "60"}, 1, {{"gpu_type", "a100"}});
      k["idempotency_key"] = "once-through-the-front";
      requester->request(subject, k.dump(), 30000, on(&keyed));
    }
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, 60s, [&] { return distinct.size() == 300 && keyed.size() == 20; }));
  }
  std::set<std::string> ids, clusters;
  for (const auto& r : distinct) {
    INFO(r.dump());
    REQUIRE(r.contains("job_id"));
    ids.insert(r.value("job_id", ""));
    clusters.insert(r.value("cluster", ""));
  }
  CHECK(ids.size() == 300);
  CHECK(clusters == std::set<std::string>{"c1", "c2"});
  std::set<std::string> keyed_ids;
  for (const auto& r : keyed) {
    INFO(r.dump());
    REQUIRE(r.contains("job_id"));
    keyed_ids.insert(r.value("job_id", ""));
  }
  REQUIRE(keyed_ids.size() == 1);
  CHECK(ids.count(*keyed_ids.begin()) == 0);
  Json view;
  REQUIRE(wait_view(
      front, [](const Json& v) { return v["counters"].value("duplicates", 0) >= 19; }, 10s, &view));
  CHECK(view["counters"].value("sent", 0) == 301);
}

TEST_CASE(
    "the front door forgets a job ended longer than job_retention_s, in memory and in its bucket, "
    "and keeps the running ones",
    "[integration][clusters]") {
  TwoClusters all;
  Cluster& front = all.front();
  const std::string config = "clusters:\n" + linked_entry("c1", front) + linked_entry("c2", front) +
                             "poll_ms: 200\njob_retention_s: 1\n";
  auto dispatch = start_dispatch(front, config);
  wait_clusters(front, 30s);
  const std::string done = front.submit_ok("t1", typed({"true"}, 1, {{"gpu_type", "a100"}}));
  const std::string runs =
      front.submit_ok("t1", typed({"sleep", "120"}, 1, {{"gpu_type", "h100"}}));
  REQUIRE(front.events().wait_state(done, std::string(names::kSucceeded), 30s));
  REQUIRE(front.events().wait_state(runs, std::string(names::kRunning), 30s));
  auto listed = [&] {
    std::set<std::string> ids;
    for (const auto& j : front.request(subjects::team_verb("t1", subjects::kJobs), Json::object())
                             .value("jobs", Json::array()))
      ids.insert(j.value("job_id", ""));
    return ids;
  };
  REQUIRE(wait_status(
      front, done, [](const Json& st) { return st.value("code", "") == "not_found"; }, 20s));
  CHECK(listed() == std::set<std::string>{runs});
  CHECK(front.status("t1", runs).value("state", "") == std::string(names::kRunning));
  Json view;
  REQUIRE(wait_view(
      front, [](const Json& v) { return v["counters"].value("forgotten", 0) >= 1; }, 10s, &view));
  // Gone from the bucket too: a new front door restores the running job only.
  dispatch->stop();
  dispatch = start_dispatch(front, config);
  wait_clusters(front, 30s);
  CHECK(listed() == std::set<std::string>{runs});
  CHECK(front.status("t1", done).value("code", "") == "not_found");
  CHECK(front.status("t1", runs).value("state", "") == std::string(names::kRunning));
}

TEST_CASE("a cluster slow to answer holds up no request about another cluster's job",
          "[integration][clusters]") {
  TwoClusters all;
  Cluster &c2 = all.c2, &front = all.front();
  const std::string config =
      "clusters:\n" + linked_entry("c1", front) + linked_entry("c2", front) + "poll_ms: 200\n";
  auto dispatch = start_dispatch(front, config, "dispatch", {"--request-timeout-ms", "4000"});
  wait_clusters(front, 30s);
  const std::string a = front.submit_ok("t1", typed({"sleep", "120"}, 1, {{"gpu_type", "a100"}}));
  const std::string b = front.submit_ok("t1", typed({"sleep", "120"}, 1, {{"gpu_type", "h100"}}));
  REQUIRE(front.events().wait_state(a, std::string(names::kRunning), 30s));
  REQUIRE(front.events().wait_state(b, std::string(names::kRunning), 30s));

  // c2's scheduler stalls: each request about b waits a request timeout.
  REQUIRE(c2.scheduler().signal(SIGSTOP));
  std::mutex mu;
  std::condition_variable cv;
  int answered_b = 0;
  const std::string inbox = front.conn().new_inbox();
  auto sub = front.conn().subscribe(inbox, [&](Inbound&&) {
    std::lock_guard<std::mutex> lock(mu);
    ++answered_b;
    cv.notify_all();
  });
  REQUIRE(sub);
  const std::string about_b = Json{{"job_id", b}}.dump();
  for (int i = 0; i < 3; ++i)  // on this connection before the request about a: heard first
    REQUIRE(front.conn().publish(subjects::team_verb("t1", subjects::kStatus), about_b, inbox));
  // The request about a (in c1) is answered while those about b still wait.
  Json st = front.status("t1", a);
  {
    std::lock_guard<std::mutex> lock(mu);
    INFO("status of a: " << st.dump());
    CHECK(answered_b == 0);
  }
  CHECK(st.value("state", "") == std::string(names::kRunning));
  CHECK(st.value("cluster", "") == "c1");
  // Those about b end as the front door knows it (unreachable), not lost.
  {
    std::unique_lock<std::mutex> lock(mu);
    CHECK(cv.wait_for(lock, 20s, [&] { return answered_b == 3; }));
  }
  REQUIRE(c2.scheduler().signal(SIGCONT));
  CHECK(front.status("t1", b).value("state", "") == std::string(names::kRunning));
}

TEST_CASE(
    "a schedule at the front door: each tick's run is a front-door job sent by its type, listed "
    "by its schedule, and the schedule outlives a front door restart",
    "[integration][clusters][schedules]") {
  TwoClusters all;
  Cluster& front = all.front();
  const std::string config =
      "clusters:\n" + linked_entry("c1", front) + linked_entry("c2", front) + "poll_ms: 200\n";
  auto dispatch = start_dispatch(front, config);
  wait_clusters(front, 30s);
  const std::string subject = subjects::team_verb("t1", subjects::kSchedule);
  Json made = front.request(
      subject, Json{{"op", "create"},
                    {"name", "tick"},
                    {"cron", "@every 1s"},
                    {"concurrency", "forbid"},
                    {"spec", typed({"sh", "-c", "echo tick-ok"}, 1, {{"gpu_type", "h100"}})}});
  INFO("created: " << made.dump());
  REQUIRE(made.value("name", "") == "tick");
  CHECK(front.request(subject, Json{{"op", "create"}, {"name", "bad"}, {"cron", "0 0 30 2 *"}})
            .value("code", "") == "bad_request");
  // Its runs: front-door jobs named after it, ended in c2 (h100).
  auto runs_in = [](const std::vector<Event>& events) {
    std::set<std::string> ids;
    for (const auto& e : events)
      if (e.json.value("name", "") == "tick" && e.state == names::kSucceeded) ids.insert(e.job_id);
    return ids;
  };
  auto runs = [&] { return runs_in(front.events().all()); };
  REQUIRE(front.events().wait_for(
      [&](const std::vector<Event>& events) { return runs_in(events).size() >= 2; }, 30s));
  for (const auto& id : runs()) {
    CHECK(id.rfind("j-x", 0) == 0);
    CHECK(front.status("t1", id).value("cluster", "") == "c2");
  }
  const std::string one = *runs().begin();
  CHECK(front.logs("t1", one).data.find("tick-ok") != std::string::npos);
  Json listed = front.request(subjects::team_jobs("t1"), Json{{"schedule", "tick"}});
  INFO("its runs listed: " << listed.dump());
  CHECK(listed.value("jobs", Json::array()).size() >= 2);
  for (const auto& j : listed.value("jobs", Json::array()))
    CHECK(j["labels"].value(std::string(names::kScheduleLabel), "") == "tick");
  Json shown = front.request(subject, Json{{"op", "show"}, {"name", "tick"}});
  CHECK(shown.value("runs", 0) >= 2);
  // Another team's request reads as none; a name that is no schedule name is refused.
  const std::string theirs = subjects::team_verb("t2", subjects::kSchedule);
  CHECK(front.request(theirs, Json{{"op", "show"}, {"name", "tick"}}).value("code", "") ==
        "not_found");
  CHECK(front.request(theirs, Json{{"op", "delete"}, {"name", "tick"}}).value("code", "") ==
        "not_found");
  CHECK(front.request_text(subject, "{not json").value("code", "") == "bad_request");
  CHECK(front
            .request(subject, Json{{"op", "create"},
                                   {"name", "a.b>*"},
                                   {"cron", "@daily"},
                                   {"spec", typed({"true"}, 1, {})}})
            .value("code", "") == "bad_request");
  CHECK(shown.value("last_run", "").rfind("j-x", 0) == 0);

  // A new front door finds it and goes on firing it.
  dispatch->stop();
  const size_t before = runs().size();
  dispatch = start_dispatch(front, config);
  wait_clusters(front, 30s);
  Json list = front.request(subject, Json{{"op", "list"}});
  INFO("after a restart: " << list.dump());
  REQUIRE(list.value("schedules", Json::array()).size() == 1);
  CHECK(list["schedules"][0].value("name", "") == "tick");
  CHECK(front.events().wait_for(
      [&](const std::vector<Event>& events) { return runs_in(events).size() >= before + 2; }, 30s));
  Json gone = front.request(subject, Json{{"op", "delete"}, {"name", "tick"}});
  CHECK(gone.value("deleted", "") == "tick");
  CHECK(front.request(subject, Json{{"op", "list"}}).value("schedules", Json::array()).empty());
  CHECK(front.request(subject, Json{{"op", "show"}, {"name", "tick"}}).value("code", "") ==
        "not_found");
  CHECK(dispatch->running());
}

TEST_CASE(
    "the HTTP API and the web console over a front door: both clusters' nodes, a job's cluster, "
    "log and end, cancel, another team's job hidden, its clusters (openapi), and the console in "
    "headless chromium",
    "[integration][clusters][http][browser][openapi][alone]") {
  TwoClusters all(true);
  Cluster& front = all.front();
  auto dispatch = start_dispatch(front, "clusters:\n" + linked_entry("c1", front) +
                                            linked_entry("c2", front) + "poll_ms: 200\n");
  wait_clusters(front, 30s);
  const std::string url = front.start_gateway();
  const std::string token = front.add_token("t1");
  httplib::Client http(url);
  http.set_read_timeout(30, 0);
  const httplib::Headers t1{{"Authorization", "Bearer " + token}};
  const httplib::Headers t2{{"Authorization", "Bearer " + front.add_token("t2")}};
  auto said = [](const httplib::Result& r) {
    return r ? std::to_string(r->status) + " " + r->body.substr(0, 800)
             : "no response: " + httplib::to_string(r.error());
  };
  auto json_of = [&](const httplib::Result& r, int status) {
    INFO(said(r));
    REQUIRE(r);
    CHECK(r->status == status);
    Json j = Json::parse(r->body, nullptr, false);
    REQUIRE(j.is_object());
    return j;
  };

  // Every cluster's nodes, each row with its cluster.
  Json nodes = json_of(http.Get("/v1/nodes", t1), 200);
  std::map<std::string, std::string> node_cluster;
  for (const auto& n : nodes.value("nodes", Json::array()))
    node_cluster[n.value("node", "")] = n.value("cluster", "");
  CHECK(node_cluster == std::map<std::string, std::string>{{"a1", "c1"}, {"h1", "c2"}});
  // Every cluster, as troupe clusters --json: its GPU type and state.
  Json clusters = json_of(http.Get("/v1/clusters", t1), 200);
  std::map<std::string, std::string> cluster_types;
  for (const auto& cl : clusters.value("clusters", Json::array())) {
    CHECK(cl.value("state", "") == "reachable");
    const Json types = cl.value("gpu_types", Json::object());
    for (auto t = types.begin(); t != types.end(); ++t)
      cluster_types[cl.value("name", "")] += t.key();
  }
  CHECK(cluster_types == std::map<std::string, std::string>{{"c1", "a100"}, {"c2", "h100"}});
  // One cluster's queues (?cluster=, troupe queues --cluster): its pools
  // alone, named; a cluster the front door does not know.
  Json c2_queues = json_of(http.Get("/v1/queues?cluster=c2", t1), 200);
  CHECK(c2_queues.value("cluster", "") == "c2");
  REQUIRE_FALSE(c2_queues.value("pools", Json::array()).empty());
  for (const auto& p : c2_queues["pools"]) CHECK(p.value("cluster", "") == "c2");
  CHECK(json_of(http.Get("/v1/queues?cluster=c9", t1), 404).value("code", "") == "not_found");
  // And its replies match docs/openapi.yaml (ajv), as for one cluster's.
  {
    RunResult r = run_program(
        {"/usr/bin/env", "node",
         std::string(TROUPE_SOURCE_DIR) + "/tests/browser/api_schema_test.mjs", "--url", url,
         "--team-token", token, "--admin-token", front.add_token("ops", true), "--front-door"},
        front.dir(), "openapi", 60s, &front.dump());
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("checks passed") != std::string::npos);
  }

  // An h100 job through the HTTP API: it goes to c2; its log, followed,
  // ends with it; its view names its cluster and its id there.
  const std::string spec =
      R"({"name":"via-front","command":["simulated"],"env":{"TROUPE_SIM_DURATION_S":"1"},)"
      R"("resources":{"gpus":1,"gpu_type":"h100"}})";
  Json made = json_of(http.Post("/v1/jobs", t1, spec, "application/json"), 201);
  const std::string id = made.value("job_id", "");
  REQUIRE_FALSE(id.empty());
  auto followed = http.Get("/v1/jobs/" + id + "/logs?follow=1", t1);
  INFO("followed log: " << said(followed));
  REQUIRE(followed);
  CHECK(followed->status == 200);
  CHECK_FALSE(followed->body.empty());
  INFO("front events: " << front.events().describe());
  REQUIRE(front.events().wait_state(id, std::string(names::kSucceeded), 30s));
  Json view = json_of(http.Get("/v1/jobs/" + id, t1), 200);
  CHECK(view.value("state", "") == "succeeded");
  CHECK(view.value("cluster", "") == "c2");
  CHECK(view.value("cluster_job_id", "").rfind("j-", 0) == 0);
  Json listed = json_of(http.Get("/v1/jobs?state=succeeded", t1), 200);
  bool in_list = false;
  for (const auto& j : listed.value("jobs", Json::array()))
    in_list = in_list || (j.value("job_id", "") == id && j.value("cluster", "") == "c2");
  CHECK(in_list);

  // Another team's token: the job is not there for it, and it cannot cancel it.
  CHECK(json_of(http.Get("/v1/jobs/" + id, t2), 404).value("code", "") == "not_found");
  // A long a100 job: canceled through the HTTP API, in c1.
  Json long_job =
      json_of(http.Post("/v1/jobs", t1,
                        R"({"command":["simulated"],"env":{"TROUPE_SIM_DURATION_S":"300"},)"
                        R"("resources":{"gpus":1,"gpu_type":"a100"}})",
                        "application/json"),
              201);
  const std::string long_id = long_job.value("job_id", "");
  REQUIRE(front.events().wait_state(long_id, std::string(names::kRunning), 30s));
  CHECK(json_of(http.Delete("/v1/jobs/" + long_id, t2), 404).value("code", "") == "not_found");
  CHECK(json_of(http.Get("/v1/jobs/" + long_id, t1), 200).value("cluster", "") == "c1");
  {
    auto canceled = http.Delete("/v1/jobs/" + long_id, t1);
    INFO(said(canceled));
    REQUIRE(canceled);
    CHECK(canceled->status / 100 == 2);
  }
  CHECK(front.events().wait_state(long_id, std::string(names::kCanceled), 30s));
  CHECK(all.c1.events().wait_state(
      json_of(http.Get("/v1/jobs/" + long_id, t1), 200).value("cluster_job_id", ""),
      std::string(names::kCanceled), 10s));

  // The console, in a real browser, over both clusters.
  const std::string out = std::string(TROUPE_ARTIFACT_DIR) + "/front-door";
  std::filesystem::create_directories(out);
  const std::string script = std::string(TROUPE_SOURCE_DIR) + "/tests/browser/console_test.mjs";
  RunResult r = run_program({"/usr/bin/env", "node", script, "--url", url, "--token", token,
                             "--out", out, "--clusters", "c1,c2"},
                            front.dir(), "browser", 180s, &front.dump());
  INFO(describe(r));
  CHECK(r.exit_code == 0);
}

TEST_CASE("troupe up --clusters 2: two clusters behind a front door, the demo passes",
          "[integration][clusters]") {
  TmpDir tmp("troupe-up-clusters");
  const std::string troupe = bin_dir() + "/troupe";
  const std::string home = tmp.file("home");
  // A base port with its clusters' (+10, +20) free too.
  int port = 0;
  for (int tries = 0; tries < 50 && port == 0; ++tries) {
    int p = free_port();
    if (p > 0 && p + 20 < 65536 && bindable(p + 10) && bindable(p + 20)) port = p;
  }
  REQUIRE(port > 0);
  RunResult r = run_program({troupe, "up", "--clusters", "2", "--exit-after-demo", "--home", home,
                             "--port", std::to_string(port), "--http-port", "0"},
                            tmp.path(), "troupe-up", 180s, nullptr);
  const std::string out = read_file(tmp.file("troupe-up.out"));
  INFO("troupe up: rc=" << r.exit_code << " timed out=" << r.timed_out << "\nstdout:\n"
                        << tail_file(tmp.file("troupe-up.out"), 80) << "\nstderr:\n"
                        << tail_file(tmp.file("troupe-up.err"), 80) << "\ndispatch log:\n"
                        << tail_file(home + "/logs/dispatch.log", 40));
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 0);
  CHECK(out.find("Demo passed") != std::string::npos);
  // The clusters table: a row per cluster with its type.
  CHECK(out.find("c1") != std::string::npos);
  CHECK(out.find("a100") != std::string::npos);
  CHECK(out.find("h100") != std::string::npos);
  // The console and HTTP API over the front door, with a token to sign in.
  CHECK(out.find("Console and HTTP API (every cluster): http://127.0.0.1:") != std::string::npos);
  CHECK(out.find("(log in with the token trp_") != std::string::npos);
  CHECK(std::filesystem::is_regular_file(home + "/dispatch.yaml"));
  CHECK(std::filesystem::is_directory(home + "/c2/nats"));
}

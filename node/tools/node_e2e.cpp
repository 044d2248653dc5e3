// Throwaway end-to-end check of troupe-node against a real nats-server: plays
// a fake scheduler (hello, Launch, Stop, logs, garbage) and checks what the
// agent publishes. Not built by default; run by hand:
//   nats-server -a 127.0.0.1 -p 14222 &  troupe-node --nats nats://127.0.0.1:14222 --name e2e &
//   troupe-node-e2e --nats nats://127.0.0.1:14222 --node e2e --agent-pid <pid of troupe-node>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "bus/nats.hpp"
#include "bus/subjects.hpp"
#include "messages/json_text.hpp"
#include "messages/wire.hpp"

using namespace troupe;
using namespace std::chrono_literals;

namespace {

struct Inbox {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Inbound> q;
  void push(Inbound&& in) {
    std::lock_guard<std::mutex> l(mu);
    q.push_back(std::move(in));
    cv.notify_all();
  }
  // Next message whose subject ends with `kind`, skipping others (heartbeats).
  std::optional<Inbound> next(const std::string& kind, std::chrono::milliseconds t) {
    std::unique_lock<std::mutex> l(mu);
    auto deadline = std::chrono::steady_clock::now() + t;
    while (true) {
      for (auto it = q.begin(); it != q.end(); ++it)
        if (subjects::token(it->subject, 4) == kind) {
          Inbound in = std::move(*it);
          q.erase(it);
          return in;
        }
      if (cv.wait_until(l, deadline) == std::cv_status::timeout) return std::nullopt;
    }
  }
};

int failures = 0;
void check(bool ok, const std::string& what) {
  std::cout << (ok ? "PASS " : "FAIL ") << what << std::endl;
  if (!ok) ++failures;
}

wire::Bytes launch(const std::string& job, std::vector<std::string> cmd, std::vector<int> gpus,
                   std::vector<std::pair<std::string, std::string>> env = {}) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<flatbuffers::String>> c;
  for (auto& s : cmd) c.push_back(fbb.CreateString(s));
  std::vector<flatbuffers::Offset<wire::KeyValue>> e;
  for (auto& [k, v] : env)
    e.push_back(wire::CreateKeyValue(fbb, fbb.CreateString(k), fbb.CreateString(v)));
  return wire::seal(fbb,
                    wire::CreateLaunch(fbb, fbb.CreateString(job), fbb.CreateString("t"), 0, 0, 1,
                                       fbb.CreateString("127.0.0.1:29500"), fbb.CreateVector(gpus),
                                       fbb.CreateVector(c), fbb.CreateVector(e), 0, 10, 0, 1));
}

wire::Bytes stop(const std::string& job, int grace) {
  flatbuffers::FlatBufferBuilder fbb;
  return wire::seal(fbb, wire::CreateStop(fbb, fbb.CreateString(job), 0, -1, grace,
                                          fbb.CreateString("test"), 15, 5, 1));
}

const wire::Exited* exited_of(const std::optional<Inbound>& in) {
  if (!in) return nullptr;
  auto* e = wire::open(in->data);
  return e ? e->body_as_Exited() : nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  std::string url = "nats://127.0.0.1:4222", node = "e2e";
  int agent_pid = 0;
  CLI::App app{"fake scheduler for troupe-node"};
  app.add_option("--nats", url);
  app.add_option("--node", node);
  app.add_option("--agent-pid", agent_pid, "SIGTERM this troupe-node at the end");
  CLI11_PARSE(app, argc, argv);

  bus::Library lib;
  std::string err;
  bus::ConnectOptions co;
  co.url = url;
  auto sub = bus::Connection::open(co, &err);
  auto pub = bus::Connection::open(co, &err);
  if (!sub || !pub) {
    std::cerr << err << "\n";
    return 2;
  }
  Inbox inbox;
  auto s = sub->subscribe("troupe.sys.agent." + node + ".>",
                          [&](Inbound&& in) { inbox.push(std::move(in)); });
  sub->flush();
  auto to = [&](std::string_view kind) { return subjects::scheduler_to_agent(node, kind); };

  pub->publish(subjects::kSysHello, std::string());
  auto reg = inbox.next("register", 5s);
  const wire::NodeRegister* r = nullptr;
  if (reg) {
    auto* e = wire::open(reg->data);
    r = e ? e->body_as_NodeRegister() : nullptr;
  }
  check(r != nullptr && wire::str(r->node()) == node, "hello -> NodeRegister");
  if (r)
    std::cout << "     gpus=" << (r->gpus() ? r->gpus()->size() : 0)
              << " type=" << wire::str(r->gpu_type()) << " cpus=" << r->cpus()
              << " mem=" << r->memory_mb() << " sim=" << r->simulate() << "\n";
  check(inbox.next("heartbeat", 3s).has_value(), "heartbeat");

  pub->publish(
      to("launch"),
      launch("j-e2e1", {"/bin/sh", "-c", "echo hi gpus=$CUDA_VISIBLE_DEVICES; exit 3"}, {0, 1}));
  auto st = inbox.next("started", 5s);
  check(st && wire::open(st->data) && wire::open(st->data)->body_as_Started(), "Started");
  auto ex = exited_of(inbox.next("exited", 5s));
  check(ex && ex->exit_code() == 3 && wire::str(ex->reason()) == "exited with code 3",
        "Exited code 3");

  auto reply = pub->request(to("logs"), R"({"job_id":"j-e2e1","attempt":0,"rank":0})", 2000, &err);
  check(reply.has_value(), "logs reply " + err);
  if (reply) {
    auto j = json_text::parse(std::string(reply->begin(), reply->end()));
    std::cout << "     " << j.dump() << "\n";
    check(!j.is_discarded() && j.value("data", "") == "hi gpus=0,1\n" && j.value("eof", false),
          "logs content");
  }
  reply = pub->request(to("logs"), R"({"job_id":"j-nope"})", 2000, &err);
  check(reply &&
            std::string(reply->begin(), reply->end()).find("no log for job") != std::string::npos,
        "logs of an unknown job");

  // Garbage must not kill the agent.
  pub->publish(to("launch"), std::string("\x01\x02garbage"));
  pub->publish(to("stop"), launch("j-x", {"true"}, {}));
  pub->publish(to("launch"), std::string());
  inbox.next("heartbeat", 100ms);
  check(inbox.next("heartbeat", 3s).has_value(), "alive after garbage");

  pub->publish(to("launch"), launch("j-e2e2", {"/bin/sh", "-c", "trap '' TERM; sleep 30"}, {}));
  check(inbox.next("started", 5s).has_value(), "Started (TERM-ignoring worker)");
  std::this_thread::sleep_for(300ms);
  auto t0 = std::chrono::steady_clock::now();
  pub->publish(to("stop"), stop("j-e2e2", 1));
  ex = exited_of(inbox.next("exited", 5s));
  auto took = std::chrono::steady_clock::now() - t0;
  check(ex && ex->signal() == 9 && wire::str(ex->reason()) == "stopped" && took >= 900ms,
        "Stop escalates to SIGKILL after grace");

  pub->publish(to("launch"), launch("j-e2e3", {"nonexistent-cmd-e2e"}, {}));
  inbox.next("started", 5s);
  ex = exited_of(inbox.next("exited", 5s));
  check(ex && ex->exit_code() == 127, "exec failure exits 127");

  if (agent_pid > 0) {
    pub->publish(to("launch"), launch("j-e2e4", {"sleep", "30"}, {}));
    check(inbox.next("started", 5s).has_value(), "Started (sleep)");
    ::kill(agent_pid, SIGTERM);
    ex = exited_of(inbox.next("exited", 15s));
    check(ex && wire::str(ex->reason()) == "stopped" && wire::str(ex->job_id()) == "j-e2e4",
          "agent SIGTERM stops its workers and publishes Exited");
  }
  std::cout << (failures == 0 ? "ALL PASSED" : "FAILURES: " + std::to_string(failures)) << "\n";
  return failures == 0 ? 0 : 1;
}

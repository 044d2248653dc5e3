// Writes the FlatBuffers seeds of tests/fuzz/corpus/: one Envelope of each
// body type (corpus/envelope), the agent's Launch and Stop (corpus/launch) and
// SubmitRequests (corpus/submit), built with the encoders the scheduler and
// agent use (spec::to_wire, node/agent_messages) or as the actors build them.
//   cmake --build build-fuzz --target fuzz_seeds && build-fuzz/fuzz_seeds tests/fuzz/corpus
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "messages/spec.hpp"
#include "node/agent_messages.hpp"

namespace {

using namespace troupe;
using Fbb = flatbuffers::FlatBufferBuilder;

std::string g_root;

void write(const std::string& dir, const std::string& name, const wire::Bytes& b) {
  std::string path = g_root + "/" + dir + "/" + name + ".fb";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
  std::printf("%s (%zu bytes)\n", path.c_str(), b.size());
}

pb::JobSpec job(int workers) {
  pb::JobSpec s;
  s.set_name(workers > 1 ? "bert-gang" : "resnet");
  s.set_team("vision");
  s.set_kind("training");
  for (const char* a : {"python", "train.py", "--lr", "0.001"}) s.add_command(a);
  (*s.mutable_env())["EPOCHS"] = "3";
  (*s.mutable_env())["TROUPE_SIM_DURATION_S"] = "2.5";
  s.set_image("registry/train:1");
  s.mutable_resources()->set_gpus(workers > 1 ? 8 : 1);
  s.mutable_resources()->set_gpu_type("a100");
  s.mutable_resources()->set_cpus(16);
  s.mutable_resources()->set_memory_mb(65536);
  s.set_workers(workers);
  s.set_priority("high");
  s.set_max_runtime_s(3600);
  s.set_max_retries(2);
  s.set_idempotency_key("run-7");
  s.set_pool("a100");
  return s;
}

wire::Bytes submit(int workers) {
  Fbb fbb;
  return wire::seal(fbb, wire::CreateSubmitRequest(fbb, spec::to_wire(fbb, job(workers))));
}

// As job_actor.cpp builds a Launch.
wire::Bytes launch(int rank, int world) {
  Fbb fbb;
  std::vector<int> gpus = {0, 1, 2, 3};
  std::vector<flatbuffers::Offset<flatbuffers::String>> cmd;
  for (const char* a : {"python", "train.py"}) cmd.push_back(fbb.CreateString(a));
  std::vector<flatbuffers::Offset<wire::KeyValue>> kv;
  kv.push_back(wire::CreateKeyValue(fbb, fbb.CreateString("EPOCHS"), fbb.CreateString("3")));
  kv.push_back(
      wire::CreateKeyValue(fbb, fbb.CreateString("TROUPE_SIM_EXIT"), fbb.CreateString("1")));
  auto body = wire::CreateLaunch(fbb, fbb.CreateString("j-42"), fbb.CreateString("vision"), 1, rank,
                                 world, fbb.CreateString("10.0.0.7:29500"), fbb.CreateVector(gpus),
                                 fbb.CreateVector(cmd), fbb.CreateVectorOfSortedTables(&kv), 3600,
                                 30, fbb.CreateString("checkpoints/j-42"));
  return wire::seal(fbb, body);
}

// As job_actor.cpp (preemption: SIGUSR1 first) and node_actor.cpp (fencing) build a Stop.
wire::Bytes stop(int rank, int signal, const char* reason) {
  Fbb fbb;
  return wire::seal(fbb, wire::CreateStop(fbb, fbb.CreateString("j-42"), 1, rank, 30,
                                          fbb.CreateString(reason), signal, 5));
}

flatbuffers::Offset<wire::Resources> resources(Fbb& fbb) {
  return wire::CreateResources(fbb, 4, fbb.CreateString("a100"), 8, 32768);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  g_root = argv[1];

  write("submit", "single", submit(1));
  write("submit", "gang", submit(4));
  write("launch", "launch-rank0", launch(0, 2));
  write("launch", "launch-rank1", launch(1, 2));
  write("launch", "stop-preempt", stop(0, SIGUSR1, "preempted"));
  write("launch", "stop-all-ranks", stop(-1, SIGTERM, "cancelled"));
  // As the job supervisor builds a Forget (a purged job's checkpoint dir).
  write("launch", "forget", wire::forget("j-42", "/var/lib/troupe/checkpoints/j-42", 3));
  write("launch", "forget-relative", wire::forget("j-42", "checkpoints/j-42", 3));

  node::Inventory inv;
  inv.gpu_type = "a100";
  inv.cpus = 64;
  inv.memory_mb = 515000;
  inv.gpus = {{0, "NVIDIA A100-SXM4-80GB", 81920}, {1, "NVIDIA A100-SXM4-80GB", 81920}};
  std::vector<node::WorkerKey> running = {{"j-42", 1, 0}, {"j-43", 0, 1}};
  node::WorkerKey k{"j-42", 1, 0};
  node::ExitInfo exited;
  exited.exit_code = -1;
  exited.signal = 9;
  exited.reason = "killed by signal 9";

  write("envelope", "SubmitRequest", submit(2));
  {
    Fbb fbb;
    write("envelope", "SubmitReply",
          wire::seal(fbb, wire::CreateSubmitReply(fbb, fbb.CreateString("j-42"), 0)));
  }
  {
    Fbb fbb;
    std::vector<flatbuffers::Offset<wire::WorkerPlacement>> w;
    w.push_back(wire::CreateWorkerPlacement(fbb, 0, fbb.CreateString("n1"),
                                            fbb.CreateVector(std::vector<int>{0, 1})));
    w.push_back(wire::CreateWorkerPlacement(fbb, 1, fbb.CreateString("n2"),
                                            fbb.CreateVector(std::vector<int>{3})));
    write("envelope", "JobEvent",
          wire::seal(fbb,
                     wire::CreateJobEvent(fbb, fbb.CreateString("j-42"), fbb.CreateString("vision"),
                                          fbb.CreateString("running"), 1, 1700000000000,
                                          fbb.CreateVector(w), 0, fbb.CreateString(""))));
  }
  write("envelope", "NodeRegister",
        node::make_register("n1", "10.0.0.7", inv, true, running, "a100", "rack-3"));
  write("envelope", "Heartbeat", node::make_heartbeat("n1", 17, running));
  write("envelope", "Launch", launch(0, 1));
  write("envelope", "Stop", stop(0, SIGTERM, "cancelled"));
  write("envelope", "Forget", wire::forget("j-42", "/ckpt/j-42", 1));
  write("envelope", "Started", node::make_started("n1", k, 4242));
  write("envelope", "Exited", node::make_exited("n1", k, exited));
  write("envelope", "Checkpointed", node::make_checkpointed("n1", k, "step-100", 1700000000000));
  {
    Fbb fbb;
    write(
        "envelope", "Propose",
        wire::seal(fbb, wire::CreatePropose(fbb, fbb.CreateString("r-1"), fbb.CreateString("j-42"),
                                            fbb.CreateString("vision"), resources(fbb), 5000)));
  }
  {
    Fbb fbb;
    write(
        "envelope", "Reserve",
        wire::seal(fbb, wire::CreateReserve(fbb, fbb.CreateString("r-2"), fbb.CreateString("j-42"),
                                            fbb.CreateString("j-42"), fbb.CreateString("vision"),
                                            resources(fbb), 5000, 1)));
  }
  {
    Fbb fbb;
    write("envelope", "Accept",
          wire::seal(fbb, wire::CreateAccept(fbb, fbb.CreateString("r-1"), fbb.CreateString("n1"),
                                             fbb.CreateVector(std::vector<int>{0, 1, 2, 3}),
                                             1700000005000)));
  }
  {
    Fbb fbb;
    write("envelope", "Reject",
          wire::seal(fbb, wire::CreateReject(fbb, fbb.CreateString("r-1"), fbb.CreateString("n1"),
                                             fbb.CreateString("not enough GPUs"))));
  }
  {
    Fbb fbb;
    write("envelope", "Commit", wire::seal(fbb, wire::CreateCommit(fbb, fbb.CreateString("r-1"))));
  }
  {
    Fbb fbb;
    write("envelope", "Release",
          wire::seal(fbb, wire::CreateRelease(fbb, fbb.CreateString("r-1"),
                                              fbb.CreateString("attempt ended"))));
  }
  return 0;
}

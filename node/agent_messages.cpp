// Owns building the agent -> scheduler Envelopes.
#include "node/agent_messages.hpp"

namespace troupe::node {

namespace {

flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<wire::WorkerRef>>> refs(
    flatbuffers::FlatBufferBuilder& fbb, const std::vector<WorkerKey>& running) {
  std::vector<flatbuffers::Offset<wire::WorkerRef>> v;
  v.reserve(running.size());
  for (const auto& k : running)
    v.push_back(wire::CreateWorkerRef(fbb, fbb.CreateString(k.job_id), k.attempt, k.rank));
  return fbb.CreateVector(v);
}

// An absent field for "" (the reader gets an empty string either way).
flatbuffers::Offset<flatbuffers::String> opt_string(flatbuffers::FlatBufferBuilder& fbb,
                                                    const std::string& s) {
  return s.empty() ? flatbuffers::Offset<flatbuffers::String>() : fbb.CreateString(s);
}

}  // namespace

wire::Bytes make_register(const std::string& node, const std::string& host, const Inventory& inv,
                          bool simulate, const std::vector<WorkerKey>& running,
                          const std::string& pool, const std::string& rack, const Ended& ended,
                          const std::string& runtime, const std::string& sandbox) {
  flatbuffers::FlatBufferBuilder fbb(256 + 64 * running.size() + 96 * ended.size());
  std::vector<flatbuffers::Offset<wire::Exited>> ends;
  for (const auto& [k, e] : ended)
    ends.push_back(wire::CreateExited(fbb, fbb.CreateString(node), fbb.CreateString(k.job_id),
                                      k.attempt, k.rank, e.exit_code, e.signal,
                                      fbb.CreateString(e.reason)));
  std::vector<flatbuffers::Offset<wire::Gpu>> gpus;
  for (const auto& g : inv.gpus)
    gpus.push_back(wire::CreateGpu(fbb, g.index, fbb.CreateString(g.name), g.memory_mb));
  auto body = wire::CreateNodeRegister(
      fbb, fbb.CreateString(node), fbb.CreateString(host), fbb.CreateString(inv.gpu_type),
      fbb.CreateVector(gpus), inv.cpus, inv.memory_mb, simulate, refs(fbb, running),
      opt_string(fbb, pool), opt_string(fbb, rack), ends.empty() ? 0 : fbb.CreateVector(ends),
      opt_string(fbb, runtime), opt_string(fbb, sandbox));
  return wire::seal(fbb, body);
}

wire::Bytes make_heartbeat(const std::string& node, uint64_t seq,
                           const std::vector<WorkerKey>& running) {
  flatbuffers::FlatBufferBuilder fbb(128 + 64 * running.size());
  auto body = wire::CreateHeartbeat(fbb, fbb.CreateString(node), seq, refs(fbb, running));
  return wire::seal(fbb, body);
}

wire::Bytes make_started(const std::string& node, const WorkerKey& k, int pid) {
  return wire::started(node, k.job_id, k.attempt, k.rank, pid);
}

wire::Bytes make_exited(const std::string& node, const WorkerKey& k, const ExitInfo& e) {
  return wire::exited(node, k.job_id, k.attempt, k.rank, e.exit_code, e.signal, e.reason);
}

wire::Bytes make_checkpointed(const std::string& node, const WorkerKey& k, const std::string& path,
                              int64_t ts_ms) {
  flatbuffers::FlatBufferBuilder fbb(192);
  auto body = wire::CreateCheckpointed(fbb, fbb.CreateString(node), fbb.CreateString(k.job_id),
                                       k.attempt, k.rank, fbb.CreateString(path), ts_ms);
  return wire::seal(fbb, body);
}

}  // namespace troupe::node

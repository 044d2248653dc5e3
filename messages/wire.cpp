#include "messages/wire.hpp"

#include <algorithm>
#include <cctype>

namespace troupe::wire {

const Envelope* open(const uint8_t* data, size_t size) {
  if (data == nullptr || size < sizeof(flatbuffers::uoffset_t)) return nullptr;
  flatbuffers::Verifier verifier(data, size, /*max_depth=*/32, /*max_tables=*/100000);
  if (!VerifyEnvelopeBuffer(verifier)) return nullptr;
  auto* env = GetEnvelope(data);
  if (env->body_type() == Body::NONE || env->body() == nullptr) return nullptr;
  return env;
}

bool json_text(const Bytes& body) {
  auto first = std::find_if(body.begin(), body.end(), [](uint8_t c) { return !std::isspace(c); });
  return first != body.end() && *first == '{';
}

const Envelope* submit_request(const Bytes& body) {
  if (json_text(body)) return nullptr;
  auto* env = open(body);
  return env != nullptr && env->body_as_SubmitRequest() != nullptr ? env : nullptr;
}

std::vector<int> ints(const flatbuffers::Vector<int32_t>* v) {
  std::vector<int> out;
  if (v == nullptr) return out;
  out.reserve(v->size());
  for (auto x : *v) out.push_back(x);
  return out;
}

Bytes release(const std::string& id, const std::string& reason, bool if_unlaunched) {
  flatbuffers::FlatBufferBuilder fbb;
  auto body = CreateRelease(fbb, fbb.CreateString(id), fbb.CreateString(reason), if_unlaunched);
  return seal(fbb, body);
}

Bytes accept(const std::string& node, const std::string& reservation_id,
             const std::vector<int>& gpus, int64_t lease_expires_ms) {
  flatbuffers::FlatBufferBuilder fbb(128);
  auto body = CreateAccept(fbb, fbb.CreateString(reservation_id), fbb.CreateString(node),
                           fbb.CreateVector(gpus), lease_expires_ms);
  return seal(fbb, body);
}

Bytes reject(const std::string& node, const std::string& reservation_id,
             const std::string& reason) {
  flatbuffers::FlatBufferBuilder fbb(128);
  auto body = CreateReject(fbb, fbb.CreateString(reservation_id), fbb.CreateString(node),
                           fbb.CreateString(reason));
  return seal(fbb, body);
}

Bytes started(const std::string& node, const std::string& job_id, int attempt, int rank, int pid) {
  flatbuffers::FlatBufferBuilder fbb(128);
  auto body =
      CreateStarted(fbb, fbb.CreateString(node), fbb.CreateString(job_id), attempt, rank, pid);
  return seal(fbb, body);
}

Bytes exited(const std::string& node, const std::string& job_id, int attempt, int rank,
             int exit_code, int signal, const std::string& reason) {
  flatbuffers::FlatBufferBuilder fbb(192);
  auto body = CreateExited(fbb, fbb.CreateString(node), fbb.CreateString(job_id), attempt, rank,
                           exit_code, signal, fbb.CreateString(reason));
  return seal(fbb, body);
}

Bytes stop(const std::string& job_id, int attempt, int rank, int grace_s, const std::string& reason,
           int signal, int kill_after_s, uint64_t epoch) {
  flatbuffers::FlatBufferBuilder fbb(128);
  auto body = CreateStop(fbb, fbb.CreateString(job_id), attempt, rank, grace_s,
                         fbb.CreateString(reason), signal, kill_after_s, epoch);
  return seal(fbb, body);
}

Bytes forget(const std::string& job_id, const std::string& checkpoint_dir, uint64_t epoch) {
  flatbuffers::FlatBufferBuilder fbb(128);
  auto body = CreateForget(fbb, fbb.CreateString(job_id), fbb.CreateString(checkpoint_dir), epoch);
  return seal(fbb, body);
}

Bytes commit(const std::string& reservation_id) {
  flatbuffers::FlatBufferBuilder fbb(64);
  return seal(fbb, CreateCommit(fbb, fbb.CreateString(reservation_id)));
}

Bytes submit_reply(const std::string& job_id, const std::string& error, const std::string& code) {
  flatbuffers::FlatBufferBuilder fbb(128);
  auto body = CreateSubmitReply(fbb, fbb.CreateString(job_id), fbb.CreateString(error),
                                fbb.CreateString(code));
  return seal(fbb, body);
}

namespace {
flatbuffers::Offset<Resources> resources(flatbuffers::FlatBufferBuilder& fbb, const Ask& a) {
  return CreateResources(fbb, a.gpus, fbb.CreateString(a.gpu_type), a.cpus, a.memory_mb, 0,
                         a.gpu_memory_mb);
}
}  // namespace

Bytes reserve(const std::string& reservation_id, const std::string& gang_id,
              const std::string& job_id, const std::string& team, const Ask& ask, int64_t lease_ms,
              int rank, bool allocate) {
  flatbuffers::FlatBufferBuilder fbb(192);
  auto res = resources(fbb, ask);
  auto body = CreateReserve(fbb, fbb.CreateString(reservation_id), fbb.CreateString(gang_id),
                            fbb.CreateString(job_id), fbb.CreateString(team), res, lease_ms, rank,
                            allocate, ask.share_across_teams);
  return seal(fbb, body);
}

Bytes launch(const LaunchFields& l) {
  flatbuffers::FlatBufferBuilder fbb(512);
  std::vector<flatbuffers::Offset<flatbuffers::String>> cmd;
  for (const auto& c : l.command) cmd.push_back(fbb.CreateString(c));
  std::vector<flatbuffers::Offset<KeyValue>> kv;
  for (const auto& [k, v] : l.env)
    kv.push_back(CreateKeyValue(fbb, fbb.CreateString(k), fbb.CreateString(v)));
  std::vector<int32_t> gpus(l.gpus.begin(), l.gpus.end());
  auto body =
      CreateLaunch(fbb, fbb.CreateString(l.job_id), fbb.CreateString(l.team), l.attempt, l.rank,
                   l.world_size, fbb.CreateString(l.coordinator), fbb.CreateVector(gpus),
                   fbb.CreateVector(cmd), fbb.CreateVectorOfSortedTables(&kv), l.max_runtime_s,
                   l.grace_s, fbb.CreateString(l.checkpoint_dir), l.epoch,
                   fbb.CreateString(l.image), l.cpus, l.memory_mb, l.run_as_uid, l.gpu_memory_mb);
  return seal(fbb, body);
}

bool is_agent_report(Body b) {
  return b == Body::Heartbeat || b == Body::Started || b == Body::Exited || b == Body::Checkpointed;
}

std::string check_agent_message(const Envelope& e, std::string_view node) {
  const flatbuffers::String* named = nullptr;
  switch (e.body_type()) {
    case Body::NodeRegister:
      named = e.body_as_NodeRegister()->node();
      break;
    case Body::Heartbeat:
      named = e.body_as_Heartbeat()->node();
      break;
    case Body::Started:
      named = e.body_as_Started()->node();
      break;
    case Body::Exited:
      named = e.body_as_Exited()->node();
      break;
    case Body::Checkpointed:
      named = e.body_as_Checkpointed()->node();
      break;
    default:
      return std::string("an agent does not send ") + body_name(e.body_type());
  }
  if (named == nullptr || named->string_view() != node)
    return std::string(body_name(e.body_type())) + " names node '" + str(named) +
           "', not its sender '" + std::string(node) + "'";
  return {};
}

}  // namespace troupe::wire

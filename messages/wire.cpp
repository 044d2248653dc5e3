#include "messages/wire.hpp"

namespace troupe::wire {

const Envelope* open(const uint8_t* data, size_t size) {
  if (data == nullptr || size < sizeof(flatbuffers::uoffset_t)) return nullptr;
  flatbuffers::Verifier verifier(data, size, /*max_depth=*/32, /*max_tables=*/100000);
  if (!VerifyEnvelopeBuffer(verifier)) return nullptr;
  auto* env = GetEnvelope(data);
  if (env->body_type() == Body::NONE || env->body() == nullptr) return nullptr;
  return env;
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

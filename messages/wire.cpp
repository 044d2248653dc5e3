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

}  // namespace troupe::wire

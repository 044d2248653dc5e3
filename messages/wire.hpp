// FlatBuffers envelopes: build one, verify one. Every buffer received from the
// bus or another actor goes through `open()` before any field is read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "troupe_generated.h"

namespace troupe::wire {

using Bytes = std::vector<uint8_t>;

// Verifies `data` as an Envelope with a body. Returns nullptr when the buffer
// is malformed (the caller drops it, counts it and logs it).
const Envelope* open(const uint8_t* data, size_t size);
inline const Envelope* open(const Bytes& b) {
  return open(b.data(), b.size());
}

// Finishes `fbb` with an Envelope around `body` and returns the bytes.
template <class T>
Bytes seal(flatbuffers::FlatBufferBuilder& fbb, flatbuffers::Offset<T> body) {
  auto env = CreateEnvelope(fbb, BodyTraits<T>::enum_value, body.Union());
  fbb.Finish(env);
  return Bytes(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

// Short helpers for the common fields.
inline std::string str(const flatbuffers::String* s) {
  return s ? s->str() : std::string();
}
std::vector<int> ints(const flatbuffers::Vector<int32_t>* v);

// A Release of hold `id` (see Release.if_unlaunched).
Bytes release(const std::string& id, const std::string& reason, bool if_unlaunched = false);

// Whether an envelope may come from the agent of `node` (on
// troupe.sys.agent.<node>.<kind>): only the kinds an agent sends (register,
// heartbeat, started, exited, checkpointed), each naming that node and no
// other. "" when it may, else why not. A node speaks only for itself.
std::string check_agent_message(const Envelope& e, std::string_view node);

// Name of a body type, for logs and counters.
inline const char* body_name(Body b) {
  return EnumNameBody(b);
}

}  // namespace troupe::wire

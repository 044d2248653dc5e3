// FlatBuffers envelopes: build one, verify one. Every buffer received from the
// bus or another actor goes through `open()` before any field is read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
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

// A submission's body is JSON text when its first byte but spaces is '{';
// else a FlatBuffers SubmitRequest: its envelope, verified (null when the
// body is JSON, or neither). The scheduler and the front door tell them
// apart the same way.
bool json_text(const Bytes& body);
const Envelope* submit_request(const Bytes& body);

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

// The other sealed messages the scheduler's actors and the agents send, each
// built here once (field meanings: messages/troupe.fbs).
Bytes accept(const std::string& node, const std::string& reservation_id,
             const std::vector<int>& gpus, int64_t lease_expires_ms);
Bytes reject(const std::string& node, const std::string& reservation_id, const std::string& reason);
Bytes started(const std::string& node, const std::string& job_id, int attempt, int rank, int pid);
Bytes exited(const std::string& node, const std::string& job_id, int attempt, int rank,
             int exit_code, int signal, const std::string& reason);
Bytes stop(const std::string& job_id, int attempt, int rank, int grace_s, const std::string& reason,
           int signal, int kill_after_s, uint64_t epoch);
Bytes forget(const std::string& job_id, const std::string& checkpoint_dir, uint64_t epoch);
Bytes commit(const std::string& reservation_id);
Bytes submit_reply(const std::string& job_id, const std::string& error, const std::string& code);

// What one worker asks of a node (Resources).
struct Ask {
  int gpus = 0;
  std::string gpu_type;
  int cpus = 0;
  int64_t memory_mb = 0;
  int64_t gpu_memory_mb = 0;        // a shared worker's part of one GPU
  bool share_across_teams = false;  // Reserve.share_across_teams
};
// A gang reservation's ask of one rank (every placement, one worker or many;
// the schema's Propose table is no longer sent).
// `allocate`: reserve and commit at once (Reserve.allocate).
Bytes reserve(const std::string& reservation_id, const std::string& gang_id,
              const std::string& job_id, const std::string& team, const Ask& ask, int64_t lease_ms,
              int rank, bool allocate = false);

// One rank's Launch (field meanings: table Launch in messages/troupe.fbs).
struct LaunchFields {
  std::string job_id, team;
  int attempt = 1, rank = 0, world_size = 1;
  std::string coordinator;
  std::vector<int> gpus;
  std::vector<std::string> command;
  std::vector<std::pair<std::string, std::string>> env;  // sorted by key, unique keys
  int64_t max_runtime_s = 0;
  int grace_s = 10;
  std::string checkpoint_dir;
  uint64_t epoch = 0;
  std::string image;
  int cpus = 0;
  int64_t memory_mb = 0;
  int64_t run_as_uid = -1;
  int64_t gpu_memory_mb = 0;  // a shared worker's part of its one GPU
};
Bytes launch(const LaunchFields& l);

// Whether an envelope may come from the agent of `node` (on
// troupe.sys.agent.<node>.<kind>): only the kinds an agent sends (register,
// heartbeat, started, exited, checkpointed), each naming that node and no
// other. "" when it may, else why not. A node speaks only for itself.
std::string check_agent_message(const Envelope& e, std::string_view node);
// What an agent says about what runs or itself, after its register:
// heartbeat, started, exited, checkpointed.
bool is_agent_report(Body b);

// Name of a body type, for logs and counters.
inline const char* body_name(Body b) {
  return EnumNameBody(b);
}

}  // namespace troupe::wire

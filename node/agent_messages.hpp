// The FlatBuffers Envelopes the agent publishes (NodeRegister, Heartbeat,
// Started, Exited, Checkpointed), built from plain C++ values. Pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "messages/wire.hpp"
#include "node/exit_status.hpp"
#include "node/inventory.hpp"
#include "node/launch_spec.hpp"

namespace troupe::node {

// `pool` (troupe-node --pool) and `rack` (--rack) are left out when empty.
// `ended`: workers that ended recently with how (a restarted scheduler learns
// the real exit of what ended while it was down).
using Ended = std::vector<std::pair<WorkerKey, ExitInfo>>;
wire::Bytes make_register(const std::string& node, const std::string& host, const Inventory& inv,
                          bool simulate, const std::vector<WorkerKey>& running,
                          const std::string& pool = {}, const std::string& rack = {},
                          const Ended& ended = {}, const std::string& runtime = {},
                          const std::string& sandbox = {});
wire::Bytes make_heartbeat(const std::string& node, uint64_t seq,
                           const std::vector<WorkerKey>& running);
wire::Bytes make_started(const std::string& node, const WorkerKey& k, int pid);
wire::Bytes make_exited(const std::string& node, const WorkerKey& k, const ExitInfo& e);
wire::Bytes make_checkpointed(const std::string& node, const WorkerKey& k, const std::string& path,
                              int64_t ts_ms);

}  // namespace troupe::node

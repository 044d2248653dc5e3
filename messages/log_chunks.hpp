// A worker's output as its agent ships it to the stream TROUPE_LOGS_<team>
// (subject troupe.sys.logs.<node>.<team>.<job>.<attempt>.<rank>), so that
// `troupe logs` reads it after the node is gone (docs/api.md, "logs"). Each
// message is one chunk: its byte offset in the log, a newline, the bytes.
// Pure functions, shared by the agent (writer) and the scheduler (reader).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace troupe::logchunks {

// The most bytes in one chunk (well under NATS's max_payload).
inline constexpr int64_t kMaxChunkBytes = 64 * 1024;
// A logs page when the request names no max_bytes, and the largest one.
inline constexpr int64_t kDefaultPageBytes = 65536;
inline constexpr int64_t kMaxPageBytes = 1 << 20;

std::string encode(int64_t offset, std::string_view data);
// False when `payload` is not a chunk (no offset line, a negative offset).
bool decode(std::string_view payload, int64_t* offset, std::string_view* data);

// A log put together from its chunks as they come (stream order): a chunk
// at or before the end extends it (what overlaps is skipped); one past the
// end (a chunk lost between) stops it there (`gap`).
class Assembler {
 public:
  void add(std::string_view payload);
  const std::string& log() const { return log_; }
  bool gap() const { return gap_; }
  int64_t chunks() const { return chunks_; }

 private:
  std::string log_;
  bool gap_ = false;
  int64_t chunks_ = 0;
};

// Length of the longest prefix of `data` (size n) that does not end inside a
// UTF-8 multi-byte sequence; n itself when the tail is complete, or when
// cutting would leave nothing.
size_t utf8_complete_prefix(const char* data, size_t n);

// The reply of troupe.<team>.logs for `data`, read at `offset` of a log of
// `size` bytes: {"data","offset" (the next one),"eof","size"}, plus
// "stored":true when it was read from TROUPE_LOGS_<team> rather than from the node.
// `data` is cut at a whole UTF-8 character; invalid bytes are replaced.
std::string reply_json(std::string data, int64_t offset, int64_t size, bool stored);

// The reply of troupe.<team>.logs for bytes [offset, offset + max_bytes) of
// `log`, as an agent answers it: {"data","offset","eof","size","stored":true}
// (`data` cut at a whole UTF-8 character, invalid bytes replaced).
std::string page_json(const std::string& log, int64_t offset, int64_t max_bytes);

// The numbers of a troupe.<team>.logs request, read alike by the scheduler's
// router (from a team) and the agent (from the scheduler): each optional and
// an integer when given. `rank` 0..2^30 (default 0), `offset` >= 0 (default
// 0), `max_bytes` (absent or <= 0: kDefaultPageBytes; at most
// kMaxPageBytes), `attempt` (-1: absent or out of 0..2^30, the latest).
struct PageRequest {
  int32_t rank = 0;
  int64_t offset = 0;
  int64_t max_bytes = kDefaultPageBytes;
  int32_t attempt = -1;
};
// "" or why the request is bad; `req` is a JSON object.
std::string read_page_request(const nlohmann::json& req, PageRequest* out);

}  // namespace troupe::logchunks

// A worker's shipped output (see log_chunks.hpp).
#include "messages/log_chunks.hpp"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "messages/json_number.hpp"

namespace troupe::logchunks {

std::string encode(int64_t offset, std::string_view data) {
  std::string out = std::to_string(offset);
  out.push_back('\n');
  out.append(data);
  return out;
}

bool decode(std::string_view payload, int64_t* offset, std::string_view* data) {
  auto nl = payload.find('\n');
  if (nl == std::string_view::npos || nl == 0 || nl > 19) return false;
  int64_t off = 0;
  auto [p, ec] = std::from_chars(payload.data(), payload.data() + nl, off);
  if (ec != std::errc() || p != payload.data() + nl || off < 0) return false;
  *offset = off;
  *data = payload.substr(nl + 1);
  return true;
}

void Assembler::add(std::string_view payload) {
  int64_t off = 0;
  std::string_view data;
  if (gap_ || !decode(payload, &off, &data)) return;
  ++chunks_;
  const auto end = static_cast<int64_t>(log_.size());
  if (off > end) {
    gap_ = true;
    return;
  }
  const auto skip = static_cast<size_t>(end - off);
  if (skip < data.size()) log_.append(data.substr(skip));
}

size_t utf8_complete_prefix(const char* data, size_t n) {
  // Walk back over at most 3 continuation bytes to the last lead byte.
  size_t i = n;
  int back = 0;
  while (i > 0 && back < 4) {
    unsigned char c = static_cast<unsigned char>(data[i - 1]);
    if ((c & 0xC0) != 0x80) break;  // not a continuation byte
    --i;
    ++back;
  }
  if (i == 0) return n;
  unsigned char lead = static_cast<unsigned char>(data[i - 1]);
  size_t need = (lead & 0x80) == 0x00   ? 1
                : (lead & 0xE0) == 0xC0 ? 2
                : (lead & 0xF0) == 0xE0 ? 3
                : (lead & 0xF8) == 0xF0 ? 4
                                        : 1;  // invalid lead: nothing to keep together
  size_t have = n - (i - 1);
  if (have >= need) return n;
  return i - 1 > 0 ? i - 1 : n;
}

std::string reply_json(std::string data, int64_t offset, int64_t size, bool stored) {
  data.resize(utf8_complete_prefix(data.data(), data.size()));
  const int64_t next = offset + static_cast<int64_t>(data.size());
  nlohmann::json reply{
      {"data", std::move(data)}, {"offset", next}, {"eof", next >= size}, {"size", size}};
  if (stored) reply["stored"] = true;
  return reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string read_page_request(const nlohmann::json& req, PageRequest* out) {
  constexpr int64_t kMaxIndex = int64_t{1} << 30;
  PageRequest p;
  // (a float is refused: its cast to an integer out of range is undefined)
  auto field = [&req](const char* name, int64_t* v) {
    auto it = req.find(name);
    if (it == req.end() || it->is_null()) return true;
    auto n = json_number::integer(*it);
    if (n) *v = *n;
    return n.has_value();
  };
  int64_t rank = 0, attempt = -1, max_bytes = 0;
  if (!field("attempt", &attempt) || !field("rank", &rank) || !field("offset", &p.offset) ||
      !field("max_bytes", &max_bytes))
    return "attempt, rank, offset and max_bytes must be integers";
  if (rank < 0 || rank > kMaxIndex) return "rank must be from 0 to 1073741824";
  if (p.offset < 0) return "offset must be >= 0";
  p.rank = static_cast<int32_t>(rank);
  p.attempt = attempt >= 0 && attempt <= kMaxIndex ? static_cast<int32_t>(attempt) : -1;
  p.max_bytes = max_bytes <= 0 ? kDefaultPageBytes : std::min(max_bytes, kMaxPageBytes);
  *out = p;
  return {};
}

std::string page_json(const std::string& log, int64_t offset, int64_t max_bytes) {
  if (max_bytes <= 0) max_bytes = kDefaultPageBytes;  // as an agent reads a page
  max_bytes = std::min(max_bytes, kMaxPageBytes);
  const auto size = static_cast<int64_t>(log.size());
  const int64_t off = std::clamp<int64_t>(offset, 0, size);
  const int64_t want = std::clamp<int64_t>(max_bytes, 0, size - off);
  return reply_json(log.substr(static_cast<size_t>(off), static_cast<size_t>(want)), off, size,
                    true);
}

}  // namespace troupe::logchunks

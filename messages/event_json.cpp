#include "messages/event_json.hpp"

#include <charconv>
#include <cstdint>

namespace troupe::spec {

namespace {

constexpr char kHex[] = "0123456789abcdef";

void append_u16(std::string& out, uint32_t u) {
  const char buf[6] = {
      '\\', 'u', kHex[(u >> 12) & 0xf], kHex[(u >> 8) & 0xf], kHex[(u >> 4) & 0xf], kHex[u & 0xf]};
  out.append(buf, sizeof buf);
}

// Appends the escape of code point `cp` and returns true, or returns false
// when protobuf writes it as is (JsonEscaping's EscapeCodePoint).
bool append_escape(std::string& out, uint32_t cp) {
  if (cp < 0xa0) {
    switch (cp) {
      case '"':
        out += "\\\"";
        return true;
      case '\\':
        out += "\\\\";
        return true;
      case '\b':
        out += "\\b";
        return true;
      case '\t':
        out += "\\t";
        return true;
      case '\n':
        out += "\\n";
        return true;
      case '\f':
        out += "\\f";
        return true;
      case '\r':
        out += "\\r";
        return true;
      case '<':
      case '>':
        append_u16(out, cp);
        return true;
      default:
        if (cp < 0x20 || cp >= 0x7f) {
          append_u16(out, cp);
          return true;
        }
        return false;
    }
  }
  if (cp == 0x00ad || (cp >= 0x0600 && cp <= 0x0603) || cp == 0x06dd || cp == 0x070f ||
      cp == 0x17b4 || cp == 0x17b5 || (cp >= 0x200b && cp <= 0x200f) ||
      (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x2064) ||
      (cp >= 0x206a && cp <= 0x206f) || cp == 0xfeff || (cp >= 0xfff9 && cp <= 0xfffb)) {
    append_u16(out, cp);
    return true;
  }
  if (cp == 0xe0001 || (cp >= 0x1d173 && cp <= 0x1d17a) || (cp >= 0xe0020 && cp <= 0xe007f)) {
    append_u16(out, 0xd800 + ((cp - 0x10000) >> 10));
    append_u16(out, 0xdc00 + ((cp - 0x10000) & 0x3ff));
    return true;
  }
  return false;
}

bool plain_ascii(unsigned char c) {
  return c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '<' && c != '>';
}

void append_int(std::string& out, int64_t v) {
  char buf[24];
  auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  out.append(buf, end);
}

void append_quoted_int(std::string& out, int64_t v) {
  out += '"';
  append_int(out, v);
  out += '"';
}

void append_field(std::string& out, std::string_view key_and_comma, std::string_view value) {
  out += key_and_comma;
  append_proto_json_string(out, value);
}

}  // namespace

void append_proto_json_string(std::string& out, std::string_view s) {
  out += '"';
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    size_t run = i;
    while (run < n && plain_ascii(static_cast<unsigned char>(s[run]))) ++run;
    out.append(s.data() + i, run - i);
    i = run;
    if (i == n) break;
    // One code point, decoded as protobuf's ReadCodePoint does (no check for
    // overlong forms; a bad continuation byte is consumed with the sequence).
    uint32_t cp = static_cast<unsigned char>(s[i]);
    size_t j = i + 1;
    int left = 0;
    if (cp <= 0x7f) {
    } else if (cp <= 0xbf) {
      i = j;  // a stray continuation byte: dropped
      continue;
    } else if (cp <= 0xdf) {
      cp &= 0x1f, left = 1;
    } else if (cp <= 0xef) {
      cp &= 0x0f, left = 2;
    } else if (cp <= 0xf7) {
      cp &= 0x07, left = 3;
    } else {
      i = j;
      continue;
    }
    bool ok = true;
    while (left > 0 && j < n) {
      const auto b = static_cast<unsigned char>(s[j++]);
      --left;
      cp = (cp << 6) | (b & 0x3f);
      if (b < 0x80 || b > 0xbf) {
        ok = false;
        break;
      }
    }
    if (left > 0 && ok) break;  // cut short by the end of the string: dropped
    if (!ok || (cp & 0xfffff800) == 0xd800 || cp > 0x10ffff) {
      i = j;
      continue;
    }
    if (!append_escape(out, cp)) out.append(s.data() + i, j - i);
    i = j;
  }
  out += '"';
}

std::string event_json(const pb::JobEvent& e) {
  std::string out;
  out.reserve(192 + e.job_id().size() + e.team().size() + e.state().size() + e.ts().size() +
              e.reason().size() + e.name().size() + e.kind().size() + e.cause().size() +
              48 * static_cast<size_t>(e.workers_size()));
  append_field(out, "{\"job_id\":", e.job_id());
  append_field(out, ",\"team\":", e.team());
  append_field(out, ",\"state\":", e.state());
  out += ",\"attempt\":";
  append_int(out, e.attempt());
  out += ",\"ts_ms\":";
  append_quoted_int(out, e.ts_ms());
  append_field(out, ",\"ts\":", e.ts());
  out += ",\"workers\":[";
  for (int w = 0; w < e.workers_size(); ++w) {
    const auto& p = e.workers(w);
    out += w == 0 ? "{\"rank\":" : ",{\"rank\":";
    append_int(out, p.rank());
    append_field(out, ",\"node\":", p.node());
    out += ",\"gpus\":[";
    for (int g = 0; g < p.gpus_size(); ++g) {
      if (g > 0) out += ',';
      append_int(out, p.gpus(g));
    }
    out += "]}";
  }
  out += ']';
  append_field(out, ",\"reason\":", e.reason());
  append_field(out, ",\"name\":", e.name());
  append_field(out, ",\"kind\":", e.kind());
  append_field(out, ",\"cause\":", e.cause());
  out += ",\"seq\":";
  append_quoted_int(out, e.seq());
  if (e.has_exit_code()) {
    out += ",\"exit_code\":";
    append_int(out, e.exit_code());
  }
  out += '}';
  return out;
}

}  // namespace troupe::spec

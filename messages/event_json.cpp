#include "messages/event_json.hpp"

#include <google/protobuf/util/json_util.h>

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <ctime>

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

// The fast reader: event_json's exact shape, nothing else.
class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}

  bool lit(std::string_view t) {
    if (s_.compare(i_, t.size(), t) != 0) return false;
    i_ += t.size();
    return true;
  }
  bool at(char c) const { return i_ < s_.size() && s_[i_] == c; }
  bool done() const { return i_ == s_.size(); }

  // A JSON integer as the printer writes it: no '+', no leading zero, no
  // "-0", in range.
  template <class Int>
  bool integer(Int* v) {
    const size_t from = i_;
    if (at('-')) ++i_;
    const size_t digits = i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    const size_t n = i_ - digits;
    if (n == 0 || (s_[digits] == '0' && (n > 1 || digits != from))) return false;
    const auto r = std::from_chars(s_.data() + from, s_.data() + i_, *v);
    return r.ec == std::errc() && r.ptr == s_.data() + i_;
  }
  template <class Int>
  bool quoted(Int* v) {
    return lit("\"") && integer(v) && lit("\"");
  }

  // A string literal: raw bytes that are valid UTF-8 (no control
  // characters), the printer's escapes, \uxxxx with surrogate pairs.
  bool string(std::string* out) {
    if (!lit("\"")) return false;
    out->clear();
    for (;;) {
      const size_t run = i_;
      while (i_ < s_.size()) {
        const auto c = static_cast<unsigned char>(s_[i_]);
        if (c == '"' || c == '\\' || c < 0x20) break;
        if (c < 0x80) {
          ++i_;
        } else if (!utf8_sequence()) {
          return false;
        }
      }
      out->append(s_.data() + run, i_ - run);
      if (i_ == s_.size()) return false;
      const char c = s_[i_++];
      if (c == '"') return true;
      if (c != '\\' || i_ == s_.size()) return false;
      switch (s_[i_++]) {
        case '"':
          *out += '"';
          break;
        case '\\':
          *out += '\\';
          break;
        case 'b':
          *out += '\b';
          break;
        case 't':
          *out += '\t';
          break;
        case 'n':
          *out += '\n';
          break;
        case 'f':
          *out += '\f';
          break;
        case 'r':
          *out += '\r';
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!hex4(&cp) || (cp >= 0xdc00 && cp <= 0xdfff)) return false;
          if (cp >= 0xd800 && cp <= 0xdbff) {
            uint32_t low = 0;
            if (!lit("\\u") || !hex4(&low) || low < 0xdc00 || low > 0xdfff) return false;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          }
          append_utf8(*out, cp);
          break;
        }
        default:
          return false;
      }
    }
  }

 private:
  bool hex4(uint32_t* v) {
    if (s_.size() - i_ < 4) return false;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_++];
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) return false;
      *v = (*v << 4) | static_cast<uint32_t>(d);
    }
    return true;
  }

  // One well-formed UTF-8 sequence of two to four bytes at i_ (shortest
  // form, no surrogate, at most U+10FFFF); moves past it.
  bool utf8_sequence() {
    const auto b0 = static_cast<unsigned char>(s_[i_]);
    int len = 0;
    uint32_t cp = 0, min = 0;
    if (b0 >= 0xc2 && b0 <= 0xdf) {
      len = 2, cp = b0 & 0x1f, min = 0x80;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
      len = 3, cp = b0 & 0x0f, min = 0x800;
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
      len = 4, cp = b0 & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (s_.size() - i_ < static_cast<size_t>(len)) return false;
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s_[i_ + k]);
      if (b < 0x80 || b > 0xbf) return false;
      cp = (cp << 6) | (b & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i_ += len;
    return true;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  std::string_view s_;
  size_t i_ = 0;
};

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
              72 * static_cast<size_t>(e.workers_size()));
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
    out += "],\"gpu_memory_mb\":";
    append_quoted_int(out, p.gpu_memory_mb());
    out += '}';
  }
  out += ']';
  append_field(out, ",\"reason\":", e.reason());
  append_field(out, ",\"name\":", e.name());
  append_field(out, ",\"kind\":", e.kind());
  append_field(out, ",\"cause\":", e.cause());
  out += ",\"seq\":";
  append_quoted_int(out, e.seq());
  out += ",\"tasks\":";
  append_int(out, e.tasks());
  if (e.has_exit_code()) {
    out += ",\"exit_code\":";
    append_int(out, e.exit_code());
  }
  out += '}';
  return out;
}

bool read_event_json_fast(std::string_view json, pb::JobEvent* e) {
  e->Clear();
  Reader r(json);
  int32_t i32 = 0;
  int64_t i64 = 0;
  if (!r.lit("{\"job_id\":") || !r.string(e->mutable_job_id()) || !r.lit(",\"team\":") ||
      !r.string(e->mutable_team()) || !r.lit(",\"state\":") || !r.string(e->mutable_state()) ||
      !r.lit(",\"attempt\":") || !r.integer(&i32))
    return false;
  e->set_attempt(i32);
  if (!r.lit(",\"ts_ms\":") || !r.quoted(&i64)) return false;
  e->set_ts_ms(i64);
  if (!r.lit(",\"ts\":") || !r.string(e->mutable_ts()) || !r.lit(",\"workers\":[")) return false;
  for (bool first = true; !r.lit("]"); first = false) {
    if (!first && !r.lit(",")) return false;
    auto* p = e->add_workers();
    if (!r.lit("{\"rank\":") || !r.integer(&i32)) return false;
    p->set_rank(i32);
    if (!r.lit(",\"node\":") || !r.string(p->mutable_node()) || !r.lit(",\"gpus\":[")) return false;
    for (bool g = true; !r.lit("]"); g = false) {
      if ((!g && !r.lit(",")) || !r.integer(&i32)) return false;
      p->add_gpus(i32);
    }
    if (r.lit(",\"gpu_memory_mb\":")) {
      if (!r.quoted(&i64)) return false;
      p->set_gpu_memory_mb(i64);
    }
    if (!r.lit("}")) return false;
  }
  if (!r.lit(",\"reason\":") || !r.string(e->mutable_reason()) || !r.lit(",\"name\":") ||
      !r.string(e->mutable_name()) || !r.lit(",\"kind\":") || !r.string(e->mutable_kind()) ||
      !r.lit(",\"cause\":") || !r.string(e->mutable_cause()) || !r.lit(",\"seq\":") ||
      !r.quoted(&i64))
    return false;
  e->set_seq(i64);
  if (r.lit(",\"tasks\":")) {  // (events written before arrays have none)
    if (!r.integer(&i32)) return false;
    e->set_tasks(i32);
  }
  if (r.lit(",\"exit_code\":")) {
    if (!r.integer(&i32)) return false;
    e->set_exit_code(i32);
  }
  return r.lit("}") && r.done();
}

bool read_event_json(std::string_view json, pb::JobEvent* e) {
  if (read_event_json_fast(json, e)) return true;
  e->Clear();
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;
  return google::protobuf::util::JsonStringToMessage(
             google::protobuf::StringPiece(json.data(), json.size()), e, o)
      .ok();
}

std::string rfc3339(int64_t ms) {
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  return buf;
}

}  // namespace troupe::spec

// Owns the string scanning used on the hot NATS paths of troupe-load.
#include "load/scan.hpp"

namespace troupe::load {

std::string_view json_string_field(std::string_view json, std::string_view key) {
  size_t pos = 0;
  while (true) {
    pos = json.find(key, pos);
    if (pos == std::string_view::npos) return {};
    size_t end = pos + key.size();
    if (pos == 0 || json[pos - 1] != '"' || end >= json.size() || json[end] != '"') {
      pos = end;
      continue;
    }
    size_t i = end + 1;
    while (i < json.size() && (json[i] == ' ' || json[i] == '\t' || json[i] == '\n' ||
                               json[i] == '\r'))
      ++i;
    if (i >= json.size() || json[i] != ':') {
      pos = end;  // a string value equal to the key, not the key itself
      continue;
    }
    ++i;
    while (i < json.size() && (json[i] == ' ' || json[i] == '\t' || json[i] == '\n' ||
                               json[i] == '\r'))
      ++i;
    if (i >= json.size() || json[i] != '"') return {};
    size_t start = i + 1;
    size_t close = start;
    while (close < json.size() && json[close] != '"') {
      if (json[close] == '\\') ++close;
      ++close;
    }
    if (close >= json.size()) return {};
    return json.substr(start, close - start);
  }
}

std::string_view last_token(std::string_view subject) {
  size_t dot = subject.find_last_of('.');
  return dot == std::string_view::npos ? subject : subject.substr(dot + 1);
}

}  // namespace troupe::load

// How Troupe writes the numbers in its ids: base 36 (0-9a-z), fixed width,
// so that ids of one kind sort in the order they were made. Used by the
// scheduler's job ids (actors/submission.hpp) and the front door's
// (gateway/dispatch/policy.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace troupe::ids {

// Appends `v` in base 36, at least `width` digits (zeros in front).
inline void append_base36(std::string& out, uint64_t v, size_t width) {
  char buf[16];
  size_t n = 0;
  do {
    buf[n++] = "0123456789abcdefghijklmnopqrstuvwxyz"[v % 36];
    v /= 36;
  } while (v != 0);
  while (n < width) buf[n++] = '0';
  while (n > 0) out.push_back(buf[--n]);
}

}  // namespace troupe::ids

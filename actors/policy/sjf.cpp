// Shortest declared job first: see sjf.hpp.
#include "actors/policy/sjf.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace troupe::policy {

int sjf_band(int64_t max_runtime_s, int64_t gpus) {
  if (max_runtime_s <= 0) return kSjfUnknownBand;
  // In doubles: saturating (int64 max seconds x int64 max GPUs still lands in
  // the last band before kSjfUnknownBand, never an overflow).
  const double work =
      static_cast<double>(max_runtime_s) * static_cast<double>(std::max<int64_t>(1, gpus));
  int band = 0;
  for (double room = 1.0; work > room && band < kSjfUnknownBand - 1; room *= 2.0) ++band;
  return band;
}

std::string sjf_band_text(int band) {
  if (band >= kSjfUnknownBand)
    return "band " + std::to_string(band) + ": no max_runtime_s, the last band";
  if (band < 0) band = 0;
  // 2^band GPU-seconds, exact in a double up to band 47.
  char work[32];
  std::snprintf(work, sizeof work, "%.0f", std::ldexp(1.0, band));
  return "band " + std::to_string(band) + ": declared work up to " + work + " GPU-seconds";
}

}  // namespace troupe::policy

// Shortest declared job first: see sjf.hpp.
#include "actors/policy/sjf.hpp"

#include <algorithm>

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

}  // namespace troupe::policy

// Owns the percentile arithmetic (stats.hpp).
#include "actors/policy/stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace troupe::policy {

double percentile_sorted(const std::vector<double>& s, double p) {
  if (s.empty()) return 0;
  p = std::min(std::max(p, 0.0), 100.0);
  double rank = p / 100.0 * static_cast<double>(s.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(rank));
  size_t hi = std::min(lo + 1, s.size() - 1);
  double frac = rank - static_cast<double>(lo);
  return s[lo] + (s[hi] - s[lo]) * frac;
}

double percentile(std::vector<double> samples, double p) {
  std::sort(samples.begin(), samples.end());
  return percentile_sorted(samples, p);
}

}  // namespace troupe::policy

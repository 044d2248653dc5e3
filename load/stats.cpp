// Owns the percentile, summary and fairness arithmetic.
#include "load/stats.hpp"

#include <algorithm>
#include <cmath>

namespace troupe::load {

Summary summarize(std::vector<double> samples) {
  Summary s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.count = samples.size();
  double sum = 0;
  for (double v : samples) sum += v;
  s.mean = sum / static_cast<double>(s.count);
  s.p50 = percentile_sorted(samples, 50);
  s.p99 = percentile_sorted(samples, 99);
  s.p999 = percentile_sorted(samples, 99.9);
  s.max = samples.back();
  return s;
}

double jain_index(const std::vector<double>& x) {
  if (x.empty()) return 0;
  double sum = 0, sq = 0;
  for (double v : x) {
    sum += v;
    sq += v * v;
  }
  if (sq == 0) return 1;
  return sum * sum / (static_cast<double>(x.size()) * sq);
}

}  // namespace troupe::load

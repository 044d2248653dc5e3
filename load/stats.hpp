// Statistics of troupe-load reports: percentiles, summaries of latency
// samples, and Jain's fairness index. Pure.
#pragma once

#include <cstddef>
#include <vector>

namespace troupe::load {

// The p-th percentile (0 <= p <= 100) of `samples` with linear interpolation
// between the two closest ranks (rank = p/100 * (n-1), as numpy's default).
// 0 when there are no samples. `samples` need not be sorted.
double percentile(std::vector<double> samples, double p);
// The same on samples already sorted ascending (no copy).
double percentile_sorted(const std::vector<double>& sorted, double p);

struct Summary {
  size_t count = 0;
  double mean = 0, p50 = 0, p99 = 0, p999 = 0, max = 0;
};
Summary summarize(std::vector<double> samples);

// Jain's fairness index (sum x)^2 / (n * sum x^2) over n >= 1 non-negative
// values: 1 when all are equal, 1/n when one gets everything. 1 when every
// value is 0 (nobody got anything: equal); 0 when there are no values.
double jain_index(const std::vector<double>& x);

}  // namespace troupe::load

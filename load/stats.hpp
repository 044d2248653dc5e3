// Statistics of troupe-load reports: percentiles, summaries of latency
// samples, and Jain's fairness index. Pure.
#pragma once

#include <cstddef>
#include <vector>

#include "actors/policy/stats.hpp"

namespace troupe::load {

// Percentiles: the one definition (linear interpolation between ranks).
using policy::percentile;
using policy::percentile_sorted;

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

// Owns the percentile of a sample, the one definition every report uses
// (usage reports, troupe-load's). Pure.
#pragma once

#include <vector>

namespace troupe::policy {

// The p-th percentile (0 <= p <= 100, clamped) of `samples` with linear
// interpolation between the two closest ranks (rank = p/100 * (n-1), as
// numpy's default): the median of an even count is the mean of the middle
// two; p100 is the largest. 0 when there are no samples. Need not be sorted.
double percentile(std::vector<double> samples, double p);
// The same on samples already sorted ascending (no copy).
double percentile_sorted(const std::vector<double>& sorted, double p);

}  // namespace troupe::policy

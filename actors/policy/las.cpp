#include "actors/policy/las.hpp"

#include <algorithm>

namespace troupe::policy {

int las_band(double attained_gpu_s, const std::vector<double>& thresholds) {
  int band = 0;
  for (double t : thresholds)
    if (attained_gpu_s >= t) ++band;
  return band;
}

WaitingBand waiting_band(double attained_gpu_s, const std::vector<double>& thresholds,
                         int64_t promote_after_s, int64_t queued_ms, int64_t now_ms) {
  WaitingBand w;
  w.band = las_band(attained_gpu_s, thresholds);
  if (w.band == 0 || promote_after_s <= 0) return w;
  int64_t at = queued_ms + promote_after_s * 1000;
  if (at <= now_ms)
    w.band = 0;
  else
    w.promote_at_ms = at;
  return w;
}

double attempt_gpu_s(int gpus_per_worker, int workers, int64_t started_ms, int64_t now_ms) {
  if (started_ms <= 0 || now_ms <= started_ms) return 0;
  return static_cast<double>(gpus_per_worker) * std::max(1, workers) *
         static_cast<double>(now_ms - started_ms) / 1000.0;
}

}  // namespace troupe::policy

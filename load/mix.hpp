// The job mix of troupe-load (--mix): parsing "1gpu:0.8,gang2x4:0.1,8gpu:0.1"
// into weighted job shapes, and picking a shape from a uniform draw. Pure.
//
// Grammar: a comma-separated list of SHAPE[:WEIGHT]. WEIGHT is a positive
// number (default 1); weights are relative (they need not sum to 1).
//   cpu        one worker, no GPU
//   <N>gpu     one worker with N GPUs (0gpu is the same as cpu)
//   gang<W>x<G>  a gang of W workers (W >= 2) with G GPUs each (G >= 1)
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace troupe::load {

struct MixEntry {
  std::string label;  // the SHAPE as written
  int workers = 1;
  int gpus = 0;       // per worker
  double weight = 1;
  int total_gpus() const { return workers * gpus; }
};

// nullopt (and `error` set) when the spec is malformed.
std::optional<std::vector<MixEntry>> parse_mix(const std::string& spec, std::string* error);

// Index of the entry that the draw `u` in [0, 1) falls on (cumulative
// weights). `mix` must not be empty.
size_t pick(const std::vector<MixEntry>& mix, double u);

}  // namespace troupe::load

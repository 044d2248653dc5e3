// Owns parsing of the --mix grammar (see mix.hpp) and weighted picking.
#include "load/mix.hpp"

#include <cmath>
#include <cstdlib>

namespace troupe::load {

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// A whole non-negative decimal integer (at most 6 digits); nullopt otherwise.
std::optional<int> whole(const std::string& s) {
  if (s.empty() || s.size() > 6) return std::nullopt;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::optional<MixEntry> shape(const std::string& s, std::string* error) {
  MixEntry e;
  e.label = s;
  if (s == "cpu") return e;
  const std::string gang = "gang", gpu = "gpu";
  if (s.rfind(gang, 0) == 0) {
    std::string rest = s.substr(gang.size());
    size_t x = rest.find('x');
    auto w = x == std::string::npos ? std::nullopt : whole(rest.substr(0, x));
    auto g = x == std::string::npos ? std::nullopt : whole(rest.substr(x + 1));
    if (!w || !g) {
      *error = "'" + s + "': a gang is gang<workers>x<gpus per worker>, e.g. gang2x4";
      return std::nullopt;
    }
    if (*w < 2 || *g < 1) {
      *error = "'" + s + "': a gang needs at least 2 workers and 1 GPU per worker";
      return std::nullopt;
    }
    e.workers = *w;
    e.gpus = *g;
    return e;
  }
  if (s.size() > gpu.size() && s.compare(s.size() - gpu.size(), gpu.size(), gpu) == 0) {
    if (auto n = whole(s.substr(0, s.size() - gpu.size()))) {
      e.gpus = *n;
      return e;
    }
  }
  *error = "'" + s + "': unknown job shape (expected cpu, <N>gpu or gang<W>x<G>)";
  return std::nullopt;
}

}  // namespace

std::optional<std::vector<MixEntry>> parse_mix(const std::string& spec, std::string* error) {
  std::string err;
  std::vector<MixEntry> out;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    std::string item =
        trim(spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    start = comma == std::string::npos ? spec.size() + 1 : comma + 1;
    if (item.empty()) {
      err = "empty entry in the mix '" + spec + "'";
      break;
    }
    std::string shp = item;
    double weight = 1;
    if (size_t colon = item.find(':'); colon != std::string::npos) {
      shp = trim(item.substr(0, colon));
      std::string w = trim(item.substr(colon + 1));
      char* end = nullptr;
      weight = std::strtod(w.c_str(), &end);
      if (w.empty() || end == nullptr || *end != '\0' || !std::isfinite(weight) || weight <= 0) {
        err = "'" + item + "': the weight must be a positive number";
        break;
      }
    }
    auto e = shape(shp, &err);
    if (!e) break;
    e->weight = weight;
    out.push_back(*e);
  }
  if (!err.empty()) {
    if (error != nullptr) *error = err;
    return std::nullopt;
  }
  return out;
}

size_t pick(const std::vector<MixEntry>& mix, double u) {
  double total = 0;
  for (const auto& e : mix) total += e.weight;
  double at = u * total;
  double acc = 0;
  for (size_t i = 0; i < mix.size(); ++i) {
    acc += mix[i].weight;
    if (at < acc) return i;
  }
  return mix.empty() ? 0 : mix.size() - 1;
}

}  // namespace troupe::load

// Owns the node inventory: nvidia-smi / meminfo parsing, flag overrides, probing.
#include "node/inventory.hpp"

#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

namespace troupe::node {

namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// Parses a whole non-negative integer prefix; nullopt when there is none.
std::optional<long long> leading_number(const std::string& s) {
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return std::nullopt;
  long long v = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) break;
    if (v > (1LL << 50)) return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

}  // namespace

std::optional<std::vector<GpuInfo>> parse_nvidia_smi_csv(const std::string& text) {
  std::vector<GpuInfo> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    line = trim(line);
    if (line.empty()) continue;
    // index, name, memory — the name may itself hold commas, so split on the
    // first and the last one.
    auto first = line.find(',');
    auto last = line.rfind(',');
    if (first == std::string::npos || last == first) continue;
    auto idx = leading_number(trim(line.substr(0, first)));
    if (!idx || *idx > 1024 || trim(line.substr(0, first)).size() != std::to_string(*idx).size())
      continue;
    GpuInfo g;
    g.index = static_cast<int>(*idx);
    g.name = trim(line.substr(first + 1, last - first - 1));
    g.memory_mb = leading_number(trim(line.substr(last + 1))).value_or(0);
    if (g.name.empty()) continue;
    out.push_back(std::move(g));
  }
  if (out.empty()) return std::nullopt;
  return out;
}

std::optional<long long> parse_meminfo_total_mb(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemTotal:", 0) != 0) continue;
    auto kb = leading_number(trim(line.substr(9)));
    if (!kb) return std::nullopt;
    return *kb / 1024;
  }
  return std::nullopt;
}

std::string gpu_type_from_name(const std::string& name) {
  std::string s;
  for (char c : trim(name)) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s.rfind("nvidia ", 0) == 0) s = trim(s.substr(7));
  std::string out;
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!out.empty() && out.back() != '-') out += '-';
    } else {
      out += c;
    }
  }
  return out.empty() ? std::string("generic") : out;
}

Inventory build_inventory(const Options& opts, const Probe& probe) {
  Inventory inv;
  if (opts.gpus) {
    inv.gpu_type = opts.gpu_type.value_or("generic");
    for (int i = 0; i < *opts.gpus; ++i) inv.gpus.push_back(GpuInfo{i, inv.gpu_type, 0});
  } else if (probe.smi_gpus && !probe.smi_gpus->empty()) {
    inv.gpus = *probe.smi_gpus;
    inv.gpu_type = opts.gpu_type ? *opts.gpu_type : gpu_type_from_name(inv.gpus.front().name);
  } else {
    inv.gpu_type = opts.gpu_type.value_or("generic");
  }
  if (opts.gpu_memory_mb)
    for (auto& g : inv.gpus) g.memory_mb = *opts.gpu_memory_mb;
  inv.cpus = opts.cpus ? *opts.cpus : probe.online_cpus;
  inv.memory_mb = opts.memory_mb ? *opts.memory_mb : probe.meminfo_mb.value_or(0);
  return inv;
}

Probe probe_machine(const Options& opts) {
  Probe p;
  if (!opts.gpus) {
    struct Closer {
      void operator()(FILE* f) const { pclose(f); }
    };
    // pclose's status is needed, so close by hand and let the guard cover errors.
    std::unique_ptr<FILE, Closer> pipe(popen(
        "nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader 2>/dev/null", "r"));
    if (pipe) {
      std::string text;
      std::array<char, 4096> buf{};
      size_t n;
      while ((n = fread(buf.data(), 1, buf.size(), pipe.get())) > 0) text.append(buf.data(), n);
      int status = pclose(pipe.release());
      if (status == 0) p.smi_gpus = parse_nvidia_smi_csv(text);
    }
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  p.online_cpus = n > 0 ? static_cast<int>(n) : 1;
  std::ifstream f("/proc/meminfo");
  if (f) {
    std::stringstream ss;
    ss << f.rdbuf();
    p.meminfo_mb = parse_meminfo_total_mb(ss.str());
  }
  return p;
}

}  // namespace troupe::node

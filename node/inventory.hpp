// What this node offers: GPUs, CPUs, memory. Pure parsers for nvidia-smi CSV
// and /proc/meminfo, the pure merge with command-line overrides, and the one
// impure probe that runs nvidia-smi and reads /proc.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "node/options.hpp"

namespace troupe::node {

struct GpuInfo {
  int index = 0;
  std::string name;
  long long memory_mb = 0;
};

struct Inventory {
  std::vector<GpuInfo> gpus;
  std::string gpu_type = "generic";
  int cpus = 0;
  long long memory_mb = 0;
};

// Parses `nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader`
// output ("0, NVIDIA H200, 143771 MiB" per line). Lines that do not parse are
// skipped; "[N/A]" memory reads as 0. nullopt when nothing parsed.
std::optional<std::vector<GpuInfo>> parse_nvidia_smi_csv(const std::string& text);

// MemTotal of /proc/meminfo in MB (kB / 1024); nullopt when absent.
std::optional<long long> parse_meminfo_total_mb(const std::string& text);

// GPU type from a device name: lowercased, a leading "nvidia " dropped, blanks
// turned into '-' ("NVIDIA H200" -> "h200", "Tesla V100-SXM2-16GB" -> "tesla-v100-sxm2-16gb").
std::string gpu_type_from_name(const std::string& name);

// What the machine reported (nullopt: not available).
struct Probe {
  std::optional<std::vector<GpuInfo>> smi_gpus;
  int online_cpus = 0;
  std::optional<long long> meminfo_mb;
};

// Pure: the inventory from the probe and the flags. --gpus given explicitly
// wins over nvidia-smi (GPUs 0..N-1 of --gpu-type); --gpu-type given explicitly
// names the type either way; --cpus / --memory-mb win over /proc.
Inventory build_inventory(const Options& opts, const Probe& probe);

// Impure: runs nvidia-smi (unless --gpus was given), reads /proc/meminfo and
// sysconf. Call before any worker thread exists (it uses popen/pclose).
Probe probe_machine(const Options& opts);

}  // namespace troupe::node

// Owns reading /proc: status memory fields and the executable-name search.
#include "load/proc.hpp"

#include <dirent.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

namespace troupe::load {

std::optional<long long> parse_status_kb(const std::string& text, const std::string& field) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.size() <= field.size() || line.compare(0, field.size(), field) != 0 ||
        line[field.size()] != ':')
      continue;
    const char* p = line.c_str() + field.size() + 1;
    char* end = nullptr;
    long long v = std::strtoll(p, &end, 10);
    if (end == p) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

bool cmdline_runs(const std::string& cmdline, const std::string& name) {
  std::string argv0 = cmdline.substr(0, cmdline.find('\0'));
  size_t slash = argv0.find_last_of('/');
  std::string base = slash == std::string::npos ? argv0 : argv0.substr(slash + 1);
  return !name.empty() && base == name;
}

namespace {
std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

ProcMemory read_proc_memory(pid_t pid) {
  ProcMemory m;
  m.pid = pid;
  std::string text = slurp("/proc/" + std::to_string(pid) + "/status");
  m.hwm_kb = parse_status_kb(text, "VmHWM");
  m.rss_kb = parse_status_kb(text, "VmRSS");
  return m;
}

std::optional<pid_t> find_process(const std::string& name, int* count) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir("/proc"), ::closedir);
  if (count != nullptr) *count = 0;
  if (!dir) return std::nullopt;
  std::optional<pid_t> best;
  while (dirent* e = ::readdir(dir.get())) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 0) continue;
    if (!cmdline_runs(slurp(std::string("/proc/") + e->d_name + "/cmdline"), name)) continue;
    if (count != nullptr) ++*count;
    if (!best || pid < *best) best = static_cast<pid_t>(pid);
  }
  return best;
}

std::optional<ProcMemory> memory_of(std::optional<int> pid, const std::string& name) {
  std::optional<pid_t> p;
  if (pid)
    p = static_cast<pid_t>(*pid);
  else
    p = find_process(name);
  if (!p) return std::nullopt;
  return read_proc_memory(*p);
}

}  // namespace troupe::load

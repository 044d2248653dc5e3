// Process figures from /proc for troupe-load reports: a process's peak and
// current resident memory (VmHWM, VmRSS of /proc/<pid>/status) and finding a
// process by its executable name. The parsers are pure; the readers do I/O.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace troupe::load {

// The "<field>:   1234 kB" value of a /proc/<pid>/status text, in kB.
std::optional<long long> parse_status_kb(const std::string& status_text, const std::string& field);

// True when a /proc/<pid>/cmdline text (NUL-separated argv) runs an
// executable whose file name is `name`.
bool cmdline_runs(const std::string& cmdline, const std::string& name);

struct ProcMemory {
  pid_t pid = 0;
  std::optional<long long> hwm_kb;  // peak RSS (VmHWM)
  std::optional<long long> rss_kb;  // current RSS (VmRSS)
};

// Reads /proc/<pid>/status; fields are nullopt when the process is gone.
ProcMemory read_proc_memory(pid_t pid);

// The lowest pid whose argv[0] file name is `name` (e.g. "troupe-scheduler");
// nullopt when none runs. Several matches: the lowest pid, and `count` says
// how many there were.
std::optional<pid_t> find_process(const std::string& name, int* count = nullptr);

// read_proc_memory of `pid` when given, else of find_process(name); nullopt
// when there is no such process.
std::optional<ProcMemory> memory_of(std::optional<int> pid, const std::string& name);

}  // namespace troupe::load

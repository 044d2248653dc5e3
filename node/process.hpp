// Starting and signalling worker processes: fork/exec in a new session
// (process group), stdout+stderr appended to a log file, cwd and environment
// as given; an O_CLOEXEC pipe tells the parent whether exec succeeded. Also
// UniqueFd, the RAII file descriptor used by the node agent.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace troupe::node {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct ProcessSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in the child env's PATH
  std::vector<std::string> env;   // "KEY=VALUE"
  std::string cwd;                // created when missing
  std::string log_file;           // created (with its folder) when missing; appended to
  // The child gets SIGKILL when the thread that forked it ends
  // (prctl(PR_SET_PDEATHSIG)), and kills itself at once when that already
  // happened before the prctl took effect. Fork from a thread that lives as
  // long as the process (node/spawner.hpp): the kernel ties the signal to the
  // forking *thread*, not the process.
  bool die_with_parent = false;
  // Isolation (node/isolation.hpp). The child joins these cgroups (writes "0"
  // to each cgroup.procs) before anything else runs; then, when uid is set,
  // drops every supplementary group, takes gid and uid, and sets
  // no_new_privs, so nothing it execs can become root again.
  std::vector<std::string> cgroup_procs;
  std::optional<uid_t> uid;
  gid_t gid = 0;
  int oom_score_adj = 0;  // > 0: the kernel's OOM killer picks the job before the agent
};

struct SpawnResult {
  pid_t pid = -1;          // > 0: a child exists (even when exec failed: it exits 127)
  std::string error;       // fork/setup failure (pid -1): "launch failed: <error>"
  std::string exec_error;  // exec failed in the child (already written to the log)
};

// Forks and execs. The child: default signal dispositions and an empty signal
// mask, the parent-death signal when asked, setsid(), stdin from /dev/null, stdout+stderr to the
// log file, cwd, then execve over the PATH candidates; when every one fails it writes "troupe-node:
// cannot execute '<argv0>': <error>" to the log and exits 127. Returns after exec succeeded or
// failed in the child.
SpawnResult spawn_process(const ProcessSpec& spec);

// Sends `sig` to the process group `pid` leads (falls back to the process).
// Returns false when neither exists.
bool signal_group(pid_t pid, int sig);

// Runs a tool of the host (useradd, du, rm: looked up in the agent's PATH)
// and waits for it: stdin and stderr /dev/null, stdout into `out` (at most
// 64 KiB) when given, else /dev/null. Returns its exit status, or -1 when it
// could not run or was killed. Not for workers (spawn_process).
int run_tool(const std::vector<std::string>& args, std::string* out = nullptr);

// The PATH candidates execvp would try for `file` given the child env.
std::vector<std::string> exec_candidates(const std::string& file,
                                         const std::vector<std::string>& env);

}  // namespace troupe::node

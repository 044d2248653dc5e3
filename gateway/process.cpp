// Child processes, signals as a file descriptor, port probing (see process.hpp).
#include "gateway/process.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <thread>

namespace troupe::gateway {

namespace {

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// Closes a file descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

}  // namespace

SignalWatch::SignalWatch() {
  sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  fd_ = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

SignalWatch::~SignalWatch() {
  if (fd_ >= 0) ::close(fd_);
  sigset_t set = stop_signals();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

int SignalWatch::wait(std::chrono::milliseconds timeout) {
  if (fd_ < 0) {
    std::this_thread::sleep_for(timeout);
    return 0;
  }
  pollfd p{fd_, POLLIN, 0};
  int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (r <= 0) return 0;
  signalfd_siginfo info{};
  if (::read(fd_, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) return 0;
  received_ = static_cast<int>(info.ssi_signo);
  return received_;
}

std::optional<Child> Child::start(const std::string& name, const std::vector<std::string>& argv,
                                  const std::string& log_path, std::string* error) {
  if (argv.empty()) {
    *error = name + ": no command";
    return std::nullopt;
  }
  Fd log(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644));
  if (log.fd < 0) {
    *error = "cannot open " + log_path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  Fd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  // Everything the child needs is prepared before fork: after it, only
  // async-signal-safe calls (this process has NATS threads).
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::string exec_fail = name + ": cannot exec " + argv[0] + "\n";
  pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) {
    *error = name + ": fork failed: " + std::strerror(errno);
    return std::nullopt;
  }
  if (pid == 0) {
    ::setpgid(0, 0);  // Ctrl-C reaches `troupe up` only; it stops children in order
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);  // the mask survives exec
    if (devnull.fd >= 0) ::dup2(devnull.fd, 0);
    ::dup2(log.fd, 1);
    ::dup2(log.fd, 2);
    ::execv(cargv[0], cargv.data());
    ssize_t ignored = ::write(2, exec_fail.data(), exec_fail.size());
    (void)ignored;
    ::_exit(127);
  }
  Child c;
  c.name_ = name;
  c.log_path_ = log_path;
  c.pid_ = pid;
  return c;
}

Child::~Child() {
  stop();
}

Child::Child(Child&& o) noexcept {
  *this = std::move(o);
}

Child& Child::operator=(Child&& o) noexcept {
  if (this != &o) {
    stop();
    name_ = std::move(o.name_);
    log_path_ = std::move(o.log_path_);
    pid_ = o.pid_;
    exited_ = o.exited_;
    exit_text_ = std::move(o.exit_text_);
    o.pid_ = -1;
    o.exited_ = true;
  }
  return *this;
}

void Child::reap(int status) {
  exited_ = true;
  if (WIFEXITED(status))
    exit_text_ = "exited with code " + std::to_string(WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    exit_text_ = "killed by signal " + std::to_string(WTERMSIG(status));
  else
    exit_text_ = "ended";
}

bool Child::running() {
  if (pid_ <= 0 || exited_) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    reap(status);
    return false;
  }
  return r == 0;
}

bool Child::stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0 || exited_ || !running()) return true;
  ::kill(pid_, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!running()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(-pid_, SIGKILL);  // its process group: what it started goes too
  ::kill(pid_, SIGKILL);
  int status = 0;
  if (::waitpid(pid_, &status, 0) == pid_) reap(status);
  return false;
}

bool port_free(int port, std::string* why) {
  Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s.fd < 0) return true;  // cannot tell; let the server try
  int one = 1;
  ::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(s.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (why != nullptr) *why = std::strerror(errno);
    return false;
  }
  return true;
}

std::string self_dir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  std::string p(buf, static_cast<size_t>(n));
  auto slash = p.rfind('/');
  return slash == std::string::npos ? std::string() : p.substr(0, slash);
}

namespace {

bool executable(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string find_binary(const std::string& name, const std::vector<std::string>& extra_dirs) {
  std::vector<std::string> dirs;
  if (auto d = self_dir(); !d.empty()) dirs.push_back(d);
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    size_t start = 0;
    while (start <= p.size()) {
      auto colon = p.find(':', start);
      std::string d =
          p.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
      if (!d.empty()) dirs.push_back(d);
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  dirs.insert(dirs.end(), extra_dirs.begin(), extra_dirs.end());
  for (const auto& d : dirs) {
    std::string candidate = d + "/" + name;
    if (executable(candidate)) return candidate;
  }
  return {};
}

std::string tail_file(const std::string& path, int lines) {
  std::ifstream in(path);
  if (!in) return {};
  std::deque<std::string> last;
  std::string line;
  while (std::getline(in, line)) {
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) last.pop_front();
  }
  std::string out;
  for (const auto& l : last) out += "    " + l + "\n";
  return out;
}

}  // namespace troupe::gateway

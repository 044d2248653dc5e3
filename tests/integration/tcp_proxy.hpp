// A link between two parties that a test can cut: a TCP forwarder on a free
// loopback port to 127.0.0.1:<target_port>. cut() closes every connection
// and refuses new ones (each is closed at once) until mend(). One thread
// forwards every connection (poll); bytes pass untouched, TLS included.
#pragma once

#include <atomic>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace troupe::it {

class TcpProxy {
 public:
  // target_port 0: none yet (set_target); a connection then is refused.
  explicit TcpProxy(int target_port = 0);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }
  void set_target(int target_port) { target_ = target_port; }
  void cut() { cut_ = true; }
  void mend() { cut_ = false; }

 private:
  void run();
  void close_all();
  std::atomic<int> target_;
  int port_ = 0;
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> cut_{false};
  std::vector<std::pair<int, int>> pairs_;  // (accepted, to target); the thread's only
  std::thread thread_;
};

}  // namespace troupe::it

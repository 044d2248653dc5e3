#include "tcp_proxy.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace troupe::it {
namespace {

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Copies what `from` has to `to`; false when either end is done.
bool pump(int from, int to) {
  char buf[65536];
  ssize_t n = ::read(from, buf, sizeof buf);
  if (n <= 0) return false;
  for (ssize_t off = 0; off < n;) {
    ssize_t w = ::send(to, buf + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
    if (w <= 0) return false;
    off += w;
  }
  return true;
}

}  // namespace

TcpProxy::TcpProxy(int target_port) : target_(target_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(listen_fd_ >= 0);
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(listen_fd_, 64) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  port_ = ntohs(a.sin_port);
  thread_ = std::thread([this] { run(); });
}

TcpProxy::~TcpProxy() {
  stop_ = true;
  thread_.join();
  close_all();
  ::close(listen_fd_);
}

void TcpProxy::close_all() {
  for (auto& [a, b] : pairs_) {
    ::close(a);
    ::close(b);
  }
  pairs_.clear();
}

void TcpProxy::run() {
  while (!stop_) {
    if (cut_ && !pairs_.empty()) close_all();
    std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
    for (auto& [a, b] : pairs_) {
      fds.push_back({a, POLLIN, 0});
      fds.push_back({b, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
    const size_t polled = pairs_.size();
    if (fds[0].revents & POLLIN) {
      int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) {
        int t = cut_ || target_ == 0 ? -1 : connect_to(target_);
        if (t < 0)
          ::close(c);  // cut: refused
        else
          pairs_.emplace_back(c, t);
      }
    }
    std::vector<std::pair<int, int>> keep(pairs_.begin() + static_cast<long>(polled),
                                          pairs_.end());  // accepted just now
    for (size_t i = 0; i < polled; ++i) {
      auto [a, b] = pairs_[i];
      const auto& pa = fds[1 + 2 * i];
      const auto& pb = fds[2 + 2 * i];
      bool ok = true;
      if (pa.revents & (POLLIN | POLLHUP | POLLERR)) ok = pump(a, b);
      if (ok && (pb.revents & (POLLIN | POLLHUP | POLLERR))) ok = pump(b, a);
      if (ok) {
        keep.emplace_back(a, b);
      } else {
        ::close(a);
        ::close(b);
      }
    }
    pairs_ = std::move(keep);
  }
}

}  // namespace troupe::it

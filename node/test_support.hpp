// Test support for tests/unit/node_*.cpp (header only, not part of
// troupe_node_lib): a temporary folder, file helpers, and a publisher that
// records what the agent publishes.
#pragma once

#include <stdlib.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "messages/wire.hpp"

namespace troupe::node::test {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "troupe-node-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) != nullptr ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& path, const std::string& data) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream f(path, std::ios::binary);
  f << data;
}

struct Published {
  std::string subject;
  std::vector<uint8_t> data;
  std::string text() const { return std::string(data.begin(), data.end()); }
  const wire::Envelope* envelope() const { return wire::open(data); }
};

// Records every publish; wait() blocks until a predicate over the log holds.
class Capture {
 public:
  void operator()(const std::string& subject, const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    {
      std::lock_guard<std::mutex> lock(mu_);
      log_.push_back(Published{subject, std::vector<uint8_t>(p, p + size)});
    }
    cv_.notify_all();
  }
  std::vector<Published> all() const {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }
  std::vector<Published> on(const std::string& subject) const {
    std::vector<Published> out;
    for (auto& p : all())
      if (p.subject == subject) out.push_back(p);
    return out;
  }
  bool wait(const std::function<bool(const std::vector<Published>&)>& pred,
            std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(log_); });
  }
  bool wait_count(const std::string& subject, size_t n,
                  std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return wait(
        [&](const std::vector<Published>& log) {
          size_t c = 0;
          for (const auto& p : log)
            if (p.subject == subject) ++c;
          return c >= n;
        },
        timeout);
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Published> log_;
};

}  // namespace troupe::node::test

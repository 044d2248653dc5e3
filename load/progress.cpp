// Owns the progress line's text and the thread that redraws it.
#include "load/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace troupe::load {

std::string progress_line(const Progress& p, size_t total, double elapsed_s, int bar_width) {
  double frac = total == 0 ? 0.0 : std::min(1.0, static_cast<double>(p.terminal) / total);
  int filled = static_cast<int>(frac * bar_width);
  std::string bar = "[" + std::string(static_cast<size_t>(filled), '#') +
                    std::string(static_cast<size_t>(bar_width - filled), '-') + "]";
  char buf[256];
  std::snprintf(buf, sizeof buf, " %3d%%  sent %zu/%zu  acked %zu  placed %zu  done %zu%s  %.1f s",
                static_cast<int>(frac * 100), p.sent, total, p.acked, p.placed, p.terminal,
                p.rejected > 0 ? ("  rejected " + std::to_string(p.rejected)).c_str() : "",
                elapsed_s);
  return bar + buf;
}

Ticker::Ticker(bool enabled, std::function<std::string()> line) : line_(std::move(line)) {
  if (!enabled || ::isatty(STDERR_FILENO) == 0) return;
  thread_ = std::thread([this] {
    while (!stop_.load()) {
      std::string l = "\r" + line_() + "\x1b[K";
      std::fputs(l.c_str(), stderr);
      std::fflush(stderr);
      for (int i = 0; i < 10 && !stop_.load(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::string l = "\r" + line_() + "\x1b[K\n";
    std::fputs(l.c_str(), stderr);
    std::fflush(stderr);
  });
}

Ticker::~Ticker() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

}  // namespace troupe::load

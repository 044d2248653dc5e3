// troupe-load's progress line on stderr: the pure line builder and a ticker
// thread (RAII) that redraws it every 200 ms while a run goes on, only when
// stderr is a terminal.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "load/engine.hpp"

namespace troupe::load {

// "[#####-----]  52%  sent 5200/10000  acked 5100  placed 4000  done 3900  12.3 s"
// The bar shows terminal jobs out of `total`.
std::string progress_line(const Progress& p, size_t total, double elapsed_s, int bar_width = 30);

class Ticker {
 public:
  // Starts redrawing `line()` on stderr when `enabled` and stderr is a TTY.
  Ticker(bool enabled, std::function<std::string()> line);
  ~Ticker();  // stops and clears the line
  Ticker(const Ticker&) = delete;
  Ticker& operator=(const Ticker&) = delete;

 private:
  std::function<std::string()> line_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace troupe::load

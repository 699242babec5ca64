// The progress line `vkattn bench` keeps on stderr while it runs several shapes: "[3/12] prefill seq
// 2048 dim 64 causal ...", rewritten in place and cleared at the end. Only on a terminal: a script
// reading stderr sees nothing there unless something failed.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <string>

namespace vkattn::cli {

class ProgressLine {
 public:
  ProgressLine() : enabled_(::isatty(::fileno(stderr)) == 1) {}
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  // Cleared on every way out, so an error line starts at the beginning of a clean line.
  ~ProgressLine() { clear(); }

  void show(std::size_t index, std::size_t count, const std::string& what) {
    if (!enabled_) return;
    // \r and "erase to end of line" (ESC [K): a shorter line leaves nothing of the longer one before.
    std::fprintf(stderr, "\r\033[K[%zu/%zu] %s ...", index + 1, count, what.c_str());
    std::fflush(stderr);
    shown_ = true;
  }

  void clear() {
    if (!shown_) return;
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  bool enabled_;
  bool shown_ = false;
};

}  // namespace vkattn::cli

// train/progress_bar.h — a one-line progress bar with ETA on a terminal (stderr), redrawn in place;
// silent when stderr is not a TTY, so logs and CI output stay clean.
#pragma once

#include <chrono>
#include <cstdint>

namespace graphed::train {

class ProgressBar {
 public:
  ProgressBar(int64_t total, bool enabled);
  /// Redraws for `done` of `total` (at most ten times a second).
  void update(int64_t done);
  /// Erases the bar so a log line can take its place.
  void clear();

 private:
  int64_t total_;
  bool enabled_;
  bool drawn_ = false;
  int64_t first_done_ = -1;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace graphed::train

// train/progress.h — what a long run shows between its log lines. On a terminal: a one-line bar with
// ETA on stderr, redrawn in place. Elsewhere (a file, a pipe, CI): a short line on the output whenever
// ~10 s pass without one, with elapsed time, ETA and tokens seen, so a log never goes quiet.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

namespace graphed::train {

class Progress {
 public:
  /// Iterations first..total are to run, each of tokens_per_iteration tokens. terminal: stderr is a
  /// TTY. heartbeat: how long the output may stay quiet off a terminal.
  Progress(int64_t first, int64_t total, double tokens_per_iteration, std::ostream& out, bool terminal,
           std::chrono::seconds heartbeat = std::chrono::seconds(10));

  /// After iteration `done` (1-based): redraws the bar, or prints a heartbeat when the output has been
  /// quiet for the heartbeat interval.
  void update(int64_t done);
  /// Call before printing a line to the output: erases the bar and restarts the quiet clock.
  void before_line();
  /// Seconds since the first update's start (the run's own time, without setup).
  double elapsed_seconds() const;
  /// "2m05s"
  static std::string duration(double seconds);

 private:
  double eta_seconds(int64_t done) const;

  int64_t first_, total_;
  double tokens_per_iteration_;
  std::ostream& out_;
  bool terminal_;
  std::chrono::seconds heartbeat_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_, last_line_;
};

}  // namespace graphed::train

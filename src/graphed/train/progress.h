// train/progress.h — what a long run shows between its log lines. When stderr is a terminal: a
// one-line bar with ETA there, redrawn in place. When the output is a file or a pipe (CI, `> log`): a
// short line in it whenever ~10 s pass without one, with elapsed time, ETA and tokens seen.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

namespace graphed::train {

class Progress {
 public:
  /// Iterations first..total are to run, each of tokens_per_iteration tokens. bar: stderr is a
  /// terminal (draw the bar there). out_is_terminal: out is one (no heartbeat lines in it). heartbeat:
  /// how long out may stay quiet otherwise.
  Progress(int64_t first, int64_t total, double tokens_per_iteration, std::ostream& out, bool bar,
           bool out_is_terminal, std::chrono::seconds heartbeat = std::chrono::seconds(10));

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
  void clear_bar();

  int64_t first_, total_;
  double tokens_per_iteration_;
  std::ostream& out_;
  bool bar_;
  bool heartbeats_;
  std::chrono::seconds heartbeat_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_, last_line_;
};

}  // namespace graphed::train

// train/progress.h — what a long run shows besides its log lines. When stderr is a terminal: a
// one-line bar with ETA there, redrawn in place. When the output is a file or a pipe (CI, `> log`): a
// watcher thread prints a heartbeat event into it whenever it has been quiet for ~10 s — during a long
// iteration, capture, evaluation or save too — with elapsed time, ETA and tokens seen. Every event the
// trainer prints goes through print(), so the two never interleave.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

#include "graphed/train/event_log.h"

namespace graphed::train {

class Progress {
 public:
  /// Iterations first..total are to run, each of tokens_per_iteration tokens. bar: stderr is a
  /// terminal (draw the bar there). out_is_terminal: the log prints to one (no heartbeats in it).
  /// heartbeat: how long the log may stay quiet otherwise.
  Progress(int64_t first, int64_t total, double tokens_per_iteration, EventLog& log, bool bar, bool out_is_terminal,
           std::chrono::milliseconds heartbeat = std::chrono::seconds(10));
  /// Stops the watcher.
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// After iteration `done` (1-based): redraws the bar; the watcher's heartbeats count from here.
  void update(int64_t done);
  /// Prints one event to the log (EventLog::print): erases the bar first and restarts the quiet clock.
  void print(const std::string& kind, const nlohmann::json& fields, const std::string& line);
  /// Seconds since the Progress was made (the run's own time, without setup).
  double elapsed_seconds() const;
  /// "2m05s"
  static std::string duration(double seconds);

 private:
  double eta_seconds(int64_t done) const;
  void clear_bar();
  void watch();  // the heartbeat thread

  const int64_t first_, total_;
  const double tokens_per_iteration_;
  EventLog& log_;
  const bool bar_;
  const std::chrono::milliseconds heartbeat_;
  const std::chrono::steady_clock::time_point start_;
  std::atomic<int64_t> done_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_draw_;
  std::mutex mutex_;  // guards last_line_ and stopping_, and keeps events in order
  std::condition_variable wake_;
  std::chrono::steady_clock::time_point last_line_;
  bool stopping_ = false;
  std::thread watcher_;  // last: starts once everything above is set
};

}  // namespace graphed::train

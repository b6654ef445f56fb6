// train/interval_timer.h — times the training of one log interval: from its start to now, less the
// pauses in between (an evaluation, a checkpoint, a sample), so that ms/iter, tokens/s and MFU describe
// training alone wherever --eval-interval and --save-interval fall between two log lines.
#pragma once

#include <chrono>
#include <functional>

namespace graphed::train {

class IntervalTimer {
 public:
  using Clock = std::chrono::steady_clock;
  /// now: the clock (tests pass their own).
  IntervalTimer() : IntervalTimer(Clock::now) {}
  explicit IntervalTimer(std::function<Clock::time_point()> now) : now_(std::move(now)), start_(now_()) {}

  /// A new interval starts now.
  void restart() { start_ = now_(); }
  /// Seconds of the interval so far, pauses left out.
  double seconds() const { return std::chrono::duration<double>(now_() - start_).count(); }

  /// While it lives, time does not count: the interval's start moves on by the pause's length.
  class Pause {
   public:
    explicit Pause(IntervalTimer& timer) : timer_(timer), begin_(timer.now_()) {}
    ~Pause() { timer_.start_ += timer_.now_() - begin_; }
    Pause(const Pause&) = delete;
    Pause& operator=(const Pause&) = delete;

   private:
    IntervalTimer& timer_;
    const Clock::time_point begin_;
  };

 private:
  std::function<Clock::time_point()> now_;
  Clock::time_point start_;
};

}  // namespace graphed::train

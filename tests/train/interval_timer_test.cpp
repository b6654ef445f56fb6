// tests/train/interval_timer_test.cpp — a log interval's time is its training only: an evaluation or
// a checkpoint between two log lines is left out (it once halved ms/iter and doubled MFU there).
#include "graphed/train/interval_timer.h"

#include <gtest/gtest.h>

namespace graphed::train {
namespace {

/// A clock the test moves by hand.
struct HandClock {
  IntervalTimer::Clock::time_point now{};
  void advance(double seconds) {
    now += std::chrono::duration_cast<IntervalTimer::Clock::duration>(std::chrono::duration<double>(seconds));
  }
};

TEST(IntervalTimerTest, PausesAreLeftOut) {
  HandClock clock;
  IntervalTimer timer([&clock] { return clock.now; });
  clock.advance(0.115);  // 5 iterations of 23 ms
  {
    const IntervalTimer::Pause evaluation(timer);
    clock.advance(2.0);
  }
  clock.advance(0.115);  // 5 more
  EXPECT_NEAR(timer.seconds(), 0.230, 1e-9);
  {
    const IntervalTimer::Pause checkpoint(timer);
    clock.advance(1.0);
    EXPECT_NEAR(timer.seconds(), 1.230, 1e-9) << "inside a pause, the pause so far counts until it ends";
  }
  EXPECT_NEAR(timer.seconds(), 0.230, 1e-9);
}

TEST(IntervalTimerTest, RestartBeginsANewInterval) {
  HandClock clock;
  IntervalTimer timer([&clock] { return clock.now; });
  clock.advance(3.0);
  timer.restart();
  clock.advance(0.5);
  EXPECT_NEAR(timer.seconds(), 0.5, 1e-9);
  {
    const IntervalTimer::Pause save(timer);  // right after a log line: the next interval starts after it
    clock.advance(4.0);
  }
  clock.advance(0.25);
  EXPECT_NEAR(timer.seconds(), 0.75, 1e-9);
}

}  // namespace
}  // namespace graphed::train

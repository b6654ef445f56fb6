// tests/util/stop_signals_test.cpp — a first SIGINT or SIGTERM only asks to stop (and says so once);
// a copy of it within half a second (a launcher passing the terminal's Ctrl-C on) is the same request;
// a later second signal ends the process at once with the status of a signal death; the earlier
// handlers come back afterwards. The whole-run behaviour: tests/cli/train_signal_test.cpp.
#include "graphed/util/stop_signals.h"

#include <signal.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace graphed {
namespace {

volatile sig_atomic_t earlier_handler_calls = 0;
extern "C" void count_earlier_handler_call(int) { earlier_handler_calls = earlier_handler_calls + 1; }

TEST(StopSignalsTest, AFirstSignalOnlyAsksToStop) {
  StopSignals stop(/*announce=*/false, "");
  EXPECT_FALSE(stop.requested());
  EXPECT_EQ(stop.signal_name(), "");
  ::raise(SIGTERM);
  EXPECT_TRUE(stop.requested());
  EXPECT_EQ(stop.signal_name(), "SIGTERM");
  ::raise(SIGINT);  // within 500 ms of the first: the same request, and this process lives on
  EXPECT_EQ(stop.signal_name(), "SIGTERM");
}

TEST(StopSignalsTest, TheFirstSignalIsAnnouncedOnStderr) {
  ::testing::internal::CaptureStderr();
  {
    StopSignals stop(/*announce=*/true, "stopping after this iteration");
    ::raise(SIGINT);
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "\nstopping after this iteration\n");
}

TEST(StopSignalsTest, ASecondSignalLaterExitsAtOnce) {
  EXPECT_EXIT(
      {
        StopSignals stop(/*announce=*/false, "");
        ::raise(SIGINT);
        std::this_thread::sleep_for(std::chrono::milliseconds(700));
        ::raise(SIGINT);
        std::this_thread::sleep_for(std::chrono::seconds(5));  // never reached
      },
      ::testing::ExitedWithCode(130), "second signal: exiting now; nothing more is saved");
  EXPECT_EQ(StopSignals::exit_status_of_second_signal(SIGTERM), 143);
}

TEST(StopSignalsTest, TheEarlierHandlersComeBack) {
  struct sigaction counting {};
  counting.sa_handler = count_earlier_handler_call;
  sigemptyset(&counting.sa_mask);
  struct sigaction before {};
  sigaction(SIGINT, &counting, &before);
  { StopSignals stop(/*announce=*/false, ""); }
  earlier_handler_calls = 0;
  ::raise(SIGINT);
  EXPECT_EQ(earlier_handler_calls, 1);
  sigaction(SIGINT, &before, nullptr);
}

}  // namespace
}  // namespace graphed

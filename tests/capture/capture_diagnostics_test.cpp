// tests/capture/capture_diagnostics_test.cpp — each failure of the seed-003 table is recognized from
// the text CUDA or LibTorch raises, and the message names the cause, the fix and the RNG caveat.
#include "graphed/capture/capture_diagnostics.h"

#include <gtest/gtest.h>

namespace graphed::capture {
namespace {

struct Case {
  std::string raised;
  std::string cause_part;
  std::string fix_part;
};

TEST(CaptureDiagnosticsTest, EachFailureOfTheTableIsNamed) {
  const std::vector<Case> cases{
      {"CUDA error: operation not permitted when stream is capturing\nCUDA kernel errors might be ...",
       "a host synchronization inside the captured region (.item(), .cpu()", "read device values outside the step"},
      {"Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the CPU tensor is pinned.",
       "a host synchronization", "only at its log lines"},
      {"CUDA error: capture sequence contains a fork that was not joined to the primary stream", "never joined back",
       "wait for every side stream"},
      {"CUDA error: operation would make the legacy stream depend on a capturing blocking stream",
       "the legacy default stream was used", "current (capturing) stream"},
      {"Offset increment outside graph capture encountered unexpectedly.", "random-number generator",
       "default CUDA generator"},
      {"CUDA error: operation failed due to a previous error during capture", "invalidated",
       "drop every tensor of the warmup"},
      {"CUDA error: cudaErrorStreamCaptureInvalidated", "invalidated", "the debug channel 'capture'"},
  };
  for (const auto& c : cases) {
    const CaptureError error = diagnose_capture_failure("the full-iteration training step", c.raised);
    EXPECT_NE(error.cause().find(c.cause_part), std::string::npos) << c.raised << "\n -> " << error.cause();
    EXPECT_NE(error.fix().find(c.fix_part), std::string::npos) << c.raised << "\n -> " << error.fix();
    EXPECT_EQ(error.cause().rfind("capturing the full-iteration training step failed: ", 0), 0u);
    EXPECT_NE(error.cause().find("the process's CUDA RNG is unusable after a failed capture"), std::string::npos);
  }
}

TEST(CaptureDiagnosticsTest, ExactMessageForAHostSync) {
  const CaptureError error =
      diagnose_capture_failure("the step", "CUDA error: operation not permitted when stream is capturing");
  EXPECT_STREQ(error.what(),
               "capturing the step failed: a host synchronization inside the captured region (.item(), .cpu(), "
               "printing a tensor, a blocking copy, or a CUDA call that waits for the device) (CUDA/LibTorch said: "
               "CUDA error: operation not permitted when stream is capturing); the process's CUDA RNG is unusable "
               "after a failed capture, so the run stops here with no checkpoint written; fix: read device values "
               "outside the step (graphed reads losses only at its log lines), or run this region without CUDA "
               "graphs");
}

TEST(CaptureDiagnosticsTest, UnknownFailuresKeepTheOriginalText) {
  const CaptureError error = diagnose_capture_failure("the step", "something new\nwith details");
  EXPECT_EQ(error.cause().rfind("capturing the step failed: something new; ", 0), 0u) << error.cause();
  EXPECT_NE(error.fix().find("run without CUDA graphs"), std::string::npos);
}

TEST(CaptureDiagnosticsTest, NoFixNamesACommandLineFlag) {  // capture knows no flags; cli/main.cpp adds them
  for (const std::string raised : {"CUDA error: operation not permitted when stream is capturing",
                                   "CUDA error: cudaErrorStreamCaptureInvalidated", "something new"}) {
    const CaptureError error = diagnose_capture_failure("the step", raised);
    EXPECT_EQ(std::string(error.what()).find("--"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace graphed::capture

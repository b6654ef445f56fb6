// capture/capture_diagnostics.cpp — see capture/capture_diagnostics.h.
#include "graphed/capture/capture_diagnostics.h"

#include <algorithm>
#include <vector>

namespace graphed::capture {
namespace {

struct Pattern {
  std::vector<std::string> needles;  ///< any of these substrings (lower-case) identifies the cause
  std::string cause;
  std::string fix;
};

const std::vector<Pattern>& patterns() {
  static const std::vector<Pattern> table{
      {{"unless the cpu tensor is pinned", "operation not permitted when stream is capturing",
        "cudaerrorstreamcaptureunsupported", "_local_scalar_dense"},
       "a host synchronization inside the captured region (.item(), .cpu(), printing a tensor, a blocking "
       "copy, or a CUDA call that waits for the device)",
       "read device values outside the step (graphed reads losses only at its log lines), or run this region "
       "without CUDA graphs"},
      {{"not joined", "unjoined", "cudaerrorstreamcaptureunjoined"},
       "work was forked to another stream inside the capture and never joined back",
       "make the capturing stream wait for every side stream (an event record + wait) before the region ends"},
      {{"legacy stream", "cudaerrorstreamcaptureimplicit", "implicit"},
       "the legacy default stream was used while capturing (an implicit synchronization with the capture)",
       "run every operation of the region on the current (capturing) stream; avoid cudaMemcpy and "
       "default-stream libraries inside it"},
      {{"offset increment outside graph capture", "not in capture mode", "generator", "philox",
        "during cuda graph capture"},
       "a random-number generator was used in a way a graph cannot replay (a generator not registered "
       "with the graph, or its seed or state read or set inside the capture)",
       "draw random numbers only from the default CUDA generator (or one registered before capture) and "
       "never read or set RNG state inside the captured region"},
      {{"invalidated", "cudaerrorstreamcaptureinvalidated", "previous error during capture"},
       "the capture was invalidated by an earlier illegal call in the region (often a host sync, another "
       "thread's CUDA call in global capture mode, or an autograd graph left over from warmup)",
       "find the first illegal call (the debug channel 'capture' logs every capture), keep host reads out of the "
       "step, and drop "
       "every tensor of the warmup iterations before capture"},
      {{"wrong thread", "cudaerrorstreamcapturewrongthread"},
       "the capture was ended on a different thread than the one that began it",
       "begin and end each capture on the same thread"},
  };
  return table;
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

std::string first_line(const std::string& text) {
  const auto end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

}  // namespace

CaptureError diagnose_capture_failure(const std::string& region, const std::string& error_text) {
  const std::string haystack = lower(error_text);
  for (const auto& pattern : patterns()) {
    for (const auto& needle : pattern.needles) {
      if (haystack.find(needle) != std::string::npos) {
        return CaptureError("capturing " + region + " failed: " + pattern.cause +
                                " (CUDA/LibTorch said: " + first_line(error_text) +
                                "); the process's CUDA RNG is unusable after a failed "
                                "capture, so the run stops here with no checkpoint written",
                            pattern.fix);
      }
    }
  }
  return CaptureError("capturing " + region + " failed: " + first_line(error_text) +
                          "; the process's CUDA RNG is unusable after a failed capture, so the run stops here "
                          "with no checkpoint written",
                      "run without CUDA graphs, and report this error if the region should be capturable");
}

}  // namespace graphed::capture

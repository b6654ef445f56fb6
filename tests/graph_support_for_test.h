// tests/graph_support_for_test.h — why CUDA graphs cannot run on the CPU in this build on this machine, as
// capture/graph_support.h words it, spelled out for the tests that expect the errors built around it.
#pragma once

#include <string>

#include "graphed/runtime/device.h"
#include "graphed/util/build_info.h"

namespace graphed::testing {

inline std::string why_no_graphs_on_cpu() {
  if (!built_with_cuda()) return "this binary was built against a CPU-only LibTorch (GRAPHED_CUDA=0)";
  return runtime::cuda_available() ? "the run is on cpu" : "no CUDA device is visible";
}

}  // namespace graphed::testing

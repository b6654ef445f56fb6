// capture/graph_support.cpp — see capture/graph_support.h.
#include "graphed/capture/graph_support.h"

#include "graphed/runtime/device.h"
#include "graphed/util/build_info.h"

namespace graphed::capture {

std::optional<std::string> why_graphs_cannot_run(const c10::Device& device) {
  if (!built_with_cuda()) return "this binary was built against a CPU-only LibTorch (GRAPHED_CUDA=0)";
  if (!runtime::cuda_available()) return "no CUDA device is visible";
  if (!device.is_cuda()) return "the run is on " + device.str();
  return std::nullopt;
}

}  // namespace graphed::capture

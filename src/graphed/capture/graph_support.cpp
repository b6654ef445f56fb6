// capture/graph_support.cpp — see capture/graph_support.h.
#include "graphed/capture/graph_support.h"

#include "graphed/runtime/device.h"

namespace graphed::capture {

std::optional<std::string> why_graphs_cannot_run(const c10::Device& device) {
  if (auto why = runtime::why_cuda_is_unavailable()) return why;
  if (!device.is_cuda()) return "the run is on " + device.str();
  return std::nullopt;
}

}  // namespace graphed::capture

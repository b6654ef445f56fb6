// capture/graph_support.h — whether CUDA graphs can run on a device, decided in one place for training,
// decoding and serving, and why not when they cannot: each caller words its own error around the reason.
#pragma once

#include <optional>
#include <string>

#include <c10/core/Device.h>

namespace graphed::capture {

/// Why CUDA graphs cannot run on `device` ("this binary was built against a CPU-only LibTorch
/// (GRAPHED_CUDA=0)", "no CUDA device is visible", "the run is on cpu"); nullopt when they can.
std::optional<std::string> why_graphs_cannot_run(const c10::Device& device);

}  // namespace graphed::capture

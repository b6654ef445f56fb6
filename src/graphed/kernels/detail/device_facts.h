// kernels/detail/device_facts.h — what the launches of kernels/ ask of the current GPU, asked once per
// device: its multiprocessor count (grids sized to fill it) and whether it takes programmatic dependent
// launches (detail/programmatic_launch.cuh).
#pragma once

namespace graphed::kernels::detail {

/// Streaming multiprocessors of the current device.
int multiprocessor_count();

/// Compute capability 9.0 or later, unless GRAPHED_PROGRAMMATIC_LAUNCH=0 is set (for measuring what the
/// overlap is worth).
bool programmatic_launch_supported();

}  // namespace graphed::kernels::detail

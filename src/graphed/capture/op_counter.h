// capture/op_counter.h — counts the ATen operators a region dispatches (nested ones included), via a
// RecordFunction callback. A diagnostic for launch-bound loops: every dispatched operator costs host
// time, and a CUDA graph replays the kernels without dispatching any. Not for use inside a capture.
#pragma once

#include <cstdint>
#include <functional>

namespace graphed::capture {

/// Runs the region once and returns how many ATen operators it dispatched (forward and backward).
int64_t count_dispatched_ops(const std::function<void()>& region);

}  // namespace graphed::capture

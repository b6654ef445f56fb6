// capture/capture_memory.h — what a capture takes from the device: the growth of the graph pools and the
// memory the instantiated graphs hold outside the caching allocator, measured from a mark taken before it.
#pragma once

#include <ATen/ATen.h>

#include "graphed/runtime/device.h"

namespace graphed::capture {

/// What a capture took: the growth of the graph pools, and the device memory taken outside the caching
/// allocator meanwhile (the instantiated graphs themselves).
struct CaptureMemory {
  int64_t pool_bytes = 0;
  int64_t graph_bytes = 0;
};
inline CaptureMemory operator+(const CaptureMemory& a, const CaptureMemory& b) {
  return {a.pool_bytes + b.pool_bytes, a.graph_bytes + b.graph_bytes};
}

/// Graph-pool, reserved and used memory at one moment, to measure a capture against.
class MemoryMark {
 public:
  explicit MemoryMark(const at::Device& device)
      : device_(device),
        pools_(runtime::graph_pool_bytes(device)),
        reserved_(runtime::reserved_memory_bytes(device)),
        used_(runtime::device_memory_used_bytes(device)) {}
  /// What was taken since the mark (synchronize first, so that the capture has finished).
  CaptureMemory taken_since() const {
    const int64_t reserved_change = runtime::reserved_memory_bytes(device_) - reserved_;
    const int64_t used_change = runtime::device_memory_used_bytes(device_) - used_;
    return {runtime::graph_pool_bytes(device_) - pools_,
            used_change > reserved_change ? used_change - reserved_change : 0};
  }

 private:
  at::Device device_;
  int64_t pools_;
  int64_t reserved_;
  int64_t used_;
};

}  // namespace graphed::capture

// capture/sample_buffer_plan.h — which (chunk, microbatch, layer) graph entries can share one set of
// static input buffers, walking a pipeline order (research/megatron-cudagraphs.md §3.3, the TE
// helper's schedule-aware reuse). Two entries share buffers when their signatures (shapes, dtypes of
// the inputs; an integer key here) are equal and their lifetimes — from the forward to the end of the
// backward of their microbatch — do not overlap in the order. Model-agnostic.
#pragma once

#include <cstdint>
#include <vector>

namespace graphed::capture {

struct SampleBufferPlan {
  /// Buffer id of each entry; entry index = chunk-major, then microbatch, then layer:
  /// prefix_layers[c] x M + microbatch x layers[c] + layer.
  std::vector<int64_t> buffer_of_entry;
  /// Number of distinct buffers (ids are 0..unique_buffers-1).
  int64_t unique_buffers = 0;
};

/// order: +c / -c forward / backward of 1-based chunk c (convert_schedule_table_to_order), every
/// chunk's microbatches in order; layers_per_chunk[c]; microbatches M; signatures[c][l] the input
/// signature key of layer l of chunk c. Precondition: max(order) == chunks and |order| == 2 x M x chunks.
SampleBufferPlan plan_sample_buffers(const std::vector<int64_t>& order, const std::vector<int64_t>& layers_per_chunk,
                                     int64_t microbatches, const std::vector<std::vector<int64_t>>& signatures);

}  // namespace graphed::capture

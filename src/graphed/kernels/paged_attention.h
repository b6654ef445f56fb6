// kernels/paged_attention.h — attention of a flat batch of query tokens over a paged key/value cache,
// free of ATen (pointers, sizes, a stream). Each token belongs to one request of the step, attends to
// that request's cache positions 0..its own position, and finds them through the request's block
// table. One kernel serves prefill chunks and decode tokens alike; long contexts split across thread
// blocks (flash-decoding) and a second kernel combines the splits in a fixed order, so a result
// never depends on how many tokens share the launch or how long the launch's longest context is. A step's prompt
// tokens may go instead to the tile kernel (kernels/paged_prefill_attention.h), which reads a context once for 16
// tokens: the launch then skips the tokens past a count it reads on the device. A launch that
// fails throws graphed::Error (kernels/detail/launch_check.h). The ATen wrapper is kernels/paged_attention_ops.h.
#pragma once

#include <cstdint>

namespace graphed::kernels {

/// The shapes of one launch. Caches are [blocks, block_size, groups, head_dim]; block tables
/// [requests, table_width] int64; tokens index requests through token_request [tokens] int64.
struct PagedAttentionShape {
  int64_t tokens = 0;
  int64_t heads = 0;
  int64_t groups = 0;
  int64_t head_dim = 0;  ///< a multiple of 8, at most 256
  int64_t block_size = 0;
  int64_t table_width = 0;  ///< blocks per request in the table
  int64_t max_context = 0;  ///< no token's position reaches this; sets the number of splits
};

/// Positions one split covers.
constexpr int64_t kPagedAttentionSplit = 256;

/// Floats of workspace a launch needs: tokens x heads x splits x (head_dim + 2).
int64_t paged_attention_workspace(const PagedAttentionShape& shape);

/// output [tokens, heads, head_dim] = softmax(scale q k^T) v for query [tokens, heads, head_dim], each
/// token over positions 0..positions[t] of request token_request[t]. `is_float`: float32 tensors,
/// else bf16. workspace: paged_attention_workspace(shape) floats. split_count: null, or a device int64 that
/// the launch reads once it runs (never the host): the kernels then skip the tokens t >= *split_count of their
/// grid (shape.tokens), which another kernel writes (kernels/paged_prefill_attention.h), so the grid can be
/// sized for the largest step while a step's count changes between replays of a CUDA graph.
void launch_paged_attention(const void* query, const void* key_cache, const void* value_cache,
                            const int64_t* block_tables, const int64_t* token_request, const int64_t* positions,
                            const int64_t* split_count, void* output, float* workspace,
                            const PagedAttentionShape& shape, float scale, bool is_float, void* stream);

}  // namespace graphed::kernels

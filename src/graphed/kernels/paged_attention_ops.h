// kernels/paged_attention_ops.h — the ATen face of kernels/paged_attention.h, and its reference form in
// LibTorch ops (the CPU build's path, and the CUDA build's for dtypes or shapes the kernel does not
// take). Graph-capturable: no host sync; the workspace comes from the caching allocator.
#pragma once

#include <ATen/ATen.h>

namespace graphed::kernels {

/// Where each token of a flat batch finds its keys and values (see kernels/paged_attention.h), and, optionally,
/// which kernel attends it. The last three fields are a plan, not a meaning: the result of every token is the
/// same with them or without (the reference ignores them).
struct PagedContext {
  at::Tensor block_tables;   ///< [requests, table width] int64: block ids of each request's positions
  at::Tensor token_request;  ///< [tokens] int64: the request of each token
  at::Tensor positions;      ///< [tokens] int64: each token's position; it sees positions 0..its own
  int64_t max_context = 0;   ///< an upper bound on positions + 1 (sizes the splits)
  /// [max tiles, 4] int64 on the device (kernels/prefill_tiles.h): the tiles of the tile kernel
  /// (kernels/paged_prefill_attention.h), which must name every token >= *split_count. Undefined: no tiles,
  /// every token goes through the split kernel (kernels/paged_attention.h).
  at::Tensor tiles;
  /// [1] int64 on the device, with tiles: the split kernel attends tokens [0, *split_count) (a step's decode
  /// tokens, which the scheduler puts first), the tiles every other token. Read on the device only.
  at::Tensor split_count;
  /// With tiles: the split kernel's grid covers tokens [0, split_bound) (and sizes its workspace): a static
  /// bound on *split_count, such as a step bucket's request count, so that a captured graph fits every step.
  int64_t split_bound = 0;
};

/// query [tokens, heads, head_dim] over key/value caches [blocks, block size, groups, head dim]:
/// [tokens, heads, head_dim]. Through the CUDA kernels for contiguous float32 or bf16 CUDA tensors the split
/// kernel takes (head dim a multiple of 8 up to 256, up to 16 heads per group), else the reference. With tiles,
/// bf16 and a head dim of 32, 64, 96 or 128, the tiles' tokens go through the tile kernel; otherwise the split
/// kernel attends every token, the tiles unread. No host sync either way: capturable in a CUDA graph.
at::Tensor paged_attention(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                           const PagedContext& context, double scale);

namespace reference {
/// paged_attention in LibTorch ops: gathers each token's context rows (memory grows with tokens x
/// max_context), masks the positions past its own, softmax in float32.
at::Tensor paged_attention(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                           const PagedContext& context, double scale);
}  // namespace reference

}  // namespace graphed::kernels

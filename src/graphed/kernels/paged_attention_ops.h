// kernels/paged_attention_ops.h — the ATen face of kernels/paged_attention.h, and its reference form in
// LibTorch ops (the CPU build's path, and the CUDA build's for dtypes or shapes the kernel does not
// take). Graph-capturable: no host sync; the workspace comes from the caching allocator.
#pragma once

#include <ATen/ATen.h>

namespace graphed::kernels {

/// Where each token of a flat batch finds its keys and values (see kernels/paged_attention.h).
struct PagedContext {
  at::Tensor block_tables;   ///< [requests, table width] int64: block ids of each request's positions
  at::Tensor token_request;  ///< [tokens] int64: the request of each token
  at::Tensor positions;      ///< [tokens] int64: each token's position; it sees positions 0..its own
  int64_t max_context = 0;   ///< an upper bound on positions + 1 (sizes the splits)
};

/// query [tokens, heads, head_dim] over key/value caches [blocks, block size, groups, head dim]:
/// [tokens, heads, head_dim]. Through the CUDA kernel for contiguous float32 or bf16 CUDA tensors it
/// takes (head dim a multiple of 8 up to 256, up to 16 heads per group), else the reference.
at::Tensor paged_attention(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                           const PagedContext& context, double scale);

namespace reference {
/// paged_attention in LibTorch ops: gathers each token's context rows (memory grows with tokens x
/// max_context), masks the positions past its own, softmax in float32.
at::Tensor paged_attention(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                           const PagedContext& context, double scale);
}  // namespace reference

}  // namespace graphed::kernels

// kernels/paged_attention_reference.cpp — kernels::reference::paged_attention in LibTorch ops, in both builds (one
// convention for the two builds: src/graphed/CMakeLists.txt): what paged_attention_cpu.cpp runs, what
// paged_attention_cuda.cpp falls back to, and what the kernel is tested against.
#include "graphed/kernels/paged_attention_ops.h"

#include <algorithm>
#include <limits>

namespace graphed::kernels::reference {

at::Tensor paged_attention(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                           const PagedContext& context, double scale) {
  const int64_t tokens = query.size(0);
  const int64_t heads = query.size(1);
  const int64_t head_dim = query.size(2);
  const int64_t block_size = key_cache.size(1);
  const int64_t groups = key_cache.size(2);
  const int64_t blocks = std::min((context.max_context + block_size - 1) / block_size, context.block_tables.size(1));
  const int64_t length = blocks * block_size;
  // Each token's context as cache rows [tokens, length].
  const at::Tensor tables = context.block_tables.index_select(0, context.token_request).narrow(1, 0, blocks);
  const at::Tensor offsets = at::arange(block_size, tables.options());
  const at::Tensor rows = (tables.unsqueeze(-1) * block_size + offsets).reshape({tokens, length});
  const auto gather = [&](const at::Tensor& cache) {  // [tokens, groups, length, head_dim]
    return cache.reshape({-1, groups, head_dim})
        .index_select(0, rows.reshape({-1}))
        .view({tokens, length, groups, head_dim})
        .transpose(1, 2);
  };
  const at::Tensor keys = gather(key_cache);
  const at::Tensor values = gather(value_cache);
  const at::Tensor q = query.reshape({tokens, groups, heads / groups, head_dim});
  at::Tensor scores = at::matmul(q, keys.transpose(-2, -1)) * scale;  // [tokens, groups, ratio, length]
  const at::Tensor past =
      at::arange(length, context.positions.options()).view({1, length}) > context.positions.view({tokens, 1});
  scores = scores.masked_fill(past.view({tokens, 1, 1, length}), -std::numeric_limits<double>::infinity());
  const at::Tensor probabilities =
      at::softmax(scores, -1, at::promote_types(scores.scalar_type(), at::kFloat)).to(query.scalar_type());
  return at::matmul(probabilities, values).reshape({tokens, heads, head_dim});
}

}  // namespace graphed::kernels::reference

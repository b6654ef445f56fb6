// kernels/paged_attention_cuda.cpp — kernels/paged_attention_ops.h on a CUDA build; paged_attention_cpu.cpp is the
// CPU build's (one convention for the two builds: src/graphed/CMakeLists.txt). The kernel of
// kernels/paged_attention.h where it applies, the reference (paged_attention_reference.cpp) elsewhere.
#include <c10/cuda/CUDAStream.h>

#include "graphed/kernels/paged_attention.h"
#include "graphed/kernels/paged_attention_ops.h"

namespace graphed::kernels {
namespace {

bool kernel_takes(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                  const PagedContext& context) {
  const auto type = query.scalar_type();
  const int64_t head_dim = query.size(2);
  const int64_t ratio = query.size(1) / key_cache.size(2);
  const auto aligned = [](const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; };
  return query.is_cuda() && (type == at::kBFloat16 || type == at::kFloat) && key_cache.scalar_type() == type &&
         value_cache.scalar_type() == type && key_cache.is_contiguous() && value_cache.is_contiguous() &&
         head_dim % 8 == 0 && head_dim <= 256 && ratio <= 16 && aligned(key_cache) && aligned(value_cache) &&
         context.block_tables.is_contiguous() && context.token_request.is_contiguous() &&
         context.positions.is_contiguous();
}

}  // namespace

at::Tensor paged_attention(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                           const PagedContext& context, double scale) {
  if (!kernel_takes(query, key_cache, value_cache, context)) {
    return reference::paged_attention(query, key_cache, value_cache, context, scale);
  }
  const at::Tensor q = query.contiguous();
  PagedAttentionShape shape;
  shape.tokens = q.size(0);
  shape.heads = q.size(1);
  shape.head_dim = q.size(2);
  shape.groups = key_cache.size(2);
  shape.block_size = key_cache.size(1);
  shape.table_width = context.block_tables.size(1);
  shape.max_context = context.max_context;
  at::Tensor output = at::empty_like(q);
  at::Tensor workspace = at::empty({paged_attention_workspace(shape)}, q.options().dtype(at::kFloat));
  launch_paged_attention(q.data_ptr(), key_cache.data_ptr(), value_cache.data_ptr(),
                         context.block_tables.data_ptr<int64_t>(), context.token_request.data_ptr<int64_t>(),
                         context.positions.data_ptr<int64_t>(), output.data_ptr(), workspace.data_ptr<float>(), shape,
                         static_cast<float>(scale), q.scalar_type() == at::kFloat,
                         static_cast<void*>(c10::cuda::getCurrentCUDAStream().stream()));
  return output;
}

}  // namespace graphed::kernels

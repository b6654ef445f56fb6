// kernels/paged_attention_cpu.cpp — kernels/paged_attention_ops.h on a CPU build, in place of
// paged_attention_cuda.cpp (one convention for the two builds: src/graphed/CMakeLists.txt): every call is the
// reference (paged_attention_reference.cpp).
#include "graphed/kernels/paged_attention_ops.h"

namespace graphed::kernels {

at::Tensor paged_attention(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                           const PagedContext& context, double scale) {
  return reference::paged_attention(query, key_cache, value_cache, context, scale);
}

}  // namespace graphed::kernels

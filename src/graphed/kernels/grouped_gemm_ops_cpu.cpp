// kernels/grouped_gemm_ops_cpu.cpp — the CPU build's grouped_matmul: the reference (kernels/grouped_gemm_ops.h).
#include "graphed/kernels/grouped_gemm_ops.h"

namespace graphed::kernels {

bool uses_library_grouped_mm(const at::Tensor& /*input*/, const at::Tensor& /*weight*/) { return false; }

at::Tensor grouped_matmul(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& offsets) {
  return reference::grouped_matmul(input, weight, offsets);
}

GroupedMatmulGrads grouped_matmul_backward(const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight,
                                           const at::Tensor& offsets) {
  return reference::grouped_matmul_backward(grad, input, weight, offsets);
}

}  // namespace graphed::kernels

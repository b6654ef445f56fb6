// kernels/grouped_gemm_reference.cpp — grouped_matmul in ATen (kernels/grouped_gemm_ops.h): the CPU build's, the
// CUDA build's for types the kernels do not take, and what the kernels are tested against.
#include "graphed/kernels/grouped_gemm_ops.h"

#include <vector>

namespace graphed::kernels {

at::Tensor expert_of_rows(const at::Tensor& offsets, int64_t rows) {
  // The first expert whose end lies past the row: experts without rows share their end with the one before.
  const at::Tensor ends = offsets.narrow(0, 1, offsets.size(0) - 1);
  return at::searchsorted(ends, at::arange(rows, offsets.options()), /*out_int32=*/false, /*right=*/true);
}

}  // namespace graphed::kernels

namespace graphed::kernels::reference {

at::Tensor grouped_matmul(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& offsets) {
  const at::Tensor bounds = offsets.to(at::kCPU);
  const int64_t experts = weight.size(0);
  std::vector<at::Tensor> pieces;
  for (int64_t expert = 0; expert < experts; ++expert) {
    const int64_t begin = bounds[expert].item<int64_t>();
    const int64_t end = bounds[expert + 1].item<int64_t>();
    if (end > begin) pieces.push_back(at::matmul(input.narrow(0, begin, end - begin), weight[expert]));
  }
  if (pieces.empty()) return at::zeros({input.size(0), weight.size(2)}, input.options());
  return at::cat(pieces);
}

GroupedMatmulGrads grouped_matmul_backward(const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight,
                                           const at::Tensor& offsets) {
  // The products at::matmul's backward runs for each expert's rows of grouped_matmul above.
  const at::Tensor bounds = offsets.to(at::kCPU);
  const at::Tensor gradient = grad.to(input.scalar_type());
  GroupedMatmulGrads grads{at::zeros_like(input), at::zeros_like(weight)};
  for (int64_t expert = 0; expert < weight.size(0); ++expert) {
    const int64_t begin = bounds[expert].item<int64_t>();
    const int64_t rows = bounds[expert + 1].item<int64_t>() - begin;
    if (rows == 0) continue;
    const at::Tensor expert_grad = gradient.narrow(0, begin, rows);
    grads.input.narrow(0, begin, rows).copy_(at::mm(expert_grad, weight[expert].t()));
    grads.weight[expert].copy_(at::mm(input.narrow(0, begin, rows).t(), expert_grad));
  }
  return grads;
}

at::Tensor grouped_bias(const at::Tensor& bias, const at::Tensor& offsets, int64_t rows) {
  return bias.index_select(0, expert_of_rows(offsets, rows));
}

}  // namespace graphed::kernels::reference

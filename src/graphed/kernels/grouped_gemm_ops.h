// kernels/grouped_gemm_ops.h — grouped_matmul(): every expert's rows times its own matrix, differentiable, with the
// experts' rows given by device-side offsets. On a CUDA build and CUDA tensors it is LibTorch's at::_grouped_mm
// (CUTLASS) for aligned bf16 on Hopper and Blackwell, else kernels/grouped_gemm.h's one launch each way (nothing
// read on the host either way, so a CUDA graph can hold it); elsewhere the reference, one matmul per expert over
// offsets read on the host. The MoE's grouped dispatch (model/moe_dispatch.h) calls it.
#pragma once

#include <ATen/ATen.h>

namespace graphed::kernels {

/// out [M, N]: for each expert e, rows offsets[e] .. offsets[e + 1] of input [M, K] times weight[e] [K, N].
/// input and weight have one floating type (the caller casts, e.g. to autocast's); offsets: int64 [E + 1] on
/// input's device, offsets[0] = 0, non-decreasing, offsets[E] = M. Gradients flow to input and weight (the
/// weight's rows of an expert without rows get zeros).
at::Tensor grouped_matmul(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& offsets);

/// grouped_matmul's gradients for the gradient of its output `grad` [M, N]: input's [M, K] and weight's [E, K, N]
/// (zero for an expert without rows), by the products grouped_matmul's own backward runs on the same tensors. For a
/// caller that keeps the forward's input itself (model/paged_experts.h) rather than in an autograd graph.
struct GroupedMatmulGrads {
  at::Tensor input;
  at::Tensor weight;
};
GroupedMatmulGrads grouped_matmul_backward(const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight,
                                           const at::Tensor& offsets);

/// Whether grouped_matmul(input, weight, ...) runs LibTorch's at::_grouped_mm: a CUDA build on LibTorch 2.8 or
/// later, bf16 CUDA tensors, compute capability 9 or 10, input and output rows of whole 16-byte units, and fewer
/// than 2^31 rows.
bool uses_library_grouped_mm(const at::Tensor& input, const at::Tensor& weight);

/// Each row's expert [rows] (int64) from the offsets, on their device: nothing read on the host.
at::Tensor expert_of_rows(const at::Tensor& offsets, int64_t rows);

namespace reference {
/// The same in ATen: a matmul per expert that has rows, the offsets copied to the host.
at::Tensor grouped_matmul(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& offsets);
GroupedMatmulGrads grouped_matmul_backward(const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight,
                                           const at::Tensor& offsets);
/// out [rows, N]: each row of expert e (offsets as above, offsets[E] = rows) gets bias[e], a gather differentiable
/// through ATen (kernels/moe_routing_ops.h's reference adds it; its kernel sums the gradient in a fixed order).
at::Tensor grouped_bias(const at::Tensor& bias, const at::Tensor& offsets, int64_t rows);
}  // namespace reference

}  // namespace graphed::kernels

// kernels/detail/aten_glue.h — the small helpers the CUDA builds' ATen-facing files of kernels/ share
// (training_ops_cuda.cpp, fp8_linear_cuda.cpp, fp8_weights_cuda.cpp, decode_ops_cuda.cpp, sampling_ops_cuda.cpp):
// the current stream, tensor facts a launch needs, and the rules for optional tensors and in-place gradients. CUDA
// builds only.
#pragma once

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include "graphed/kernels/training_kernels.h"

namespace graphed::kernels::detail {

/// The current CUDA stream, as the launchers take it.
inline void* current_stream() { return at::cuda::getCurrentCUDAStream().stream(); }

/// Whether a tensor's data starts on a 16-byte boundary (what vector loads and cuBLASLt's bias and scales want).
inline bool aligned_16(const at::Tensor& tensor) { return reinterpret_cast<uintptr_t>(tensor.data_ptr()) % 16 == 0; }

/// The tensor, or a copy of it where its data does not start on a 16-byte boundary (a view into a flat buffer).
inline at::Tensor aligned_16_copy(const at::Tensor& tensor) { return aligned_16(tensor) ? tensor : tensor.clone(); }

/// fp32 or bf16, as the kernels name them.
inline Element element_of(const at::Tensor& tensor) {
  return tensor.scalar_type() == at::kFloat ? Element::kFloat32 : Element::kBFloat16;
}

inline at::Tensor as_bf16(const at::Tensor& tensor) {
  return tensor.scalar_type() == at::kBFloat16 ? tensor : tensor.to(at::kBFloat16);
}

/// Function::apply takes no undefined tensors: an absent optional input is an empty one.
inline at::Tensor or_empty(const at::Tensor& tensor, const at::Tensor& like) {
  return tensor.defined() ? tensor : at::empty({0}, like.options());
}
inline bool present(const at::Tensor& tensor) { return tensor.numel() > 0; }

/// Whether a parameter's gradient can be accumulated in place: fp32, contiguous, its own shape.
inline bool accumulable(const at::Tensor& parameter) {
  const at::Tensor& grad = parameter.grad();
  return grad.defined() && grad.scalar_type() == at::kFloat && grad.is_contiguous() &&
         grad.sizes() == parameter.sizes();
}

}  // namespace graphed::kernels::detail

// kernels/grouped_gemm_ops_cuda.cpp — the CUDA build's grouped_matmul: bf16 on Hopper or Blackwell with rows
// aligned to 16 bytes goes to LibTorch's at::_grouped_mm (CUTLASS grouped GEMMs that read the offsets on the
// device, forward and backward); other CUDA tensors of fp32, bf16 or fp16 to an autograd function over
// kernels/grouped_gemm.h (the forward one row launch; the backward a row launch against the transposed weights
// for the input and a weights launch for the weights); anything else to the reference.
#include <limits>

#include <ATen/cuda/CUDAContext.h>
#include <torch/csrc/autograd/custom_function.h>

#include "graphed/kernels/detail/aten_glue.h"
#include "graphed/kernels/grouped_gemm.h"
#include "graphed/kernels/grouped_gemm_ops.h"
#include "graphed/util/compat.h"
#include "graphed/util/error.h"

namespace graphed::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

bool kernel_type(at::ScalarType type, GemmType& out) {
  switch (type) {
    case at::kFloat: out = GemmType::kFloat32; return true;
    case at::kBFloat16: out = GemmType::kBFloat16; return true;
    case at::kHalf: out = GemmType::kFloat16; return true;
    default: return false;
  }
}

GroupedGemmShape shape_of(int64_t rows, int64_t depth, int64_t columns, int64_t experts, at::ScalarType type) {
  GroupedGemmShape shape;
  shape.rows = rows;
  shape.depth = depth;
  shape.columns = columns;
  shape.experts = experts;
  kernel_type(type, shape.type);
  return shape;
}

/// out [M, N] = rows of `rows` [M, K] times each expert's `weight`[e] ([E, K, N]; transposed: [E, N, K]).
at::Tensor rows_product(const at::Tensor& rows, const at::Tensor& weight, const at::Tensor& offsets, bool transposed) {
  const int64_t columns = transposed ? weight.size(1) : weight.size(2);
  at::Tensor out = at::empty({rows.size(0), columns}, rows.options());
  launch_grouped_rows_gemm(rows.data_ptr(), weight.data_ptr(), offsets.data_ptr<int64_t>(), out.data_ptr(),
                           shape_of(rows.size(0), rows.size(1), columns, weight.size(0), rows.scalar_type()),
                           transposed, detail::current_stream());
  return out;
}

/// The own kernels' gradients: a row launch against the transposed weights for the input, a weights launch for the
/// weights.
GroupedMatmulGrads kernel_gradients(const at::Tensor& gradient, const at::Tensor& input, const at::Tensor& weight,
                                    const at::Tensor& offsets, bool want_input, bool want_weight) {
  GroupedMatmulGrads grads;
  if (want_input) grads.input = rows_product(gradient, weight, offsets, /*transposed=*/true);
  if (want_weight) {
    grads.weight = at::empty_like(weight);
    launch_grouped_weights_gemm(
        input.data_ptr(), gradient.data_ptr(), offsets.data_ptr<int64_t>(), grads.weight.data_ptr(),
        shape_of(input.size(0), weight.size(1), weight.size(2), weight.size(0), input.scalar_type()),
        detail::current_stream());
  }
  return grads;
}

struct GroupedMatmulFunction : torch::autograd::Function<GroupedMatmulFunction> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& offsets) {
    context->save_for_backward({input, weight, offsets});
    return rows_product(input, weight, offsets, /*transposed=*/false);
  }

  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    const auto saved = context->get_saved_variables();
    const at::Tensor gradient = grads[0].to(saved[0].scalar_type()).contiguous();
    const GroupedMatmulGrads out = kernel_gradients(gradient, saved[0], saved[1], saved[2],
                                                    context->needs_input_grad(0), context->needs_input_grad(1));
    return {out.input, out.weight, at::Tensor()};
  }
};

/// Whether the own kernels take these tensors.
bool kernel_takes(const at::Tensor& input, const at::Tensor& weight) {
  GemmType type;
  return input.is_cuda() && kernel_type(input.scalar_type(), type) && weight.scalar_type() == input.scalar_type() &&
         input.dim() == 2 && weight.dim() == 3;
}

}  // namespace

bool uses_library_grouped_mm(const at::Tensor& input, const at::Tensor& weight) {
  if (!input.is_cuda() || input.scalar_type() != at::kBFloat16 || weight.scalar_type() != at::kBFloat16 ||
      input.dim() != 2 || weight.dim() != 3) {
    return false;
  }
  // LibTorch runs its CUTLASS kernels (no host synchronisation) on compute capability 9 and 10 only; elsewhere
  // it reads the offsets on the host, which a graph cannot hold.
  const int major = at::cuda::getDeviceProperties(input.get_device())->major;
  const bool aligned = input.size(1) % 8 == 0 && weight.size(2) % 8 == 0;        // rows of 16 bytes
  const bool int32_rows = input.size(0) <= std::numeric_limits<int32_t>::max();  // its group ends are int32
  return compat::kHasGroupedMm && (major == 9 || major == 10) && aligned && int32_rows;
}

at::Tensor grouped_matmul(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& offsets) {
  if (uses_library_grouped_mm(input, weight)) {
    GRAPHED_INTERNAL_ASSERT(weight.size(1) == input.size(1) && offsets.numel() == weight.size(0) + 1,
                            "grouped_matmul: input ", input.sizes(), ", weight ", weight.sizes(), ", offsets ",
                            offsets.sizes());
    // at::_grouped_mm takes each group's end (int32 [E]) where the offsets also hold the first start.
    const at::Tensor ends = offsets.narrow(0, 1, weight.size(0)).to(at::kInt);
    return compat::grouped_mm(input.contiguous(), weight.contiguous(), ends);
  }
  if (!kernel_takes(input, weight)) return reference::grouped_matmul(input, weight, offsets);
  GRAPHED_INTERNAL_ASSERT(weight.size(1) == input.size(1) && offsets.numel() == weight.size(0) + 1 &&
                              offsets.scalar_type() == at::kLong && offsets.is_cuda(),
                          "grouped_matmul: input ", input.sizes(), ", weight ", weight.sizes(), ", offsets ",
                          offsets.sizes());
  return GroupedMatmulFunction::apply(input.contiguous(), weight.contiguous(), offsets.contiguous());
}

GroupedMatmulGrads grouped_matmul_backward(const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight,
                                           const at::Tensor& offsets) {
  const at::Tensor gradient = grad.to(input.scalar_type()).contiguous();
  if (uses_library_grouped_mm(input, weight)) {
    // The products of at::_grouped_mm's derivative: against the transposed weights, and the input's transpose
    // (its groups now along the shared dimension) against the gradient.
    const at::Tensor ends = offsets.narrow(0, 1, weight.size(0)).to(at::kInt);
    return {compat::grouped_mm(gradient, weight.transpose(-2, -1), ends),
            compat::grouped_mm(input.t(), gradient, ends)};
  }
  if (!kernel_takes(input, weight)) return reference::grouped_matmul_backward(grad, input, weight, offsets);
  return kernel_gradients(gradient, input.contiguous(), weight.contiguous(), offsets.contiguous(), true, true);
}

}  // namespace graphed::kernels

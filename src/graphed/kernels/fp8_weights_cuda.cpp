// kernels/fp8_weights_cuda.cpp — kernels/fp8_weights.h on a CUDA build; fp8_weights_cpu.cpp is the CPU build's
// (one convention for the two builds: src/graphed/CMakeLists.txt). Both forms cast rows with
// kernels/fp8_kernels.h's per-row kernel: a weight's output rows once, a GEMM's activation rows at every call
// (at::_scaled_mm's rowwise form: activation scales [rows, 1], weight scales [1, out], bf16 out).
#include <cstdint>
#include <optional>

#include "graphed/kernels/detail/aten_glue.h"
#include "graphed/kernels/fp8_kernels.h"
#include "graphed/kernels/fp8_linear.h"
#include "graphed/kernels/fp8_scaling.h"
#include "graphed/kernels/fp8_weights.h"
#include "graphed/util/error.h"

namespace graphed::kernels {
namespace {

using detail::current_stream;
using detail::element_of;

/// Rows of a bf16 or fp32 CUDA matrix in E4M3, one scale each.
Fp8Weight cast_rows(const at::Tensor& matrix) {
  const at::Tensor rows = matrix.contiguous();
  Fp8Weight result{at::empty(rows.sizes(), rows.options().dtype(at::kFloat8_e4m3fn)),
                   at::empty({rows.size(0)}, rows.options().dtype(at::kFloat))};
  launch_cast_rows_to_fp8(rows.data_ptr(), element_of(rows), rows.size(0), rows.size(1),
                          static_cast<float>(fp8_max(Fp8Format::kE4M3)), result.data.data_ptr(),
                          result.scale.data_ptr<float>(), current_stream());
  return result;
}

/// Any number of rows: the input transform, then every activation row in E4M3 and the rowwise scaled GEMM.
at::Tensor many_rows(const at::Tensor& input, const Fp8Weight& weight, const at::Tensor& bias, const LinearInput& first,
                     const at::Tensor& residual) {
  const at::Tensor x = transformed_input(input, first);
  const at::Tensor rows = x.reshape({-1, x.size(-1)});
  const Fp8Weight activations = cast_rows(rows);
  std::optional<at::Tensor> bias_argument;
  if (bias.defined()) bias_argument = detail::aligned_16_copy(bias);  // cuBLASLt wants it 16-byte aligned
  const at::Tensor product =
      at::_scaled_mm(activations.data, weight.data.t(), activations.scale.view({-1, 1}), weight.scale.view({1, -1}),
                     bias_argument, /*scale_result=*/std::nullopt, at::kBFloat16, /*use_fast_accum=*/true);
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = weight.data.size(0);
  const at::Tensor output = product.view(sizes);
  return residual.defined() ? residual + output : output;
}

}  // namespace

bool fp8_weight_fits(const at::Tensor& weight) {
  return weight.dim() == 2 && weight.size(0) % 16 == 0 && weight.size(1) % 16 == 0 && weight.is_cuda() &&
         fp8_supported(weight.device());
}

Fp8Weight quantize_weight_fp8(const at::Tensor& weight) {
  GRAPHED_INTERNAL_ASSERT(
      fp8_weight_fits(weight) && (weight.scalar_type() == at::kBFloat16 || weight.scalar_type() == at::kFloat),
      "an FP8 weight is a bf16 or fp32 CUDA matrix of sizes that are multiples of 16");
  return cast_rows(weight);
}

at::Tensor fp8_weight_linear(const at::Tensor& input, const Fp8Weight& weight, const at::Tensor& bias,
                             const LinearInput& first, const at::Tensor& residual) {
  // A step's few rows: one kernels/row_linear.h launch over the FP8 rows.
  if (row_linear_takes(input, weight.data, bias, first, residual)) {
    return row_linear(input, weight.data, weight.scale, bias, first, residual);
  }
  const int64_t width = first.transform == RowTransform::kSwiglu ? 2 * weight.data.size(1) : weight.data.size(1);
  GRAPHED_INTERNAL_ASSERT(input.size(-1) == width, "an FP8-weight linear: input [..., ", width, "]");
  return many_rows(input, weight, bias, first, residual);
}

}  // namespace graphed::kernels

// kernels/decode_ops_cuda.cpp — kernels/decode_ops.h on a CUDA build; decode_ops_cpu.cpp is the CPU build's (one
// convention for the two builds: src/graphed/CMakeLists.txt).
#include "graphed/kernels/decode_ops.h"

#include <c10/cuda/CUDAStream.h>

#include "graphed/kernels/decode_kernels.h"
#include "graphed/kernels/detail/aten_glue.h"
#include "graphed/util/error.h"

namespace graphed::kernels {
namespace {

using detail::current_stream;

void require(const at::Tensor& tensor, const char* name) {
  GRAPHED_INTERNAL_ASSERT(tensor.is_cuda() && tensor.scalar_type() == at::kBFloat16 && tensor.is_contiguous(), name,
                          " must be a contiguous CUDA bf16 tensor");
}

void require_rope_inputs(const at::Tensor& qkv, const at::Tensor& positions, const at::Tensor& cos,
                         const at::Tensor& sin, const at::Tensor& key_cache, const at::Tensor& value_cache) {
  require(qkv, "qkv");
  require(key_cache, "key cache");
  require(value_cache, "value cache");
  GRAPHED_INTERNAL_ASSERT(positions.scalar_type() == at::kLong && positions.is_contiguous(), "positions must be int64");
  if (cos.defined()) {
    require(cos, "rotary cos");
    require(sin, "rotary sin");
  }
}

bool bf16_rows(const at::Tensor& tensor) {
  return tensor.is_cuda() && tensor.scalar_type() == at::kBFloat16 && tensor.is_contiguous() &&
         detail::aligned_16(tensor);
}

/// The unfused steps of decode_linear: the input transform, at::linear, the residual add.
at::Tensor unfused_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                          const LinearInput& first, const at::Tensor& residual) {
  const at::Tensor output = at::linear(transformed_input(input, first), weight, bias);
  return residual.defined() ? residual + output : output;
}

}  // namespace

bool decode_kernels_supported(const at::Tensor& like) { return like.is_cuda() && like.scalar_type() == at::kBFloat16; }

at::Tensor rms_norm(const at::Tensor& input, const at::Tensor& weight, double epsilon) {
  const at::Tensor x = input.contiguous();
  require(x, "rms_norm input");
  require(weight, "rms_norm weight");
  at::Tensor output = at::empty_like(x);
  const int64_t columns = x.size(-1);
  launch_rms_norm(x.data_ptr(), weight.data_ptr(), output.data_ptr(), x.numel() / columns, columns,
                  static_cast<float>(epsilon), current_stream());
  return output;
}

at::Tensor rope_into_paged_cache(const at::Tensor& qkv, const at::Tensor& positions, const at::Tensor& cache_rows,
                                 const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& key_cache,
                                 const at::Tensor& value_cache, int64_t heads, int64_t groups, int64_t head_dim) {
  const at::Tensor x = qkv.contiguous();
  require_rope_inputs(x, positions, cos, sin, key_cache, value_cache);
  const int64_t tokens = positions.numel();
  GRAPHED_INTERNAL_ASSERT(cache_rows.scalar_type() == at::kLong && cache_rows.is_contiguous() &&
                              cache_rows.numel() == tokens && x.numel() == tokens * (heads + 2 * groups) * head_dim,
                          "one cache row per token");
  at::Tensor query = at::empty({tokens, heads, head_dim}, x.options());
  launch_rope_into_paged_cache(x.data_ptr(), positions.data_ptr<int64_t>(), cache_rows.data_ptr<int64_t>(),
                               cos.defined() ? cos.data_ptr() : nullptr, sin.defined() ? sin.data_ptr() : nullptr,
                               query.data_ptr(), key_cache.data_ptr(), value_cache.data_ptr(), tokens, heads, groups,
                               head_dim, current_stream());
  return query;
}

bool row_linear_takes(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                      const LinearInput& first, const at::Tensor& residual) {
  const bool fp8_weight = weight.scalar_type() == at::kFloat8_e4m3fn;
  const bool weight_rows =
      fp8_weight ? weight.is_cuda() && weight.is_contiguous() && detail::aligned_16(weight) : bf16_rows(weight);
  const int64_t rows = input.size(-1) > 0 ? input.numel() / input.size(-1) : 0;
  return bf16_rows(input) && weight_rows && row_linear_fits(rows, weight.size(1), fp8_weight) &&
         (!bias.defined() || bf16_rows(bias)) && (!residual.defined() || bf16_rows(residual)) &&
         (first.transform != RowTransform::kRmsNorm || bf16_rows(first.norm_weight));
}

at::Tensor row_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& weight_scale,
                      const at::Tensor& bias, const LinearInput& first, const at::Tensor& residual) {
  const int64_t in_features = weight.size(1);
  const int64_t width = first.transform == RowTransform::kSwiglu ? 2 * in_features : in_features;
  const int64_t rows = input.numel() / input.size(-1);
  GRAPHED_INTERNAL_ASSERT(input.size(-1) == width && (!residual.defined() || residual.numel() == rows * weight.size(0)),
                          "row_linear: input [..., ", width, "] and residual [..., ", weight.size(0), "]");
  std::vector<int64_t> sizes = input.sizes().vec();
  sizes.back() = weight.size(0);
  at::Tensor output = at::empty(sizes, input.options());
  RowLinearArguments arguments;
  arguments.input = input.data_ptr();
  arguments.norm_weight = first.transform == RowTransform::kRmsNorm ? first.norm_weight.data_ptr() : nullptr;
  arguments.epsilon = static_cast<float>(first.epsilon);
  arguments.weight = weight.data_ptr();
  arguments.weight_scale = weight_scale.defined() ? weight_scale.data_ptr<float>() : nullptr;
  arguments.bias = bias.defined() ? bias.data_ptr() : nullptr;
  arguments.residual = residual.defined() ? residual.data_ptr() : nullptr;
  arguments.output = output.data_ptr();
  arguments.rows = rows;
  arguments.in_features = in_features;
  arguments.out_features = weight.size(0);
  arguments.transform = first.transform;
  launch_row_linear(arguments, current_stream());
  return output;
}

at::Tensor decode_linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                         const LinearInput& first, const at::Tensor& residual) {
  if (!row_linear_takes(input, weight, bias, first, residual))
    return unfused_linear(input, weight, bias, first, residual);
  return row_linear(input, weight, {}, bias, first, residual);
}

at::Tensor transformed_input(const at::Tensor& input, const LinearInput& first) {
  if (first.transform == RowTransform::kRmsNorm) return rms_norm(input, first.norm_weight, first.epsilon);
  if (first.transform == RowTransform::kSwiglu) return silu_and_mul(input);
  return input;
}

at::Tensor silu_and_mul(const at::Tensor& input) {
  const at::Tensor x = input.contiguous();
  require(x, "silu_and_mul input");
  const int64_t width = x.size(-1) / 2;
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = width;
  at::Tensor output = at::empty(sizes, x.options());
  launch_silu_and_mul(x.data_ptr(), output.data_ptr(), x.numel() / x.size(-1), width, current_stream());
  return output;
}

}  // namespace graphed::kernels

// kernels/row_linear.h — a linear layer over a few rows (the tokens of a decode step), free of ATen: one
// kernel reads the weight once at close to the memory bandwidth, and folds in what surrounds a projection in
// a decoder layer: the RMSNorm or SwiGLU of its input before, the bias and the residual add after. The
// ATen faces are kernels::decode_linear (kernels/decode_ops.h) and kernels::fp8_weight_linear (kernels/fp8_weights.h).
#pragma once

#include <cstdint>

namespace graphed::kernels {

/// What the kernel applies to each input row before the product.
enum class RowTransform {
  kNone,     ///< input [rows, in]
  kRmsNorm,  ///< input [rows, in]: x * rsqrt(mean(x^2) + epsilon) * norm_weight, rounded to bf16
  kSwiglu,   ///< input [rows, 2 in]: silu(first half) * second half, rounded to bf16
};

/// output [rows, out] = residual + (transform(input) weight^T + bias), all bf16, fp32 sums; the product is
/// rounded to bf16 before the residual is added (what the unfused ops compute). bias, residual and
/// norm_weight may be null. All pointers 16-byte aligned; in a multiple of 8 (16 for FP8 weights).
struct RowLinearArguments {
  const void* input = nullptr;
  const void* norm_weight = nullptr;    ///< [in], kRmsNorm only
  float epsilon = 0.0f;                 ///< kRmsNorm only
  const void* weight = nullptr;         ///< [out, in]: bf16, or FP8 E4M3 where weight_scale is given
  const float* weight_scale = nullptr;  ///< [out] fp32: FP8 weight row o stands for row o x weight_scale[o]
  const void* bias = nullptr;           ///< [out]
  const void* residual = nullptr;       ///< [rows, out]
  void* output = nullptr;               ///< [rows, out]; not one of the inputs
  int64_t rows = 0;
  int64_t in_features = 0;
  int64_t out_features = 0;
  RowTransform transform = RowTransform::kNone;
};

/// The most rows one launch takes.
constexpr int64_t kRowLinearMaxRows = 2;

/// Whether launch_row_linear takes this many rows of this width (rows x in bf16 values are staged in
/// shared memory; FP8 weights want in a multiple of 16).
bool row_linear_fits(int64_t rows, int64_t in_features, bool fp8_weight = false);

/// Launches the kernel on `stream` (a cudaStream_t). Each output is one warp's dot product in a fixed
/// order: the same bits on every run and for every grid.
void launch_row_linear(const RowLinearArguments& arguments, void* stream);

}  // namespace graphed::kernels

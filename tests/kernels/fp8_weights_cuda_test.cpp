// tests/kernels/fp8_weights_cuda_test.cpp — FP8 weights for decoding (kernels/fp8_weights.h) on the GPU: each
// row's amax lands on E4M3's largest value and the rows multiply back within E4M3's rounding; one or two rows
// (row_linear's FP8 kernel) match the product of the dequantized weight in fp32, with each input transform,
// bias and residual; many rows (activations cast per row, the rowwise scaled GEMM) stay within FP8's error of
// the bf16 product; a CUDA graph replays the eager bits.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <string>
#include <vector>

#include "cuda_test.h"
#include "graphed/kernels/fp8_linear.h"
#include "graphed/kernels/fp8_weights.h"

namespace graphed::kernels {
namespace {

const auto kBf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);

class Fp8WeightsCudaTest : public graphed::testing::CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    std::string why_not;
    if (!fp8_supported(at::Device(at::kCUDA, 0), &why_not)) GTEST_SKIP() << why_not;
    at::manual_seed(21);
  }
};

double relative_error(const at::Tensor& got, const at::Tensor& want) {
  const at::Tensor difference = got.to(at::kDouble) - want.to(at::kDouble);
  return (difference.norm() / want.to(at::kDouble).norm()).item<double>();
}

at::Tensor dequantized(const Fp8Weight& weight) { return weight.data.to(at::kFloat) * weight.scale.view({-1, 1}); }

TEST_F(Fp8WeightsCudaTest, EachRowsAmaxLandsOnTheLargestValue) {
  const at::Tensor weight = at::randn({96, 256}, kBf16) * at::linspace(0.01, 3, 96, kBf16).view({-1, 1});
  ASSERT_TRUE(fp8_weight_fits(weight));
  const Fp8Weight fp8 = quantize_weight_fp8(weight);
  EXPECT_EQ(fp8.data.scalar_type(), at::kFloat8_e4m3fn);
  EXPECT_TRUE(at::equal(fp8.data.to(at::kFloat).abs().amax(1), at::full({96}, 448.0f, kBf16.dtype(at::kFloat))));
  EXPECT_LT(relative_error(dequantized(fp8), weight), 0.04);
  EXPECT_FALSE(fp8_weight_fits(at::randn({96, 40}, kBf16)));  // 40 columns: not a multiple of 16
}

TEST_F(Fp8WeightsCudaTest, FewRowsMatchTheDequantizedProduct) {
  const int64_t in = 512;
  const int64_t out = 384;
  const Fp8Weight weight = quantize_weight_fp8(at::randn({out, in}, kBf16) * 0.05);
  const at::Tensor bias = at::randn({out}, kBf16);
  const at::Tensor norm_weight = at::rand({in}, kBf16) + 0.5;
  for (const RowTransform transform : {RowTransform::kNone, RowTransform::kRmsNorm, RowTransform::kSwiglu}) {
    for (const int64_t rows : {1, 2}) {
      const at::Tensor input = at::randn({rows, transform == RowTransform::kSwiglu ? 2 * in : in}, kBf16);
      const at::Tensor residual = at::randn({rows, out}, kBf16);
      LinearInput first;
      first.transform = transform;
      if (transform == RowTransform::kRmsNorm) {
        first.norm_weight = norm_weight;
        first.epsilon = 1e-5;
      }
      const at::Tensor got = fp8_weight_linear(input, weight, bias, first, residual);
      at::Tensor x = input;
      if (transform == RowTransform::kRmsNorm) x = rms_norm(input, norm_weight, 1e-5);
      if (transform == RowTransform::kSwiglu) x = silu_and_mul(input);
      const at::Tensor product = (at::matmul(x.to(at::kFloat), dequantized(weight).t()) + bias.to(at::kFloat));
      const at::Tensor want = product.to(at::kBFloat16) + residual;
      EXPECT_LT(relative_error(got, want), 0.01) << "transform " << static_cast<int>(transform) << ", rows " << rows;
      EXPECT_TRUE(at::equal(got, fp8_weight_linear(input, weight, bias, first, residual)));  // the same bits again
    }
  }
}

TEST_F(Fp8WeightsCudaTest, ManyRowsStayWithinFp8ErrorOfBf16) {
  const at::Tensor bf16_weight = at::randn({256, 512}, kBf16) * 0.05;
  const Fp8Weight weight = quantize_weight_fp8(bf16_weight);
  const at::Tensor bias = at::randn({256}, kBf16);
  for (const int64_t rows : {3, 40}) {
    const at::Tensor input = at::randn({rows, 512}, kBf16);
    const at::Tensor got = fp8_weight_linear(input, weight, bias);
    ASSERT_EQ(got.sizes(), (std::vector<int64_t>{rows, 256}));
    EXPECT_LT(relative_error(got, at::linear(input, bf16_weight, bias)), 0.06) << rows << " rows";
  }
}

TEST_F(Fp8WeightsCudaTest, AGraphReplaysTheEagerBits) {
  const Fp8Weight weight = quantize_weight_fp8(at::randn({256, 512}, kBf16) * 0.05);
  for (const int64_t rows : {1, 40}) {
    const at::Tensor input = at::randn({rows, 512}, kBf16);
    const at::Tensor eager = fp8_weight_linear(input, weight, {});
    const c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool();
    at::Tensor captured;
    at::cuda::CUDAGraph graph;
    {
      const c10::cuda::CUDAStreamGuard guard(stream);
      fp8_weight_linear(input, weight, {});  // warm up on the side stream
      stream.synchronize();
      graph.capture_begin();
      captured = fp8_weight_linear(input, weight, {});
      graph.capture_end();
    }
    graph.replay();
    torch::cuda::synchronize();
    EXPECT_TRUE(at::equal(captured, eager)) << rows << " rows";
  }
}

}  // namespace
}  // namespace graphed::kernels

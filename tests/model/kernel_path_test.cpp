// tests/model/kernel_path_test.cpp — the ATen path: what it computes, and that --no-fused-kernels (a path
// without decode kernels) keeps decoding on LibTorch's ops.
#include "graphed/model/kernel_path.h"

#include <gtest/gtest.h>

namespace graphed::model {
namespace {

TEST(KernelPathTest, TheAtenPathSaysWhetherDecodingTakesTheKernels) {
  EXPECT_TRUE(aten_path()->decode_kernels());
  EXPECT_TRUE(aten_path(true)->decode_kernels());
  EXPECT_FALSE(aten_path(false)->decode_kernels());
  EXPECT_FALSE(aten_path(false)->fuses_output_loss());
}

TEST(KernelPathTest, WithoutDecodeKernelsDecodeLinearIsLibTorchsLinearPlusTheResidual) {
  at::manual_seed(3);
  const at::Tensor input = at::randn({2, 8});
  const at::Tensor weight = at::randn({4, 8});
  const at::Tensor bias = at::randn({4});
  const at::Tensor residual = at::randn({2, 4});
  const auto path = aten_path(false);
  EXPECT_TRUE(
      at::equal(path->decode_linear(input, weight, bias, {}, residual), residual + at::linear(input, weight, bias)));
  EXPECT_TRUE(at::equal(path->decode_linear(input, weight, {}, {}, {}), at::linear(input, weight)));
  EXPECT_TRUE(at::equal(path->inference_linear(input, weight, bias), at::linear(input, weight, bias)));
  EXPECT_TRUE(at::equal(path->residual_add(residual, residual), residual + residual));
  EXPECT_TRUE(at::equal(path->logits(input, weight), at::linear(input, weight)));
}

}  // namespace
}  // namespace graphed::model

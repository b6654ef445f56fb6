// tests/model/kernel_path_cuda_test.cpp — on a GPU, the ATen path (--no-fused-kernels) runs decoding's
// projections and paged attention through LibTorch's ops, bit for bit.
#include "graphed/model/kernel_path.h"

#include <gtest/gtest.h>

#include "cuda_test.h"

namespace graphed::model {
namespace {

using KernelPathCudaTest = graphed::testing::CudaTest;

TEST_F(KernelPathCudaTest, WithoutDecodeKernelsDecodingRunsLibTorchsOps) {
  const auto options = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  at::manual_seed(7);
  const at::Tensor input = at::randn({1, 256}, options);
  const at::Tensor weight = at::randn({512, 256}, options);
  const at::Tensor residual = at::randn({1, 512}, options);
  const auto path = aten_path();
  EXPECT_TRUE(at::equal(path->decode_linear(input, weight, {}, {}, residual), residual + at::linear(input, weight)));
  EXPECT_TRUE(at::equal(path->inference_linear(input, weight, {}), at::linear(input, weight)));
}

TEST_F(KernelPathCudaTest, WithoutDecodeKernelsPagedAttentionIsTheReference) {
  const auto options = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  const auto integers = at::TensorOptions().device(at::kCUDA).dtype(at::kLong);
  at::manual_seed(11);
  const int64_t blocks = 4, block_size = 16, groups = 2, heads = 4, head_dim = 64, tokens = 2;
  const at::Tensor key = at::randn({blocks, block_size, groups, head_dim}, options);
  const at::Tensor value = at::randn({blocks, block_size, groups, head_dim}, options);
  const at::Tensor query = at::randn({tokens, heads, head_dim}, options);
  kernels::PagedContext context;
  context.block_tables = at::tensor({0, 1, 2, 3}, integers).view({2, 2});
  context.token_request = at::tensor({0, 1}, integers);
  context.positions = at::tensor({20, 9}, integers);
  context.max_context = 32;
  const at::Tensor expected = kernels::reference::paged_attention(query, key, value, context, 0.125);
  EXPECT_TRUE(at::equal(aten_path()->paged_attention(query, key, value, context, 0.125), expected));
}

}  // namespace
}  // namespace graphed::model

// tests/kernels/paged_attention_cuda_test.cpp — the paged attention kernel against its LibTorch
// reference on the same inputs: bf16 and float32, GQA (8 heads / 2 groups, and 4 / 4), head dims 64
// and 128, blocks of 16 positions scattered through the cache, tokens of several requests at positions
// from 0 to past several 256-position splits; the same bits on every run, and captured in a CUDA graph
// the same bits as eager. Tolerance: float32 1e-4, bf16 2e-2, relative to the largest value.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <array>

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "cuda_test.h"
#include "graphed/kernels/paged_attention_ops.h"

namespace graphed::kernels {
namespace {

struct Case {
  at::Tensor query, key_cache, value_cache;
  PagedContext context;
};

/// Requests of contexts 1, 40, 300 and 700 positions in blocks of 16 taken from a shuffled pool; one
/// token at each request's last position, plus a run of prompt tokens of the 300-position one.
Case make_case(at::ScalarType type, int64_t heads, int64_t groups, int64_t head_dim) {
  const auto options = at::TensorOptions().device(at::kCUDA).dtype(type);
  const auto longs = at::TensorOptions().device(at::kCUDA).dtype(at::kLong);
  const int64_t block_size = 16;
  const std::vector<int64_t> contexts{1, 40, 300, 700};
  const int64_t width = 700 / block_size + 1;
  const int64_t blocks = 4 * width + 1;
  const at::Tensor order = at::randperm(blocks - 1, at::kLong) + 1;
  at::Tensor tables = at::zeros({4, width}, at::kLong);
  for (int64_t r = 0; r < 4; ++r) tables[r].copy_(order.narrow(0, r * width, width));
  std::vector<int64_t> token_request, positions;
  for (int64_t r = 0; r < 4; ++r) {
    token_request.push_back(r);
    positions.push_back(contexts[static_cast<std::size_t>(r)] - 1);
  }
  for (int64_t p = 250; p < 300; p += 7) {
    token_request.push_back(2);
    positions.push_back(p);
  }
  Case c;
  c.query = at::randn({static_cast<int64_t>(positions.size()), heads, head_dim}, options);
  c.key_cache = at::randn({blocks, block_size, groups, head_dim}, options);
  c.value_cache = at::randn({blocks, block_size, groups, head_dim}, options);
  c.context.block_tables = tables.to(longs.device());
  c.context.token_request = at::tensor(token_request, at::kLong).to(longs.device());
  c.context.positions = at::tensor(positions, at::kLong).to(longs.device());
  c.context.max_context = 1024;  // more splits than any token needs: the empty ones change nothing
  return c;
}

class PagedAttentionCudaTest : public graphed::testing::CudaTestWithParam<at::ScalarType> {
 protected:
  void SetUp() override {
    CudaTestWithParam::SetUp();
    if (IsSkipped()) return;
    at::manual_seed(11);
  }
};

TEST_P(PagedAttentionCudaTest, MatchesTheReferenceAndRepeatsItsBits) {
  const double tolerance = GetParam() == at::kFloat ? 1e-4 : 2e-2;
  for (const auto& [heads, groups, head_dim] :
       std::vector<std::array<int64_t, 3>>{{8, 2, 64}, {4, 4, 128}, {12, 2, 64}}) {
    const Case c = make_case(GetParam(), heads, groups, head_dim);
    const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
    const at::Tensor want = reference::paged_attention(c.query.to(at::kFloat), c.key_cache.to(at::kFloat),
                                                       c.value_cache.to(at::kFloat), c.context, scale);
    const at::Tensor got = paged_attention(c.query, c.key_cache, c.value_cache, c.context, scale);
    const double largest = want.abs().max().item<double>();
    const double difference = (got.to(at::kFloat) - want).abs().max().item<double>();
    EXPECT_LE(difference, tolerance * std::max(largest, 1.0))
        << heads << " heads, " << groups << " groups, head dim " << head_dim << ": max difference " << difference;
    EXPECT_TRUE(at::equal(got, paged_attention(c.query, c.key_cache, c.value_cache, c.context, scale)));
    PagedContext fewer_splits = c.context;
    fewer_splits.max_context = 700;
    EXPECT_TRUE(at::equal(got, paged_attention(c.query, c.key_cache, c.value_cache, fewer_splits, scale)))
        << "empty splits changed the result";
    // A limit of 2^20 positions (4,096 splits, more than the launch's blocks allow): each block takes several
    // splits, with the same bits.
    PagedContext long_limit = c.context;
    long_limit.max_context = int64_t{1} << 20;
    EXPECT_TRUE(at::equal(got, paged_attention(c.query, c.key_cache, c.value_cache, long_limit, scale)))
        << "blocks that take several splits changed the result";
  }
}

TEST_P(PagedAttentionCudaTest, CapturedEqualsEager) {
  const Case c = make_case(GetParam(), 8, 2, 64);
  const at::Tensor eager = paged_attention(c.query, c.key_cache, c.value_cache, c.context, 0.125);
  at::cuda::CUDAStream stream = at::cuda::getStreamFromPool();
  at::Tensor captured;
  at::cuda::CUDAGraph graph;
  {
    const c10::cuda::CUDAStreamGuard guard(stream);
    paged_attention(c.query, c.key_cache, c.value_cache, c.context, 0.125);  // warmup on the side stream
    graph.capture_begin();
    captured = paged_attention(c.query, c.key_cache, c.value_cache, c.context, 0.125);
    graph.capture_end();
  }
  graph.replay();
  torch::cuda::synchronize();
  EXPECT_TRUE(at::equal(captured, eager));
}

INSTANTIATE_TEST_SUITE_P(Types, PagedAttentionCudaTest, ::testing::Values(at::kBFloat16, at::kFloat),
                         [](const ::testing::TestParamInfo<at::ScalarType>& info) {
                           return info.param == at::kFloat ? "float32" : "bf16";
                         });

}  // namespace
}  // namespace graphed::kernels

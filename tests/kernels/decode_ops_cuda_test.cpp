// tests/kernels/decode_ops_cuda_test.cpp — the fused decode kernels against LibTorch's float32 ops on
// the same bf16 inputs (tolerance: a few bf16 roundings, 2e-2 relative to the largest value), with
// odd sizes (1 and 3 rows, 1,001 output features, GQA 6 heads / 2 groups, head dim 64 and 128, paged
// contexts of 40 and 1,301 positions in scattered blocks, norm rows of 1,000 to 8,200 columns); the same bits
// on every run and whatever the launch's longest context; and captured in a CUDA graph, the same bits as eager.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "cuda_test.h"
#include "graphed/kernels/decode_ops.h"
#include "graphed/kernels/paged_attention_ops.h"

namespace graphed::kernels {
namespace {

const auto kBf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);

class DecodeOpsCudaTest : public graphed::testing::CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    at::manual_seed(3);
  }
};

void expect_close(const at::Tensor& got, const at::Tensor& want, const char* what) {
  const double largest = want.abs().max().item<double>();
  const double difference = (got.to(at::kFloat) - want.to(at::kFloat)).abs().max().item<double>();
  EXPECT_LE(difference, 2e-2 * std::max(largest, 1.0))
      << what << ": max difference " << difference << ", largest " << largest;
}

TEST_F(DecodeOpsCudaTest, RmsNormMatchesFloat32) {
  for (const int64_t columns : {1000, 2048, 8192, 8200}) {  // scalar, registers, registers (full), scalar (too wide)
    const at::Tensor input = at::randn({3, 1, columns}, kBf16);
    const at::Tensor weight = at::randn({columns}, kBf16);
    const at::Tensor x = input.to(at::kFloat);
    const at::Tensor want = x * at::rsqrt(x.pow(2).mean(-1, true) + 1e-5) * weight.to(at::kFloat);
    const at::Tensor got = rms_norm(input, weight, 1e-5);
    expect_close(got, want, ("rms_norm, " + std::to_string(columns) + " columns").c_str());
    EXPECT_TRUE(at::equal(got, rms_norm(input, weight, 1e-5)));
  }
}

TEST_F(DecodeOpsCudaTest, DecodeLinearMatchesFloat32) {
  const at::Tensor weight = at::randn({1001, 2048}, kBf16) * 0.05;
  const at::Tensor bias = at::randn({1001}, kBf16);
  for (const int64_t rows : {1, 3}) {  // the one-row kernel, at::linear beyond
    const at::Tensor input = at::randn({rows, 1, 2048}, kBf16);
    for (const bool with_bias : {false, true}) {
      const at::Tensor b = with_bias ? bias : at::Tensor();
      const at::Tensor want =
          at::linear(input.to(at::kFloat), weight.to(at::kFloat), with_bias ? bias.to(at::kFloat) : at::Tensor());
      const at::Tensor got = decode_linear(input, weight, b);
      EXPECT_EQ(got.sizes(), want.sizes());
      expect_close(got, want, ("decode_linear, " + std::to_string(rows) + " rows").c_str());
      EXPECT_TRUE(at::equal(got, decode_linear(input, weight, b)));
    }
  }
}

TEST_F(DecodeOpsCudaTest, SiluAndMulMatchesFloat32) {
  const at::Tensor input = at::randn({3, 1, 2 * 777}, kBf16);
  const at::Tensor x = input.to(at::kFloat);
  const at::Tensor want = at::silu(x.narrow(-1, 0, 777)) * x.narrow(-1, 777, 777);
  expect_close(silu_and_mul(input), want, "silu_and_mul");
}

/// A paged cache of `rows` requests of `length` positions in blocks of kBlock, each request's blocks
/// scattered over the cache (request r's block i is block i x rows + (rows - 1 - r), block 0 unused).
constexpr int64_t kBlock = 16;

struct PagedRows {
  at::Tensor key_cache, value_cache;  // [blocks, kBlock, groups, head_dim]
  at::Tensor block_tables;            // [rows, blocks per request]
  at::Tensor cache_rows;              // [rows]: each request's row of its position
};

PagedRows paged_rows(int64_t rows, int64_t groups, int64_t head_dim, int64_t length,
                     const std::vector<int64_t>& where) {
  const int64_t width = (length + kBlock - 1) / kBlock;
  PagedRows paged;
  paged.key_cache = at::randn({1 + width * rows, kBlock, groups, head_dim}, kBf16);
  paged.value_cache = at::randn_like(paged.key_cache);
  std::vector<int64_t> tables, cache_rows;
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t block = 0; block < width; ++block) tables.push_back(1 + block * rows + (rows - 1 - row));
    const int64_t position = where[static_cast<std::size_t>(row)];
    cache_rows.push_back(tables[static_cast<std::size_t>(row * width + position / kBlock)] * kBlock +
                         position % kBlock);
  }
  paged.block_tables = at::tensor(tables, at::kLong).view({rows, width}).to(at::kCUDA);
  paged.cache_rows = at::tensor(cache_rows, at::kLong).to(at::kCUDA);
  return paged;
}

/// Request `row`'s cached rows of positions 0..count-1 of one group: [count, head_dim] float.
at::Tensor context_rows(const at::Tensor& cache, const at::Tensor& table, int64_t group, int64_t count) {
  const at::Tensor blocks = table.narrow(0, 0, (count + kBlock - 1) / kBlock);
  return cache.index_select(0, blocks)
      .select(2, group)
      .reshape({-1, cache.size(-1)})
      .narrow(0, 0, count)
      .to(at::kFloat);
}

/// RoPE + the paged cache write + paged attention against a float32 reference, for one head size and
/// context (up to 256 positions one split, beyond it splits of 256 and their combination).
void check_attention(int64_t head_dim, bool rope, int64_t length = 40) {
  const int64_t rows = 3, heads = 6, groups = 2;
  const std::vector<int64_t> where{0, length * 3 / 7, length - 1};
  const at::Tensor positions = at::tensor(where, at::kLong).to(at::kCUDA);
  PagedRows paged = paged_rows(rows, groups, head_dim, length, where);
  const at::Tensor old_keys = paged.key_cache.clone();
  const at::Tensor qkv = at::randn({rows, (heads + 2 * groups) * head_dim}, kBf16);
  const at::Tensor angles = at::outer(at::arange(length, at::kDouble), at::rand({head_dim / 2}, at::kDouble));
  const at::Tensor cos = rope ? angles.cos().to(kBf16) : at::Tensor();
  const at::Tensor sin = rope ? angles.sin().to(kBf16) : at::Tensor();
  const at::Tensor query = rope_into_paged_cache(qkv, positions, paged.cache_rows, cos, sin, paged.key_cache,
                                                 paged.value_cache, heads, groups, head_dim);
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  PagedContext context{paged.block_tables, at::arange(rows, positions.options()), positions, length};
  const at::Tensor output = paged_attention(query, paged.key_cache, paged.value_cache, context, scale);

  const auto rotate = [&](at::Tensor x, int64_t position) {  // x [n, d] float
    if (!rope) return x;
    const at::Tensor c = cos[position].to(at::kFloat), s = sin[position].to(at::kFloat);
    const auto halves = x.chunk(2, -1);
    return at::cat({halves[0] * c - halves[1] * s, halves[1] * c + halves[0] * s}, -1);
  };
  const at::Tensor flat_keys = paged.key_cache.view({-1, groups, head_dim});
  const at::Tensor flat_values = paged.value_cache.view({-1, groups, head_dim});
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t position = where[static_cast<std::size_t>(row)];
    const int64_t cache_row = paged.cache_rows[row].item<int64_t>();
    const at::Tensor parts = qkv[row].to(at::kFloat).view({heads + 2 * groups, head_dim});
    const at::Tensor q = rotate(parts.narrow(0, 0, heads), position);
    const at::Tensor k = rotate(parts.narrow(0, heads, groups), position);
    const at::Tensor v = parts.narrow(0, heads + groups, groups);
    expect_close(query[row], q, "rotated query");
    expect_close(flat_keys[cache_row], k, "cached key");
    EXPECT_TRUE(at::equal(flat_values[cache_row], v.to(at::kBFloat16))) << "cached value";
    EXPECT_TRUE(at::equal(flat_keys[cache_row + 1], old_keys.view({-1, groups, head_dim})[cache_row + 1]))
        << "the next slot is untouched";
    for (int64_t head = 0; head < heads; ++head) {
      const int64_t group = head / (heads / groups);
      const at::Tensor table = paged.block_tables[row];
      const at::Tensor keys = context_rows(paged.key_cache, table, group, position + 1);
      const at::Tensor values = context_rows(paged.value_cache, table, group, position + 1);
      const at::Tensor weights = at::softmax(at::mv(keys, query[row][head].to(at::kFloat)) * scale, 0);
      expect_close(output[row][head], at::mv(values.t(), weights), "attention");
    }
  }
  // The same bits on a second run, and whatever the launch's longest context (one split or several).
  PagedContext longer = context;
  longer.max_context = length + 3 * 256;
  EXPECT_TRUE(at::equal(paged_attention(query, paged.key_cache, paged.value_cache, context, scale), output));
  EXPECT_TRUE(at::equal(paged_attention(query, paged.key_cache, paged.value_cache, longer, scale), output));
}

TEST_F(DecodeOpsCudaTest, RopePagedCacheAndAttentionMatchFloat32) {
  check_attention(64, true);
  check_attention(128, true);
  check_attention(64, false);
  check_attention(64, true, 1301);  // splits of 256 positions and their combination
  check_attention(128, false, 1301);
}

TEST_F(DecodeOpsCudaTest, CapturedInAGraphGiveTheSameBits) {
  const at::Tensor input = at::randn({4, 1, 256}, kBf16);
  const at::Tensor weight = at::randn({256}, kBf16);
  const at::Tensor eager = silu_and_mul(rms_norm(input, weight, 1e-6));
  torch::cuda::synchronize();
  c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool();
  c10::cuda::CUDAStreamGuard guard(stream);
  at::cuda::CUDAGraph graph;
  at::Tensor output;
  graph.capture_begin();
  output = silu_and_mul(rms_norm(input, weight, 1e-6));
  graph.capture_end();
  graph.replay();
  stream.synchronize();
  EXPECT_TRUE(at::equal(output, eager));
}

}  // namespace
}  // namespace graphed::kernels

// tests/kernels/decode_ops_cuda_test.cpp — the fused decode kernels against LibTorch's float32 ops on
// the same bf16 inputs (tolerance: a few bf16 roundings, 2e-2 relative to the largest value), with
// odd sizes (1 and 3 rows, 1,001 output features, GQA 6 heads / 2 groups, head dim 64 and 128, caches of 40
// and 1,301 positions, norm rows of 1,000 to 8,200 columns); the
// same bits on every run; and captured in a CUDA graph, the same bits as eager.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "graphed/kernels/decode_ops.h"

namespace graphed::kernels {
namespace {

const auto kBf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);

class DecodeOpsCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible to LibTorch";
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

/// RoPE + cache write + attention against a float32 reference, for one head size and cache length (up to
/// 1,024 positions one block a head, beyond it the split kernels over the contiguous cache).
void check_attention(int64_t head_dim, bool rope, int64_t length = 40) {
  const int64_t rows = 3, heads = 6, groups = 2;
  const std::vector<int64_t> where{0, length * 3 / 7, length - 1};
  const at::Tensor positions = at::tensor(where, at::kLong).to(at::kCUDA);
  at::Tensor key_cache = at::randn({rows, groups, length, head_dim}, kBf16);
  at::Tensor value_cache = at::randn({rows, groups, length, head_dim}, kBf16);
  const at::Tensor old_keys = key_cache.clone();
  const at::Tensor qkv = at::randn({rows, (heads + 2 * groups) * head_dim}, kBf16);
  const at::Tensor angles = at::outer(at::arange(length, at::kDouble), at::rand({head_dim / 2}, at::kDouble));
  const at::Tensor cos = rope ? angles.cos().to(kBf16) : at::Tensor();
  const at::Tensor sin = rope ? angles.sin().to(kBf16) : at::Tensor();
  const at::Tensor query = rope_into_cache(qkv, positions, cos, sin, key_cache, value_cache, heads, groups, head_dim);
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const at::Tensor output = decode_attention(query, key_cache, value_cache, positions, scale);

  const auto rotate = [&](at::Tensor x, int64_t position) {  // x [n, d] float
    if (!rope) return x;
    const at::Tensor c = cos[position].to(at::kFloat), s = sin[position].to(at::kFloat);
    const auto halves = x.chunk(2, -1);
    return at::cat({halves[0] * c - halves[1] * s, halves[1] * c + halves[0] * s}, -1);
  };
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t position = where[static_cast<std::size_t>(row)];
    const at::Tensor parts = qkv[row].to(at::kFloat).view({heads + 2 * groups, head_dim});
    const at::Tensor q = rotate(parts.narrow(0, 0, heads), position);
    const at::Tensor k = rotate(parts.narrow(0, heads, groups), position);
    const at::Tensor v = parts.narrow(0, heads + groups, groups);
    expect_close(query[row], q, "rotated query");
    expect_close(key_cache[row].select(1, position), k, "cached key");
    EXPECT_TRUE(at::equal(value_cache[row].select(1, position), v.to(at::kBFloat16))) << "cached value";
    if (position + 1 < length) {
      EXPECT_TRUE(at::equal(key_cache[row].narrow(1, position + 1, 1), old_keys[row].narrow(1, position + 1, 1)))
          << "slots past the position are untouched";
    }
    for (int64_t head = 0; head < heads; ++head) {
      const int64_t group = head / (heads / groups);
      const at::Tensor keys = key_cache[row][group].narrow(0, 0, position + 1).to(at::kFloat);
      const at::Tensor values = value_cache[row][group].narrow(0, 0, position + 1).to(at::kFloat);
      const at::Tensor weights = at::softmax(at::mv(keys, query[row][head].to(at::kFloat)) * scale, 0);
      expect_close(output[row][head], at::mv(values.t(), weights), "attention");
    }
  }
  // The same bits on a second run.
  at::Tensor key_again = key_cache.clone(), value_again = value_cache.clone();
  const at::Tensor query_again =
      rope_into_cache(qkv, positions, cos, sin, key_again, value_again, heads, groups, head_dim);
  EXPECT_TRUE(at::equal(query_again, query));
  EXPECT_TRUE(at::equal(decode_attention(query_again, key_again, value_again, positions, scale), output));
}

TEST_F(DecodeOpsCudaTest, RopeCacheAndAttentionMatchFloat32) {
  check_attention(64, true);
  check_attention(128, true);
  check_attention(64, false);
  check_attention(64, true, 1301);  // past the one-block kernel's length: splits of 256 positions
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

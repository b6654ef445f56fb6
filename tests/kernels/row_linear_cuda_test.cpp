// tests/kernels/row_linear_cuda_test.cpp — kernels::decode_linear through the row-linear kernel
// (kernels/row_linear.h) against float32 LibTorch on the same bf16 inputs: every input transform (none,
// RMSNorm, SwiGLU), 1 and 2 rows (and 3, 5 and 8, through the unfused ops), 1,001 output features, widths of 2,048 and
// 8,200 columns (a partial last step), with and without bias and residual. Tolerance: a few bf16 roundings, 2e-2
// relative to the largest value. Also: the same bits on every run, the unfused ops where the kernel does not apply, a
// chain of dependent launches (each a programmatic dependent launch) equal to the same launches with a synchronisation
// between each, and the chain captured in a CUDA graph the same bits as eager. Then rope_into_paged_cache against a
// float32 reference.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "cuda_test.h"
#include "graphed/kernels/decode_ops.h"

namespace graphed::kernels {
namespace {

const auto kBf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);

class RowLinearCudaTest : public graphed::testing::CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    at::manual_seed(11);
  }
};

void expect_close(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const double largest = want.abs().max().item<double>();
  const double difference = (got.to(at::kFloat) - want.to(at::kFloat)).abs().max().item<double>();
  EXPECT_LE(difference, 2e-2 * std::max(largest, 1.0))
      << what << ": max difference " << difference << ", largest " << largest;
}

/// The float32 reference: the transformed input rounded to bf16 (as the kernel stages it), the product in
/// float32, the residual added.
at::Tensor reference(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                     const LinearInput& first, const at::Tensor& residual) {
  at::Tensor x = input.to(at::kFloat);
  if (first.transform == RowTransform::kRmsNorm) {
    x = x * at::rsqrt(x.pow(2).mean(-1, true) + first.epsilon) * first.norm_weight.to(at::kFloat);
  }
  if (first.transform == RowTransform::kSwiglu) {
    const int64_t width = x.size(-1) / 2;
    x = at::silu(x.narrow(-1, 0, width)) * x.narrow(-1, width, width);
  }
  x = x.to(at::kBFloat16).to(at::kFloat);
  at::Tensor output = at::linear(x, weight.to(at::kFloat), bias.defined() ? bias.to(at::kFloat) : at::Tensor());
  if (residual.defined()) output = output + residual.to(at::kFloat);
  return output;
}

const char* name_of(RowTransform transform) {
  switch (transform) {
    case RowTransform::kNone: return "none";
    case RowTransform::kRmsNorm: return "rms_norm";
    case RowTransform::kSwiglu: return "swiglu";
  }
  return "?";
}

TEST_F(RowLinearCudaTest, MatchesFloat32ForEveryTransformAndRowCount) {
  const int64_t out = 1001;
  for (const int64_t in : {2048, 8200}) {
    const at::Tensor weight = at::randn({out, in}, kBf16) * (1.0 / std::sqrt(static_cast<double>(in)));
    const at::Tensor bias = at::randn({out}, kBf16);
    for (const RowTransform transform : {RowTransform::kNone, RowTransform::kRmsNorm, RowTransform::kSwiglu}) {
      LinearInput first;
      first.transform = transform;
      first.norm_weight = at::randn({in}, kBf16);
      first.epsilon = 1e-5;
      const int64_t width = transform == RowTransform::kSwiglu ? 2 * in : in;
      for (const int64_t rows : {1, 2, 3, 5, 8}) {
        const at::Tensor input = at::randn({rows, 1, width}, kBf16);
        const at::Tensor residual = at::randn({rows, 1, out}, kBf16);
        for (const bool extras : {false, true}) {
          const at::Tensor b = extras ? bias : at::Tensor();
          const at::Tensor r = extras ? residual : at::Tensor();
          const std::string what = std::string(name_of(transform)) + ", " + std::to_string(rows) + " rows of " +
                                   std::to_string(in) + (extras ? ", bias and residual" : "") +
                                   (row_linear_fits(rows, in) ? "" : " (unfused)");
          const at::Tensor got = decode_linear(input, weight, b, first, r);
          expect_close(got, reference(input, weight, b, first, r), what);
          EXPECT_TRUE(at::equal(got, decode_linear(input, weight, b, first, r))) << what << ": a second run differs";
        }
      }
    }
  }
}

TEST_F(RowLinearCudaTest, TakesTheRowsAndWidthsItStagesAndLeavesTheRestToTheUnfusedOps) {
  EXPECT_TRUE(row_linear_fits(1, 8192));
  EXPECT_TRUE(row_linear_fits(2, 8192));
  EXPECT_FALSE(row_linear_fits(3, 64));     // more rows than the kernel sums
  EXPECT_FALSE(row_linear_fits(2, 16384));  // 64 KiB of staged input
  EXPECT_FALSE(row_linear_fits(1, 2044));   // not a multiple of 8
  // A misaligned input (a view 2 bytes in) takes the unfused ops and gives the same values.
  const at::Tensor weight = at::randn({300, 64}, kBf16);
  const at::Tensor values = at::randn({1, 64}, kBf16);
  const at::Tensor misaligned = at::empty({1, 72}, kBf16).narrow(1, 1, 64).copy_(values);
  ASSERT_NE(reinterpret_cast<uintptr_t>(misaligned.data_ptr()) % 16, 0u);
  expect_close(decode_linear(misaligned, weight, {}), reference(values, weight, {}, {}, {}), "misaligned view");
}

LinearInput rms_norm_input(const at::Tensor& norm_weight) {
  LinearInput norm;
  norm.transform = RowTransform::kRmsNorm;
  norm.norm_weight = norm_weight;
  norm.epsilon = 1e-6;
  return norm;
}

LinearInput swiglu_input() {
  LinearInput swiglu;
  swiglu.transform = RowTransform::kSwiglu;
  return swiglu;
}

/// Norm + QKV-sized projection, then SwiGLU + down projection + residual, then the output layer: each
/// launch reads the one before.
at::Tensor chain(const at::Tensor& hidden, const std::vector<at::Tensor>& weights, const at::Tensor& norm_weight) {
  const LinearInput norm = rms_norm_input(norm_weight);
  const LinearInput swiglu = swiglu_input();
  const at::Tensor up = decode_linear(hidden, weights[0], {}, norm);
  const at::Tensor down = decode_linear(up, weights[1], {}, swiglu, hidden);
  return decode_linear(down, weights[2], {}, norm);
}

TEST_F(RowLinearCudaTest, DependentLaunchesMatchSynchronisedOnesAndReplayInAGraph) {
  const int64_t hidden_size = 1024, ffn = 2816, rows = 3;
  const std::vector<at::Tensor> weights{at::randn({2 * ffn, hidden_size}, kBf16) * 0.03,
                                        at::randn({hidden_size, ffn}, kBf16) * 0.02,
                                        at::randn({5003, hidden_size}, kBf16) * 0.03};
  const at::Tensor norm_weight = at::randn({hidden_size}, kBf16);
  const at::Tensor hidden = at::randn({rows, 1, hidden_size}, kBf16);
  const at::Tensor chained = chain(hidden, weights, norm_weight);
  // The same three launches, each waiting for the one before on the host.
  const LinearInput norm = rms_norm_input(norm_weight);
  const LinearInput swiglu = swiglu_input();
  const at::Tensor up = decode_linear(hidden, weights[0], {}, norm);
  torch::cuda::synchronize();
  const at::Tensor down = decode_linear(up, weights[1], {}, swiglu, hidden);
  torch::cuda::synchronize();
  const at::Tensor separate = decode_linear(down, weights[2], {}, norm);
  torch::cuda::synchronize();
  EXPECT_TRUE(at::equal(chained, separate));

  c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool();
  c10::cuda::CUDAStreamGuard guard(stream);
  at::cuda::CUDAGraph graph;
  at::Tensor captured;
  graph.capture_begin();
  captured = chain(hidden, weights, norm_weight);
  graph.capture_end();
  for (int replay = 0; replay < 3; ++replay) {
    graph.replay();
    stream.synchronize();
    EXPECT_TRUE(at::equal(captured, chained)) << "replay " << replay;
  }
}

TEST_F(RowLinearCudaTest, RopeIntoPagedCacheMatchesFloat32) {
  const int64_t tokens = 5, heads = 6, groups = 2, head_dim = 64, blocks = 9, block_size = 4, length = 64;
  const std::vector<int64_t> where{0, 3, 17, 17, 35};
  const std::vector<int64_t> rows{5, 30, 7, 12, 33};  // cache rows (block x 4 + offset), any order
  const at::Tensor positions = at::tensor(where, at::kLong).to(at::kCUDA);
  const at::Tensor cache_rows = at::tensor(rows, at::kLong).to(at::kCUDA);
  at::Tensor key_cache = at::randn({blocks, block_size, groups, head_dim}, kBf16);
  at::Tensor value_cache = at::randn({blocks, block_size, groups, head_dim}, kBf16);
  const at::Tensor untouched = key_cache.clone();
  const at::Tensor qkv = at::randn({tokens, (heads + 2 * groups) * head_dim}, kBf16);
  const at::Tensor angles = at::outer(at::arange(length, at::kDouble), at::rand({head_dim / 2}, at::kDouble));
  const at::Tensor cos = angles.cos().to(kBf16), sin = angles.sin().to(kBf16);
  const at::Tensor query =
      rope_into_paged_cache(qkv, positions, cache_rows, cos, sin, key_cache, value_cache, heads, groups, head_dim);
  const at::Tensor flat_keys = key_cache.view({-1, groups, head_dim});
  const at::Tensor flat_values = value_cache.view({-1, groups, head_dim});
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t position = where[static_cast<std::size_t>(t)];
    const int64_t row = rows[static_cast<std::size_t>(t)];
    const at::Tensor c = cos[position].to(at::kFloat), s = sin[position].to(at::kFloat);
    const auto rotate = [&](const at::Tensor& x) {
      const auto halves = x.chunk(2, -1);
      return at::cat({halves[0] * c - halves[1] * s, halves[1] * c + halves[0] * s}, -1);
    };
    const at::Tensor parts = qkv[t].to(at::kFloat).view({heads + 2 * groups, head_dim});
    expect_close(query[t], rotate(parts.narrow(0, 0, heads)), "rotated query");
    expect_close(flat_keys[row], rotate(parts.narrow(0, heads, groups)), "cached key");
    EXPECT_TRUE(at::equal(flat_values[row], parts.narrow(0, heads + groups, groups).to(at::kBFloat16)));
  }
  EXPECT_TRUE(at::equal(flat_keys[0], untouched.view({-1, groups, head_dim})[0])) << "other rows are untouched";
  at::Tensor key_again = untouched.clone(), value_again = at::zeros_like(value_cache);
  const at::Tensor query_again =
      rope_into_paged_cache(qkv, positions, cache_rows, cos, sin, key_again, value_again, heads, groups, head_dim);
  EXPECT_TRUE(at::equal(query_again, query));
  EXPECT_TRUE(at::equal(key_again, key_cache));
}

}  // namespace
}  // namespace graphed::kernels

// tests/kernels/training_ops_cuda_test.cpp — the fused training kernels against their ATen references
// (kernels::reference, in fp32 on the same bf16 values), forward and backward, with odd sizes and
// unaligned tails: norms of 7 to 2,050 columns over 1 to 5,000 rows, RoPE on a transposed view (head
// dims 64 and 6), SwiGLU of widths 33 and 130, cross-entropy over a 1,001-token vocabulary in chunks of
// 10 rows, AdamW over 1,003 elements and over an unaligned view. Tolerance: a few bf16 roundings, 2e-2
// of the largest value (AdamW, all fp32: 1e-5). Bit for bit: the residual add against ATen's, and norms
// accumulating their gradients in place against autograd's accumulation. Each gives the same bits from
// run to run, and a CUDA graph of forward and backward replays the eager bits.
#include <gtest/gtest.h>

#include <ATen/core/grad_mode.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/autograd/autograd.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cuda_test.h"
#include "graphed/kernels/accumulation_listeners.h"
#include "graphed/kernels/training_ops.h"

namespace graphed::kernels {
namespace {

const auto kCuda = at::TensorOptions().device(at::kCUDA);
const auto kBf16 = kCuda.dtype(at::kBFloat16);
const auto kFloat = kCuda.dtype(at::kFloat);

class TrainingOpsCudaTest : public graphed::testing::CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    at::manual_seed(5);
  }
};

void expect_close(const at::Tensor& got, const at::Tensor& want, const std::string& what, double tolerance = 2e-2) {
  ASSERT_TRUE(got.defined()) << what << ": undefined";
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const double largest = want.to(at::kFloat).abs().max().item<double>();
  const double difference = (got.to(at::kFloat) - want.to(at::kFloat)).abs().max().item<double>();
  EXPECT_LE(difference, tolerance * std::max(largest, 1e-3))
      << what << ": max difference " << difference << ", largest " << largest;
}

/// Leaves that want gradients, as copies of `tensors` (undefined stay undefined).
std::vector<at::Tensor> leaves(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.defined() ? t.detach().clone().requires_grad_(true) : at::Tensor());
  return out;
}

/// The output of `function` on fresh leaves of `inputs` and the leaves' gradients for `upstream`.
std::vector<at::Tensor> forward_backward(const std::function<at::Tensor(const std::vector<at::Tensor>&)>& function,
                                         const std::vector<at::Tensor>& inputs, const at::Tensor& upstream) {
  const std::vector<at::Tensor> x = leaves(inputs);
  const at::Tensor output = function(x);
  std::vector<at::Tensor> wanted;
  for (const auto& t : x)
    if (t.defined()) wanted.push_back(t);
  const auto grads = torch::autograd::grad({output}, wanted, {upstream.to(output.scalar_type())});
  std::vector<at::Tensor> result{output.detach()};
  result.insert(result.end(), grads.begin(), grads.end());
  return result;
}

void expect_all_close(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    expect_close(got[i], want[i], what + (i == 0 ? ", output" : ", gradient " + std::to_string(i)));
}

void expect_all_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(at::equal(a[i], b[i])) << what << ": tensor " << i << " differs";
}

TEST_F(TrainingOpsCudaTest, NormsMatchTheReferenceForwardAndBackward) {
  for (const bool layer_norm : {true, false}) {
    for (const auto input_type : {at::kFloat, at::kBFloat16}) {
      for (const auto& [rows, columns] :
           std::vector<std::pair<int64_t, int64_t>>{{1, 7}, {3, 768}, {300, 2050}, {5000, 64}}) {
        const std::string what = std::string(layer_norm ? "LayerNorm" : "RMSNorm") + ", " + c10::toString(input_type) +
                                 ", " + std::to_string(rows) + " x " + std::to_string(columns);
        const at::Tensor input = at::randn({rows, columns}, kCuda.dtype(input_type)) * 3 + 1;
        const at::Tensor weight = at::randn({columns}, kFloat);
        const at::Tensor bias = layer_norm ? at::randn({columns}, kFloat) : at::Tensor();
        const at::Tensor upstream = at::randn({rows, columns}, kBf16);
        const auto fused = [&](const std::vector<at::Tensor>& x) {
          return norm(x[0], x[1], x[2], 1e-5, at::kBFloat16);
        };
        const auto want = forward_backward(
            [&](const std::vector<at::Tensor>& x) {
              return reference::norm(x[0].to(at::kFloat), x[1], x[2], 1e-5, at::kFloat);
            },
            {input, weight, bias}, upstream.to(at::kFloat));
        const auto got = forward_backward(fused, {input, weight, bias}, upstream);
        EXPECT_EQ(got[0].scalar_type(), at::kBFloat16) << what;
        EXPECT_EQ(got[1].scalar_type(), input_type) << what << ": the input's gradient keeps its type";
        expect_all_close(got, want, what);
        expect_all_equal(got, forward_backward(fused, {input, weight, bias}, upstream), what + ", run twice");
      }
    }
  }
}

TEST_F(TrainingOpsCudaTest, NormsAccumulatingInPlaceGiveAutogradsBits) {
  for (const bool layer_norm : {true, false}) {
    const at::Tensor input = at::randn({300, 768}, kFloat);
    const at::Tensor upstream = at::randn({300, 768}, kBf16);
    const at::Tensor start = at::randn({768}, kFloat);  // gradients already accumulated (an earlier microbatch)
    std::vector<at::Tensor> grads;
    for (const bool in_place : {false, true}) {
      at::Tensor weight = at::randn({768}, kFloat).fill_(1.5).requires_grad_(true);
      at::Tensor bias = layer_norm ? at::zeros({768}, kFloat).requires_grad_(true) : at::Tensor();
      weight.mutable_grad() = start.clone();
      if (layer_norm) bias.mutable_grad() = start.clone();
      norm(input, weight, bias, 1e-5, at::kBFloat16, in_place).backward(upstream);
      grads.push_back(weight.grad());
      if (layer_norm) grads.push_back(bias.grad());
    }
    const std::size_t half = grads.size() / 2;
    for (std::size_t i = 0; i < half; ++i) {
      EXPECT_TRUE(at::equal(grads[i], grads[half + i])) << (layer_norm ? "LayerNorm" : "RMSNorm") << ", gradient " << i;
    }
  }
}

TEST_F(TrainingOpsCudaTest, ResidualNormsAddTheStreamsGradientWithAutogradsBits) {
  // residual_norm hands the stream back, so the stream's gradient reaches the norm's backward, whose kernel
  // adds it where autograd would sum the two branches: the bits of that sum, in fp32 and in bf16; a
  // transposed (non-contiguous) stream gradient takes a separate add.
  for (const bool layer_norm : {true, false}) {
    for (const auto input_type : {at::kFloat, at::kBFloat16}) {
      for (const bool contiguous : {true, false}) {
        const std::string what = std::string(layer_norm ? "LayerNorm" : "RMSNorm") + ", " + c10::toString(input_type) +
                                 (contiguous ? "" : ", transposed stream gradient");
        const at::Tensor input = at::randn({300, 768}, kCuda.dtype(input_type)) * 3 + 1;
        const at::Tensor weight = at::randn({768}, kFloat);
        const at::Tensor bias = layer_norm ? at::randn({768}, kFloat) : at::Tensor();
        const at::Tensor upstream = at::randn({300, 768}, kBf16);
        const at::Tensor stream_gradient = contiguous ? at::randn({300, 768}, kCuda.dtype(input_type))
                                                      : at::randn({768, 300}, kCuda.dtype(input_type)).t();
        std::vector<std::vector<at::Tensor>> results;
        for (const bool fused : {false, true}) {
          const at::Tensor x = input.clone().requires_grad_(true);
          const NormedStream out = fused ? residual_norm(x, weight, bias, 1e-5, at::kBFloat16)
                                         : NormedStream{x.view_as(x), norm(x, weight, bias, 1e-5, at::kBFloat16)};
          const auto grads = torch::autograd::grad({out.stream, out.normed}, {x}, {stream_gradient, upstream});
          results.push_back({out.stream.detach(), out.normed.detach(), grads[0]});
        }
        EXPECT_TRUE(at::equal(results[1][0], input)) << what << ": the stream comes back as itself";
        expect_all_equal(results[1], results[0], what);
      }
    }
  }
}

TEST_F(TrainingOpsCudaTest, LinearsAccumulatingInTheGemmGiveAutogradsSum) {
  // Megatron's gradient-accumulation fusion: the weight's gradient GEMM adds into .grad (beta = 1) where
  // autograd would add its fp32 output. The sum is the same one, rounded once either way; cuBLAS may pick
  // another kernel for beta = 1, so the test allows fp32 rounding of the sum, no more.
  const at::Tensor input = at::randn({300, 768}, kBf16);
  const at::Tensor upstream = at::randn({300, 512}, kBf16);
  const at::Tensor start = at::randn({512, 768}, kFloat);  // gradients already accumulated (an earlier microbatch)
  std::vector<at::Tensor> grads, bias_grads;
  for (const bool in_place : {false, true}) {
    at::Tensor weight = (at::randn({512, 768}, kFloat) * 0.05).requires_grad_(true);
    at::Tensor bias = at::zeros({512}, kFloat).requires_grad_(true);
    weight.mutable_grad() = start.clone();
    const at::Tensor weight_copy = weight.detach().to(at::kBFloat16);
    const at::Tensor bias_copy = bias.detach().to(at::kBFloat16);
    linear(input, weight, weight_copy, bias, bias_copy, in_place).backward(upstream);
    grads.push_back(weight.grad());
    bias_grads.push_back(bias.grad());
  }
  // A sum of 300 products rounded in fp32 by either kernel: a few units in the last place of values up to ~70.
  EXPECT_TRUE(at::allclose(grads[1], grads[0], /*rtol=*/1e-5, /*atol=*/1e-5))
      << "max difference " << (grads[1] - grads[0]).abs().max().item<float>();
  EXPECT_TRUE(at::equal(bias_grads[1], bias_grads[0]));  // the bias keeps autograd's accumulation
  // Without a .grad to add into (the first backward of a run) the gradient comes back as usual.
  at::Tensor fresh = (at::randn({512, 768}, kFloat) * 0.05).requires_grad_(true);
  linear(input, fresh, fresh.detach().to(at::kBFloat16), {}, {}, /*accumulate_in_place=*/true).backward(upstream);
  ASSERT_TRUE(fresh.grad().defined());
  EXPECT_TRUE(at::allclose(fresh.grad(), grads[0] - start, 1e-4, 1e-4));
}

TEST_F(TrainingOpsCudaTest, LinearGivesTheMastersFloat32GradientsFromTheCopies) {
  const at::Tensor input = at::randn({3, 5, 72}, kBf16);
  const at::Tensor weight = at::randn({33, 72}, kFloat) * 0.1;
  const at::Tensor bias = at::randn({33}, kFloat);
  const at::Tensor upstream = at::randn({3, 5, 33}, kBf16);
  for (const bool with_bias : {true, false}) {
    const at::Tensor b = with_bias ? bias : at::Tensor();
    const at::Tensor weight_copy = weight.to(at::kBFloat16);
    const at::Tensor bias_copy = with_bias ? bias.to(at::kBFloat16) : at::Tensor();
    const auto fused = [&](const std::vector<at::Tensor>& x) {
      return linear(x[0], x[1], weight_copy, x[2], bias_copy);
    };
    const auto got = forward_backward(fused, {input, weight, b}, upstream);
    const auto want = forward_backward(
        [&](const std::vector<at::Tensor>& x) {
          // The copies' values, in fp32: what the GEMMs read.
          const at::Tensor w = x[1] + (weight_copy.to(at::kFloat) - weight).detach();
          const at::Tensor bb = with_bias ? x[2] + (bias_copy.to(at::kFloat) - bias).detach() : at::Tensor();
          return reference::linear(x[0].to(at::kFloat), w, bb);
        },
        {input, weight, b}, upstream.to(at::kFloat));
    const std::string what = with_bias ? "linear with bias" : "linear";
    EXPECT_EQ(got[2].scalar_type(), at::kFloat) << what << ": the master's gradient is fp32";
    expect_all_close(got, want, what);
    expect_all_equal(got, forward_backward(fused, {input, weight, b}, upstream), what + ", run twice");
  }
}

TEST_F(TrainingOpsCudaTest, RopeOfATransposedViewMatchesTheReference) {
  for (const int64_t head_dim : {int64_t{64}, int64_t{6}}) {  // pairs of values per load; one (odd half)
    const int64_t batch = 2, seq = 9, heads = 6;
    const at::Tensor angles = at::outer(at::arange(16, kFloat), at::rand({head_dim / 2}, kFloat));
    const at::Tensor cos = angles.cos(), sin = angles.sin();
    const at::Tensor input = at::randn({batch, seq, heads, head_dim}, kBf16).transpose(1, 2);  // [b, heads, s, d] view
    const at::Tensor upstream = at::randn({batch, heads, seq, head_dim}, kBf16);
    const auto fused = [&](const std::vector<at::Tensor>& x) { return rope(x[0], cos, sin); };
    const auto got = forward_backward(fused, {input}, upstream);
    const auto want = forward_backward(
        [&](const std::vector<at::Tensor>& x) { return reference::rope(x[0].to(at::kFloat), cos, sin); }, {input},
        upstream.to(at::kFloat));
    expect_all_close(got, want, "rope, head_dim " + std::to_string(head_dim));
    expect_all_equal(got, forward_backward(fused, {input}, upstream), "rope, run twice");
  }
}

TEST_F(TrainingOpsCudaTest, SwigluOfOddAndEvenWidthMatchesTheReference) {
  for (const int64_t width : {int64_t{33}, int64_t{130}}) {  // one value per load; pairs
    const at::Tensor input = at::randn({3, 7, 2 * width}, kBf16) * 2;
    const at::Tensor upstream = at::randn({3, 7, width}, kBf16);
    const auto fused = [&](const std::vector<at::Tensor>& x) { return swiglu(x[0]); };
    const auto got = forward_backward(fused, {input}, upstream);
    const auto want =
        forward_backward([&](const std::vector<at::Tensor>& x) { return reference::swiglu(x[0].to(at::kFloat)); },
                         {input}, upstream.to(at::kFloat));
    expect_all_close(got, want, "swiglu, width " + std::to_string(width));
    expect_all_equal(got, forward_backward(fused, {input}, upstream), "swiglu, run twice");
  }
}

TEST_F(TrainingOpsCudaTest, ResidualAddOfAnFp32StreamAndABf16UpdateMatchesTheReference) {
  for (const auto& shape : std::vector<std::vector<int64_t>>{{3, 5, 7}, {4, 16}}) {  // one value per load; four
    const at::Tensor hidden = at::randn(shape, kFloat);
    const at::Tensor update = at::randn(shape, kBf16);
    const at::Tensor upstream = at::randn(shape, kFloat);
    const auto fused = [&](const std::vector<at::Tensor>& x) { return residual_add(x[0], x[1]); };
    const auto got = forward_backward(fused, {hidden, update}, upstream);
    const auto want =
        forward_backward([&](const std::vector<at::Tensor>& x) { return reference::residual_add(x[0], x[1]); },
                         {hidden, update}, upstream);
    expect_all_equal(got, want, "residual add of " + std::to_string(hidden.numel()) + " values");
    EXPECT_EQ(got[2].scalar_type(), at::kBFloat16);
  }
}

TEST_F(TrainingOpsCudaTest, ChunkedLinearCrossEntropyMatchesTheReference) {
  const int64_t rows = 37, hidden = 64, vocab = 1001;
  const at::Tensor input = at::randn({rows, hidden}, kBf16);
  const at::Tensor weight = at::randn({vocab, hidden}, kFloat) * 0.3;
  const at::Tensor weight_copy = weight.to(at::kBFloat16);
  const at::Tensor labels = at::randint(0, vocab, {rows}, kCuda.dtype(at::kLong));
  const at::Tensor upstream = at::full({}, 0.5, kFloat);  // a scaled loss (microbatches)
  const auto want = forward_backward(
      [&](const std::vector<at::Tensor>& x) {
        const at::Tensor w = x[1] + (weight_copy.to(at::kFloat) - weight).detach();
        const at::Tensor logits = at::linear(x[0].to(at::kFloat), w);
        const at::Tensor rounded = logits + (logits.to(at::kBFloat16).to(at::kFloat) - logits).detach();  // bf16 logits
        return at::cross_entropy_loss(rounded, labels);
      },
      {input, weight}, upstream);
  for (const int64_t chunk_rows : {int64_t{10}, rows}) {  // four chunks (the last of 7 rows), and one
    const auto fused = [&](const std::vector<at::Tensor>& x) {
      return linear_cross_entropy(x[0], x[1], weight_copy, labels, /*accumulate_in_place=*/false,
                                  chunk_rows * vocab * 2);
    };
    const auto got = forward_backward(fused, {input, weight}, upstream);
    const std::string what = "cross-entropy in chunks of " + std::to_string(chunk_rows) + " rows";
    EXPECT_EQ(got[2].scalar_type(), at::kFloat) << what;
    expect_all_close(got, want, what);
    expect_all_equal(got, forward_backward(fused, {input, weight}, upstream), what + ", run twice");
  }
  at::NoGradGuard no_grad;  // evaluation: the loss alone
  expect_close(linear_cross_entropy(input, weight, weight_copy, labels), want[0], "cross-entropy without grad");
}

TEST_F(TrainingOpsCudaTest, LinearCrossEntropyAccumulatingInPlaceGivesAutogradsBits) {
  // The output weight's gradient times the incoming one, added into .grad in one kernel, against autograd's
  // product and AccumulateGrad's add: the same bits where the scale is a power of two (1 / microbatches).
  const int64_t rows = 37, hidden = 64, vocab = 1001;
  const at::Tensor input = at::randn({rows, hidden}, kBf16);
  const at::Tensor labels = at::randint(0, vocab, {rows}, kCuda.dtype(at::kLong));
  const at::Tensor start = at::randn({vocab, hidden}, kFloat);  // an earlier microbatch's gradient
  const at::Tensor initial = at::randn({vocab, hidden}, kFloat) * 0.02;
  for (const double scale : {1.0, 0.125, 1.0 / 3.0}) {
    std::vector<at::Tensor> grads;
    for (const bool in_place : {false, true}) {
      at::Tensor weight = initial.clone().requires_grad_(true);
      weight.mutable_grad() = start.clone();
      const at::Tensor loss = linear_cross_entropy(input, weight, weight.detach().to(at::kBFloat16), labels, in_place);
      (loss * scale).backward();
      grads.push_back(weight.grad());
    }
    if (scale != 1.0 / 3.0) {
      EXPECT_TRUE(at::equal(grads[0], grads[1])) << "scale " << scale;
    } else {  // an inexact product: one rounding fewer where the kernel fuses it, so fp32 rounding apart
      expect_close(grads[1], grads[0], "scale 1/3", 1e-6);
    }
  }
}

TEST_F(TrainingOpsCudaTest, InPlaceAccumulationsTellTheListenersOncePerParameter) {
  // What the data-parallel reducer counts on: each parameter whose gradient a kernel added in place is heard
  // once per backward (LayerNorm's weight and bias, the linear's weight, the output layer's weight).
  std::map<const void*, int> heard;
  const int64_t listener =
      add_accumulation_listener([&](const at::Tensor& parameter) { ++heard[parameter.data_ptr()]; });
  const auto with_gradient = [](at::Tensor t) {
    t.requires_grad_(true);
    t.mutable_grad() = at::zeros_like(t);
    return t;
  };
  const at::Tensor norm_weight = with_gradient(at::ones({64}, kFloat));
  const at::Tensor norm_bias = with_gradient(at::zeros({64}, kFloat));
  const at::Tensor linear_weight = with_gradient(at::randn({64, 64}, kFloat) * 0.1);
  const at::Tensor output_weight = with_gradient(at::randn({101, 64}, kFloat) * 0.1);
  const at::Tensor input = at::randn({16, 64}, kFloat).requires_grad_(true);
  const at::Tensor normed = norm(input, norm_weight, norm_bias, 1e-5, at::kBFloat16, /*accumulate_in_place=*/true);
  const at::Tensor hidden = linear(normed, linear_weight, linear_weight.detach().to(at::kBFloat16), {}, {}, true);
  const at::Tensor labels = at::randint(0, 101, {16}, kCuda.dtype(at::kLong));
  linear_cross_entropy(hidden, output_weight, output_weight.detach().to(at::kBFloat16), labels, true).backward();
  remove_accumulation_listener(listener);
  for (const at::Tensor* parameter : {&norm_weight, &norm_bias, &linear_weight, &output_weight}) {
    EXPECT_EQ(heard[parameter->data_ptr()], 1) << "a parameter of " << parameter->sizes();
  }
  EXPECT_EQ(heard.size(), 4u);
}

TEST_F(TrainingOpsCudaTest, FlatAdamWMatchesTheReferenceAlignedAndNot) {
  const AdamWSettings settings;
  for (const int64_t offset : {0, 1}) {  // offset 1: 4-byte aligned views, the scalar loop
    const int64_t n = 1003;
    const auto state = [&](at::Tensor t) { return t.narrow(0, offset, n); };
    at::Tensor p = state(at::randn({n + 1}, kFloat)), m = state(at::zeros({n + 1}, kFloat)),
               v = state(at::zeros({n + 1}, kFloat));
    at::Tensor p2 = p.clone(), m2 = m.clone(), v2 = v.clone();
    at::Tensor copy = state(at::empty({n + 1}, kBf16)), copy2 = at::empty({n}, kBf16);
    const at::Tensor lr = at::full({}, 1e-2, kFloat), step = at::zeros({}, kFloat), scale = at::full({}, 2.0, kFloat);
    for (int iteration = 0; iteration < 3; ++iteration) {
      const at::Tensor g = at::randn({n}, kFloat);
      step.add_(1);
      adamw_step(p, g, m, v, copy, lr, step, scale, settings);
      reference::adamw_step(p2, g, m2, v2, copy2, lr, step, scale, settings);
    }
    const std::string what = "AdamW, offset " + std::to_string(offset);
    expect_close(p, p2, what + ", parameters", 1e-5);
    expect_close(m, m2, what + ", first moment", 1e-5);
    expect_close(v, v2, what + ", second moment", 1e-5);
    EXPECT_TRUE(at::equal(copy, p.to(at::kBFloat16))) << what << ": the copy is the parameters rounded to bf16";
  }
}

TEST_F(TrainingOpsCudaTest, AGraphOfForwardAndBackwardReplaysTheEagerBits) {
  const at::Tensor hidden_states = at::randn({4, 16, 128}, kFloat);
  const at::Tensor norm_weight = at::randn({128}, kFloat);
  const at::Tensor weight = (at::randn({256, 128}, kFloat) * 0.05).requires_grad_(true);
  const at::Tensor weight_copy = weight.detach().to(at::kBFloat16);
  const at::Tensor labels = at::randint(0, 256, {64}, kCuda.dtype(at::kLong));
  const auto step = [&](const at::Tensor& input) {
    const at::Tensor x = input.detach().requires_grad_(true);
    const at::Tensor normed = norm(x, norm_weight, {}, 1e-5, at::kBFloat16);
    const at::Tensor gated = swiglu(linear(normed, weight, weight_copy, {}, {}));  // [4, 16, 128]
    const at::Tensor loss = linear_cross_entropy(gated.reshape({64, 128}), weight, weight_copy, labels);
    const auto grads = torch::autograd::grad({loss}, {x, weight});
    return std::vector<at::Tensor>{loss.detach(), grads[0], grads[1]};
  };
  const auto eager = step(hidden_states);
  c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool();
  std::vector<at::Tensor> captured;
  {
    c10::cuda::CUDAStreamGuard guard(stream);
    step(hidden_states);  // warm up on the capture stream
    at::cuda::CUDAGraph graph;
    graph.capture_begin();
    captured = step(hidden_states);
    graph.capture_end();
    graph.replay();
    stream.synchronize();
  }
  expect_all_equal(captured, eager, "graph replay against eager");
}

}  // namespace
}  // namespace graphed::kernels

// tests/kernels/fp8_linear_cuda_test.cpp — FP8 casts and linears (kernels/fp8_linear.h) on the GPU: a current-
// scaled cast maps the amax to the format's largest value and multiplies back within the format's rounding;
// a delayed cast uses its slot's scale and records the amax; the linear's output and both gradients stay
// within FP8's error of the bf16 product (relative norm of the difference); the weight's gradient accumulates
// in place where asked (telling the accumulation listeners once), inside the GEMM; the same inputs give the same bits
// twice, and a CUDA graph replays the eager bits. A cast's transpose is the transposed cast, bit for bit; a cast
// in place writes a fresh cast's bytes; SwiGLU's fused cast and linear, and the norm that writes E4M3 with its
// linear, equal the two apart.
#include <gtest/gtest.h>

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <string>
#include <vector>

#include "cuda_test.h"
#include "graphed/kernels/accumulation_listeners.h"
#include "graphed/kernels/fp8_gemm.h"
#include "graphed/kernels/fp8_linear.h"
#include "graphed/kernels/training_ops.h"

namespace graphed::kernels {
namespace {

const auto kCuda = at::TensorOptions().device(at::kCUDA);
const auto kBf16 = kCuda.dtype(at::kBFloat16);
const auto kFloat = kCuda.dtype(at::kFloat);

class Fp8LinearCudaTest : public graphed::testing::CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    std::string why_not;
    if (!fp8_supported(at::Device(at::kCUDA, 0), &why_not)) GTEST_SKIP() << why_not;
    at::manual_seed(11);
  }
};

/// |got - want| / |want| over the whole tensor.
double relative_error(const at::Tensor& got, const at::Tensor& want) {
  const at::Tensor difference = got.to(at::kDouble) - want.to(at::kDouble);
  return (difference.norm() / want.to(at::kDouble).norm()).item<double>();
}

/// A weight's E4M3 cast with its transpose, current scaling: what fp8_linear reads.
Fp8Tensor weight_cast(const at::Tensor& weight) {
  return quantize_fp8(weight, Fp8Format::kE4M3, {}, false, /*transpose=*/true);
}

bool same_bytes(const at::Tensor& a, const at::Tensor& b) { return at::equal(a.view(at::kByte), b.view(at::kByte)); }

TEST_F(Fp8LinearCudaTest, CurrentScalingMapsTheAmaxToTheLargestValue) {
  const at::Tensor x = at::randn({64, 96}, kBf16) * 3;
  for (const Fp8Format format : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    const Fp8Tensor quantized = quantize_fp8(x, format);
    ASSERT_EQ(quantized.data.sizes(), x.sizes());
    EXPECT_EQ(quantized.data.element_size(), 1);
    const double amax = x.abs().max().item<double>();
    const at::Tensor back = quantized.data.to(at::kFloat) * quantized.scale_inverse;
    EXPECT_NEAR(back.abs().max().item<double>(), amax, amax * 1e-6);  // the amax itself is exact
    EXPECT_NEAR(quantized.scale_inverse.item<double>() * fp8_max(format), amax, amax * 1e-6);
    // E4M3 keeps 3 mantissa bits (relative error up to 1/16), E5M2 2 (1/8), for values far from the bottom.
    EXPECT_LT(relative_error(back, x), format == Fp8Format::kE4M3 ? 0.04 : 0.08);
  }
}

TEST_F(Fp8LinearCudaTest, DelayedScalingUsesTheSlotAndRecordsTheAmax) {
  Fp8ScalingState state(3, Fp8Format::kE4M3, DelayedScaling{}, at::Device(at::kCUDA, 0));
  const at::Tensor x = at::randn({32, 48}, kBf16);
  const Fp8Slot slot = slot_of(state, 1);
  const Fp8Tensor first = quantize_fp8(x, Fp8Format::kE4M3, slot, /*record=*/true);
  EXPECT_EQ(first.scale_inverse.item<float>(), 1.0f);  // the scale starts at 1
  EXPECT_EQ(state.amax_history()[0][1].item<float>(), x.abs().max().to(at::kFloat).item<float>());
  EXPECT_EQ(state.amax_history()[0][0].item<float>(), 0.0f);  // other slots untouched
  state.update();
  const Fp8Tensor second = quantize_fp8(x, Fp8Format::kE4M3, slot, /*record=*/false);
  EXPECT_FLOAT_EQ(second.scale_inverse.item<float>(), x.abs().max().to(at::kFloat).item<float>() / 448.0f);
  EXPECT_EQ(state.amax_history()[0][1].item<float>(), 0.0f);  // not recorded
  EXPECT_LT(relative_error(second.data.to(at::kFloat) * second.scale_inverse, x), 0.04);
}

TEST_F(Fp8LinearCudaTest, TheCastWritesItsTransposeBitForBit) {
  // Whole 64 x 64 tiles, edge tiles, and a shape the tiled kernel does not take (rows not a multiple of 4).
  const std::vector<std::vector<int64_t>> shapes = {{128, 192}, {100, 36}, {4, 260}, {6, 10}};
  for (const auto& shape : shapes) {
    const at::Tensor x = at::randn(shape, kBf16) * 5;
    for (const Fp8Format format : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
      const Fp8Tensor plain = quantize_fp8(x, format);
      const Fp8Tensor both = quantize_fp8(x, format, {}, false, /*transpose=*/true);
      ASSERT_TRUE(both.transposed.defined());
      ASSERT_EQ(both.transposed.sizes(), (std::vector<int64_t>{shape[1], shape[0]}));
      EXPECT_TRUE(at::equal(both.data.view(at::kByte), plain.data.view(at::kByte))) << shape[0] << "x" << shape[1];
      EXPECT_TRUE(at::equal(both.transposed.view(at::kByte), plain.data.t().contiguous().view(at::kByte)))
          << shape[0] << "x" << shape[1];
    }
  }
  // A delayed cast with its transpose records the same amax as without.
  Fp8ScalingState state(1, Fp8Format::kE4M3, DelayedScaling{}, at::Device(at::kCUDA, 0));
  const at::Tensor x = at::randn({96, 64}, kBf16);
  quantize_fp8(x, Fp8Format::kE4M3, slot_of(state, 0), /*record=*/true, /*transpose=*/true);
  EXPECT_EQ(state.amax_history()[0][0].item<float>(), x.abs().max().to(at::kFloat).item<float>());
}

struct LinearRun {
  at::Tensor output, grad_input, grad_weight, grad_bias;
};

LinearRun run_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& upstream,
                     const Fp8LinearRecipe& recipe) {
  const at::Tensor input = x.detach().clone().requires_grad_(true);
  const at::Tensor master = weight.detach().to(at::kFloat).requires_grad_(true);
  const at::Tensor master_bias = bias.detach().to(at::kFloat).requires_grad_(true);
  const at::Tensor output = fp8_linear(input, master, weight_cast(weight), master_bias, bias, recipe,
                                       Fp8LinearScaling{}, /*accumulate_in_place=*/false, /*record_amax=*/false);
  output.backward(upstream);
  return {output.detach(), input.grad(), master.grad(), master_bias.grad()};
}

TEST_F(Fp8LinearCudaTest, LinearStaysWithinFp8ErrorOfBf16) {
  const at::Tensor x = at::randn({4, 64, 128}, kBf16);
  const at::Tensor weight = (at::randn({96, 128}, kBf16) * 0.05).to(at::kBFloat16);
  const at::Tensor bias = at::randn({96}, kBf16);
  const at::Tensor upstream = at::randn({4, 64, 96}, kBf16);
  const at::Tensor reference_input = x.to(at::kFloat).detach().requires_grad_(true);
  const at::Tensor reference_weight = weight.to(at::kFloat).detach().requires_grad_(true);
  const at::Tensor reference = at::linear(reference_input, reference_weight, bias.to(at::kFloat));
  reference.backward(upstream.to(at::kFloat));
  for (const bool hybrid : {false, true}) {
    for (const bool fp8_weight_gradient : {true, false}) {
      const Fp8LinearRecipe recipe{hybrid ? Fp8Format::kE5M2 : Fp8Format::kE4M3, fp8_weight_gradient};
      const LinearRun run = run_linear(x, weight, bias, upstream, recipe);
      const std::string what = std::string(hybrid ? "hybrid" : "e4m3") + (fp8_weight_gradient ? "" : ", bf16 wgrad");
      EXPECT_EQ(run.output.scalar_type(), at::kBFloat16) << what;
      EXPECT_EQ(run.grad_weight.scalar_type(), at::kFloat) << what;
      EXPECT_LT(relative_error(run.output, reference), 0.06) << what;
      EXPECT_LT(relative_error(run.grad_input, reference_input.grad()), hybrid ? 0.12 : 0.06) << what;
      EXPECT_LT(relative_error(run.grad_weight, reference_weight.grad()), hybrid ? 0.12 : 0.06) << what;
      EXPECT_LT(relative_error(run.grad_bias, upstream.to(at::kFloat).sum(at::IntArrayRef{0, 1})), 1e-2) << what;
      const LinearRun again = run_linear(x, weight, bias, upstream, recipe);
      EXPECT_TRUE(at::equal(again.output, run.output) && at::equal(again.grad_input, run.grad_input) &&
                  at::equal(again.grad_weight, run.grad_weight))
          << what << ": not the same bits twice";
    }
  }
}

TEST_F(Fp8LinearCudaTest, AccumulatesTheWeightGradientInPlace) {
  const at::Tensor x = at::randn({64, 32}, kBf16);
  const at::Tensor weight = at::randn({16, 32}, kBf16);
  const at::Tensor upstream = at::randn({64, 16}, kBf16);
  const at::Tensor master = weight.to(at::kFloat).requires_grad_(true);
  master.mutable_grad() = at::ones_like(master);
  int heard = 0;  // the in-place path tells the listeners (the data-parallel reducer) once
  const int64_t listener = add_accumulation_listener([&](const at::Tensor& parameter) {
    if (parameter.is_same(master)) ++heard;
  });
  const at::Tensor output =
      fp8_linear(x, master, weight_cast(weight), {}, {}, Fp8LinearRecipe{}, {}, /*accumulate_in_place=*/true, false);
  output.backward(upstream);
  remove_accumulation_listener(listener);
  EXPECT_EQ(heard, 1);
  const LinearRun fresh = run_linear(x, weight, at::zeros({16}, kBf16), upstream, Fp8LinearRecipe{});
  // Added inside the GEMM (kernels/fp8_gemm.h), whose kernel may sum in another order than the fresh one's.
  EXPECT_TRUE(at::allclose(master.grad(), fresh.grad_weight + 1, 1e-5, 1e-5)) << "the gradient was not added to .grad";
}

TEST_F(Fp8LinearCudaTest, TheWeightGradientGemmAddsIntoFp32InPlace) {
  const int64_t rows = 128, in = 96, out = 48;
  const at::Tensor dy = at::randn({rows, out}, kBf16);
  const at::Tensor x = at::randn({rows, in}, kBf16);
  for (const Fp8Format format : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    const Fp8Tensor gradient = quantize_fp8(dy, format, {}, false, /*transpose=*/true);
    const Fp8Tensor input = quantize_fp8(x, Fp8Format::kE4M3, {}, false, /*transpose=*/true);
    const at::Tensor before = at::randn({out, in}, kFloat);
    at::Tensor sum = before.clone();
    ASSERT_TRUE(
        fp8_gemm_accumulate(gradient.transposed, gradient.scale_inverse, input.transposed, input.scale_inverse, sum))
        << "cuBLASLt's FP8 GEMM into fp32 with beta = 1 is not available here";
    // The reference in fp64 on the CPU (a CUDA fp32 matmul may take TF32).
    const auto dequantized = [](const Fp8Tensor& t) {
      return t.data.to(at::kDouble).cpu() * t.scale_inverse.item<double>();
    };
    const at::Tensor want = before.to(at::kDouble).cpu() + at::matmul(dequantized(gradient).t(), dequantized(input));
    // Hopper's FP8 tensor cores sum with about 14 bits of mantissa within a block of k (1.0e-4 to 1.3e-4 here);
    // overwriting instead of adding would miss by about |before| / |want|, about 0.1.
    EXPECT_LT(relative_error(sum.cpu(), want), 1e-3) << (format == Fp8Format::kE5M2 ? "e5m2" : "e4m3");
  }
}

TEST_F(Fp8LinearCudaTest, AGraphReplaysTheEagerBits) {
  Fp8ScalingState forward(2, Fp8Format::kE4M3, DelayedScaling{}, at::Device(at::kCUDA, 0));
  Fp8ScalingState backward(1, Fp8Format::kE5M2, DelayedScaling{}, at::Device(at::kCUDA, 0));
  const Fp8LinearScaling scaling{slot_of(forward, 0), slot_of(backward, 0)};
  const Fp8LinearRecipe recipe{Fp8Format::kE5M2, true};
  const at::Tensor x = at::randn({128, 64}, kBf16);
  const at::Tensor weight = at::randn({32, 64}, kBf16);
  const at::Tensor upstream = at::randn({128, 32}, kBf16);
  const at::Tensor master = weight.to(at::kFloat).requires_grad_(true);
  const at::Tensor input = x.clone().requires_grad_(true);
  const Fp8Tensor cast = empty_fp8_matrix(weight, Fp8Format::kE4M3);
  const auto step = [&] {  // the weight's cast, forward, backward and the scales' update, as one training step
    input.mutable_grad() = at::Tensor();
    master.mutable_grad() = at::Tensor();
    quantize_fp8_into(weight, Fp8Format::kE4M3, slot_of(forward, 1), /*record=*/true, cast);
    fp8_linear(input, master, cast, {}, {}, recipe, scaling, false, /*record_amax=*/true).backward(upstream);
    const at::Tensor result = at::cat({input.grad().to(at::kFloat).flatten(), master.grad().flatten()});
    forward.update();
    backward.update();
    return result;
  };
  std::vector<at::Tensor> eager;
  for (int i = 0; i < 3; ++i) eager.push_back(step().clone());
  // Back to the state before the eager steps: scales 1, history empty.
  for (auto* state : {&forward, &backward}) {
    state->scale().fill_(1);
    state->scale_inverse().fill_(1);
    state->amax_history().zero_();
  }
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  at::cuda::CUDAGraph graph;
  at::Tensor captured;
  {
    c10::cuda::CUDAStreamGuard guard(side);
    // One eager step on the side stream (warmup), then capture; reset the state again afterwards.
    step();
    for (auto* state : {&forward, &backward}) {
      state->scale().fill_(1);
      state->scale_inverse().fill_(1);
      state->amax_history().zero_();
    }
    graph.capture_begin();
    captured = step();
    graph.capture_end();
  }
  for (auto* state : {&forward, &backward}) {
    state->scale().fill_(1);
    state->scale_inverse().fill_(1);
    state->amax_history().zero_();
  }
  for (int i = 0; i < 3; ++i) {
    graph.replay();
    EXPECT_TRUE(at::equal(captured, eager[static_cast<std::size_t>(i)])) << "replay " << i << " differs from eager";
  }
}

TEST_F(Fp8LinearCudaTest, ACastInPlaceWritesTheCastsBytes) {
  const at::Tensor weight = at::randn({96, 64}, kBf16);
  Fp8ScalingState state(1, Fp8Format::kE4M3, DelayedScaling{}, at::Device(at::kCUDA, 0));
  state.scale().fill_(3);
  state.scale_inverse().fill_(1.0 / 3);
  const Fp8Tensor cast = empty_fp8_matrix(weight, Fp8Format::kE4M3);
  const void* address = cast.data.data_ptr();
  quantize_fp8_into(weight, Fp8Format::kE4M3, slot_of(state, 0), /*record=*/true, cast);
  const Fp8Tensor fresh = quantize_fp8(weight, Fp8Format::kE4M3, slot_of(state, 0), false, /*transpose=*/true);
  EXPECT_EQ(cast.data.data_ptr(), address);
  EXPECT_TRUE(same_bytes(cast.data, fresh.data) && same_bytes(cast.transposed, fresh.transposed));
  EXPECT_TRUE(at::equal(cast.scale_inverse, fresh.scale_inverse));
  EXPECT_EQ(state.amax_history()[0][0].item<float>(), weight.abs().max().to(at::kFloat).item<float>());
  // Current scaling too.
  quantize_fp8_into(weight, Fp8Format::kE4M3, {}, false, cast);
  const Fp8Tensor current = weight_cast(weight);
  EXPECT_TRUE(same_bytes(cast.data, current.data) && same_bytes(cast.transposed, current.transposed));
  EXPECT_TRUE(at::equal(cast.scale_inverse, current.scale_inverse));
}

TEST_F(Fp8LinearCudaTest, TheSwigluCastEqualsSwigluThenTheCastBitForBit) {
  // Whole tiles, edge tiles, and widths the fused kernel does not take (SwiGLU first, then the cast).
  const std::vector<std::vector<int64_t>> shapes = {{128, 384}, {100, 72}, {6, 20}};
  for (const auto& shape : shapes) {
    const at::Tensor x = at::randn(shape, kBf16) * 3;
    const at::Tensor activated = swiglu(x);
    const std::string what = std::to_string(shape[0]) + "x" + std::to_string(shape[1]);
    for (const Fp8Format format : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
      const Fp8Tensor fused = quantize_fp8(x, format, {}, false, true, Fp8InputTransform::kSwiglu);
      const Fp8Tensor apart = quantize_fp8(activated, format, {}, false, true);
      EXPECT_TRUE(same_bytes(fused.data, apart.data) && same_bytes(fused.transposed, apart.transposed)) << what;
      EXPECT_TRUE(at::equal(fused.scale_inverse, apart.scale_inverse)) << what << ": current scaling's amax";
    }
    Fp8ScalingState state(2, Fp8Format::kE4M3, DelayedScaling{}, at::Device(at::kCUDA, 0));
    state.scale().fill_(5);
    const Fp8Tensor fused =
        quantize_fp8(x, Fp8Format::kE4M3, slot_of(state, 0), /*record=*/true, false, Fp8InputTransform::kSwiglu);
    const Fp8Tensor apart = quantize_fp8(activated, Fp8Format::kE4M3, slot_of(state, 1), /*record=*/true);
    EXPECT_TRUE(same_bytes(fused.data, apart.data)) << what << ", delayed";
    EXPECT_FALSE(fused.transposed.defined());
    EXPECT_EQ(state.amax_history()[0][0].item<float>(), state.amax_history()[0][1].item<float>()) << what;
  }
}

TEST_F(Fp8LinearCudaTest, ASwigluFusedLinearEqualsSwigluThenTheLinear) {
  const at::Tensor x = at::randn({2, 64, 192}, kBf16);
  const at::Tensor weight = (at::randn({80, 96}, kBf16) * 0.1).to(at::kBFloat16);
  const at::Tensor upstream = at::randn({2, 64, 80}, kBf16);
  const Fp8Tensor cast = weight_cast(weight);
  const Fp8LinearRecipe recipe{Fp8Format::kE5M2, true};
  const auto run = [&](bool fused) {
    const at::Tensor input = x.clone().requires_grad_(true);
    const at::Tensor master = weight.to(at::kFloat).requires_grad_(true);
    const at::Tensor output =
        fused ? fp8_linear(input, master, cast, {}, {}, recipe, {}, false, false, Fp8InputTransform::kSwiglu)
              : fp8_linear(swiglu(input), master, cast, {}, {}, recipe, {}, false, false);
    output.backward(upstream);
    return std::vector<at::Tensor>{output.detach(), input.grad(), master.grad()};
  };
  const std::vector<at::Tensor> fused = run(true);
  const std::vector<at::Tensor> apart = run(false);
  EXPECT_EQ(fused[1].sizes(), x.sizes());
  EXPECT_TRUE(at::equal(fused[0], apart[0])) << "the output";
  EXPECT_TRUE(at::equal(fused[1], apart[1])) << "the input's gradient";
  EXPECT_TRUE(at::equal(fused[2], apart[2])) << "the weight's gradient";
}

TEST_F(Fp8LinearCudaTest, ANormFusedLinearEqualsTheNormThenTheLinear) {
  const at::Tensor weight = (at::randn({96, 128}, kBf16) * 0.1).to(at::kBFloat16);
  const at::Tensor upstream = at::randn({2, 32, 96}, kBf16);
  const at::Tensor stream_upstream = at::randn({2, 32, 128}, kFloat);
  const Fp8Tensor cast = weight_cast(weight);
  const Fp8LinearRecipe recipe{Fp8Format::kE5M2, true};
  for (const bool layer_norm : {false, true}) {
    const at::Tensor hidden = at::randn({2, 32, 128}, kFloat) * 2;
    const at::Tensor norm_weight = at::rand({128}, kFloat) + 0.5;
    const at::Tensor norm_bias = layer_norm ? at::randn({128}, kFloat) * 0.1 : at::Tensor();
    const auto run = [&](bool fused) {
      Fp8ScalingState forward(1, Fp8Format::kE4M3, DelayedScaling{}, at::Device(at::kCUDA, 0));
      Fp8ScalingState backward(1, Fp8Format::kE5M2, DelayedScaling{}, at::Device(at::kCUDA, 0));
      forward.scale().fill_(3);
      forward.scale_inverse().fill_(1.0 / 3);
      const Fp8LinearScaling scaling{slot_of(forward, 0), slot_of(backward, 0)};
      const at::Tensor input = hidden.clone().requires_grad_(true);
      const at::Tensor gamma = norm_weight.clone().requires_grad_(true);
      const at::Tensor beta = layer_norm ? norm_bias.clone().requires_grad_(true) : at::Tensor();
      const at::Tensor master = weight.to(at::kFloat).requires_grad_(true);
      at::Tensor stream, output;
      if (fused) {
        EXPECT_TRUE(fp8_norm_linear_fits(input, gamma, beta, recipe, scaling));
        const Fp8NormLinear result =
            fp8_norm_linear(input, gamma, beta, 1e-5, master, cast, {}, {}, recipe, scaling, false, true);
        stream = result.stream, output = result.output;
      } else {
        const NormedStream normed = residual_norm(input, gamma, beta, 1e-5, at::kBFloat16);
        stream = normed.stream;
        output = fp8_linear(normed.normed, master, cast, {}, {}, recipe, scaling, false, true);
      }
      ((output.to(at::kFloat) * upstream.to(at::kFloat)).sum() + (stream * stream_upstream).sum()).backward();
      std::vector<at::Tensor> results{output.detach(),
                                      input.grad(),
                                      gamma.grad(),
                                      master.grad(),
                                      forward.amax_history().clone(),
                                      backward.amax_history().clone()};
      if (layer_norm) results.push_back(beta.grad());
      return results;
    };
    const std::vector<at::Tensor> fused = run(true);
    const std::vector<at::Tensor> apart = run(false);
    const std::vector<std::string> names = {
        "output",     "input's gradient", "norm weight's gradient", "weight's gradient",
        "input amax", "gradient amax",    "norm bias's gradient"};
    ASSERT_EQ(fused.size(), apart.size());
    for (std::size_t i = 0; i < fused.size(); ++i) {
      EXPECT_TRUE(at::equal(fused[i], apart[i])) << names[i] << (layer_norm ? ", LayerNorm" : ", RMSNorm");
    }
  }
}

}  // namespace
}  // namespace graphed::kernels

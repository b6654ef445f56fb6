// tests/kernels/moe_routing_cuda_test.cpp — the MoE routing kernels (kernels/moe_routing.h) against the reference
// (kernels/moe_routing_ops.h's LibTorch form): the route's choices, weights, sums and logits' gradient for fp32 and
// bf16 logits, 8 to 200 experts, 1 to 8 choices, with and without pre-softmax; the edges (no tokens, one expert,
// every expert chosen, 256 experts and 32 choices, NaN logits); the counting sort bit-equal to the stable sort; the
// gathers both ways with gradients; each expert's bias with every activation; the same bits on a second run; and a CUDA
// graph captured once replaying another routing as eager launches do.
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <limits>
#include <string>
#include <vector>

#include "cuda_test.h"
#include "graphed/kernels/moe_routing_ops.h"

namespace graphed::kernels {
namespace {

class MoeRoutingCudaTest : public graphed::testing::CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    at::manual_seed(31);
  }
};

const auto kCuda = at::TensorOptions().device(at::kCUDA);

void expect_close(const at::Tensor& got, const at::Tensor& want, double tolerance, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const at::Tensor wide = want.to(at::kDouble);
  const double largest = wide.numel() > 0 ? wide.abs().max().item<double>() : 0.0;
  const double difference = wide.numel() > 0 ? (got.to(at::kDouble) - wide).abs().max().item<double>() : 0.0;
  EXPECT_LE(difference, tolerance * std::max(largest, 1.0)) << what << ": difference " << difference;
}

/// A route's outputs and the logits' gradient for fixed upstream gradients.
struct Routed {
  RouteDecision decision;
  at::Tensor grad_logits;
};

Routed route_with_gradient(const at::Tensor& logits, int64_t k, bool pre_softmax, const at::Tensor& upstream,
                           const at::Tensor& mass_upstream, bool reference_path) {
  const at::Tensor x = logits.detach().requires_grad_(true);
  Routed routed;
  routed.decision = reference_path ? reference::moe_route(x, k, pre_softmax) : moe_route(x, k, pre_softmax);
  const at::Tensor loss = (routed.decision.weights * upstream.to(routed.decision.weights.scalar_type())).sum() +
                          (routed.decision.mass * mass_upstream.to(routed.decision.mass.scalar_type())).sum();
  routed.grad_logits = torch::autograd::grad({loss}, {x})[0];
  return routed;
}

TEST_F(MoeRoutingCudaTest, RouteMatchesTheReference) {
  for (const auto type : {at::kFloat, at::kBFloat16}) {
    for (const int64_t experts : {int64_t{8}, int64_t{64}, int64_t{200}}) {
      for (const int64_t k : {int64_t{1}, int64_t{2}, int64_t{8}}) {
        for (const bool pre_softmax : {false, true}) {
          for (const int64_t tokens : {int64_t{1}, int64_t{13}, int64_t{1024}}) {
            const std::string what = std::string(type == at::kFloat ? "fp32" : "bf16") + " E " +
                                     std::to_string(experts) + " k " + std::to_string(k) + " T " +
                                     std::to_string(tokens) + (pre_softmax ? " pre-softmax" : "");
            const at::Tensor logits = (at::randn({tokens, experts}, kCuda) * 2.0).to(type);
            const at::Tensor upstream = at::randn({tokens, k}, kCuda);
            const at::Tensor mass_upstream = at::randn({experts}, kCuda);
            const Routed got = route_with_gradient(logits, k, pre_softmax, upstream, mass_upstream, false);
            const Routed want =
                route_with_gradient(logits.to(at::kDouble), k, pre_softmax, upstream, mass_upstream, true);
            if (!pre_softmax) {  // the logits' order is exact in both; ties go to the lower expert in both
              EXPECT_TRUE(at::equal(got.decision.indices, want.decision.indices)) << what;
            }
            // With pre-softmax, rounding may order near-equal probabilities differently: the chosen ones must be as
            // large as the reference's.
            const at::Tensor probabilities = at::softmax(logits.to(at::kDouble), -1);
            expect_close(probabilities.gather(-1, got.decision.indices),
                         probabilities.gather(-1, want.decision.indices), 1e-6, what + " chosen");
            expect_close(got.decision.weights, want.decision.weights, 2e-6, what + " weights");
            expect_close(got.decision.mass, want.decision.mass, 1e-5, what + " mass");
            const double gradient_tolerance = type == at::kFloat ? 1e-5 : 1e-2;  // bf16: one rounding of the result
            if (at::equal(got.decision.indices, want.decision.indices)) {        // else a near-tie went the other way
              expect_close(got.decision.counts, want.decision.counts, 0.0, what + " counts");
              expect_close(got.grad_logits, want.grad_logits, gradient_tolerance, what + " logits' gradient");
            }
            const Routed again = route_with_gradient(logits, k, pre_softmax, upstream, mass_upstream, false);
            EXPECT_TRUE(at::equal(got.decision.weights, again.decision.weights) &&
                        at::equal(got.decision.mass, again.decision.mass) &&
                        at::equal(got.grad_logits, again.grad_logits))
                << what << ": not the same bits on a second run";
          }
        }
      }
    }
  }
}

// The kernels' edges: no tokens, one expert, every expert chosen, the most experts and choices the kernel takes;
// NaN logits still choose k distinct real experts (later kernels index memory by them).
TEST_F(MoeRoutingCudaTest, RouteEdgesMatchTheReference) {
  struct Edge {
    int64_t tokens, experts, k;
  };
  for (const Edge edge : {Edge{0, 8, 2}, Edge{5, 1, 1}, Edge{7, 8, 8}, Edge{9, 256, 32}, Edge{33, 40, 3}}) {
    const std::string what =
        "T " + std::to_string(edge.tokens) + " E " + std::to_string(edge.experts) + " k " + std::to_string(edge.k);
    const at::Tensor logits = at::randn({edge.tokens, edge.experts}, kCuda);
    const RouteDecision got = moe_route(logits, edge.k, false);
    const RouteDecision want = reference::moe_route(logits.to(at::kDouble), edge.k, false);
    EXPECT_TRUE(at::equal(got.indices, want.indices)) << what;
    expect_close(got.weights, want.weights, 2e-6, what + " weights");
    expect_close(got.mass, want.mass, 1e-5, what + " mass");
    expect_close(got.counts, want.counts, 0.0, what + " counts");
  }
  at::Tensor logits = at::randn({4, 40}, kCuda);
  logits[1].fill_(std::numeric_limits<float>::quiet_NaN());
  logits[2][7] = std::numeric_limits<float>::quiet_NaN();
  const at::Tensor indices = moe_route(logits, 4, false).indices.cpu();
  for (int64_t t = 0; t < 4; ++t) {
    const at::Tensor row = indices[t];
    EXPECT_TRUE(row.ge(0).all().item<bool>() && row.lt(40).all().item<bool>()) << "token " << t << ": " << row;
    const at::Tensor ascending = std::get<0>(row.sort());
    EXPECT_TRUE(ascending.narrow(0, 1, 3).gt(ascending.narrow(0, 0, 3)).all().item<bool>())  // four distinct
        << "token " << t << ": " << row;
  }
}

TEST_F(MoeRoutingCudaTest, TiedLogitsGoToTheLowerExpert) {
  const at::Tensor logits = at::zeros({3, 16}, kCuda);
  logits[1][9] = 1.0;
  const RouteDecision decision = moe_route(logits, 4, false);
  const at::Tensor want = at::tensor({0, 1, 2, 3, 9, 0, 1, 2, 0, 1, 2, 3}, at::kLong).view({3, 4});
  EXPECT_TRUE(at::equal(decision.indices.cpu(), want));
  expect_close(decision.weights[0], at::full({4}, 0.25, kCuda), 1e-7, "equal weights");
}

TEST_F(MoeRoutingCudaTest, SwitchLossMatchesTheReference) {
  for (const int64_t experts : {int64_t{8}, int64_t{300}}) {
    const at::Tensor mass = at::rand({experts}, kCuda).requires_grad_(true);
    const at::Tensor counts = at::randint(0, 50, {experts}, kCuda);
    const at::Tensor loss = switch_balance_loss(mass, counts, 0.01);
    const at::Tensor mass_wide = mass.detach().to(at::kDouble).requires_grad_(true);
    const at::Tensor want = reference::switch_balance_loss(mass_wide, counts.to(at::kDouble), 0.01);
    expect_close(loss, want, 1e-6, std::to_string(experts) + " experts: loss");
    const at::Tensor upstream = at::full({}, 3.0, kCuda);
    const at::Tensor got = torch::autograd::grad({loss * upstream}, {mass})[0];
    const at::Tensor wanted = torch::autograd::grad({want * 3.0}, {mass_wide})[0];
    expect_close(got, wanted, 1e-6, std::to_string(experts) + " experts: gradient");
  }
}

TEST_F(MoeRoutingCudaTest, SortPlanEqualsTheStableSortBitForBit) {
  for (const int64_t experts : {int64_t{1}, int64_t{8}, int64_t{128}, int64_t{256}}) {
    for (const int64_t assignments :
         {int64_t{0}, int64_t{1}, int64_t{13}, int64_t{1024}, int64_t{2048}, int64_t{5000}, int64_t{16384}}) {
      for (const bool one_expert : {false, true}) {
        const std::string what = std::to_string(experts) + " experts, " + std::to_string(assignments) + " assignments" +
                                 (one_expert ? ", all on one" : "");
        const at::Tensor experts_of = one_expert ? at::full({assignments}, experts - 1, kCuda.dtype(at::kLong))
                                                 : at::randint(0, experts, {assignments}, kCuda.dtype(at::kLong));
        const SortPlan got = moe_sort_plan(experts_of, experts);
        const SortPlan want = reference::moe_sort_plan(experts_of, experts);
        EXPECT_TRUE(at::equal(got.order, want.order)) << what;
        EXPECT_TRUE(at::equal(got.destination, want.destination)) << what;
        EXPECT_TRUE(at::equal(got.counts, want.counts)) << what;
        EXPECT_TRUE(at::equal(got.offsets, want.offsets)) << what;
      }
    }
  }
}

TEST_F(MoeRoutingCudaTest, PermuteAndUnpermuteMatchTheReferenceWithGradients) {
  for (const auto token_type : {at::kFloat, at::kBFloat16}) {
    for (const auto sorted_type : {at::kFloat, at::kBFloat16}) {
      for (const int64_t k : {int64_t{1}, int64_t{2}, int64_t{8}}) {
        for (const int64_t h : {int64_t{100}, int64_t{256}}) {
          const std::string what = std::string(token_type == at::kFloat ? "fp32" : "bf16") + " tokens to " +
                                   (sorted_type == at::kFloat ? "fp32" : "bf16") + ", k " + std::to_string(k) + ", h " +
                                   std::to_string(h);
          const int64_t tokens = 37;
          const SortPlan plan = moe_sort_plan(at::randint(0, 8, {tokens * k}, kCuda.dtype(at::kLong)), 8);
          const at::Tensor x = at::randn({tokens, h}, kCuda).to(token_type).requires_grad_(true);
          const at::Tensor sorted = moe_permute(x, plan.order, plan.destination, k, sorted_type);
          const at::Tensor x_wide = x.detach().to(at::kDouble).requires_grad_(true);
          const at::Tensor sorted_want = reference::moe_permute(x_wide, plan.order, plan.destination, k, at::kDouble);
          EXPECT_TRUE(at::equal(sorted, sorted_want.to(sorted_type))) << what << " permute";
          const at::Tensor weights = at::rand({tokens, k}, kCuda).requires_grad_(true);
          const at::Tensor weights_wide = weights.detach().to(at::kDouble).requires_grad_(true);
          const at::Tensor out = moe_unpermute(sorted, weights, plan.order, plan.destination);
          const at::Tensor out_want = reference::moe_unpermute(sorted_want, weights_wide, plan.order, plan.destination);
          const double tolerance = sorted_type == at::kFloat ? 1e-6 : 1e-2;
          expect_close(out, out_want, tolerance, what + " unpermute");
          const at::Tensor upstream = at::randn({tokens, h}, kCuda);
          const auto got = torch::autograd::grad({(out * upstream.to(out.scalar_type())).sum()}, {x, weights});
          const auto want =
              torch::autograd::grad({(out_want * upstream.to(at::kDouble)).sum()}, {x_wide, weights_wide});
          expect_close(got[0], want[0], token_type == at::kFloat && sorted_type == at::kFloat ? 1e-6 : 2e-2,
                       what + " tokens' gradient");
          expect_close(got[1], want[1], sorted_type == at::kFloat ? 1e-5 : 2e-2, what + " weights' gradient");
          const at::Tensor out_again = moe_unpermute(moe_permute(x, plan.order, plan.destination, k, sorted_type),
                                                     weights, plan.order, plan.destination);
          const auto again = torch::autograd::grad({(out_again * upstream.to(out.scalar_type())).sum()}, {x, weights});
          EXPECT_TRUE(at::equal(out, out_again) && at::equal(got[0], again[0]) && at::equal(got[1], again[1]))
              << what << ": not the same bits on a second run";
        }
      }
    }
  }
}

TEST_F(MoeRoutingCudaTest, BiasActivationMatchesTheReferenceWithGradients) {
  const at::Tensor offsets = at::tensor({0, 5, 5, 305, 306, 306, 383}, at::kLong).to(at::kCUDA);  // empty experts
  const int64_t rows = 383;
  for (const auto activation :
       {ExpertActivation::kNone, ExpertActivation::kGelu, ExpertActivation::kGeluTanh, ExpertActivation::kSwiglu}) {
    for (const auto hidden_type : {at::kFloat, at::kBFloat16}) {
      for (const bool with_bias : {true, false}) {
        const auto out_type = activation == ExpertActivation::kNone ? at::kFloat : hidden_type;
        const std::string what = "activation " + std::to_string(static_cast<int>(activation)) + ", " +
                                 (hidden_type == at::kFloat ? "fp32" : "bf16") + (with_bias ? ", bias" : "");
        const int64_t columns = 200;
        const at::Tensor hidden = at::randn({rows, columns}, kCuda).to(hidden_type).requires_grad_(true);
        const at::Tensor bias = with_bias ? at::randn({6, columns}, kCuda).requires_grad_(true) : at::Tensor();
        const at::Tensor out = grouped_bias_activation(hidden, bias, offsets, activation, out_type);
        const at::Tensor hidden_wide = hidden.detach().to(at::kDouble).requires_grad_(true);
        const at::Tensor bias_wide = with_bias ? bias.detach().to(at::kDouble).requires_grad_(true) : at::Tensor();
        const at::Tensor want =
            reference::grouped_bias_activation(hidden_wide, bias_wide, offsets, activation, at::kDouble);
        const double tolerance = out_type == at::kFloat ? 1e-5 : 1e-2;
        expect_close(out, want, tolerance, what + " output");
        const at::Tensor upstream = at::randn(want.sizes(), kCuda);
        std::vector<at::Tensor> inputs = {hidden};
        std::vector<at::Tensor> wide_inputs = {hidden_wide};
        if (with_bias) {
          inputs.push_back(bias);
          wide_inputs.push_back(bias_wide);
        }
        const auto got = torch::autograd::grad({(out * upstream.to(out.scalar_type())).sum()}, inputs);
        const auto wanted = torch::autograd::grad({(want * upstream.to(at::kDouble)).sum()}, wide_inputs);
        expect_close(got[0], wanted[0], hidden_type == at::kFloat ? 1e-5 : 2e-2, what + " hidden's gradient");
        if (with_bias) {
          expect_close(got[1], wanted[1], hidden_type == at::kFloat ? 1e-5 : 2e-2, what + " bias's gradient");
          EXPECT_TRUE(at::equal(got[1][1].cpu(), at::zeros({columns}))) << what << ": an expert without rows";
        }
        const at::Tensor again = grouped_bias_activation(hidden, bias, offsets, activation, out_type);
        const auto grads_again = torch::autograd::grad({(again * upstream.to(out.scalar_type())).sum()}, inputs);
        bool same = at::equal(out, again);
        for (std::size_t i = 0; i < got.size(); ++i) same = same && at::equal(got[i], grads_again[i]);
        EXPECT_TRUE(same) << what << ": not the same bits on a second run";
        // The backward on its own (the paged stash's experts, model/paged_experts.h): autograd's bits.
        const BiasActivationGrads alone =
            grouped_bias_activation_backward(upstream.to(out.scalar_type()), hidden.detach(),
                                             with_bias ? bias.detach() : at::Tensor(), offsets, activation);
        EXPECT_TRUE(at::equal(alone.hidden, got[0])) << what << ": hidden's gradient on its own";
        if (with_bias) EXPECT_TRUE(at::equal(alone.bias, got[1])) << what << ": bias's gradient on its own";
      }
    }
  }
}

/// The routing chain of one MoE: route, plan, gather and weighted sum back, forward only.
at::Tensor routed_sum(const at::Tensor& logits, const at::Tensor& tokens, int64_t k) {
  const RouteDecision decision = moe_route(logits, k, false);
  const SortPlan plan = moe_sort_plan(decision.indices, logits.size(1));
  const at::Tensor sorted = moe_permute(tokens, plan.order, plan.destination, k, at::kBFloat16);
  return moe_unpermute(sorted.to(at::kFloat) * 3.0, decision.weights, plan.order, plan.destination) +
         decision.mass.sum() + decision.counts.sum();
}

TEST_F(MoeRoutingCudaTest, AGraphReplaysOtherRoutingsAsEagerLaunchesDo) {
  const int64_t tokens = 300, experts = 16, k = 2, h = 64;
  at::Tensor logits = at::randn({tokens, experts}, kCuda).to(at::kBFloat16);
  const at::Tensor x = at::randn({tokens, h}, kCuda);
  at::NoGradGuard no_grad;
  c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool();
  at::Tensor captured;
  at::cuda::CUDAGraph graph;
  {
    c10::cuda::CUDAStreamGuard guard(stream);
    routed_sum(logits, x, k);  // warm up on the capturing stream
    stream.synchronize();
    graph.capture_begin();
    captured = routed_sum(logits, x, k);
    graph.capture_end();
  }
  for (int round = 0; round < 3; ++round) {
    logits.copy_(at::randn({tokens, experts}, kCuda).to(at::kBFloat16));
    graph.replay();
    at::cuda::getCurrentCUDAStream().synchronize();
    stream.synchronize();
    EXPECT_TRUE(at::equal(captured, routed_sum(logits, x, k))) << "round " << round;
  }
}

}  // namespace
}  // namespace graphed::kernels

// tests/model/paged_experts_test.cpp — the grouped experts' ffn through the paged stash (float64, the reference ops):
// the output and every gradient equal the same products differentiated by autograd, the rows past the real ones
// getting no gradient from outside, as under the fixed expert blocks.
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include "graphed/kernels/grouped_gemm_ops.h"
#include "graphed/kernels/moe_routing_ops.h"
#include "graphed/model/paged_experts.h"

namespace graphed::model {
namespace {

const auto kDouble = at::TensorOptions().dtype(at::kDouble);

TEST(PagedExpertsTest, TheStashedFfnGivesAutogradsOutputAndGradients) {
  at::manual_seed(3);
  const int64_t rows = 10, real = 7, h = 4, f = 3;
  // Experts 0..2: rows 0-2, none, 3-9 (the last expert also takes the three padding rows, as the blocks place them).
  const at::Tensor offsets = at::tensor({0, 3, 3, 10}, at::kLong);
  at::Tensor input = at::randn({rows, h}, kDouble);
  input.narrow(0, real, rows - real).zero_();
  input.requires_grad_(true);
  GroupedMlpWeights weights;
  weights.fc1 = at::randn({3, h, 2 * f}, kDouble).requires_grad_(true);
  weights.fc1_bias = at::randn({3, 2 * f}, kDouble).requires_grad_(true);
  weights.fc2 = at::randn({3, f, h}, kDouble).requires_grad_(true);
  weights.fc2_bias = at::randn({3, h}, kDouble).requires_grad_(true);
  weights.activation = kernels::ExpertActivation::kSwiglu;
  weights.type = at::kDouble;
  const std::vector<at::Tensor> leaves = {input, weights.fc1, weights.fc1_bias, weights.fc2, weights.fc2_bias};

  const at::Tensor hidden = kernels::grouped_matmul(input, weights.fc1, offsets);
  const at::Tensor activated =
      kernels::grouped_bias_activation(hidden, weights.fc1_bias, offsets, weights.activation, at::kDouble);
  const at::Tensor expected =
      kernels::grouped_bias_activation(kernels::grouped_matmul(activated, weights.fc2, offsets), weights.fc2_bias,
                                       offsets, kernels::ExpertActivation::kNone, at::kDouble);
  at::Tensor upstream = at::randn({rows, h}, kDouble);
  upstream.narrow(0, real, rows - real).zero_();  // the padding rows' outputs are cut off
  const auto wanted = torch::autograd::grad({expected}, leaves, {upstream});

  kernels::PagedStash stash(kernels::PagedStashOptions{2, 1.0});
  const at::Tensor filled = at::tensor(real, at::kLong);
  for (int run = 0; run < 2; ++run) {  // profiling (the rows kept whole), then parked in the sized pool
    if (run == 1) stash.begin_iteration();
    {
      at::NoGradGuard no_grad;  // nothing to differentiate: nothing parked
      EXPECT_FALSE(paged_grouped_mlp(input, weights, offsets, filled, real, stash).requires_grad());
    }
    const at::Tensor output = paged_grouped_mlp(input, weights, offsets, filled, real, stash);
    EXPECT_TRUE(at::allclose(output, expected, 1e-13, 1e-13)) << "run " << run;
    const auto got = torch::autograd::grad({output}, leaves, {upstream});
    for (std::size_t i = 0; i < leaves.size(); ++i) {
      EXPECT_TRUE(at::allclose(got[i], wanted[i], 1e-12, 1e-12)) << "run " << run << ", leaf " << i;
    }
  }
  EXPECT_TRUE(stash.sized());
  EXPECT_EQ(stash.overflowed().item<int64_t>(), 0);
}

}  // namespace
}  // namespace graphed::model

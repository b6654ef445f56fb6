// tests/kernels/grouped_gemm_test.cpp — grouped_matmul on the CPU (the reference): each expert's rows times its
// own matrix, experts without rows, and gradients equal to a matmul per expert.
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include "graphed/kernels/grouped_gemm_ops.h"

namespace graphed::kernels {
namespace {

TEST(GroupedGemmTest, EachExpertsRowsTimesItsMatrixWithGradients) {
  at::manual_seed(5);
  const at::Tensor input = at::randn({9, 5}, at::kDouble).requires_grad_(true);
  const at::Tensor weight = at::randn({4, 5, 3}, at::kDouble).requires_grad_(true);
  const at::Tensor offsets = at::tensor({0, 2, 2, 7, 9}, at::kLong);  // expert 1 has no rows
  const at::Tensor out = grouped_matmul(input, weight, offsets);
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{9, 3}));
  const std::vector<std::pair<int64_t, int64_t>> rows = {{0, 2}, {2, 2}, {2, 7}, {7, 9}};
  std::vector<at::Tensor> expected;
  for (int64_t expert = 0; expert < 4; ++expert) {
    const auto [begin, end] = rows[static_cast<std::size_t>(expert)];
    if (end > begin) expected.push_back(at::matmul(input.narrow(0, begin, end - begin), weight[expert]));
  }
  const at::Tensor want = at::cat(expected);
  EXPECT_TRUE(at::allclose(out, want, 1e-14, 1e-14));
  const at::Tensor upstream = at::randn_like(out);
  const auto got = torch::autograd::grad({(out * upstream).sum()}, {input, weight});
  const auto wanted = torch::autograd::grad({(want * upstream).sum()}, {input, weight});
  EXPECT_TRUE(at::allclose(got[0], wanted[0], 1e-14, 1e-14));
  EXPECT_TRUE(at::allclose(got[1], wanted[1], 1e-14, 1e-14));
  EXPECT_TRUE(at::equal(got[1][1], at::zeros({5, 3}, at::kDouble)));  // the expert without rows
}

TEST(GroupedGemmTest, TheBackwardGivesAutogradsGradients) {
  at::manual_seed(6);
  const at::Tensor input = at::randn({9, 5}, at::kDouble).requires_grad_(true);
  const at::Tensor weight = at::randn({4, 5, 3}, at::kDouble).requires_grad_(true);
  const at::Tensor offsets = at::tensor({0, 2, 2, 7, 9}, at::kLong);
  const at::Tensor out = grouped_matmul(input, weight, offsets);
  const at::Tensor upstream = at::randn_like(out);
  const auto wanted = torch::autograd::grad({out}, {input, weight}, {upstream});
  const GroupedMatmulGrads got = grouped_matmul_backward(upstream, input.detach(), weight.detach(), offsets);
  EXPECT_TRUE(at::allclose(got.input, wanted[0], 1e-14, 1e-14));
  EXPECT_TRUE(at::allclose(got.weight, wanted[1], 1e-14, 1e-14));
  EXPECT_TRUE(at::equal(got.weight[1], at::zeros({5, 3}, at::kDouble)));  // the expert without rows
}

TEST(GroupedGemmTest, EachRowGetsItsExpertsBias) {
  const at::Tensor offsets = at::tensor({0, 2, 2, 5}, at::kLong);
  EXPECT_TRUE(at::equal(expert_of_rows(offsets, 5), at::tensor({0, 0, 2, 2, 2}, at::kLong)));
  const at::Tensor bias = at::tensor({1.0, 2.0, 3.0}, at::kDouble).view({3, 1}).requires_grad_(true);
  const at::Tensor out = reference::grouped_bias(bias, offsets, 5);
  EXPECT_TRUE(at::equal(out.view({5}), at::tensor({1.0, 1.0, 3.0, 3.0, 3.0}, at::kDouble)));
  const at::Tensor gradient = torch::autograd::grad({(out.view({5}) * at::arange(5, at::kDouble)).sum()}, {bias})[0];
  EXPECT_TRUE(at::equal(gradient.view({3}), at::tensor({1.0, 0.0, 9.0}, at::kDouble)));
}

}  // namespace
}  // namespace graphed::kernels

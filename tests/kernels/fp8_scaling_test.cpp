// tests/kernels/fp8_scaling_test.cpp — FP8 delayed scaling against TransformerEngine's rule, on the CPU: the scale
// from the most recent or the largest amax, the margin, a zero or infinite amax, an overflowing scale, the roll.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "graphed/kernels/fp8_scaling.h"

namespace graphed::kernels {
namespace {

std::vector<float> values(const at::Tensor& t) {
  const at::Tensor flat = t.contiguous().reshape({-1});
  return {flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel()};
}

TEST(Fp8ScalingTest, TheFormatsLargestValues) {
  EXPECT_EQ(fp8_max(Fp8Format::kE4M3), 448.0);
  EXPECT_EQ(fp8_max(Fp8Format::kE5M2), 57344.0);
}

TEST(Fp8ScalingTest, MostRecentAmaxSetsTheScaleAndRowZeroStartsAgain) {
  Fp8ScalingState state(2, Fp8Format::kE4M3, {}, at::kCPU);
  EXPECT_EQ(values(state.scale()), (std::vector<float>{1, 1}));
  state.record_amax(0, at::tensor({-4.0f, 2.0f}));
  state.record_amax(0, at::tensor({3.0f}));  // a second cast of the same tensor: the larger amax stays
  state.record_amax(1, at::tensor({0.5f}));
  state.update();
  EXPECT_EQ(values(state.scale()), (std::vector<float>{448.0f / 4.0f, 448.0f / 0.5f}));
  EXPECT_EQ(values(state.scale_inverse()), (std::vector<float>{4.0f / 448.0f, 0.5f / 448.0f}));
  EXPECT_EQ(values(state.amax_history()), (std::vector<float>{0, 0}));
}

TEST(Fp8ScalingTest, TheMarginLeavesHeadroomAndE5m2HasItsOwnMaximum) {
  DelayedScaling recipe;
  recipe.margin = 1;
  Fp8ScalingState state(1, Fp8Format::kE5M2, recipe, at::kCPU);
  state.record_amax(0, at::tensor({8.0f}));
  state.update();
  EXPECT_EQ(values(state.scale()), (std::vector<float>{57344.0f / 2.0f / 8.0f}));
}

TEST(Fp8ScalingTest, AZeroOrInfiniteAmaxKeepsTheScaleAndAnOverflowingOneIsCapped) {
  Fp8ScalingState state(3, Fp8Format::kE4M3, {}, at::kCPU);
  state.record_amax(0, at::tensor({2.0f}));
  state.record_amax(1, at::tensor({2.0f}));
  state.record_amax(2, at::tensor({2.0f}));
  state.update();  // every scale 224
  state.record_amax(1, at::tensor({std::numeric_limits<float>::infinity()}));
  state.record_amax(2, at::tensor({1e-45f}));  // 448 / 1e-45 overflows fp32
  state.update();                              // tensor 0 saw nothing this step: amax 0
  EXPECT_EQ(values(state.scale()), (std::vector<float>{224.0f, 224.0f, std::numeric_limits<float>::max()}));
}

TEST(Fp8ScalingTest, MaxAlgorithmTakesTheWindowAndTheHistoryRolls) {
  DelayedScaling recipe;
  recipe.history_length = 3;
  recipe.algorithm = AmaxAlgorithm::kMax;
  Fp8ScalingState state(1, Fp8Format::kE4M3, recipe, at::kCPU);
  std::vector<float> scales;
  for (const float amax : {2.0f, 8.0f, 4.0f, 1.0f}) {
    state.record_amax(0, at::tensor({amax}));
    state.update();
    scales.push_back(values(state.scale())[0]);
  }
  // Steps 1-3 see {2}, {2, 8}, {2, 8, 4}; step 4's window of 3 has lost the 2 but still holds the 8.
  EXPECT_EQ(scales, (std::vector<float>{224.0f, 56.0f, 56.0f, 56.0f}));
  // Row 0 is zeroed for the next step; the other rows hold the last two amaxes, oldest first.
  EXPECT_EQ(values(state.amax_history()), (std::vector<float>{0.0f, 4.0f, 1.0f}));
}

}  // namespace
}  // namespace graphed::kernels

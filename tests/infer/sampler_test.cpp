// tests/infer/sampler_test.cpp — device-side sampling: greedy is argmax, the hashed noise is
// deterministic and uniform, top-k and top-p keep only the tokens they should.
#include "graphed/infer/sampler.h"

#include <gtest/gtest.h>

#include <set>

namespace graphed::infer {
namespace {

at::Tensor step_tensor(int64_t step) { return at::full({1}, step, at::kLong); }

TEST(Sampler, GreedyIsArgmax) {
  const at::Tensor logits = at::tensor({0.1f, 2.0f, -1.0f, 1.9f, 0.0f, 3.0f}, at::kFloat).view({2, 3});
  const at::Tensor tokens = sample_tokens(logits, SamplingOptions{}, step_tensor(0));
  EXPECT_EQ(tokens[0].item<int64_t>(), 1);
  EXPECT_EQ(tokens[1].item<int64_t>(), 2);
}

TEST(Sampler, NoiseIsDeterministicAndUniform) {
  const at::Tensor a = hashed_uniform(4, 5000, 7, step_tensor(3));
  const at::Tensor b = hashed_uniform(4, 5000, 7, step_tensor(3));
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_FALSE(at::equal(a, hashed_uniform(4, 5000, 8, step_tensor(3))));
  EXPECT_FALSE(at::equal(a, hashed_uniform(4, 5000, 7, step_tensor(4))));
  EXPECT_GT(a.min().item<double>(), 0.0);
  EXPECT_LT(a.max().item<double>(), 1.0);
  EXPECT_NEAR(a.mean().item<double>(), 0.5, 0.01);
  EXPECT_NEAR(a.var().item<double>(), 1.0 / 12.0, 0.003);
  // Rows differ from each other.
  EXPECT_FALSE(at::equal(a[0], a[1]));
}

TEST(Sampler, TemperatureFollowsTheProbabilities) {
  // Two tokens with probabilities 0.8 / 0.2 at temperature 1: over many steps the first wins ~80%.
  const at::Tensor logits = at::log(at::tensor({0.8f, 0.2f}, at::kFloat)).view({1, 2});
  SamplingOptions options;
  options.temperature = 1.0;
  options.seed = 11;
  int64_t first = 0;
  const int64_t draws = 4000;
  for (int64_t step = 0; step < draws; ++step) first += sample_tokens(logits, options, step_tensor(step)).item<int64_t>() == 0;
  EXPECT_NEAR(static_cast<double>(first) / draws, 0.8, 0.03);
}

TEST(Sampler, TopKAndTopPKeepOnlyTheLikeliest) {
  const at::Tensor logits = at::log(at::tensor({0.05f, 0.4f, 0.3f, 0.15f, 0.1f}, at::kFloat)).view({1, 5});
  SamplingOptions top_k;
  top_k.temperature = 1.0;
  top_k.top_k = 2;
  SamplingOptions top_p;
  top_p.temperature = 1.0;
  top_p.top_p = 0.75;  // 0.4 + 0.3 = 0.7 < 0.75, so 0.15 joins; 0.1 and 0.05 never
  std::set<int64_t> from_k, from_p;
  for (int64_t step = 0; step < 400; ++step) {
    from_k.insert(sample_tokens(logits, top_k, step_tensor(step)).item<int64_t>());
    from_p.insert(sample_tokens(logits, top_p, step_tensor(step)).item<int64_t>());
  }
  EXPECT_EQ(from_k, (std::set<int64_t>{1, 2}));
  EXPECT_EQ(from_p, (std::set<int64_t>{1, 2, 3}));
}

TEST(Sampler, SameSeedSameTokens) {
  const at::Tensor logits = at::randn({3, 50});
  SamplingOptions options;
  options.temperature = 0.9;
  options.top_k = 20;
  options.top_p = 0.95;
  options.seed = 5;
  EXPECT_TRUE(at::equal(sample_tokens(logits, options, step_tensor(2)), sample_tokens(logits, options, step_tensor(2))));
}

}  // namespace
}  // namespace graphed::infer

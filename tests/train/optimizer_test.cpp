// tests/train/optimizer_test.cpp — AdamW with device-side state matches LibTorch's torch::optim::AdamW;
// the learning-rate schedule follows Megatron's shapes.
#include <gtest/gtest.h>

#include <torch/optim/adamw.h>

#include "graphed/train/adamw.h"
#include "graphed/train/lr_schedule.h"

namespace graphed::train {
namespace {

TEST(AdamWTest, MatchesTorchOptimAdamW) {
  at::manual_seed(1);
  const at::Tensor start = at::randn({5, 3}, at::kDouble);
  at::Tensor ours = start.clone().requires_grad_(true);
  at::Tensor reference = start.clone().requires_grad_(true);
  AdamW optimizer({{"w", ours}}, AdamWOptions{0.9, 0.95, 1e-8, 0.1});
  torch::optim::AdamW torch_optimizer({reference},
                                      torch::optim::AdamWOptions(3e-3).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1));
  for (int step = 0; step < 5; ++step) {
    const at::Tensor target = at::randn({5, 3}, at::kDouble);
    optimizer.zero_grad();
    optimizer.set_learning_rate(3e-3);
    (ours - target).pow(2).sum().backward();
    optimizer.step(std::nullopt);
    torch_optimizer.zero_grad();
    (reference - target).pow(2).sum().backward();
    torch_optimizer.step();
  }
  EXPECT_TRUE(at::allclose(ours, reference, 1e-12, 1e-12)) << ours - reference;
}

TEST(AdamWTest, GradScaleDividesTheGradients) {
  at::Tensor a = at::ones({4}, at::kDouble).requires_grad_(true);
  at::Tensor b = at::ones({4}, at::kDouble).requires_grad_(true);
  AdamW first({{"a", a}}, AdamWOptions{});
  AdamW second({{"b", b}}, AdamWOptions{});
  first.set_learning_rate(0.1);
  second.set_learning_rate(0.1);
  (a * 4.0).sum().backward();
  (b * 2.0).sum().backward();
  first.step(at::full({}, 2.0, at::kDouble));
  second.step(std::nullopt);
  EXPECT_TRUE(at::allclose(a, b));
}

TEST(AdamWTest, GradientsKeepTheirAddresses) {
  at::Tensor w = at::ones({3}).requires_grad_(true);
  AdamW optimizer({{"w", w}}, AdamWOptions{});
  const void* address = w.grad().data_ptr();
  w.sum().backward();
  optimizer.zero_grad();
  w.sum().backward();
  EXPECT_EQ(w.grad().data_ptr(), address);
  EXPECT_EQ(optimizer.state().size(), 4u);  // exp_avg, exp_avg_sq, step, lr
}

TEST(LearningRateTest, WarmupThenCosineToMin) {
  config::TrainConfig c;
  c.lr = 1.0;
  c.min_lr = 0.1;
  c.lr_warmup_iters = 10;
  c.train_iters = 110;
  c.lr_decay_style = "cosine";
  EXPECT_DOUBLE_EQ(learning_rate(c, 0), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate(c, 9), 1.0);
  EXPECT_NEAR(learning_rate(c, 59), 0.55, 1e-12);  // halfway through the decay
  EXPECT_NEAR(learning_rate(c, 109), 0.1, 1e-12);
  EXPECT_DOUBLE_EQ(learning_rate(c, 500), 0.1);
  c.lr_decay_style = "linear";
  EXPECT_NEAR(learning_rate(c, 59), 0.55, 1e-12);
  c.lr_decay_style = "constant";
  EXPECT_DOUBLE_EQ(learning_rate(c, 80), 1.0);
}

}  // namespace
}  // namespace graphed::train

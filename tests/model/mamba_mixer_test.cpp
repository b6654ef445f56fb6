// tests/model/mamba_mixer_test.cpp — the Mamba-2 mixer: its shapes and Mamba-2's initialisation ranges,
// causality (an output never depends on later positions), and outputs that do not depend on the scan's
// chunk size. Its gradients are checked in gradient_check_test.cpp.
#include <gtest/gtest.h>

#include <ATen/core/grad_mode.h>

#include "graphed/model/mamba_mixer.h"

namespace graphed::model {
namespace {

MambaShape tiny_shape(int64_t chunk_size) {
  MambaShape shape;
  shape.hidden_size = 16;
  shape.state_size = 8;
  shape.head_dim = 8;
  shape.num_groups = 2;
  shape.chunk_size = chunk_size;
  return shape;
}

TEST(MambaMixerTest, ShapesAndMamba2Initialisation) {
  at::manual_seed(1);
  MambaMixer mixer(tiny_shape(4));
  EXPECT_EQ(mixer->forward(at::randn({2, 9, 16})).sizes(), (std::vector<int64_t>{2, 9, 16}));
  const auto parameters = mixer->named_parameters();
  EXPECT_EQ(parameters["in_proj_weight"].sizes(), (std::vector<int64_t>{2 * 32 + 2 * 2 * 8 + 4, 16}));
  EXPECT_EQ(parameters["conv_weight"].sizes(), (std::vector<int64_t>{32 + 2 * 2 * 8, 4}));
  const at::Tensor decay_rates = at::exp(parameters["A_log"]);
  EXPECT_TRUE((decay_rates >= 1.0).all().item<bool>() && (decay_rates <= 16.0).all().item<bool>());
  const at::Tensor steps = at::softplus(parameters["dt_bias"]);
  EXPECT_TRUE((steps >= 0.001 - 1e-6).all().item<bool>() && (steps <= 0.1 + 1e-6).all().item<bool>()) << steps;
  EXPECT_TRUE(at::equal(parameters["D"], at::ones({4})));
}

TEST(MambaMixerTest, AnOutputNeverDependsOnLaterPositions) {
  at::manual_seed(2);
  at::NoGradGuard no_grad;
  MambaMixer mixer(tiny_shape(4));
  mixer->to(at::kDouble);
  const at::Tensor input = at::randn({2, 11, 16}, at::kDouble);
  const at::Tensor changed = input.clone();
  changed.narrow(1, 6, 5).normal_();  // positions 6..10
  const at::Tensor a = mixer->forward(input), b = mixer->forward(changed);
  EXPECT_TRUE(at::allclose(a.narrow(1, 0, 6), b.narrow(1, 0, 6), 1e-12, 1e-12));
  EXPECT_FALSE(at::allclose(a.narrow(1, 6, 1), b.narrow(1, 6, 1)));
}

TEST(MambaMixerTest, TheChunkSizeDoesNotChangeTheOutputs) {
  at::NoGradGuard no_grad;
  at::manual_seed(3);
  MambaMixer small_chunks(tiny_shape(3));
  at::manual_seed(3);
  MambaMixer one_chunk(tiny_shape(64));
  small_chunks->to(at::kDouble);
  one_chunk->to(at::kDouble);
  const at::Tensor input = at::randn({2, 13, 16}, at::kDouble);
  EXPECT_TRUE(at::allclose(small_chunks->forward(input), one_chunk->forward(input), 1e-10, 1e-10));
}

}  // namespace
}  // namespace graphed::model

// tests/infer/serving_floor_test.cpp — the serving floor of bench --serve: the decode steps of requests that
// arrive at once (a list schedule over the request limit), and the floor's compute and memory parts from the
// model's parameters and cache sizes.
#include "graphed/infer/serving_floor.h"

#include <gtest/gtest.h>

#include "graphed/infer/decode_roofline.h"
#include "test_models.h"

namespace graphed::infer {
namespace {

TEST(ServingFloor, DecodeStepsAreTheListScheduleOfTheRequestsOverTheLimit) {
  EXPECT_EQ(decode_steps_at_once({5, 5, 5}, 4), 4);  // all at once: the longest, less its first token
  EXPECT_EQ(decode_steps_at_once({5, 5, 5}, 1), 12);
  // Two slots: 10 and 3 start; 4 takes the second slot at step 2, ends at 5; 2 starts at 5 and ends at 6.
  EXPECT_EQ(decode_steps_at_once({10, 3, 4, 2}, 2), 9);
  EXPECT_EQ(decode_steps_at_once({1, 1}, 1), 0);  // one token each: drawn by the prompts' steps
  EXPECT_EQ(decode_steps_at_once({}, 8), 0);
}

TEST(ServingFloor, ComputeAndMemoryFollowTheFormula) {
  model::GptModel model = testing::cpu_test_model(testing::ModelStyle::kLlama);
  double parameters = 0;
  for (const auto& item : model->named_parameters()) {
    if (item.key() != "word_embeddings") parameters += static_cast<double>(item.value().numel());
  }
  const double flops = 1e12;
  const double bandwidth = 1e9;
  const ServingFloor floor = serving_floor(model, {10, 20}, {3, 1}, 4, flops, bandwidth);
  EXPECT_EQ(floor.decode_steps, 2);
  EXPECT_DOUBLE_EQ(floor.compute_seconds, 2.0 * parameters * (10 + 3 + 20 + 1) / flops);
  const double weights = decode_bytes_per_step(model, 0, 0);
  const double per_position = decode_bytes_per_step(model, 1, 1) - decode_bytes_per_step(model, 1, 0);
  EXPECT_GT(per_position, 0);
  // The first request's two decode steps read 10 + 1 and 10 + 2 positions; the second has none.
  EXPECT_NEAR(floor.memory_seconds, (2 * weights + 23 * per_position) / bandwidth, 1e-12);
  EXPECT_DOUBLE_EQ(floor.seconds(), floor.compute_seconds + floor.memory_seconds);
}

// With an MoE a token runs top-k of each layer's routed experts: the compute part counts those, and every other
// parameter (the router among them) whole.
TEST(ServingFloor, AnMoeCountsItsActiveParameters) {
  const auto config = testing::run_config({{"num_layers", 2},
                                           {"hidden_size", 32},
                                           {"num_attention_heads", 4},
                                           {"vocab_size", 64},
                                           {"seq_length", 48},
                                           {"num_experts", 8},
                                           {"moe_router_topk", 2},
                                           {"moe_ffn_hidden_size", 16},
                                           {"moe_grouped_gemm", true}});
  model::GptModel model(config.model, config.moe_layers);
  double whole = 0;
  double routed = 0;
  for (const auto& item : model->named_parameters()) {
    if (item.key() == "word_embeddings" || item.key() == "position_embeddings") continue;
    const auto count = static_cast<double>(item.value().numel());
    (item.key().find("experts_") != std::string::npos ? routed : whole) += count;
  }
  EXPECT_GT(routed, 0);
  const ServingFloor floor = serving_floor(model, {10}, {2}, 1, 1e12, 1e9);
  EXPECT_DOUBLE_EQ(floor.compute_seconds, 2.0 * (whole + routed * 2.0 / 8.0) * 12 / 1e12);
}

}  // namespace
}  // namespace graphed::infer

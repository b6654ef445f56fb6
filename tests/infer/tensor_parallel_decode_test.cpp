// tests/infer/tensor_parallel_decode_test.cpp — a model split over 2 ranks (threads,
// tests/model/thread_collectives.h) decodes through the serving engine what the whole model decodes, in
// float64 on the CPU: each rank's engine (paged keys and values, Mamba's conv and SSM states, a chunked
// prompt, then decode steps) draws the whole model's greedy tokens, for every model of
// tests/model/tensor_parallel_cases.h without sequence parallelism (decoding takes whole sequences).
#include <gtest/gtest.h>

#include <ATen/core/grad_mode.h>

#include "graphed/infer/serving_engine.h"
#include "infer/test_models.h"
#include "model/tensor_parallel_cases.h"
#include "model/thread_collectives.h"

namespace graphed::infer {
namespace {

constexpr int64_t kRanks = 2;

model::GptModel whole_model(const config::RunConfig& config) {
  at::manual_seed(11);
  model::GptModel model(config.model, config.moe_layers);
  model->to(at::kDouble);
  model->eval();
  return model;
}

/// The greedy continuation of `prompt` (6 tokens) by 10 tokens, the model's whole context of 16 positions,
/// through a serving engine on the CPU.
std::vector<int64_t> decoded_tokens(model::GptModel& model, const std::vector<int64_t>& prompt) {
  ServingOptions options;
  options.max_requests = 1;
  options.max_tokens = 4;  // the prompt in two chunks
  options.block_size = 4;
  options.buffer_size_gb = 0.01;
  return testing::serve_greedy(model, at::Device(at::kCPU), options, {prompt}, 10).at(0);
}

class TensorParallelDecode : public ::testing::TestWithParam<testing::Case> {};

TEST_P(TensorParallelDecode, EveryRanksEngineDrawsTheWholeModelsTokens) {
  const auto config = testing::run_config(GetParam().settings);
  at::NoGradGuard no_grad;
  std::vector<int64_t> prompt;
  for (int64_t i = 0; i < 6; ++i) prompt.push_back((i * 7 + 3) % 50);
  model::GptModel whole = whole_model(config);
  const std::vector<int64_t> expected = decoded_tokens(whole, prompt);
  ASSERT_EQ(expected.size(), 10u);

  testing::Rendezvous rendezvous(kRanks);
  std::vector<std::shared_ptr<model::TensorCollectives>> groups;
  std::vector<model::GptModel> models;
  for (int64_t rank = 0; rank < kRanks; ++rank) {  // built here: the seed is process-wide
    groups.push_back(std::make_shared<testing::ThreadCollectives>(rendezvous, kRanks, rank));
    models.push_back(whole_model(config));
    models.back()->split_for_tensor_parallel(groups.back(), false);
  }
  testing::run_ranks_on_threads(kRanks, [&](int64_t rank) {
    at::NoGradGuard rank_no_grad;  // grad mode is per thread
    EXPECT_EQ(decoded_tokens(models[static_cast<std::size_t>(rank)], prompt), expected) << "rank " << rank;
  });
}

std::vector<testing::Case> whole_sequence_cases() {
  std::vector<testing::Case> kept;
  for (const auto& item : testing::cases()) {
    if (!item.sequence_parallel) kept.push_back(item);
  }
  return kept;
}

INSTANTIATE_TEST_SUITE_P(Models, TensorParallelDecode, ::testing::ValuesIn(whole_sequence_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace graphed::infer

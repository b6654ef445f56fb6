// tests/infer/decode_engine_test.cpp — the decode engine on the CPU (scope none): greedy tokens equal
// a full recompute for mixed prompt lengths and padded batches, a row's tokens do not depend on its
// neighbours, stop tokens end rows, sampling repeats per seed, and bad input gets clear errors.
#include "graphed/infer/decode_engine.h"

#include <gtest/gtest.h>

#include <ATen/core/grad_mode.h>

#include "error_text.h"
#include "graphed/util/error.h"
#include "test_models.h"

namespace graphed::infer {
namespace {

using Kind = testing::ModelStyle;

model::GptModel small_model(Kind kind) { return testing::cpu_test_model(kind); }

using testing::recompute_greedy;

EngineOptions options_for(int64_t batch, int64_t max_new_tokens) {
  EngineOptions options;
  options.max_batch = batch;
  options.max_sequence = 48;
  options.max_new_tokens = max_new_tokens;
  return options;
}

const std::vector<std::vector<int64_t>> kPrompts{{1, 2, 3, 4, 5, 6, 7}, {9}, {10, 20, 30}};

class DecodeEngineModels : public ::testing::TestWithParam<Kind> {};

TEST_P(DecodeEngineModels, GreedyEqualsRecomputeWithMixedLengthsAndPadding) {
  model::GptModel model = small_model(GetParam());
  DecodeEngine engine(model, at::Device(at::kCPU), options_for(8, 12));
  const Generation result = engine.generate(kPrompts, 12);
  EXPECT_EQ(result.rows, 4);  // 3 prompts padded to the bucket of 4
  EXPECT_FALSE(result.graphed);
  ASSERT_EQ(result.tokens.size(), kPrompts.size());
  for (std::size_t i = 0; i < kPrompts.size(); ++i) {
    EXPECT_EQ(result.tokens[i], recompute_greedy(model, kPrompts[i], 12)) << "prompt " << i;
    EXPECT_FALSE(result.stopped[i]);
  }
  EXPECT_EQ(result.decode_steps, 11);
}

INSTANTIATE_TEST_SUITE_P(RopeAndLearned, DecodeEngineModels,
                         ::testing::Values(Kind::kLlama, Kind::kGpt2, Kind::kHybrid),
                         [](const ::testing::TestParamInfo<Kind>& info) { return testing::style_name(info.param); });

/// A Mamba layer's states carry over prefill's pieces (16 tokens or more each) and stop at each row's
/// last prompt token: a 21-token prompt beside a 2-token one decodes as each does alone.
TEST(DecodeEngine, HybridStatesCarryAcrossPrefillPiecesAndStopAtEachPrompt) {
  model::GptModel model = small_model(Kind::kHybrid);
  std::vector<int64_t> long_prompt;
  for (int64_t i = 0; i < 21; ++i) long_prompt.push_back((7 * i + 3) % 64);
  DecodeEngine engine(model, at::Device(at::kCPU), options_for(2, 6));
  const Generation result = engine.generate({long_prompt, {5, 9}}, 6);
  EXPECT_EQ(result.tokens[0], recompute_greedy(model, long_prompt, 6));
  EXPECT_EQ(result.tokens[1], recompute_greedy(model, {5, 9}, 6));
}

/// A bf16 hybrid model (no autocast in inference) keeps its Mamba states in float32 and decodes; the
/// same prompts give the same tokens twice.
TEST(DecodeEngine, HybridBf16ModelDecodesWithFloatStates) {
  model::GptModel model = small_model(Kind::kHybrid);
  model->to(at::kBFloat16);
  DecodeEngine engine(model, at::Device(at::kCPU), options_for(4, 5));
  const Generation first = engine.generate(kPrompts, 5);
  EXPECT_EQ(engine.generate(kPrompts, 5).tokens, first.tokens);
  const auto rows = engine.cache().rows(1);
  EXPECT_EQ(rows[0].ssm_state.scalar_type(), at::kFloat);
  EXPECT_EQ(rows[0].conv_state.scalar_type(), at::kFloat);
  EXPECT_EQ(rows[1].key.scalar_type(), at::kBFloat16);
  EXPECT_FALSE(rows[2].key.defined() || rows[2].ssm_state.defined()) << "an MLP layer keeps nothing";
}

TEST(DecodeEngine, ARowDoesNotDependOnItsNeighbours) {
  model::GptModel model = small_model(Kind::kLlama);
  SamplingOptions sampling;
  sampling.temperature = 0.8;
  sampling.top_k = 10;
  sampling.seed = 3;
  EngineOptions options = options_for(4, 10);
  options.sampling = sampling;
  DecodeEngine engine(model, at::Device(at::kCPU), options);
  const Generation together = engine.generate(kPrompts, 10);
  const Generation again = engine.generate(kPrompts, 10);
  EXPECT_EQ(together.tokens, again.tokens);  // the same seed: the same text
  // Row 0 alone (a batch of 1, padded to bucket 1) draws other noise rows, so compare greedy instead.
  EngineOptions greedy = options_for(4, 10);
  DecodeEngine greedy_engine(model, at::Device(at::kCPU), greedy);
  const Generation alone = greedy_engine.generate({kPrompts[0]}, 10);
  const Generation batch = greedy_engine.generate(kPrompts, 10);
  EXPECT_EQ(alone.rows, 1);
  EXPECT_EQ(alone.tokens[0], batch.tokens[0]);
}

TEST(DecodeEngine, StopTokensEndRowsAndAreKept) {
  model::GptModel model = small_model(Kind::kLlama);
  DecodeEngine probe(model, at::Device(at::kCPU), options_for(4, 12));
  const Generation free_run = probe.generate(kPrompts, 12);
  const int64_t stop = free_run.tokens[0][3];  // row 0's fourth token
  EngineOptions options = options_for(4, 12);
  options.stop_tokens = {stop};
  DecodeEngine engine(model, at::Device(at::kCPU), options);
  const Generation stopped = engine.generate(kPrompts, 12);
  for (std::size_t row = 0; row < kPrompts.size(); ++row) {
    const auto& all = free_run.tokens[row];
    const auto first = std::find(all.begin(), all.end(), stop);
    if (first == all.end()) {
      EXPECT_EQ(stopped.tokens[row], all);
      EXPECT_FALSE(stopped.stopped[row]);
    } else {
      EXPECT_EQ(stopped.tokens[row], std::vector<int64_t>(all.begin(), first + 1));
      EXPECT_TRUE(stopped.stopped[row]);
    }
  }
  EXPECT_LE(stopped.tokens[0].size(), 4u);
}

TEST(DecodeEngine, StreamsEveryStep) {
  model::GptModel model = small_model(Kind::kGpt2);
  DecodeEngine engine(model, at::Device(at::kCPU), options_for(2, 6));
  std::vector<std::vector<int64_t>> streamed(2);
  const Generation result = engine.generate({{1, 2}, {3}}, 6, [&](int64_t, const std::vector<int64_t>& tokens) {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] >= 0) streamed[i].push_back(tokens[i]);
    }
  });
  EXPECT_EQ(streamed, result.tokens);
}

TEST(DecodeEngine, ALargerBatchThanTheBucketsRunsEagerlyAtItsSize) {
  model::GptModel model = small_model(Kind::kGpt2);
  EngineOptions options = options_for(8, 4);
  options.graph_max_batch = 4;  // buckets 4, 2, 1
  DecodeEngine engine(model, at::Device(at::kCPU), options);
  EXPECT_EQ(engine.rows_for(3), (std::pair<int64_t, bool>{4, false}));
  EXPECT_EQ(engine.rows_for(6), (std::pair<int64_t, bool>{6, false}));
  const Generation result = engine.generate({{1}, {2}, {3}, {4}, {5}, {6}}, 4);
  EXPECT_EQ(result.rows, 6);
  for (std::size_t i = 0; i < 6; ++i)
    EXPECT_EQ(result.tokens[i], recompute_greedy(model, {static_cast<int64_t>(i) + 1}, 4));
}

TEST(DecodeEngine, RefusesBadPrompts) {
  model::GptModel model = small_model(Kind::kLlama);
  DecodeEngine engine(model, at::Device(at::kCPU), options_for(2, 8));
  const auto message = [&](const std::vector<std::vector<int64_t>>& prompts, int64_t count) {
    return testing::error_text<DataError>([&] { engine.generate(prompts, count); });
  };
  EXPECT_NE(message({{1}, {2}, {3}}, 4).find("larger than the cache's 2 rows"), std::string::npos);
  EXPECT_NE(message({{}}, 4).find("prompt 1 is empty"), std::string::npos);
  EXPECT_NE(message({{1, 64}}, 4).find("token id 64, outside the model's vocabulary of 64"), std::string::npos);
  EXPECT_NE(message({std::vector<int64_t>(45, 1)}, 4).find("exceeds the context of 48"), std::string::npos);
  EXPECT_NE(message({{1}}, 9).find("asked for 9 new tokens"), std::string::npos);
}

TEST(DecodeEngine, GraphScopesNeedAGpu) {
  model::GptModel model = small_model(Kind::kLlama);
  EngineOptions options = options_for(2, 4);
  options.scope = config::InferenceCudaGraphScope::kBlock;
  const std::string message =
      testing::error_text<CaptureError>([&] { DecodeEngine engine(model, at::Device(at::kCPU), options); });
  EXPECT_NE(message.find("decode graphs cannot run: "), std::string::npos) << message;
}

}  // namespace
}  // namespace graphed::infer

// tests/infer/decode_engine_cuda_test.cpp — decode graphs on the GPU: at scope layer and block, every
// bucket (8, 4, 2, 1) gives the same tokens and the same key/value cache, bit for bit, as eager decode
// (scope none) on the same padded shapes, with mixed prompt lengths, greedy and sampled, for a
// Llama-style bf16 model (RoPE, GQA, RMSNorm, SwiGLU), a GPT-2-style one (learned positions,
// LayerNorm, GELU, biases) and a Mamba-hybrid one (M*M-: conv and SSM states beside the key/value
// cache, compared too), and sampled with a tokenizer of 300 ids over the model's 512 (the padded ids are
// never drawn, graphed or eager). Also: what capture takes per bucket, and graphs released then recaptured.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <iostream>

#include "graphed/infer/decode_engine.h"
#include "test_models.h"

namespace graphed::infer {
namespace {

using config::InferenceCudaGraphScope;

using Style = testing::ModelStyle;

model::GptModel cuda_model(Style style) { return testing::gpu_test_model(style, 64); }

/// The tokenizer's ids in the padded cases: fewer than the model's 512.
constexpr int64_t kTokenizerVocabulary = 300;

EngineOptions engine_options(InferenceCudaGraphScope scope, bool sampled, bool padded = false) {
  EngineOptions options;
  options.scope = scope;
  options.max_batch = 8;
  options.max_sequence = 64;
  options.max_new_tokens = 24;
  if (sampled) {
    options.sampling.temperature = 0.9;
    options.sampling.top_k = 50;
    options.sampling.top_p = 0.95;
    options.sampling.seed = 1234;
  }
  if (padded) options.sampling.vocabulary = kTokenizerVocabulary;
  return options;
}

struct Decoded {
  std::vector<Generation> generations;
  std::vector<std::vector<at::Tensor>> caches;  // per batch: every layer's key, value, conv and SSM state rows
};

/// Batches 1, 2, 3, 5, 8 (buckets 1, 2, 4, 8, 8) through one engine.
Decoded decode_batches(model::GptModel model, InferenceCudaGraphScope scope, bool sampled, bool padded) {
  DecodeEngine engine(model, at::Device(at::kCUDA), engine_options(scope, sampled, padded));
  Decoded decoded;
  for (const int64_t batch : {1, 2, 3, 5, 8}) {
    const Generation generation = engine.generate(testing::mixed_prompts(batch), 24);
    std::vector<at::Tensor> cache;
    for (const auto& layer : engine.cache().rows(generation.rows)) {
      for (const at::Tensor& tensor : {layer.key, layer.value, layer.conv_state, layer.ssm_state}) {
        if (tensor.defined()) cache.push_back(tensor.clone());
      }
    }
    decoded.generations.push_back(generation);
    decoded.caches.push_back(cache);
  }
  return decoded;
}

struct Case {
  Style style;
  bool sampled;
  bool padded = false;  ///< draw only ids below kTokenizerVocabulary
};

class DecodeGraphsCudaTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible to LibTorch";
  }
};

TEST_P(DecodeGraphsCudaTest, EveryBucketEqualsEagerBitwise) {
  model::GptModel model = cuda_model(GetParam().style);
  const Case& c = GetParam();
  const Decoded eager = decode_batches(model, InferenceCudaGraphScope::kNone, c.sampled, c.padded);
  const Decoded eager_again = decode_batches(model, InferenceCudaGraphScope::kNone, c.sampled, c.padded);
  for (std::size_t b = 0; b < eager.generations.size(); ++b) {
    ASSERT_EQ(eager.generations[b].tokens, eager_again.generations[b].tokens) << "eager decode is not reproducible";
  }
  for (const auto scope : {InferenceCudaGraphScope::kLayer, InferenceCudaGraphScope::kBlock}) {
    const Decoded graphed = decode_batches(model, scope, c.sampled, c.padded);
    for (std::size_t b = 0; b < eager.generations.size(); ++b) {
      const auto& want = eager.generations[b];
      const auto& got = graphed.generations[b];
      EXPECT_TRUE(got.graphed) << config::to_string(scope);
      EXPECT_EQ(got.rows, want.rows);
      EXPECT_EQ(got.tokens, want.tokens) << config::to_string(scope) << ", batch of " << want.tokens.size();
      for (const auto& row : c.padded ? got.tokens : std::vector<std::vector<int64_t>>{}) {
        for (const int64_t id : row) EXPECT_LT(id, kTokenizerVocabulary) << config::to_string(scope);
      }
      for (std::size_t t = 0; t < eager.caches[b].size(); ++t) {
        EXPECT_TRUE(at::equal(graphed.caches[b][t], eager.caches[b][t]))
            << config::to_string(scope) << ", batch of " << want.tokens.size() << ", cache tensor " << t;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, DecodeGraphsCudaTest,
                         ::testing::Values(Case{Style::kLlama, false}, Case{Style::kLlama, true},
                                           Case{Style::kGpt2, false}, Case{Style::kGpt2, true},
                                           Case{Style::kHybrid, false}, Case{Style::kHybrid, true},
                                           Case{Style::kLlama, true, true}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           const Style style = info.param.style;
                           return std::string(style == Style::kLlama  ? "llama_style"
                                              : style == Style::kGpt2 ? "gpt2_style"
                                                                      : "hybrid") +
                                  (info.param.sampled ? "_sampled" : "_greedy") + (info.param.padded ? "_padded" : "");
                         });

TEST(DecodeGraphsCuda, CapturesEveryBucketAndRecapturesAfterRelease) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible to LibTorch";
  model::GptModel model = cuda_model(Style::kLlama);
  for (const auto scope : {InferenceCudaGraphScope::kLayer, InferenceCudaGraphScope::kBlock}) {
    DecodeEngine engine(model, at::Device(at::kCUDA), engine_options(scope, false));
    ASSERT_EQ(engine.buckets(), (std::vector<int64_t>{8, 4, 2, 1}));
    const auto captures = engine.capture(engine.buckets());
    ASSERT_EQ(captures.size(), 4u);
    for (const auto& capture : captures) {
      EXPECT_EQ(capture.graphs, scope == InferenceCudaGraphScope::kLayer ? 3 : 1);
      std::cout << config::to_string(scope) << " bucket " << capture.rows << ": " << capture.seconds * 1000.0
                << " ms, pool " << capture.memory.pool_bytes << " B, graphs " << capture.memory.graph_bytes << " B\n";
    }
    const Generation before = engine.generate(testing::mixed_prompts(3), 24);
    engine.release_graphs();
    EXPECT_TRUE(engine.captures().empty());
    const Generation after = engine.generate(testing::mixed_prompts(3), 24);
    EXPECT_TRUE(after.graphed);
    EXPECT_EQ(after.tokens, before.tokens);
    EXPECT_EQ(engine.captures().size(), 1u);  // only the bucket it needed
  }
}

}  // namespace
}  // namespace graphed::infer

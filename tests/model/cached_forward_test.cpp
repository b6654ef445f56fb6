// tests/model/cached_forward_test.cpp — the inference path over a key/value cache computes what the
// training path computes: a prompt's logits, then one token at a time against a full recompute, for
// rotary + grouped-query attention, learned positions with biases, and an MoE model (float64).
#include <gtest/gtest.h>

#include <ATen/core/grad_mode.h>

#include "graphed/model/gpt_model.h"
#include "run_config_for_test.h"

namespace graphed::model {
namespace {

struct Case {
  const char* name;
  nlohmann::json settings;
};

std::vector<Case> cases() {
  const nlohmann::json common = {{"num_layers", 2},      {"hidden_size", 32}, {"num_attention_heads", 4},
                                 {"vocab_size", 50},     {"seq_length", 24},  {"attention_dropout", 0.0},
                                 {"hidden_dropout", 0.0}};
  nlohmann::json rope = common;
  rope.update({{"position_embedding_type", "rope"},
               {"normalization", "RMSNorm"},
               {"swiglu", true},
               {"group_query_attention", true},
               {"num_query_groups", 2},
               {"add_bias_linear", false}});
  nlohmann::json learned = common;  // GPT-2 style: learned positions, LayerNorm, GELU, biases
  nlohmann::json moe = rope;
  moe.update({{"num_experts", 4}, {"moe_router_topk", 2}});
  return {{"rope_gqa", rope}, {"learned_positions", learned}, {"moe", moe}};
}

class CachedForward : public ::testing::TestWithParam<Case> {};

/// Logits at every position of `tokens` [1, n] through the cache, fed in pieces of `piece` tokens.
at::Tensor cached_logits(GptModel& model, const at::Tensor& tokens, int64_t piece, int64_t max_sequence) {
  std::vector<LayerCache> cache;
  const auto& attention = model->layers()[0]->attention();
  for (std::size_t i = 0; i < model->layers().size(); ++i) {
    const at::Tensor key =
        at::zeros({1, attention->shape().num_query_groups, max_sequence, attention->head_dim()}, at::kDouble);
    cache.push_back({key, at::zeros_like(key)});
  }
  std::vector<at::Tensor> logits;
  for (int64_t start = 0; start < tokens.size(1); start += piece) {
    const int64_t length = std::min(piece, tokens.size(1) - start);
    const at::Tensor positions = at::arange(start, start + length, at::kLong).view({1, length});
    const at::Tensor blocked =
        at::arange(max_sequence, at::kLong).view({1, 1, 1, -1}) > positions.view({1, 1, length, 1});
    at::Tensor hidden = model->embed_at(tokens.narrow(1, start, length), positions);
    for (std::size_t i = 0; i < model->layers().size(); ++i) {
      hidden = model->layers()[i]->forward_cached(hidden, positions, blocked, cache[i]);
    }
    logits.push_back(model->decode_logits(hidden));
  }
  return at::cat(logits, 1);
}

TEST_P(CachedForward, MatchesTheFullForward) {
  at::manual_seed(3);
  const auto config = testing::run_config(GetParam().settings);
  GptModel model(config.model, config.moe_layers);
  model->to(at::kDouble);
  model->eval();
  at::NoGradGuard no_grad;
  const at::Tensor tokens = at::randint(0, 50, {1, 20}, at::kLong);
  const at::Tensor full = model->logits(tokens);
  for (const int64_t piece : {20, 7, 1}) {  // the whole prompt, chunks, one token at a time
    const at::Tensor cached = cached_logits(model, tokens, piece, 24);
    EXPECT_TRUE(at::allclose(cached, full, 1e-9, 1e-9))
        << GetParam().name << " piece " << piece << ": max difference " << (cached - full).abs().max().item<double>();
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CachedForward, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace graphed::model

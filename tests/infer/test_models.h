// tests/infer/test_models.h — the small models the inference tests decode: GPT-2 style (learned
// positions, LayerNorm, GELU, biases), Llama style (RoPE, GQA 4 heads / 2 groups, RMSNorm, SwiGLU, no
// biases) and a Mamba hybrid, at the sizes a test gives, with a fixed seed; greedy decoding by
// recomputing the whole sequence, the reference the engine is held to; and a batch of prompts through
// the serving engine, all added at once.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <ATen/core/grad_mode.h>

#include "graphed/infer/serving_engine.h"
#include "graphed/model/gpt_model.h"
#include "run_config_for_test.h"

namespace graphed::testing {

enum class ModelStyle { kGpt2, kLlama, kHybrid };

inline const char* style_name(ModelStyle style) {
  return style == ModelStyle::kLlama ? "llama" : style == ModelStyle::kGpt2 ? "gpt2" : "hybrid";
}

struct TestModelShape {
  int64_t layers = 2;
  int64_t hidden = 32;
  int64_t vocab = 64;
  int64_t sequence = 48;
  std::string hybrid_pattern = "M*-M";  ///< the hybrid's layers (its layer count)
  int64_t mamba_state = 8;
  int64_t mamba_head_dim = 16;
  int64_t mamba_chunk = 4;  ///< small, so prompts cross scan chunks
  bool untie = false;       ///< Llama style: its own output layer
  int64_t seed = 5;
};

/// The model in eval mode, on `device` in `dtype`.
inline model::GptModel test_model(ModelStyle style, const TestModelShape& shape, at::ScalarType dtype,
                                  const at::Device& device = at::Device(at::kCPU)) {
  nlohmann::json settings = {{"num_layers", shape.layers}, {"hidden_size", shape.hidden},  {"num_attention_heads", 4},
                             {"vocab_size", shape.vocab},  {"seq_length", shape.sequence}, {"attention_dropout", 0.0},
                             {"hidden_dropout", 0.0}};
  if (style == ModelStyle::kLlama) {
    settings.update({{"position_embedding_type", "rope"},
                     {"normalization", "RMSNorm"},
                     {"swiglu", true},
                     {"group_query_attention", true},
                     {"num_query_groups", 2},
                     {"add_bias_linear", false}});
    if (shape.untie) settings["untie_embeddings_and_output_weights"] = true;
  }
  if (style == ModelStyle::kHybrid) {
    settings.update({{"num_layers", static_cast<int64_t>(shape.hybrid_pattern.size())},
                     {"hybrid_override_pattern", shape.hybrid_pattern},
                     {"mamba_state_dim", shape.mamba_state},
                     {"mamba_head_dim", shape.mamba_head_dim},
                     {"mamba_num_groups", 2},
                     {"mamba_chunk_size", shape.mamba_chunk}});
  }
  at::manual_seed(shape.seed);
  const auto config = run_config(settings);
  model::GptModel model(config.model, config.moe_layers);
  model->to(device, dtype);
  model->eval();
  return model;
}

/// The CPU tests' model: float64, the default shape.
inline model::GptModel cpu_test_model(ModelStyle style) { return test_model(style, TestModelShape{}, at::kDouble); }

/// The GPU tests' model: bf16 on CUDA, 3 layers of hidden 128, 512 ids, an M*M- hybrid with scan chunks
/// of 8 (longer prompts cross them), Llama style with its own output layer, seed 7.
inline model::GptModel gpu_test_model(ModelStyle style, int64_t sequence) {
  TestModelShape shape;
  shape.layers = 3;
  shape.hidden = 128;
  shape.vocab = 512;
  shape.sequence = sequence;
  shape.hybrid_pattern = "M*M-";
  shape.mamba_state = 16;
  shape.mamba_head_dim = 32;
  shape.mamba_chunk = 8;
  shape.untie = true;
  shape.seed = 7;
  return test_model(style, shape, at::kBFloat16, at::Device(at::kCUDA));
}

/// Prompts of mixed lengths (1 to 17 tokens, ids below 512) for a batch of the GPU tests.
inline std::vector<std::vector<int64_t>> mixed_prompts(int64_t batch) {
  std::vector<std::vector<int64_t>> result;
  for (int64_t row = 0; row < batch; ++row) {
    std::vector<int64_t> prompt;
    for (int64_t i = 0; i < 1 + (row * 5) % 17; ++i) prompt.push_back((row * 31 + i * 7) % 512);
    result.push_back(prompt);
  }
  return result;
}

/// Greedy continuation by recomputing the whole sequence at every step.
inline std::vector<int64_t> recompute_greedy(model::GptModel& model, std::vector<int64_t> sequence, int64_t count) {
  at::NoGradGuard no_grad;
  std::vector<int64_t> generated;
  for (int64_t i = 0; i < count; ++i) {
    const at::Tensor input = at::tensor(sequence, at::kLong).view({1, -1});
    const int64_t next = model->logits(input).select(1, input.size(1) - 1).argmax(-1).item<int64_t>();
    sequence.push_back(next);
    generated.push_back(next);
  }
  return generated;
}

/// Every prompt's greedy tokens through a serving engine of `options` (all added at once, stepped until
/// done), in prompt order.
inline std::vector<std::vector<int64_t>> serve_greedy(model::GptModel& model, const at::Device& device,
                                                      const infer::ServingOptions& options,
                                                      const std::vector<std::vector<int64_t>>& prompts,
                                                      int64_t new_tokens) {
  infer::ServingEngine engine(model, device, options);
  std::vector<int64_t> ids;
  for (const auto& prompt : prompts) {
    infer::RequestOptions request;
    request.max_new_tokens = new_tokens;
    ids.push_back(engine.add_request(prompt, request));
  }
  std::map<int64_t, std::vector<int64_t>> tokens;
  for (int step = 0; engine.has_work() && step < 100000; ++step) {
    for (const auto& done : engine.step().finished) tokens[done.request] = done.tokens;
  }
  std::vector<std::vector<int64_t>> result;
  for (const int64_t id : ids) result.push_back(tokens[id]);
  return result;
}

}  // namespace graphed::testing

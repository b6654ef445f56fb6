// tests/model/tensor_parallel_cases.h — the models the tensor-parallel tests split over 2 ranks: Llama-,
// GPT-2- and Qwen3-style, MoE (dropless and drop-and-pad) and a Mamba hybrid, each also with sequence
// parallelism (tests/model/gpt_tensor_parallel_test.cpp trains them, tests/infer/
// tensor_parallel_decode_test.cpp decodes them).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

namespace graphed::testing {

struct Case {
  const char* name;
  nlohmann::json settings;
  bool sequence_parallel = false;
};

/// A Llama-style Mamba-hybrid model: 8 Mamba heads of 8 channels in 4 groups (2 heads and 2 groups a
/// rank), chunks of 4 positions.
inline nlohmann::json hybrid_settings() {
  return {{"num_layers", 4},
          {"hidden_size", 32},
          {"num_attention_heads", 4},
          {"vocab_size", 50},
          {"seq_length", 16},
          {"attention_dropout", 0.0},
          {"hidden_dropout", 0.0},
          {"hybrid_override_pattern", "M*M-"},
          {"mamba_state_dim", 8},
          {"mamba_head_dim", 8},
          {"mamba_num_groups", 4},
          {"mamba_chunk_size", 4},
          {"position_embedding_type", "rope"},
          {"normalization", "RMSNorm"},
          {"swiglu", true},
          {"add_bias_linear", false},
          {"untie_embeddings_and_output_weights", true}};
}

inline std::vector<Case> cases() {
  const nlohmann::json common = {{"num_layers", 2},      {"hidden_size", 32}, {"num_attention_heads", 4},
                                 {"vocab_size", 50},     {"seq_length", 16},  {"attention_dropout", 0.0},
                                 {"hidden_dropout", 0.0}};
  nlohmann::json llama = common;
  llama.update({{"position_embedding_type", "rope"},
                {"normalization", "RMSNorm"},
                {"swiglu", true},
                {"group_query_attention", true},
                {"num_query_groups", 2},
                {"add_bias_linear", false},
                {"untie_embeddings_and_output_weights", true}});
  nlohmann::json moe = llama;  // every layer MoE, with a shared expert; drop-and-pad and dropless
  moe.update({{"num_experts", 4},
              {"moe_router_topk", 2},
              {"moe_ffn_hidden_size", 24},
              {"moe_shared_expert_intermediate_size", 16},
              {"moe_aux_loss_coeff", 0.01}});
  nlohmann::json padded_moe = moe;
  padded_moe.update({{"moe_expert_capacity_factor", 1.0},
                     {"moe_pad_expert_input_to_capacity", true},
                     {"add_bias_linear", true},
                     {"swiglu", false}});
  nlohmann::json qwen3 = llama;  // one q/k norm shared by the heads the ranks split
  qwen3["qk_layernorm"] = true;
  return {{"llama_style", llama},
          {"gpt2_style", common},
          {"qwen3_style", qwen3},
          {"llama_style_sequence_parallel", llama, true},
          {"gpt2_style_sequence_parallel", common, true},
          {"moe_dropless", moe},
          {"moe_drop_and_pad", padded_moe},
          {"moe_dropless_sequence_parallel", moe, true},
          {"moe_drop_and_pad_sequence_parallel", padded_moe, true},
          {"hybrid_mamba", hybrid_settings()},
          {"hybrid_mamba_sequence_parallel", hybrid_settings(), true}};
}

}  // namespace graphed::testing

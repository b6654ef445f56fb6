// tests/hf/hf_moe_folder_for_test.h — tiny Hugging Face mixture-of-experts folders written by the test
// itself: Mixtral, Qwen2-MoE (a gated shared expert, dense layers by mlp_only_layers or
// decoder_sparse_step), Qwen3-MoE and OLMoE (q/k norms across heads), their experts named as transformers 4 writes them
// (one tensor per expert and projection) or fused as transformers 5 keeps them (gate_up_proj, down_proj).
#pragma once

#include <string>
#include <vector>

#include "hf_folder_for_test.h"

namespace graphed::testing {

struct MoeSpec {
  std::string architecture =
      "MixtralForCausalLM";  ///< or "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "OlmoeForCausalLM"
  int64_t experts = 4, top_k = 2, expert_ffn = 12, shared_ffn = 20, layers = 2;
  bool norm_topk_prob = false;           ///< Qwen only (Mixtral always renormalises)
  std::vector<int64_t> mlp_only_layers;  ///< Qwen only: dense layers
  int64_t decoder_sparse_step = 1;       ///< Qwen only
  bool fused = false;                    ///< transformers 5's gate_up_proj / down_proj
};

/// The attention family's dense architecture of an MoE one.
inline std::string dense_architecture(const std::string& moe) {
  if (moe == "Qwen2MoeForCausalLM") return "Qwen2ForCausalLM";
  if (moe == "Qwen3MoeForCausalLM") return "Qwen3ForCausalLM";
  return "LlamaForCausalLM";
}

/// Whether layer i of the spec is MoE (transformers' rule).
inline bool is_moe_layer(const MoeSpec& s, int64_t i) {
  if (s.architecture == "MixtralForCausalLM" || s.architecture == "OlmoeForCausalLM") return true;
  for (const int64_t dense : s.mlp_only_layers) {
    if (dense == i) return false;
  }
  return (i + 1) % s.decoder_sparse_step == 0;
}

inline HfFolder moe_folder(const MoeSpec& s) {
  LlamaSpec dense;
  dense.architecture = dense_architecture(s.architecture);
  dense.layers = s.layers;
  HfFolder folder = llama_folder(dense);
  const bool mixtral = s.architecture == "MixtralForCausalLM";
  const bool qwen2 = s.architecture == "Qwen2MoeForCausalLM";
  const bool olmoe = s.architecture == "OlmoeForCausalLM";
  auto& c = folder.config;
  c["architectures"] = {s.architecture};
  c.erase("mlp_bias");
  c["num_experts_per_tok"] = s.top_k;
  if (mixtral) {
    c["num_local_experts"] = s.experts;
    c["intermediate_size"] = s.expert_ffn;
    c["sliding_window"] = nullptr;
  } else if (olmoe) {  // experts intermediate_size wide; q/k norms across heads
    c["num_experts"] = s.experts;
    c["intermediate_size"] = s.expert_ffn;
    c["norm_topk_prob"] = s.norm_topk_prob;
    c["clip_qkv"] = nullptr;
    const int64_t width = c["num_attention_heads"].get<int64_t>() * c["head_dim"].get<int64_t>();
    const int64_t key_width = c["num_key_value_heads"].get<int64_t>() * c["head_dim"].get<int64_t>();
    for (int64_t i = 0; i < s.layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".self_attn.";
      folder.tensors[p + "q_norm.weight"] = norm_weight(width);
      folder.tensors[p + "k_norm.weight"] = norm_weight(key_width);
    }
  } else {
    c["num_experts"] = s.experts;
    c["moe_intermediate_size"] = s.expert_ffn;
    c["norm_topk_prob"] = s.norm_topk_prob;
    c["decoder_sparse_step"] = s.decoder_sparse_step;
    c["mlp_only_layers"] = s.mlp_only_layers;
    c["use_sliding_window"] = false;
    if (qwen2) c["shared_expert_intermediate_size"] = s.shared_ffn;
  }
  auto& t = folder.tensors;
  const int64_t h = c["hidden_size"], f = s.expert_ffn;
  for (int64_t i = 0; i < s.layers; ++i) {
    if (!is_moe_layer(s, i)) continue;
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* name : {"gate_proj", "up_proj", "down_proj"}) t.erase(p + "mlp." + name + ".weight");
    const std::string block = p + (mixtral && !s.fused ? "block_sparse_moe." : "mlp.");
    t[block + "gate.weight"] = random_weight({s.experts, h}) * 5.0;  // routing that differs from token to token
    if (s.fused) {
      t[block + "experts.gate_up_proj"] = random_weight({s.experts, 2 * f, h});
      t[block + "experts.down_proj"] = random_weight({s.experts, h, f});
    } else {
      for (int64_t e = 0; e < s.experts; ++e) {
        const std::string expert = block + "experts." + std::to_string(e) + ".";
        t[expert + (mixtral ? "w1" : "gate_proj") + ".weight"] = random_weight({f, h});
        t[expert + (mixtral ? "w3" : "up_proj") + ".weight"] = random_weight({f, h});
        t[expert + (mixtral ? "w2" : "down_proj") + ".weight"] = random_weight({h, f});
      }
    }
    if (qwen2) {
      t[block + "shared_expert.gate_proj.weight"] = random_weight({s.shared_ffn, h});
      t[block + "shared_expert.up_proj.weight"] = random_weight({s.shared_ffn, h});
      t[block + "shared_expert.down_proj.weight"] = random_weight({h, s.shared_ffn});
      t[block + "shared_expert_gate.weight"] = random_weight({1, h});
    }
  }
  return folder;
}

}  // namespace graphed::testing

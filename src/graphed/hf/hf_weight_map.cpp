// hf/hf_weight_map.cpp — see hf/hf_weight_map.h. The layouts come from transformers'
// modeling_{llama,qwen2,qwen3,gpt2,mixtral,qwen2_moe,qwen3_moe}.py, conversion_mapping.py (transformers 5's
// fused experts) and graphed's model/attention.cpp, mlp.cpp, moe.cpp, norm.cpp and gpt_model.cpp. q_proj/k_proj rows
// are already in the rotate-half RoPE layout graphed uses.
#include "graphed/hf/hf_weight_map.h"

#include <algorithm>
#include <map>
#include <utility>

namespace graphed::hf {
namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Appends placements with a running row offset per parameter.
class MapBuilder {
 public:
  explicit MapBuilder(HfWeightMap& map) : map_(map) {}

  /// A whole parameter (or the next rows of it when called again for the same parameter).
  void add(const std::string& hf_name, std::vector<int64_t> hf_shape, const std::string& parameter,
           bool transpose = false) {
    const int64_t rows = transpose ? hf_shape.back() : hf_shape.front();
    int64_t& next_row = rows_[parameter];
    map_.placements.push_back({hf_name, std::move(hf_shape), parameter, next_row, transpose});
    next_row += rows;
  }
  /// The next rows of an experts' parameter seen transposed: of expert `expert`'s matrix, or (expert -1) of
  /// every expert's at once.
  void add_expert(const std::string& hf_name, std::vector<int64_t> hf_shape, const std::string& parameter,
                  int64_t expert) {
    const int64_t rows = expert >= 0 ? hf_shape.front() : hf_shape.at(1);
    int64_t& next_row = rows_[parameter + "#" + std::to_string(expert)];
    HfTensorPlacement placement{hf_name, std::move(hf_shape), parameter, expert >= 0 ? next_row : 0, false};
    placement.expert = expert;
    placement.transposed_target = true;
    map_.placements.push_back(std::move(placement));
    next_row += rows;
  }
  void zero(const std::string& parameter) { map_.zero_parameters.push_back(parameter); }

 private:
  HfWeightMap& map_;
  std::map<std::string, int64_t> rows_;
};

/// One MoE layer's router, experts and (Qwen2-MoE) shared expert and its gate; hf is "model.layers.i.", moe
/// the graphed prefix "layers.i.moe.".
void add_moe_layer(const HfConfig& config, ExpertLayout layout, const std::string& hf, const std::string& moe,
                   MapBuilder& map) {
  const config::ModelConfig& m = config.model;
  const int64_t h = m.hidden_size;
  const int64_t experts = m.num_experts.value_or(0);
  const int64_t f = m.moe_ffn_hidden_size.value_or(0);
  const bool mixtral = config.architecture == HfArchitecture::kMixtral;
  // Mixtral's transformers 4 module is block_sparse_moe, with w1 (gate), w3 (up) and w2 (down).
  const std::string block = hf + (mixtral && layout == ExpertLayout::kPerExpert ? "block_sparse_moe." : "mlp.");
  map.add(block + "gate.weight", {experts, h}, moe + "router_weight");
  if (layout == ExpertLayout::kFused) {
    map.add_expert(block + "experts.gate_up_proj", {experts, 2 * f, h}, moe + "experts_w1", -1);
    map.add_expert(block + "experts.down_proj", {experts, h, f}, moe + "experts_w2", -1);
  } else {
    const char* gate = mixtral ? "w1" : "gate_proj";
    const char* up = mixtral ? "w3" : "up_proj";
    const char* down = mixtral ? "w2" : "down_proj";
    for (int64_t e = 0; e < experts; ++e) {
      const std::string expert = block + "experts." + std::to_string(e) + ".";
      map.add_expert(expert + gate + ".weight", {f, h}, moe + "experts_w1", e);
      map.add_expert(expert + up + ".weight", {f, h}, moe + "experts_w1", e);
      map.add_expert(expert + down + ".weight", {h, f}, moe + "experts_w2", e);
    }
  }
  if (m.add_bias_linear) {  // attention biases make graphed's experts carry biases too: zero
    map.zero(moe + "experts_b1");
    map.zero(moe + "experts_b2");
  }
  if (const auto shared = m.moe_shared_expert_intermediate_size) {
    map.add(block + "shared_expert.gate_proj.weight", {*shared, h}, moe + "shared_expert.fc1_weight");
    map.add(block + "shared_expert.up_proj.weight", {*shared, h}, moe + "shared_expert.fc1_weight");
    map.add(block + "shared_expert.down_proj.weight", {h, *shared}, moe + "shared_expert.fc2_weight");
    map.add(block + "shared_expert_gate.weight", {1, h}, moe + "shared_expert_gate");
    if (m.add_bias_linear) {
      map.zero(moe + "shared_expert.fc1_bias");
      map.zero(moe + "shared_expert.fc2_bias");
    }
  }
}

void add_llama_family(const HfConfig& config, ExpertLayout layout, MapBuilder& map) {
  const config::ModelConfig& m = config.model;
  const std::vector<bool>& moe_layers = config.moe_layers;
  const int64_t h = m.hidden_size;
  const int64_t heads = m.num_attention_heads;
  const int64_t groups = m.num_query_groups.value_or(heads);
  const int64_t d = m.head_dim();
  const int64_t f = m.ffn_hidden_size.value_or(0);
  const bool graphed_qkv_bias = m.add_bias_linear || m.add_qkv_bias;
  map.add("model.embed_tokens.weight", {m.vocab_size, h}, "word_embeddings");
  for (int64_t i = 0; i < m.num_layers; ++i) {
    const std::string hf = "model.layers." + std::to_string(i) + ".";
    const std::string layer = "layers." + std::to_string(i) + ".";
    map.add(hf + "input_layernorm.weight", {h}, layer + "input_norm.weight");
    // q heads, then k groups, then v groups: the split AttentionImpl::project makes.
    for (const auto& [name, count] :
         {std::pair<const char*, int64_t>{"q_proj", heads}, {"k_proj", groups}, {"v_proj", groups}}) {
      map.add(hf + "self_attn." + name + ".weight", {count * d, h}, layer + "attention.qkv_weight");
    }
    for (const auto& [name, count] :
         {std::pair<const char*, int64_t>{"q_proj", heads}, {"k_proj", groups}, {"v_proj", groups}}) {
      if (config.qkv_bias) map.add(hf + "self_attn." + name + ".bias", {count * d}, layer + "attention.qkv_bias");
    }
    if (graphed_qkv_bias && !config.qkv_bias) map.zero(layer + "attention.qkv_bias");
    map.add(hf + "self_attn.o_proj.weight", {h, heads * d}, layer + "attention.proj_weight");
    if (config.attention_bias) {
      map.add(hf + "self_attn.o_proj.bias", {h}, layer + "attention.proj_bias");
    } else if (m.add_bias_linear) {
      map.zero(layer + "attention.proj_bias");
    }
    if (m.qk_layernorm) {  // per head (Qwen3), or across every head's queries and every group's keys (OLMoE)
      const bool across = m.qk_layernorm_across_heads;
      map.add(hf + "self_attn.q_norm.weight", {across ? heads * d : d}, layer + "attention.q_norm.weight");
      map.add(hf + "self_attn.k_norm.weight", {across ? groups * d : d}, layer + "attention.k_norm.weight");
    }
    map.add(hf + "post_attention_layernorm.weight", {h}, layer + "mlp_norm.weight");
    if (moe_layers[static_cast<std::size_t>(i)]) {
      add_moe_layer(config, layout, hf, layer + "moe.", map);
      continue;
    }
    // graphed's SwiGLU is silu(first half) * second half: gate rows first, then up.
    map.add(hf + "mlp.gate_proj.weight", {f, h}, layer + "mlp.fc1_weight");
    map.add(hf + "mlp.up_proj.weight", {f, h}, layer + "mlp.fc1_weight");
    map.add(hf + "mlp.down_proj.weight", {h, f}, layer + "mlp.fc2_weight");
    if (config.mlp_bias) {
      map.add(hf + "mlp.gate_proj.bias", {f}, layer + "mlp.fc1_bias");
      map.add(hf + "mlp.up_proj.bias", {f}, layer + "mlp.fc1_bias");
      map.add(hf + "mlp.down_proj.bias", {h}, layer + "mlp.fc2_bias");
    } else if (m.add_bias_linear) {
      map.zero(layer + "mlp.fc1_bias");
      map.zero(layer + "mlp.fc2_bias");
    }
  }
  map.add("model.norm.weight", {h}, "final_norm.weight");
  if (!config.tie_word_embeddings) map.add("lm_head.weight", {m.vocab_size, h}, "output_weight");
}

void add_gpt2(const HfConfig& config, MapBuilder& map) {
  const config::ModelConfig& m = config.model;
  const int64_t h = m.hidden_size;
  const int64_t f = m.ffn_hidden_size.value_or(4 * h);
  map.add("transformer.wte.weight", {m.vocab_size, h}, "word_embeddings");
  map.add("transformer.wpe.weight", {m.max_position_embeddings.value_or(m.seq_length), h}, "position_embeddings");
  for (int64_t i = 0; i < m.num_layers; ++i) {
    const std::string hf = "transformer.h." + std::to_string(i) + ".";
    const std::string layer = "layers." + std::to_string(i) + ".";
    map.add(hf + "ln_1.weight", {h}, layer + "input_norm.weight");
    map.add(hf + "ln_1.bias", {h}, layer + "input_norm.bias");
    // c_attn's output columns are q, k, v (split by n_embd), each head-major: graphed's qkv rows.
    map.add(hf + "attn.c_attn.weight", {h, 3 * h}, layer + "attention.qkv_weight", /*transpose=*/true);
    map.add(hf + "attn.c_attn.bias", {3 * h}, layer + "attention.qkv_bias");
    map.add(hf + "attn.c_proj.weight", {h, h}, layer + "attention.proj_weight", true);
    map.add(hf + "attn.c_proj.bias", {h}, layer + "attention.proj_bias");
    map.add(hf + "ln_2.weight", {h}, layer + "mlp_norm.weight");
    map.add(hf + "ln_2.bias", {h}, layer + "mlp_norm.bias");
    map.add(hf + "mlp.c_fc.weight", {h, f}, layer + "mlp.fc1_weight", true);
    map.add(hf + "mlp.c_fc.bias", {f}, layer + "mlp.fc1_bias");
    map.add(hf + "mlp.c_proj.weight", {f, h}, layer + "mlp.fc2_weight", true);
    map.add(hf + "mlp.c_proj.bias", {h}, layer + "mlp.fc2_bias");
  }
  map.add("transformer.ln_f.weight", {h}, "final_norm.weight");
  map.add("transformer.ln_f.bias", {h}, "final_norm.bias");
  if (!config.tie_word_embeddings) map.add("lm_head.weight", {m.vocab_size, h}, "output_weight");
}

}  // namespace

HfWeightMap hf_weight_map(const HfConfig& config, ExpertLayout layout) {
  HfWeightMap map;
  MapBuilder builder(map);
  if (config.architecture == HfArchitecture::kGpt2) {
    add_gpt2(config, builder);
  } else {
    add_llama_family(config, layout, builder);
  }
  return map;
}

ExpertLayout expert_layout_of(const std::vector<std::string>& names) {
  const bool fused = std::any_of(names.begin(), names.end(),
                                 [](const std::string& name) { return ends_with(name, ".experts.gate_up_proj"); });
  return fused ? ExpertLayout::kFused : ExpertLayout::kPerExpert;
}

bool is_ignored_hf_tensor(const HfConfig& config, const std::string& hf_name) {
  if (hf_name == "lm_head.weight") return config.tie_word_embeddings;
  if (config.architecture == HfArchitecture::kGpt2) {
    return ends_with(hf_name, ".attn.bias") || ends_with(hf_name, ".attn.masked_bias");
  }
  return ends_with(hf_name, "rotary_emb.inv_freq");
}

}  // namespace graphed::hf

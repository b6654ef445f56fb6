// tests/hf/hf_folder_for_test.h — tiny Hugging Face model folders written by the test itself:
// config.json, random weights named as save_pretrained names them, in one model.safetensors or in
// shards with model.safetensors.index.json. The float64 masters stay in HfFolder::tensors so a test
// can compute the reference forward from them.
#pragma once

#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "graphed/util/file_system.h"
#include "graphed/util/safetensors.h"

namespace graphed::testing {

struct HfFolder {
  nlohmann::json config;
  std::map<std::string, at::Tensor> tensors;  ///< float64
  const at::Tensor& at(const std::string& name) const { return tensors.at(name); }
};

inline void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

/// A random weight (std 0.2) or a norm weight near 1.
inline at::Tensor random_weight(std::vector<int64_t> shape) { return at::randn(shape, at::kDouble) * 0.2; }
inline at::Tensor norm_weight(int64_t size) { return 1.0 + at::randn({size}, at::kDouble) * 0.1; }

/// The shape of a Llama-family model: Llama, Qwen2 (architecture "Qwen2ForCausalLM": q/k/v biases)
/// or Qwen3 ("Qwen3ForCausalLM": q_norm, k_norm).
struct LlamaSpec {
  std::string architecture = "LlamaForCausalLM";
  int64_t hidden = 16, heads = 4, kv_heads = 2, head_dim = 4, layers = 2, ffn = 24, vocab = 50;
  bool attention_bias = false;  ///< Llama/Qwen3: q/k/v/o biases
  bool mlp_bias = false;        ///< Llama
  bool tie = false;
  double theta = 10000.0;
  nlohmann::json rope_scaling;  ///< null, or {"rope_type": "llama3", ...}
};

inline HfFolder llama_folder(const LlamaSpec& s) {
  HfFolder folder;
  const bool qwen2 = s.architecture == "Qwen2ForCausalLM";
  const bool qwen3 = s.architecture == "Qwen3ForCausalLM";
  folder.config = {{"architectures", {s.architecture}},
                   {"hidden_size", s.hidden},
                   {"intermediate_size", s.ffn},
                   {"num_hidden_layers", s.layers},
                   {"num_attention_heads", s.heads},
                   {"num_key_value_heads", s.kv_heads},
                   {"head_dim", s.head_dim},
                   {"vocab_size", s.vocab},
                   {"max_position_embeddings", 64},
                   {"rms_norm_eps", 1e-5},
                   {"rope_theta", s.theta},
                   {"rope_scaling", s.rope_scaling},
                   {"hidden_act", "silu"},
                   {"tie_word_embeddings", s.tie},
                   {"attention_bias", s.attention_bias},
                   {"mlp_bias", s.mlp_bias},
                   {"torch_dtype", "float32"},
                   {"bos_token_id", 1},
                   {"eos_token_id", 2}};
  auto& t = folder.tensors;
  const int64_t d = s.head_dim;
  t["model.embed_tokens.weight"] = at::randn({s.vocab, s.hidden}, at::kDouble);
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t[p + "input_layernorm.weight"] = norm_weight(s.hidden);
    t[p + "post_attention_layernorm.weight"] = norm_weight(s.hidden);
    t[p + "self_attn.q_proj.weight"] = random_weight({s.heads * d, s.hidden});
    t[p + "self_attn.k_proj.weight"] = random_weight({s.kv_heads * d, s.hidden});
    t[p + "self_attn.v_proj.weight"] = random_weight({s.kv_heads * d, s.hidden});
    t[p + "self_attn.o_proj.weight"] = random_weight({s.hidden, s.heads * d});
    if (qwen2 || s.attention_bias) {
      t[p + "self_attn.q_proj.bias"] = random_weight({s.heads * d});
      t[p + "self_attn.k_proj.bias"] = random_weight({s.kv_heads * d});
      t[p + "self_attn.v_proj.bias"] = random_weight({s.kv_heads * d});
    }
    if (s.attention_bias && !qwen2) t[p + "self_attn.o_proj.bias"] = random_weight({s.hidden});
    if (qwen3) {
      t[p + "self_attn.q_norm.weight"] = norm_weight(d);
      t[p + "self_attn.k_norm.weight"] = norm_weight(d);
    }
    t[p + "mlp.gate_proj.weight"] = random_weight({s.ffn, s.hidden});
    t[p + "mlp.up_proj.weight"] = random_weight({s.ffn, s.hidden});
    t[p + "mlp.down_proj.weight"] = random_weight({s.hidden, s.ffn});
    if (s.mlp_bias) {
      t[p + "mlp.gate_proj.bias"] = random_weight({s.ffn});
      t[p + "mlp.up_proj.bias"] = random_weight({s.ffn});
      t[p + "mlp.down_proj.bias"] = random_weight({s.hidden});
    }
  }
  t["model.norm.weight"] = norm_weight(s.hidden);
  if (!s.tie) t["lm_head.weight"] = random_weight({s.vocab, s.hidden});
  return folder;
}

/// GPT-2 (GPT2LMHeadModel): names with "transformer." as save_pretrained writes them.
inline HfFolder gpt2_folder(int64_t hidden = 16, int64_t heads = 4, int64_t layers = 2, int64_t vocab = 50,
                            int64_t positions = 32) {
  HfFolder folder;
  folder.config = {{"architectures", {"GPT2LMHeadModel"}},
                   {"model_type", "gpt2"},
                   {"n_embd", hidden},
                   {"n_head", heads},
                   {"n_layer", layers},
                   {"n_positions", positions},
                   {"vocab_size", vocab},
                   {"n_inner", nullptr},
                   {"activation_function", "gelu_new"},
                   {"layer_norm_epsilon", 1e-5},
                   {"bos_token_id", 0},
                   {"eos_token_id", 0}};
  auto& t = folder.tensors;
  t["transformer.wte.weight"] = at::randn({vocab, hidden}, at::kDouble);
  t["transformer.wpe.weight"] = random_weight({positions, hidden});
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    t[p + "ln_1.weight"] = norm_weight(hidden);
    t[p + "ln_1.bias"] = random_weight({hidden});
    t[p + "attn.c_attn.weight"] = random_weight({hidden, 3 * hidden});
    t[p + "attn.c_attn.bias"] = random_weight({3 * hidden});
    t[p + "attn.c_proj.weight"] = random_weight({hidden, hidden});
    t[p + "attn.c_proj.bias"] = random_weight({hidden});
    t[p + "ln_2.weight"] = norm_weight(hidden);
    t[p + "ln_2.bias"] = random_weight({hidden});
    t[p + "mlp.c_fc.weight"] = random_weight({hidden, 4 * hidden});
    t[p + "mlp.c_fc.bias"] = random_weight({4 * hidden});
    t[p + "mlp.c_proj.weight"] = random_weight({4 * hidden, hidden});
    t[p + "mlp.c_proj.bias"] = random_weight({hidden});
  }
  t["transformer.ln_f.weight"] = norm_weight(hidden);
  t["transformer.ln_f.bias"] = random_weight({hidden});
  return folder;
}

/// Writes config.json and the weights in `stored` dtype: one model.safetensors, or `shards` files
/// model-0000i-of-0000N.safetensors (tensors dealt round-robin, so a layer's q/k/v land in different
/// shards) with model.safetensors.index.json.
inline void write_folder(const std::string& dir, const HfFolder& folder, at::ScalarType stored = at::kFloat,
                         int shards = 1) {
  create_directories(dir);
  write_text(join_path(dir, "config.json"), folder.config.dump(2));
  std::vector<std::vector<std::pair<std::string, at::Tensor>>> parts(static_cast<std::size_t>(shards));
  std::size_t next = 0;
  for (const auto& [name, tensor] : folder.tensors) {
    parts[next++ % parts.size()].emplace_back(name, tensor.to(stored));
  }
  if (shards == 1) {
    write_safetensors(join_path(dir, "model.safetensors"), parts[0], {{"format", "pt"}});
    return;
  }
  nlohmann::json weight_map = nlohmann::json::object();
  for (int i = 0; i < shards; ++i) {
    const std::string file =
        "model-0000" + std::to_string(i + 1) + "-of-0000" + std::to_string(shards) + ".safetensors";
    write_safetensors(join_path(dir, file), parts[static_cast<std::size_t>(i)], {{"format", "pt"}});
    for (const auto& item : parts[static_cast<std::size_t>(i)]) weight_map[item.first] = file;
  }
  write_text(join_path(dir, "model.safetensors.index.json"),
             nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump(2));
}

}  // namespace graphed::testing

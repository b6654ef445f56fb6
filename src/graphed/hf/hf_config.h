// hf/hf_config.h — a Hugging Face model folder's config.json (and generation_config.json) as
// graphed's config::ModelConfig. Supported: LlamaForCausalLM (Llama 1/2/3, rope_scaling none or
// llama3), Qwen2ForCausalLM (QKV biases, no sliding window), Qwen3ForCausalLM (q/k RMSNorm, head_dim),
// GPT2LMHeadModel, and the mixtures of experts MixtralForCausalLM, Qwen2MoeForCausalLM (a sigmoid-gated
// shared expert), Qwen3MoeForCausalLM and OlmoeForCausalLM (q/k norms across heads) (dropless, through the
// grouped GEMM; docs/hf-models.md). Fields missing from
// config.json take transformers' defaults for the class; both transformers 4 (rope_theta, rope_scaling, torch_dtype)
// and 5 (rope_parameters, dtype) spellings are read. Anything graphed cannot run the way transformers does is a
// DataError naming the file, the field, its value and what is supported. No tensors here: hf/hf_model.h loads the
// weights.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graphed/config/model_config.h"

namespace graphed::hf {

/// The model families whose weights graphed knows how to map.
enum class HfArchitecture { kLlama, kQwen2, kQwen3, kGpt2, kMixtral, kQwen2Moe, kQwen3Moe, kOlmoe };

/// "LlamaForCausalLM", "Qwen2ForCausalLM", ..., "Qwen3MoeForCausalLM"
const char* to_string(HfArchitecture architecture);

/// The dense family whose attention an architecture has: Mixtral's is Llama's (Mistral's), OLMoE's Llama's with
/// q/k norms across heads, Qwen2-MoE's Qwen2's, Qwen3-MoE's Qwen3's; the others are their own.
HfArchitecture attention_family(HfArchitecture architecture);

/// Whether the architecture has mixture-of-experts layers.
bool is_moe_architecture(HfArchitecture architecture);

struct HfConfig {
  HfArchitecture architecture = HfArchitecture::kLlama;
  /// The model as graphed builds it: resolved (every optional with a derived default is set), dropout 0,
  /// seq_length = max_position_embeddings (the model's context).
  config::ModelConfig model;
  /// Which of the model's layers are MoE (model.moe_layer_freq parsed once): all false for a dense model.
  std::vector<bool> moe_layers;
  /// Which Hugging Face tensors exist (the weight map needs it; graphed's biases follow add_bias_linear).
  bool attention_bias = false;       ///< q/k/v/o biases (Llama, Qwen3 attention_bias; GPT-2)
  bool qkv_bias = false;             ///< q/k/v biases (Qwen2 always; attention_bias)
  bool mlp_bias = false;             ///< MLP biases (Llama mlp_bias; GPT-2)
  bool tie_word_embeddings = false;  ///< the output layer is the input embedding (lm_head.weight unused)
  /// generation_config.json's eos_token_id (an int or a list), else config.json's; may be empty.
  std::vector<int64_t> eos_token_ids;
  /// generation_config.json's bos_token_id, else config.json's.
  std::optional<int64_t> bos_token_id;
  /// config.json's dtype (transformers 5) or torch_dtype (4): "float32", "float16", "bfloat16", "float64".
  std::optional<std::string> dtype;
};

/// Reads FOLDER/config.json and, when present, FOLDER/generation_config.json. Throws DataError when the
/// folder or config.json is missing or not JSON, a field has the wrong type, the architecture or a
/// field's value is not supported (listing what is), or the sizes do not fit together (e.g.
/// num_attention_heads not divisible by num_key_value_heads).
HfConfig read_hf_config(const std::string& folder);

}  // namespace graphed::hf

// hf/hf_model.h — loads a Hugging Face causal LM folder (config.json, generation_config.json,
// model.safetensors or model.safetensors.index.json + shards) into graphed's model::GptModel:
// LlamaForCausalLM (Llama 1/2/3), Qwen2ForCausalLM, Qwen3ForCausalLM, GPT2LMHeadModel, MixtralForCausalLM,
// Qwen2MoeForCausalLM, Qwen3MoeForCausalLM and OlmoeForCausalLM (experts stored per expert or fused). The config is
// read by hf/hf_config.h, tensors are placed by hf/hf_weight_map.h. Every tensor name, shape and
// the file set are checked before a parameter is written. No tokenizer, no generation here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "graphed/config/model_config.h"
#include "graphed/model/gpt_model.h"

namespace graphed::hf {

struct HfModel {
  std::string architecture;             ///< "LlamaForCausalLM", "Qwen2ForCausalLM", ... (hf/hf_config.h)
  config::ModelConfig config;           ///< what `model` was built from (dropout 0, seq_length = context)
  model::GptModel model{nullptr};       ///< eval mode, parameters in `dtype` on the device, no grad
  std::vector<int64_t> eos_token_ids;   ///< generation_config.json's, else config.json's; may be empty
  std::optional<int64_t> bos_token_id;  ///< likewise
  at::ScalarType dtype = at::kFloat;    ///< of every parameter
};

/// Loads the model in `folder` onto `device`. dtype: the parameters' dtype; unset = config.json's dtype
/// (torch_dtype), else the dtype of the weights in the file. Weights of another floating dtype are
/// converted; on a CUDA device they are copied through pinned memory without blocking the host. The model
/// is in eval mode with requires_grad off, and the global CPU random state is left as it was (the
/// constructor's random initialization draws from it before the weights replace it).
/// Throws DataError for: a missing folder, config.json, weights file or shard; an unsupported
/// architecture or config value (hf/hf_config.h); a tensor that is missing, unexpected, of the wrong
/// shape or not floating point, naming the file and the tensor. A damaged safetensors file is a
/// CheckpointError (a DataError) from the reader.
HfModel load_hf_model(const std::string& folder, const at::Device& device,
                      std::optional<at::ScalarType> dtype = std::nullopt);

}  // namespace graphed::hf

// hf/hf_weight_map.h — where each tensor of a Hugging Face checkpoint goes in graphed's GptModel:
// the parameter, the rows it fills, whether it is transposed (GPT-2's Conv1D stores [in, out]), and the
// shape config.json implies for it. Names are those save_pretrained writes (Llama family "model.*",
// GPT-2 "transformer.*"). Pure bookkeeping over an HfConfig: no files, no tensors.
//
//   Llama / Qwen2 / Qwen3 (layer i)                 graphed (layers.i.)
//   self_attn.{q,k,v}_proj.{weight,bias}            attention.qkv_{weight,bias}: rows q heads, k groups, v groups
//   self_attn.o_proj.{weight,bias}                  attention.proj_{weight,bias}
//   self_attn.{q,k}_norm.weight  (Qwen3)            attention.{q,k}_norm.weight
//   mlp.{gate,up}_proj.{weight,bias}                mlp.fc1_{weight,bias}: rows gate, then up (silu(gate) * up)
//   mlp.down_proj.{weight,bias}                     mlp.fc2_{weight,bias}
//   input_layernorm / post_attention_layernorm      input_norm / mlp_norm
//   model.embed_tokens, model.norm, lm_head         word_embeddings, final_norm, output_weight (untied)
//   MoE layer (Mixtral: block_sparse_moe.*, w1 gate, w3 up, w2 down; Qwen: mlp.*)
//   mlp.gate.weight                                 moe.router_weight
//   mlp.experts.E.{gate,up}_proj.weight             moe.experts_w1[E] transposed: columns gate, then up
//   mlp.experts.E.down_proj.weight                  moe.experts_w2[E] transposed
//   mlp.experts.gate_up_proj, down_proj             the same, every expert in one tensor (transformers 5)
//   mlp.shared_expert.*, shared_expert_gate (Qwen2-MoE)   moe.shared_expert.fc1/fc2, moe.shared_expert_gate
//   GPT-2: wte, wpe, ln_f                           word_embeddings, position_embeddings, final_norm
//   h.i.ln_1 / ln_2                                 layers.i.input_norm / mlp_norm (weight and bias)
//   h.i.attn.c_attn (q, k, v columns), c_proj       attention.qkv_*, proj_* (weights transposed)
//   h.i.mlp.c_fc, c_proj                            mlp.fc1_*, fc2_* (weights transposed)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graphed/hf/hf_config.h"

namespace graphed::hf {

/// One Hugging Face tensor and the slice of a graphed parameter it fills.
struct HfTensorPlacement {
  std::string hf_name;            ///< "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> hf_shape;  ///< the shape config.json implies, as stored in the file
  std::string parameter;          ///< graphed's parameter, "layers.0.attention.qkv_weight"
  int64_t first_row = 0;          ///< the rows (dim 0) [first_row, first_row + rows) of the target it fills
  bool transpose = false;         ///< stored [in, out] (GPT-2 Conv1D); graphed's is [out, in]
  int64_t expert = -1;            ///< >= 0: the target is the parameter's slice [expert] (one expert's matrix)
  /// The target is seen with its last two dimensions swapped: graphed keeps the experts' matrices [in, out],
  /// Hugging Face [out, in].
  bool transposed_target = false;
};

/// How a checkpoint stores the experts: one tensor per expert and projection (transformers 4 and the hub's
/// files), or every expert's gate and up projections in one gate_up_proj [E, 2 f, h] and the down projections
/// in one down_proj [E, h, f] (transformers 5).
enum class ExpertLayout { kPerExpert, kFused };

struct HfWeightMap {
  std::vector<HfTensorPlacement> placements;  ///< every tensor the checkpoint must hold
  /// graphed parameters with no Hugging Face tensor: biases graphed has because add_bias_linear covers
  /// both attention and MLP while the model has only one of them. Zeros leave the function unchanged.
  std::vector<std::string> zero_parameters;
};

/// The placements for the model config describes, its experts stored as `layout` says.
HfWeightMap hf_weight_map(const HfConfig& config, ExpertLayout layout = ExpertLayout::kPerExpert);

/// The layout of the experts among a checkpoint's tensor names: kFused when some name ends in
/// ".experts.gate_up_proj".
ExpertLayout expert_layout_of(const std::vector<std::string>& names);

/// Tensors a checkpoint may hold that graphed does not need: transformers' buffers (GPT-2's attn.bias
/// and attn.masked_bias causal masks, rotary_emb.inv_freq) and lm_head.weight of a tied model.
bool is_ignored_hf_tensor(const HfConfig& config, const std::string& hf_name);

}  // namespace graphed::hf

// model/layer_shapes.cpp — see model/layer_shapes.h.
#include "graphed/model/layer_shapes.h"

#include <algorithm>
#include <cmath>

namespace graphed::model {
namespace {

/// The output projections' init std: Megatron's scaled init (std / sqrt(2 layers)).
double output_std(const config::ModelConfig& config) {
  return config.init_method_std / std::sqrt(2.0 * static_cast<double>(config.num_layers));
}

}  // namespace

Norm layer_norm(const config::ModelConfig& config) {
  return Norm(config.hidden_size, config.normalization == config::Normalization::kRmsNorm, config.norm_epsilon);
}

AttentionShape attention_shape(const config::ModelConfig& config) {
  AttentionShape attention;
  attention.hidden_size = config.hidden_size;
  attention.num_heads = config.num_attention_heads;
  attention.num_query_groups = config.num_query_groups.value_or(config.num_attention_heads);
  attention.head_dim = config.kv_channels.value_or(0);
  // Every position the model may see: the serving engine indexes the table by position, up to the model's
  // context (max_position_embeddings), which may exceed the training sequence.
  attention.max_sequence = std::max(config.seq_length, config.max_position_embeddings.value_or(config.seq_length));
  attention.rope = config.position_embedding_type == config::PositionEmbedding::kRope;
  attention.rotary_base = config.rotary_base;
  attention.rope_scaling = config.use_rope_scaling;
  attention.rope_scaling_options = {config.rope_scaling_factor, config.rope_scaling_low_freq_factor,
                                    config.rope_scaling_high_freq_factor,
                                    config.rope_scaling_original_max_position_embeddings};
  attention.bias = config.add_bias_linear;
  attention.qkv_bias = config.add_qkv_bias;
  attention.qk_norm = config.qk_layernorm;
  attention.qk_norm_across_heads = config.qk_layernorm && config.qk_layernorm_across_heads;
  attention.rms_norm = config.normalization == config::Normalization::kRmsNorm;
  attention.norm_epsilon = config.norm_epsilon;
  attention.attention_dropout = config.attention_dropout;
  attention.init_std = config.init_method_std;
  attention.output_init_std = output_std(config);
  return attention;
}

MambaShape mamba_shape(const config::ModelConfig& config) {
  MambaShape mamba;
  mamba.hidden_size = config.hidden_size;
  mamba.state_size = config.mamba_state_dim;
  mamba.head_dim = config.mamba_head_dim;
  mamba.num_groups = config.mamba_num_groups;
  mamba.num_heads_override = config.mamba_num_heads.value_or(0);
  mamba.conv_width = config.mamba_conv_width;
  mamba.chunk_size = config.mamba_chunk_size;
  mamba.norm_epsilon = config.norm_epsilon;
  mamba.init_std = config.init_method_std;
  mamba.output_init_std = output_std(config);
  return mamba;
}

MlpShape mlp_shape(const config::ModelConfig& config) {
  return {config.hidden_size,     config.ffn_hidden_size.value_or(4 * config.hidden_size),
          config.swiglu,          config.add_bias_linear,
          config.init_method_std, output_std(config),
          config.openai_gelu};
}

MoeShape moe_shape(const config::ModelConfig& config) {
  MoeShape moe;
  moe.hidden_size = config.hidden_size;
  moe.num_experts = config.num_experts.value_or(2);
  moe.top_k = config.moe_router_topk;
  moe.expert_ffn_hidden_size =
      config.moe_ffn_hidden_size.value_or(config.ffn_hidden_size.value_or(4 * config.hidden_size));
  moe.shared_expert_size = config.moe_shared_expert_intermediate_size;
  moe.shared_expert_gate = config.moe_shared_expert_gate;
  moe.pre_softmax = config.moe_router_pre_softmax;
  moe.capacity_factor = config.moe_expert_capacity_factor;
  moe.pad_to_capacity = config.moe_pad_expert_input_to_capacity;
  moe.grouped_gemm = config.moe_grouped_gemm;
  moe.expert_rank_capacity_factor = config.moe_expert_rank_capacity_factor;
  moe.aux_loss_coeff = config.moe_aux_loss_coeff;
  moe.swiglu = config.swiglu;
  moe.openai_gelu = config.openai_gelu;
  moe.bias = config.add_bias_linear;
  moe.init_std = config.init_method_std;
  moe.output_init_std = output_std(config);
  return moe;
}

}  // namespace graphed::model

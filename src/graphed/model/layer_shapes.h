// model/layer_shapes.h — the shapes of a transformer layer's modules from the model config (Megatron's flags):
// its norms, attention, the Mamba mixer, the dense MLP and the MoE. The output projections take Megatron's
// scaled init (std / sqrt(2 layers)). Only translation: the modules check their shapes themselves.
#pragma once

#include "graphed/config/model_config.h"
#include "graphed/model/attention.h"
#include "graphed/model/mamba_mixer.h"
#include "graphed/model/mlp.h"
#include "graphed/model/moe.h"
#include "graphed/model/norm.h"

namespace graphed::model {

/// A norm before a part of the layer (--normalization, --norm-epsilon).
Norm layer_norm(const config::ModelConfig& config);
/// The attention's shape (--num-attention-heads, --num-query-groups, --kv-channels, RoPE, q/k norm, ...).
AttentionShape attention_shape(const config::ModelConfig& config);
/// The Mamba mixer's shape from the config (--mamba-* settings).
MambaShape mamba_shape(const config::ModelConfig& config);
/// The dense MLP's shape (--ffn-hidden-size, default 4 x hidden; --swiglu).
MlpShape mlp_shape(const config::ModelConfig& config);
/// The MoE's shape (--num-experts, --moe-*; the experts' ffn size defaults to the dense MLP's).
MoeShape moe_shape(const config::ModelConfig& config);

}  // namespace graphed::model

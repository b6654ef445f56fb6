// config/hybrid_pattern.h — which kind each layer of a hybrid model is (issue 14): Megatron's symbols
// (M Mamba, * attention, - MLP, E MoE), from --hybrid-override-pattern or, without one, spread by
// --hybrid-attention-ratio and --hybrid-mlp-ratio as Megatron's allocate_layers spreads them. Not yet
// read by any command: the layers that use it come with the rest of the issue.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace graphed::config {

/// One symbol per layer: "MM*-MM*-" and the like. The ratios are in [0, 1] with a sum of at most 1
/// (Mamba takes the rest). Attention layers are spread evenly with Mamba at both ends; MLP layers
/// replace evenly spread Mamba layers, right-justified. A pattern must have num_layers valid symbols,
/// and when a ratio is nonzero, as many of each kind as the ratios give. Throws ConfigError naming the
/// flag, the value and the fix; a multi-token-prediction pattern ("main/mtp") is refused.
std::string allocate_hybrid_layers(int64_t num_layers, double attention_ratio, double mlp_ratio,
                                   const std::optional<std::string>& override_pattern);

}  // namespace graphed::config

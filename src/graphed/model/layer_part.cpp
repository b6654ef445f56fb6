// model/layer_part.cpp — see model/layer_part.h.
#include "graphed/model/layer_part.h"

#include "graphed/util/error.h"

namespace graphed::model {

const char* to_string(LayerUnit unit) {
  switch (unit) {
    case LayerUnit::kWholeLayer: return "layer";
    case LayerUnit::kAttention: return "attention";
    case LayerUnit::kMlp: return "mlp";
    case LayerUnit::kMoe: return "moe";
    case LayerUnit::kMoeRouter: return "moe_router";
    case LayerUnit::kMoePreprocess: return "moe_preprocess";
    case LayerUnit::kMamba: return "mamba";
  }
  return "unknown";
}

LayerParts transformer_parts(bool is_moe) {
  return {Mixer::kAttention, is_moe ? FeedForward::kMoe : FeedForward::kDense};
}

LayerParts hybrid_parts(char symbol) {
  switch (symbol) {
    case 'M': return {Mixer::kMamba, FeedForward::kNone};
    case '*': return {Mixer::kAttention, FeedForward::kNone};
    case '-': return {Mixer::kNone, FeedForward::kDense};
    case 'E': return {Mixer::kNone, FeedForward::kMoe};
  }
  GRAPHED_INTERNAL_ASSERT(false, "hybrid layer symbol '", std::string(1, symbol), "'");
  return {};
}

void append_parameters(NamedParameters& parameters, const std::string& prefix, const torch::nn::Module& module) {
  for (const auto& item : module.named_parameters()) parameters.emplace_back(prefix + item.key(), item.value());
}

std::vector<std::pair<std::string, ParameterSplit>> prefixed(
    const std::string& prefix, const std::vector<std::pair<std::string, ParameterSplit>>& splits) {
  std::vector<std::pair<std::string, ParameterSplit>> named;
  for (const auto& [name, split] : splits) named.emplace_back(prefix + name, split);
  return named;
}

}  // namespace graphed::model

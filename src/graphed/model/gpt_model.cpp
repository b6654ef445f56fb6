// model/gpt_model.cpp — see model/gpt_model.h.
#include "graphed/model/gpt_model.h"

#include <torch/nn/modules/container/modulelist.h>

namespace graphed::model {

GptModelImpl::GptModelImpl(const config::ModelConfig& config, const std::vector<bool>& moe_layers)
    : config_(config) {
  const int64_t h = config.hidden_size;
  word_embeddings_ = register_parameter("word_embeddings", at::randn({config.vocab_size, h}) * config.init_method_std);
  if (config.position_embedding_type == "learned_absolute") {
    position_embeddings_ = register_parameter(
        "position_embeddings", at::randn({config.max_position_embeddings.value_or(config.seq_length), h}) *
                                   config.init_method_std);
  }
  layer_list_ = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.num_layers; ++i) {
    const bool is_moe = i < static_cast<int64_t>(moe_layers.size()) && moe_layers[static_cast<std::size_t>(i)];
    layers_.emplace_back(config, i + 1, is_moe);
    layer_list_->push_back(layers_.back());
  }
  final_norm_ = register_module("final_norm", Norm(h, config.normalization == "RMSNorm", config.norm_epsilon));
  if (config.untie_embeddings_and_output_weights) {
    output_weight_ = register_parameter("output_weight", at::randn({config.vocab_size, h}) * config.init_method_std);
  }
}

at::Tensor GptModelImpl::hidden_states(const at::Tensor& tokens, at::Tensor& aux_loss) {
  at::Tensor hidden = at::embedding(word_embeddings_, tokens);  // [b, s, h]
  if (position_embeddings_.defined()) {
    hidden = hidden + position_embeddings_.narrow(0, 0, tokens.size(1));
  }
  if (config_.hidden_dropout > 0.0 && is_training()) hidden = at::dropout(hidden, config_.hidden_dropout, true);
  aux_loss = at::Tensor();
  for (auto& layer : layers_) {
    auto [next, layer_aux] = layer->forward(hidden);
    hidden = next;
    if (layer_aux.defined()) aux_loss = aux_loss.defined() ? aux_loss + layer_aux : layer_aux;
  }
  if (!aux_loss.defined()) aux_loss = at::zeros({}, hidden.options().dtype(at::promote_types(hidden.scalar_type(), at::kFloat)));
  return final_norm_->forward(hidden);
}

at::Tensor GptModelImpl::logits(const at::Tensor& tokens) {
  at::Tensor aux_loss;
  const at::Tensor hidden = hidden_states(tokens, aux_loss);
  const at::Tensor& output = output_weight_.defined() ? output_weight_ : word_embeddings_;
  return at::linear(hidden, output).to(at::promote_types(hidden.scalar_type(), at::kFloat));
}

GptOutput GptModelImpl::forward(const at::Tensor& tokens, const at::Tensor& labels) {
  GptOutput out;
  const at::Tensor hidden = hidden_states(tokens, out.aux_loss);
  const at::Tensor& output = output_weight_.defined() ? output_weight_ : word_embeddings_;
  const at::Tensor logits = at::linear(hidden, output).to(at::promote_types(hidden.scalar_type(), at::kFloat));
  out.lm_loss = at::cross_entropy_loss(logits.view({-1, logits.size(-1)}), labels.reshape({-1}));
  out.loss = config_.is_moe() ? out.lm_loss + out.aux_loss : out.lm_loss;
  return out;
}

std::vector<int64_t> GptModelImpl::generate(const std::vector<int64_t>& prompt, int64_t new_tokens) {
  const bool was_training = is_training();
  eval();
  at::NoGradGuard no_grad;
  std::vector<int64_t> sequence = prompt;
  const auto device = word_embeddings_.device();
  for (int64_t step = 0; step < new_tokens; ++step) {
    const auto window = static_cast<int64_t>(std::min<std::size_t>(sequence.size(), static_cast<std::size_t>(config_.seq_length)));
    const std::vector<int64_t> context(sequence.end() - window, sequence.end());
    const at::Tensor input = at::tensor(context, at::kLong).view({1, window}).to(device);
    const at::Tensor last = logits(input).select(1, window - 1);
    sequence.push_back(last.argmax(-1).item<int64_t>());
  }
  train(was_training);
  return sequence;
}

}  // namespace graphed::model

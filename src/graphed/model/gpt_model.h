// model/gpt_model.h — the GPT decoder: token (+ learned position) embeddings, dropout, the
// transformer layers, final norm and the output layer (tied to the embedding unless
// --untie-embeddings-and-output-weights), cross-entropy loss in fp32 plus the MoE auxiliary losses.
// Built from a resolved config::ModelConfig; initialized on the CPU from the current seed so a run
// starts from the same weights on every device.
#pragma once

#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include "graphed/config/model_config.h"
#include "graphed/model/norm.h"
#include "graphed/model/transformer_layer.h"

namespace graphed::model {

struct GptOutput {
  at::Tensor loss;      ///< lm_loss + aux_loss: what backward runs on
  at::Tensor lm_loss;   ///< mean token cross-entropy, float32 scalar
  at::Tensor aux_loss;  ///< sum of the MoE layers' load-balancing losses (0 when dense)
};

class GptModelImpl : public torch::nn::Module {
 public:
  /// moe_layers: one flag per layer (RunConfig::moe_layers).
  GptModelImpl(const config::ModelConfig& config, const std::vector<bool>& moe_layers);

  /// tokens, labels: [batch, seq] int64.
  GptOutput forward(const at::Tensor& tokens, const at::Tensor& labels);
  /// Logits [batch, seq, vocab] (float32) for the tokens.
  at::Tensor logits(const at::Tensor& tokens);
  /// Greedy continuation: appends new_tokens ids to the prompt (a window of the last seq_length
  /// tokens is fed each step). Runs in eval mode without grad; restores the training mode.
  std::vector<int64_t> generate(const std::vector<int64_t>& prompt, int64_t new_tokens);

  std::vector<TransformerLayer>& layers() { return layers_; }
  const config::ModelConfig& config() const { return config_; }

 private:
  at::Tensor hidden_states(const at::Tensor& tokens, at::Tensor& aux_loss);

  config::ModelConfig config_;
  at::Tensor word_embeddings_;      // [vocab, hidden]
  at::Tensor position_embeddings_;  // [max positions, hidden] (learned_absolute only)
  at::Tensor output_weight_;        // [vocab, hidden] (untied only)
  torch::nn::ModuleList layer_list_;
  std::vector<TransformerLayer> layers_;
  Norm final_norm_{nullptr};
};
TORCH_MODULE(GptModel);

}  // namespace graphed::model

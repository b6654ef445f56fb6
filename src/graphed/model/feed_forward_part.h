// model/feed_forward_part.h — the feed-forward part of a transformer layer (model/transformer_layer.h), chosen
// once when the layer is built: a dense MLP (unit kMlp), a mixture of experts (kMoe, and its smaller units
// kMoeRouter and kMoePreprocess) or none (the hybrid layers 'M' and '*'). A part owns its pre-norm and ends with
// the layer's residual add; the MoE's part also yields its load-balancing loss. It wraps model/mlp.h or
// model/moe.h and registers them on the layer as "mlp_norm" and "mlp" or "moe".
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "graphed/config/model_config.h"
#include "graphed/model/layer_part.h"
#include "graphed/model/residual.h"

namespace graphed::model {

class FeedForwardPart : public LayerPart {
 public:
  /// The whole part as its unit (kMlp, kMoe) runs it: hidden [b, s, h] -> {the residual stream after it}, and
  /// for an MoE its aux loss second; without a feed-forward part, {hidden}.
  virtual std::vector<at::Tensor> forward(const at::Tensor& hidden) = 0;
  /// The same through its units' runners in `runners` (the layer's composition of units): {hidden, aux loss},
  /// the aux loss undefined without an MoE.
  virtual std::pair<at::Tensor, at::Tensor> run(const at::Tensor& hidden, int64_t microbatch,
                                                const UnitRunners& runners) = 0;
  /// A serving step (TransformerLayerImpl::forward_paged): hidden [1, tokens, h] -> hidden + part(norm(hidden)).
  virtual at::Tensor forward_paged(const at::Tensor& hidden) = 0;
};

/// The feed-forward part `kind`, its modules (shaped by `config`) built and registered on `layer` in that
/// order: the pre-norm, then the MLP or the MoE. residual: the layer's (not owned; the layer outlives its parts).
std::unique_ptr<FeedForwardPart> make_feed_forward_part(FeedForward kind, const config::ModelConfig& config,
                                                        torch::nn::Module& layer, const Residual& residual);

}  // namespace graphed::model

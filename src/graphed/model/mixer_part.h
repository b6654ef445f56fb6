// model/mixer_part.h — the token mixer of a transformer layer (model/transformer_layer.h), chosen once when
// the layer is built: attention (unit kAttention), the Mamba mixer (kMamba) or none (the hybrid layers '-' and
// 'E', which pass the hidden states on as they are). A mixer owns its input norm and ends with the layer's
// residual add: hidden + dropout(mixer(norm(hidden))). It wraps model/attention.h or model/mamba_mixer.h and
// registers them on the layer as "input_norm" and "attention" or "mamba".
#pragma once

#include <cstdint>
#include <memory>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "graphed/config/model_config.h"
#include "graphed/model/layer_cache.h"
#include "graphed/model/layer_part.h"
#include "graphed/model/paged_batch.h"
#include "graphed/model/residual.h"

namespace graphed::model {

class MixerPart : public LayerPart {
 public:
  /// Its unit's function, as training and evaluation run it: hidden [b, s, h] -> the residual stream after
  /// the mixer (`hidden` itself without a mixer).
  virtual at::Tensor forward(const at::Tensor& hidden) = 0;
  /// The same through its unit's runner in `runners` (the layer's composition of units).
  virtual at::Tensor run(const at::Tensor& hidden, int64_t microbatch, const UnitRunners& runners) = 0;
  /// A serving step (TransformerLayerImpl::forward_paged): hidden [1, tokens, h] -> hidden + mixer(norm(hidden))
  /// over the paged `cache`, which it updates.
  virtual at::Tensor forward_paged(const at::Tensor& hidden, const PagedBatch& batch, const LayerCache& cache) = 0;
  /// Its paged cache: keys and values of `blocks` blocks of `block_size` positions (attention), `state_slots`
  /// state slots (Mamba), nothing without a mixer.
  virtual LayerCache allocate_paged_cache(int64_t blocks, int64_t block_size, int64_t state_slots,
                                          const at::TensorOptions& options) const = 0;
};

/// The mixer `kind`, its modules (shaped by `config`) built and registered on `layer` in that order: the
/// input norm, then attention or Mamba. residual: the layer's (not owned; the layer outlives its parts).
std::unique_ptr<MixerPart> make_mixer_part(Mixer kind, const config::ModelConfig& config, torch::nn::Module& layer,
                                           const Residual& residual);

}  // namespace graphed::model

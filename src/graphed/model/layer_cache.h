// model/layer_cache.h — what one decoder layer keeps between inference steps: the key and value cache
// of an attention layer, the convolution and SSM states of a Mamba layer (issue 14). A layer with
// neither (MLP, MoE) leaves every tensor undefined. Decode engines allocate them once, so that graphs
// captured over them keep valid addresses.
#pragma once

#include <ATen/ATen.h>

namespace graphed::model {

struct LayerCache {
  /// Attention: [batch, groups, max sequence, head dim] in the model's dtype. Positions not yet written
  /// hold anything finite: attention masks them.
  at::Tensor key, value;
  /// Mamba: the last conv-width - 1 inputs of the causal convolution [batch, width - 1, conv channels]
  /// and the scan's state [batch, heads, head dim, state], both float32 (float64 for a float64 model).
  at::Tensor conv_state, ssm_state;

  /// The first `rows` rows of every defined tensor.
  LayerCache rows(int64_t count) const;
  /// Zeroes the Mamba states (the start of a sequence); the key/value slots are masked instead.
  void reset_recurrent_state() const;
};

}  // namespace graphed::model

// infer/kv_cache.h — the static cache of a decode engine: what each layer keeps between steps
// (model::LayerCache): key and value tensors [max batch, query groups, max sequence, head dim] in the
// model's dtype for attention layers, float32 conv and SSM states for Mamba layers, nothing for MLP and
// MoE layers. Allocated once; a batch of B rows uses views of the first B rows, so graphs captured on
// them keep valid addresses.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "graphed/model/transformer_layer.h"

namespace graphed::infer {

class KvCache {
 public:
  /// Zero-filled, so that slots not yet written are finite (attention masks them) and Mamba starts
  /// from a zero state.
  KvCache(const std::vector<model::TransformerLayer>& layers, int64_t max_batch, int64_t max_sequence,
          const at::TensorOptions& options);
  /// Views of the first `batch` rows of every layer (batch <= max_batch).
  std::vector<model::LayerCache> rows(int64_t batch) const;
  int64_t max_batch() const { return max_batch_; }
  int64_t max_sequence() const { return max_sequence_; }
  /// Bytes of every tensor together.
  int64_t bytes() const;

 private:
  int64_t max_batch_;
  int64_t max_sequence_;
  std::vector<model::LayerCache> layers_;
};

}  // namespace graphed::infer

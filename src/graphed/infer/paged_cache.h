// infer/paged_cache.h — the serving engine's cache tensors: per attention layer, keys and values of
// `blocks` blocks of `block_size` positions ([blocks, block size, groups, head dim], the model's
// dtype); per Mamba layer, conv and SSM states for every state slot (slot 0 is the padding slot);
// nothing for MLP and MoE layers. Allocated once, so graphs captured over them keep valid addresses.
// How many blocks fit a memory budget is blocks_for_budget().
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "graphed/model/gpt_model.h"

namespace graphed::infer {

class PagedCache {
 public:
  PagedCache(model::GptModel& model, int64_t blocks, int64_t block_size, int64_t state_slots,
             const at::TensorOptions& options);

  const std::vector<model::LayerCache>& layers() const { return layers_; }
  int64_t blocks() const { return blocks_; }
  int64_t block_size() const { return block_size_; }
  /// Bytes of every tensor together.
  int64_t bytes() const;
  /// Copies block `from`'s keys and values to block `to` in every attention layer (queued on the current stream).
  void copy_block(int64_t from, int64_t to) const;

 private:
  int64_t blocks_;
  int64_t block_size_;
  std::vector<model::LayerCache> layers_;
};

/// Bytes one block takes over all attention layers, and bytes of the Mamba states of `state_slots`.
int64_t bytes_per_block(model::GptModel& model, int64_t block_size, const at::TensorOptions& options);
int64_t state_bytes(model::GptModel& model, int64_t state_slots, const at::TensorOptions& options);

}  // namespace graphed::infer

// infer/paged_cache.cpp — see infer/paged_cache.h.
#include "graphed/infer/paged_cache.h"

namespace graphed::infer {
namespace {

int64_t bytes_of(const model::LayerCache& cache) {
  int64_t total = 0;
  for (const at::Tensor* tensor : {&cache.key, &cache.value, &cache.conv_state, &cache.ssm_state}) {
    if (tensor->defined()) total += static_cast<int64_t>(tensor->nbytes());
  }
  return total;
}

/// Bytes of each layer's cache for `blocks` blocks and `slots` slots, sized on the CPU as meta-data only
/// would be: one block or slot allocated, multiplied out.
int64_t cache_bytes(model::GptModel& model, int64_t blocks, int64_t block_size, int64_t slots,
                    const at::TensorOptions& options, bool attention) {
  const auto host = options.device(at::kCPU);
  int64_t total = 0;
  for (auto& layer : model->layers()) {
    const model::LayerCache one = layer->allocate_paged_cache(1, block_size, 1, host);
    const int64_t keys = one.key.defined() ? static_cast<int64_t>(one.key.nbytes() + one.value.nbytes()) : 0;
    const int64_t states = bytes_of(one) - keys;
    total += attention ? keys * blocks : states * slots;
  }
  return total;
}

}  // namespace

PagedCache::PagedCache(model::GptModel& model, int64_t blocks, int64_t block_size, int64_t state_slots,
                       const at::TensorOptions& options)
    : blocks_(blocks), block_size_(block_size) {
  layers_.reserve(model->layers().size());
  for (auto& layer : model->layers())
    layers_.push_back(layer->allocate_paged_cache(blocks, block_size, state_slots, options));
}

int64_t PagedCache::bytes() const {
  int64_t total = 0;
  for (const auto& layer : layers_) total += bytes_of(layer);
  return total;
}

int64_t bytes_per_block(model::GptModel& model, int64_t block_size, const at::TensorOptions& options) {
  return cache_bytes(model, 1, block_size, 0, options, /*attention=*/true);
}

int64_t state_bytes(model::GptModel& model, int64_t state_slots, const at::TensorOptions& options) {
  return cache_bytes(model, 0, 1, state_slots, options, /*attention=*/false);
}

void PagedCache::copy_block(int64_t from, int64_t to) const {
  for (const model::LayerCache& layer : layers_) {
    if (!layer.key.defined()) continue;
    layer.key.select(0, to).copy_(layer.key.select(0, from));
    layer.value.select(0, to).copy_(layer.value.select(0, from));
  }
}

}  // namespace graphed::infer

// infer/kv_cache.cpp — see infer/kv_cache.h.
#include "graphed/infer/kv_cache.h"

#include "graphed/util/error.h"

namespace graphed::infer {

KvCache::KvCache(const std::vector<model::TransformerLayer>& layers, int64_t max_batch, int64_t max_sequence,
                 const at::TensorOptions& options)
    : max_batch_(max_batch), max_sequence_(max_sequence) {
  layers_.reserve(layers.size());
  for (const auto& layer : layers) layers_.push_back(layer->allocate_cache(max_batch, max_sequence, options));
}

std::vector<model::LayerCache> KvCache::rows(int64_t batch) const {
  GRAPHED_INTERNAL_ASSERT(batch >= 1 && batch <= max_batch_, "a batch of ", batch, " rows in a cache of ", max_batch_);
  std::vector<model::LayerCache> views;
  views.reserve(layers_.size());
  for (const auto& layer : layers_) views.push_back(layer.rows(batch));
  return views;
}

int64_t KvCache::bytes() const {
  int64_t total = 0;
  for (const auto& layer : layers_) {
    for (const at::Tensor* tensor : {&layer.key, &layer.value, &layer.conv_state, &layer.ssm_state}) {
      if (tensor->defined()) total += static_cast<int64_t>(tensor->nbytes());
    }
  }
  return total;
}

}  // namespace graphed::infer

// infer/kv_cache.cpp — see infer/kv_cache.h.
#include "graphed/infer/kv_cache.h"

#include "graphed/util/error.h"

namespace graphed::infer {

KvCache::KvCache(const KvCacheShape& shape, const at::TensorOptions& options) : shape_(shape) {
  layers_.reserve(static_cast<std::size_t>(shape.layers));
  for (int64_t i = 0; i < shape.layers; ++i) {
    model::LayerCache layer;
    layer.key = at::zeros({shape.max_batch, shape.query_groups, shape.max_sequence, shape.head_dim}, options);
    layer.value = at::zeros_like(layer.key);
    layers_.push_back(layer);
  }
}

std::vector<model::LayerCache> KvCache::rows(int64_t batch) const {
  GRAPHED_INTERNAL_ASSERT(batch >= 1 && batch <= shape_.max_batch, "a batch of ", batch, " rows in a cache of ",
                          shape_.max_batch);
  std::vector<model::LayerCache> views;
  views.reserve(layers_.size());
  for (const auto& layer : layers_) views.push_back({layer.key.narrow(0, 0, batch), layer.value.narrow(0, 0, batch)});
  return views;
}

int64_t KvCache::bytes() const { return bytes_for(shape_, layers_.empty() ? at::kFloat : layers_[0].key.scalar_type()); }

int64_t KvCache::bytes_for(const KvCacheShape& shape, at::ScalarType dtype) {
  return 2 * shape.layers * shape.max_batch * shape.query_groups * shape.max_sequence * shape.head_dim *
         static_cast<int64_t>(c10::elementSize(dtype));
}

}  // namespace graphed::infer

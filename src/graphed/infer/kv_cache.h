// infer/kv_cache.h — the static key/value cache of a decode engine: one key and one value tensor per
// layer, [max batch, query groups, max sequence, head dim] in the model's dtype, allocated once. A
// batch of B rows uses views of the first B rows, so graphs captured on them keep valid addresses.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "graphed/model/attention.h"

namespace graphed::infer {

struct KvCacheShape {
  int64_t layers = 0;
  int64_t query_groups = 0;
  int64_t head_dim = 0;
  int64_t max_batch = 0;
  int64_t max_sequence = 0;
};

class KvCache {
 public:
  /// Zero-filled, so that slots not yet written are finite (attention masks them).
  KvCache(const KvCacheShape& shape, const at::TensorOptions& options);
  /// Views of the first `batch` rows of every layer (batch <= max_batch).
  std::vector<model::LayerCache> rows(int64_t batch) const;
  const KvCacheShape& shape() const { return shape_; }
  /// Bytes of every key and value tensor together.
  int64_t bytes() const;
  /// Bytes a cache of this shape takes in `dtype`.
  static int64_t bytes_for(const KvCacheShape& shape, at::ScalarType dtype);

 private:
  KvCacheShape shape_;
  std::vector<model::LayerCache> layers_;
};

}  // namespace graphed::infer

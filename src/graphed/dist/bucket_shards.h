// dist/bucket_shards.h — the distributed optimizer's collectives over a buffer laid out by dist/gradient_buckets.h:
// each bucket's gradients summed over the data-parallel ranks into this rank's shard of it (reduce-scatter, in
// place; the caller divides, as graphed's all-reduce path does, where Megatron scales first), and each bucket's
// parameters gathered from every rank's shard (all-gather). Buckets go in layout order, so every rank issues the same
// collectives in the same order; the work is queued on the communicator's stream (nothing read on the host), so a CUDA
// graph may hold it.
#pragma once

#include <vector>

#include <ATen/ATen.h>

#include "graphed/dist/communicator.h"
#include "graphed/dist/gradient_buckets.h"

namespace graphed::dist {

class BucketShards {
 public:
  /// group: the data-parallel ranks the layout was made for (outlives this).
  BucketShards(Communicator& group, GradientBufferLayout layout);

  /// buffer [layout elements]: launches bucket `bucket`'s reduce-scatter, after which this rank's shard of it is the
  /// sum of every rank's bucket (the rest of the buffer keeps this rank's values).
  PendingWork reduce_scatter(at::Tensor& buffer, int64_t bucket);
  /// Every bucket's, waited for.
  void reduce_scatter(at::Tensor& buffer);
  /// buffer [layout elements, any dtype]: every bucket becomes the concatenation of every rank's shard of it.
  void all_gather(at::Tensor& buffer);
  /// whole [bucket `bucket`'s elements]: every rank's `shard` (its part of that bucket, held elsewhere) side by side.
  PendingWork gather_bucket(at::Tensor& whole, const at::Tensor& shard, int64_t bucket);
  /// This rank's shard of every bucket, as views of `buffer`, in bucket order.
  std::vector<at::Tensor> own_shards(const at::Tensor& buffer) const;
  const GradientBufferLayout& layout() const { return layout_; }
  const std::vector<BucketShard>& shards() const { return shards_; }

 private:
  Communicator& group_;
  GradientBufferLayout layout_;
  std::vector<BucketShard> shards_;  ///< this rank's
};

}  // namespace graphed::dist

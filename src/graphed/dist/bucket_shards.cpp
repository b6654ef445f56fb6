// dist/bucket_shards.cpp — see dist/bucket_shards.h.
#include "graphed/dist/bucket_shards.h"

#include "graphed/util/error.h"

namespace graphed::dist {

BucketShards::BucketShards(Communicator& group, GradientBufferLayout layout)
    : group_(group), layout_(std::move(layout)), shards_(shards_of(layout_, group.rank(), group.size())) {}

void BucketShards::reduce_scatter(at::Tensor& buffer, double scale) {
  GRAPHED_INTERNAL_ASSERT(buffer.dim() == 1 && buffer.numel() == layout_.elements, "a buffer of ", buffer.numel(),
                          " elements for a layout of ", layout_.elements);
  std::vector<PendingWork> work;
  for (std::size_t b = 0; b < layout_.buckets.size(); ++b) {
    const GradientBucket& bucket = layout_.buckets[b];
    at::Tensor whole = buffer.narrow(0, bucket.begin, bucket.end - bucket.begin);
    if (scale != 1.0) whole.mul_(scale);
    at::Tensor own = buffer.narrow(0, shards_[b].begin, shards_[b].end - shards_[b].begin);
    work.push_back(group_.reduce_scatter_sum(own, whole));
  }
  for (PendingWork& pending : work) pending.wait();
}

void BucketShards::all_gather(at::Tensor& buffer) {
  GRAPHED_INTERNAL_ASSERT(buffer.dim() == 1 && buffer.numel() == layout_.elements, "a buffer of ", buffer.numel(),
                          " elements for a layout of ", layout_.elements);
  std::vector<PendingWork> work;
  for (std::size_t b = 0; b < layout_.buckets.size(); ++b) {
    const GradientBucket& bucket = layout_.buckets[b];
    const int64_t shard = shards_[b].end - shards_[b].begin;
    std::vector<at::Tensor> parts;
    for (int64_t rank = 0; rank < group_.size(); ++rank) {
      parts.push_back(buffer.narrow(0, bucket.begin + rank * shard, shard));
    }
    // The own shard goes out as a copy: it is also where the gather writes this rank's part.
    at::Tensor own = parts[static_cast<std::size_t>(group_.rank())].clone();
    work.push_back(group_.all_gather(parts, own));
  }
  for (PendingWork& pending : work) pending.wait();
}

std::vector<at::Tensor> BucketShards::own_shards(const at::Tensor& buffer) const {
  std::vector<at::Tensor> views;
  for (const BucketShard& shard : shards_) views.push_back(buffer.narrow(0, shard.begin, shard.end - shard.begin));
  return views;
}

}  // namespace graphed::dist

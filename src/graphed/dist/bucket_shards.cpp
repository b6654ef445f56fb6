// dist/bucket_shards.cpp — see dist/bucket_shards.h.
#include "graphed/dist/bucket_shards.h"

#include "graphed/util/error.h"

namespace graphed::dist {

BucketShards::BucketShards(Communicator& group, GradientBufferLayout layout)
    : group_(group), layout_(std::move(layout)), shards_(shards_of(layout_, group.rank(), group.size())) {}

namespace {

void check_buffer(const at::Tensor& buffer, const GradientBufferLayout& layout) {
  GRAPHED_INTERNAL_ASSERT(buffer.dim() == 1 && buffer.numel() == layout.elements, "a buffer of ", buffer.numel(),
                          " elements for a layout of ", layout.elements);
}

}  // namespace

PendingWork BucketShards::reduce_scatter(at::Tensor& buffer, int64_t bucket) {
  check_buffer(buffer, layout_);
  const GradientBucket& whole_bucket = layout_.buckets[static_cast<std::size_t>(bucket)];
  const BucketShard& shard = shards_[static_cast<std::size_t>(bucket)];
  at::Tensor whole = buffer.narrow(0, whole_bucket.begin, whole_bucket.end - whole_bucket.begin);
  at::Tensor own = buffer.narrow(0, shard.begin, shard.end - shard.begin);
  return group_.reduce_scatter_sum(own, whole);
}

void BucketShards::reduce_scatter(at::Tensor& buffer) {
  std::vector<PendingWork> work;
  for (std::size_t b = 0; b < layout_.buckets.size(); ++b)
    work.push_back(reduce_scatter(buffer, static_cast<int64_t>(b)));
  for (PendingWork& pending : work) pending.wait();
}

PendingWork BucketShards::gather_bucket(at::Tensor& whole, const at::Tensor& shard, int64_t bucket) {
  const BucketShard& own = shards_[static_cast<std::size_t>(bucket)];
  const int64_t length = own.end - own.begin;
  GRAPHED_INTERNAL_ASSERT(shard.numel() == length && whole.numel() == length * group_.size(), "a shard of ",
                          shard.numel(), " and a bucket of ", whole.numel(), " for shards of ", length);
  return group_.all_gather_into(whole, shard);
}

void BucketShards::all_gather(at::Tensor& buffer) {
  check_buffer(buffer, layout_);
  std::vector<PendingWork> work;
  for (std::size_t b = 0; b < layout_.buckets.size(); ++b) {
    const GradientBucket& bucket = layout_.buckets[b];
    at::Tensor whole = buffer.narrow(0, bucket.begin, bucket.end - bucket.begin);
    const at::Tensor own = buffer.narrow(0, shards_[b].begin, shards_[b].end - shards_[b].begin);
    work.push_back(gather_bucket(whole, own, static_cast<int64_t>(b)));
  }
  for (PendingWork& pending : work) pending.wait();
}

std::vector<at::Tensor> BucketShards::own_shards(const at::Tensor& buffer) const {
  std::vector<at::Tensor> views;
  for (const BucketShard& shard : shards_) views.push_back(buffer.narrow(0, shard.begin, shard.end - shard.begin));
  return views;
}

}  // namespace graphed::dist

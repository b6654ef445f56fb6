// dist/gradient_buckets.cpp — see dist/gradient_buckets.h.
#include "graphed/dist/gradient_buckets.h"

#include <algorithm>
#include <numeric>

#include "graphed/util/error.h"

namespace graphed::dist {
namespace {

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

constexpr int64_t kParameterAlignment = 64;  // elements: 128 bytes of a 16-bit type
constexpr int64_t kBucketAlignment = 128;

/// Adds parameters to the open bucket and closes it, as Megatron's layout does.
class BucketBuilder {
 public:
  BucketBuilder(GradientBufferLayout& layout, int64_t data_parallel_size)
      : layout_(layout), bucket_multiple_(std::lcm(data_parallel_size, kBucketAlignment)) {}

  bool open_bucket_has_parameters() const { return !open_.parameters.empty(); }
  int64_t cursor() const { return cursor_; }

  /// Places parameter `index` of `size` elements at the next 64-element boundary.
  void place(int64_t index, int64_t size) {
    cursor_ = round_up(cursor_, kParameterAlignment);
    layout_.places[static_cast<std::size_t>(index)] = {cursor_, cursor_ + size,
                                                       static_cast<int64_t>(layout_.buckets.size())};
    open_.parameters.push_back(index);
    cursor_ += size;
  }

  /// Closes the open bucket at the cursor, padded to the bucket multiple; the next one starts there.
  void close() {
    open_.filled_end = cursor_;
    open_.end = round_up(cursor_, bucket_multiple_);
    cursor_ = open_.end;
    layout_.buckets.push_back(open_);
    open_ = GradientBucket();
    open_.begin = cursor_;
  }

  int64_t open_begin() const { return open_.begin; }

 private:
  GradientBufferLayout& layout_;
  int64_t bucket_multiple_;
  int64_t cursor_ = 0;
  GradientBucket open_;
};

}  // namespace

GradientBufferLayout lay_out_gradient_buffer(const std::vector<int64_t>& sizes, const GradientBucketOptions& options,
                                             std::optional<int64_t> tied_embedding) {
  GRAPHED_INTERNAL_ASSERT(options.data_parallel_size >= 1 && options.bucket_size.value_or(1) >= 1,
                          "a gradient buffer over ", options.data_parallel_size, " ranks in buckets of ",
                          options.bucket_size.value_or(0));
  GradientBufferLayout layout;
  layout.data_parallel_size = options.data_parallel_size;
  layout.places.resize(sizes.size());
  BucketBuilder builder(layout, options.data_parallel_size);
  for (auto index = static_cast<int64_t>(sizes.size()) - 1; index >= 0; --index) {
    const bool tied = tied_embedding == index;
    if (tied && builder.open_bucket_has_parameters()) builder.close();
    builder.place(index, sizes[static_cast<std::size_t>(index)]);
    const bool full = options.bucket_size && builder.cursor() - builder.open_begin() >= *options.bucket_size;
    if (tied || full) builder.close();
  }
  if (builder.open_bucket_has_parameters() || layout.buckets.empty()) builder.close();
  layout.elements = layout.buckets.back().end;
  return layout;
}

std::vector<BucketShard> shards_of(const GradientBufferLayout& layout, int64_t rank, int64_t data_parallel_size) {
  GRAPHED_INTERNAL_ASSERT(rank >= 0 && rank < data_parallel_size, "rank ", rank, " of ", data_parallel_size);
  std::vector<BucketShard> shards;
  for (std::size_t b = 0; b < layout.buckets.size(); ++b) {
    const GradientBucket& bucket = layout.buckets[b];
    const int64_t shard = (bucket.end - bucket.begin) / data_parallel_size;
    GRAPHED_INTERNAL_ASSERT(shard * data_parallel_size == bucket.end - bucket.begin, "a bucket of ",
                            bucket.end - bucket.begin, " elements over ", data_parallel_size, " ranks");
    BucketShard own{static_cast<int64_t>(b), bucket.begin + rank * shard, bucket.begin + (rank + 1) * shard, {}};
    for (const int64_t index : bucket.parameters) {
      const ParameterPlace& place = layout.places[static_cast<std::size_t>(index)];
      const int64_t begin = std::max(place.begin, own.begin);
      const int64_t end = std::min(place.end, own.end);
      if (end <= begin) continue;
      own.pieces.push_back({index, begin, end - begin, begin - own.begin, begin - place.begin});
    }
    shards.push_back(std::move(own));
  }
  return shards;
}

}  // namespace graphed::dist

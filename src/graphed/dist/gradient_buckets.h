// dist/gradient_buckets.h — Megatron's layout of a contiguous gradient (and parameter) buffer for its distributed
// optimizer (docs/design/megatron-distributed-optimizer.md §2-3): the parameters in reverse order of registration
// (roughly the order their gradients are ready), each at a 64-element boundary, cut into buckets at parameter
// boundaries once a bucket holds --ddp-bucket-size elements (a tied embedding in a bucket of its own), every bucket
// padded to a multiple of lcm(data-parallel size, 128); and each data-parallel rank's equal shard of every bucket,
// with the pieces of the parameters that fall in it. Arithmetic only: nothing here touches a tensor.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace graphed::dist {

struct GradientBucketOptions {
  int64_t data_parallel_size = 1;
  /// Elements after which a bucket closes (at the end of the parameter that reaches it); unset = one bucket (but for a
  /// tied embedding's own).
  std::optional<int64_t> bucket_size;
};

/// One parameter's place in the buffer: elements [begin, end) in bucket `bucket`.
struct ParameterPlace {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t bucket = 0;
};

/// Elements [begin, end) of the buffer (end padded); the parameters in it end by `filled_end`.
struct GradientBucket {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t filled_end = 0;
  std::vector<int64_t> parameters;  ///< indices into the layout's parameters, in buffer order
};

struct GradientBufferLayout {
  std::vector<ParameterPlace> places;  ///< by parameter index (registration order)
  std::vector<GradientBucket> buckets;
  int64_t elements = 0;            ///< the buffer's size: the last bucket's end, a multiple of the data-parallel size
  int64_t data_parallel_size = 1;  ///< the ranks it was laid out for
};

/// The layout of parameters of `sizes` elements each (registration order); `tied_embedding`: the index of a parameter
/// that gets a bucket of its own (Megatron's shared embedding under pipeline parallelism), if any.
GradientBufferLayout lay_out_gradient_buffer(const std::vector<int64_t>& sizes, const GradientBucketOptions& options,
                                             std::optional<int64_t> tied_embedding = std::nullopt);

/// The part of one parameter in a rank's shard of a bucket.
struct ShardPiece {
  int64_t parameter = 0;
  int64_t buffer_begin = 0;  ///< where in the buffer
  int64_t elements = 0;
  int64_t shard_offset = 0;      ///< where in the rank's shard of the bucket
  int64_t parameter_offset = 0;  ///< where in the parameter's own flattened elements
};

/// A rank's shard of one bucket: elements [begin, end) of the buffer, the bucket's rank-th equal part.
struct BucketShard {
  int64_t bucket = 0;
  int64_t begin = 0;
  int64_t end = 0;
  std::vector<ShardPiece> pieces;
};

/// `rank`'s shard of every bucket of `layout` over `data_parallel_size` ranks (the size it was laid out for).
std::vector<BucketShard> shards_of(const GradientBufferLayout& layout, int64_t rank, int64_t data_parallel_size);

}  // namespace graphed::dist

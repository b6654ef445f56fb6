// model/tensor_shards.cpp — see model/tensor_shards.h. Shards are contiguous copies; joins concatenate in
// rank order.
#include "graphed/model/tensor_shards.h"

#include "graphed/util/error.h"

namespace graphed::model {
namespace {

/// Part `shard.rank` of `size` equal parts of dimension `dim`.
at::Tensor part_of(const at::Tensor& tensor, int64_t dim, TensorShard shard) {
  const int64_t length = tensor.size(dim);
  GRAPHED_INTERNAL_ASSERT(shard.size >= 1 && shard.rank >= 0 && shard.rank < shard.size && length % shard.size == 0,
                          "a dimension of ", length, " split ", shard.size, " ways (rank ", shard.rank, ")");
  const int64_t part = length / shard.size;
  return tensor.narrow(dim, shard.rank * part, part);
}

/// The three sections of a fused QKV tensor (or one rank's shard of it) along dimension 0.
std::vector<at::Tensor> qkv_sections(const at::Tensor& weight, int64_t heads, int64_t groups, int64_t head_dim) {
  GRAPHED_INTERNAL_ASSERT(weight.size(0) == (heads + 2 * groups) * head_dim, "a QKV tensor of ", weight.size(0),
                          " rows for ", heads, " heads, ", groups, " groups of ", head_dim);
  return weight.split({heads * head_dim, groups * head_dim, groups * head_dim}, 0);
}

/// The segments of `tensor` along `dim`, whose whole sizes are `segments`, in a tensor holding one of
/// `size` parts of each (the whole tensor for size 1).
std::vector<at::Tensor> segments_of(const at::Tensor& tensor, const std::vector<int64_t>& segments, int64_t size,
                                    int64_t dim) {
  std::vector<int64_t> parts;
  int64_t total = 0;
  for (const int64_t segment : segments) {
    GRAPHED_INTERNAL_ASSERT(segment % size == 0, "a segment of ", segment, " split ", size, " ways");
    parts.push_back(segment / size);
    total += segment / size;
  }
  GRAPHED_INTERNAL_ASSERT(tensor.size(dim) == total, "a dimension of ", tensor.size(dim), " holding segments of ",
                          total, " (one of ", size, " parts each)");
  return tensor.split_with_sizes(parts, dim);
}

}  // namespace

at::Tensor column_shard(const at::Tensor& weight, TensorShard shard) { return part_of(weight, 0, shard).contiguous(); }

at::Tensor row_shard(const at::Tensor& weight, TensorShard shard) {
  return part_of(weight, weight.dim() - 1, shard).contiguous();
}

at::Tensor qkv_shard(const at::Tensor& weight, int64_t heads, int64_t groups, int64_t head_dim, TensorShard shard) {
  GRAPHED_INTERNAL_ASSERT(heads % shard.size == 0 && groups % shard.size == 0, heads, " heads and ", groups,
                          " groups over ", shard.size, " tensor-parallel ranks");
  std::vector<at::Tensor> parts;
  for (const at::Tensor& section : qkv_sections(weight, heads, groups, head_dim))
    parts.push_back(part_of(section, 0, shard));
  return at::cat(parts, 0);
}

at::Tensor swiglu_shard(const at::Tensor& weight, TensorShard shard, int64_t dim) {
  const auto halves = weight.chunk(2, dim);
  return at::cat({part_of(halves[0], dim, shard), part_of(halves[1], dim, shard)}, dim);
}

at::Tensor segments_shard(const at::Tensor& weight, const std::vector<int64_t>& segments, TensorShard shard,
                          int64_t dim) {
  std::vector<at::Tensor> parts;
  for (const at::Tensor& segment : segments_of(weight, segments, 1, dim)) parts.push_back(part_of(segment, dim, shard));
  return at::cat(parts, dim);
}

at::Tensor join_column_shards(const std::vector<at::Tensor>& shards) { return at::cat(shards, 0); }

at::Tensor join_row_shards(const std::vector<at::Tensor>& shards) {
  GRAPHED_INTERNAL_ASSERT(!shards.empty(), "no shards to join");
  return at::cat(shards, shards.front().dim() - 1);
}

at::Tensor join_qkv_shards(const std::vector<at::Tensor>& shards, int64_t heads, int64_t groups, int64_t head_dim) {
  const auto size = static_cast<int64_t>(shards.size());
  std::vector<at::Tensor> queries, keys, values;
  for (const at::Tensor& shard : shards) {
    const auto sections = qkv_sections(shard, heads / size, groups / size, head_dim);
    queries.push_back(sections[0]);
    keys.push_back(sections[1]);
    values.push_back(sections[2]);
  }
  return at::cat({at::cat(queries, 0), at::cat(keys, 0), at::cat(values, 0)}, 0);
}

at::Tensor join_swiglu_shards(const std::vector<at::Tensor>& shards, int64_t dim) {
  std::vector<at::Tensor> gates, ups;
  for (const at::Tensor& shard : shards) {
    const auto halves = shard.chunk(2, dim);
    gates.push_back(halves[0]);
    ups.push_back(halves[1]);
  }
  return at::cat({at::cat(gates, dim), at::cat(ups, dim)}, dim);
}

at::Tensor join_segments_shards(const std::vector<at::Tensor>& shards, const std::vector<int64_t>& segments,
                                int64_t dim) {
  const auto size = static_cast<int64_t>(shards.size());
  std::vector<std::vector<at::Tensor>> by_segment(segments.size());  // every rank's part of each segment
  for (const at::Tensor& shard : shards) {
    const auto parts = segments_of(shard, segments, size, dim);
    for (std::size_t i = 0; i < parts.size(); ++i) by_segment[i].push_back(parts[i]);
  }
  std::vector<at::Tensor> wholes;
  for (const auto& parts : by_segment) wholes.push_back(at::cat(parts, dim));
  return at::cat(wholes, dim);
}

at::Tensor take_shard(const at::Tensor& whole, const ParameterSplit& split, TensorShard shard) {
  switch (split.split) {
    case TensorSplit::kReplicated:
    case TensorSplit::kFirstRank:
    case TensorSplit::kSummed: return whole;
    case TensorSplit::kColumn: return part_of(whole, split.dim, shard).contiguous();
    case TensorSplit::kRow: return row_shard(whole, shard);
    case TensorSplit::kQkv: return qkv_shard(whole, split.heads, split.groups, split.head_dim, shard);
    case TensorSplit::kSwiglu: return swiglu_shard(whole, shard, split.dim);
    case TensorSplit::kSegments: return segments_shard(whole, split.segments, shard, split.dim);
  }
  GRAPHED_INTERNAL_ASSERT(false, "an unknown tensor split");
  return whole;
}

at::Tensor join_shards(const std::vector<at::Tensor>& shards, const ParameterSplit& split) {
  GRAPHED_INTERNAL_ASSERT(!shards.empty(), "no shards to join");
  switch (split.split) {
    case TensorSplit::kReplicated:
    case TensorSplit::kFirstRank:
    case TensorSplit::kSummed: return shards.front();
    case TensorSplit::kColumn: return at::cat(shards, split.dim);
    case TensorSplit::kRow: return join_row_shards(shards);
    case TensorSplit::kQkv: return join_qkv_shards(shards, split.heads, split.groups, split.head_dim);
    case TensorSplit::kSwiglu: return join_swiglu_shards(shards, split.dim);
    case TensorSplit::kSegments: return join_segments_shards(shards, split.segments, split.dim);
  }
  GRAPHED_INTERNAL_ASSERT(false, "an unknown tensor split");
  return shards.front();
}

std::vector<int64_t> whole_sizes(const at::Tensor& shard, const ParameterSplit& split, int64_t size) {
  return whole_sizes(shard.sizes().vec(), split, size);
}

std::vector<int64_t> whole_sizes(std::vector<int64_t> sizes, const ParameterSplit& split, int64_t size) {
  if (!split.is_sharded() || sizes.empty()) return sizes;
  const auto dim = static_cast<std::size_t>(split.split == TensorSplit::kRow ? sizes.size() - 1 : split.dim);
  sizes[dim] *= size;
  return sizes;
}

int64_t padded_vocabulary(int64_t vocabulary, int64_t divisible_by, int64_t tensor_size) {
  GRAPHED_INTERNAL_ASSERT(vocabulary >= 1 && divisible_by >= 1 && tensor_size >= 1, "vocabulary ", vocabulary,
                          " padded to a multiple of ", divisible_by, " x ", tensor_size);
  const int64_t multiple = divisible_by * tensor_size;
  return (vocabulary + multiple - 1) / multiple * multiple;
}

}  // namespace graphed::model

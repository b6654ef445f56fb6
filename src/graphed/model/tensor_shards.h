// model/tensor_shards.h — what one tensor-parallel rank holds of a whole weight, and how the shards join
// again, by Megatron's splits: column-parallel layers split their output features (QKV by query groups,
// SwiGLU's fc1 half by half, Mamba's fused in projection segment by segment), row-parallel layers their
// input features, the vocabulary splits like a column. Pure tensor functions, no communication:
// checkpoints stay whole, and a rank takes its shard.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

namespace graphed::model {

/// A rank's place among `size` tensor-parallel ranks.
struct TensorShard {
  int64_t size = 1;
  int64_t rank = 0;
};

/// Column-parallel: output features [rank x out / size, (rank + 1) x out / size) of weight [out, in] or
/// bias [out].
at::Tensor column_shard(const at::Tensor& weight, TensorShard shard);
/// Row-parallel: input features [rank x in / size, ...) of weight [out, in].
at::Tensor row_shard(const at::Tensor& weight, TensorShard shard);
/// The fused QKV weight [(heads + 2 groups) head_dim, in] or bias, by query groups: the rank's heads /
/// size query heads, then its groups / size keys and values, in the same [queries; keys; values] layout,
/// so a rank attends with its own heads alone (GQA needs groups to divide by size).
at::Tensor qkv_shard(const at::Tensor& weight, int64_t heads, int64_t groups, int64_t head_dim, TensorShard shard);
/// SwiGLU's fc1 weight [2 ffn, in] or bias: the rank's part of each half, [gate part; up part], so the
/// rank's activation is its part of the whole activation. `dim`: where the halves lie (0 for a linear's weight).
at::Tensor swiglu_shard(const at::Tensor& weight, TensorShard shard, int64_t dim = 0);
/// A tensor that concatenates `segments` (their whole sizes along `dim`, summing to its size there), each
/// split on its own: the rank's part of every segment, in the same order. Mamba's in projection [z | x | B |
/// C | dt] and its convolution's channels [x | B | C] (each segment must divide by size).
at::Tensor segments_shard(const at::Tensor& weight, const std::vector<int64_t>& segments, TensorShard shard,
                          int64_t dim = 0);

/// The whole tensor from every rank's shard, in rank order (the inverses of the above).
at::Tensor join_column_shards(const std::vector<at::Tensor>& shards);
at::Tensor join_row_shards(const std::vector<at::Tensor>& shards);
at::Tensor join_qkv_shards(const std::vector<at::Tensor>& shards, int64_t heads, int64_t groups, int64_t head_dim);
at::Tensor join_swiglu_shards(const std::vector<at::Tensor>& shards, int64_t dim = 0);
/// segments: the whole sizes, as segments_shard took them.
at::Tensor join_segments_shards(const std::vector<at::Tensor>& shards, const std::vector<int64_t>& segments,
                                int64_t dim = 0);

/// How a parameter lies over the tensor-parallel ranks.
enum class TensorSplit {
  kReplicated,  ///< whole on every rank, with equal gradients (norms, position embeddings)
  kColumn,      ///< equal parts along `dim`: 0 for column-parallel weights and biases and the vocabulary
  kRow,         ///< equal parts along the last dimension (row-parallel weights)
  kQkv,         ///< the fused QKV weight or bias, by query groups
  kSwiglu,      ///< SwiGLU's fc1 weight or bias, each half (along `dim`) split
  kSegments,    ///< consecutive segments along `dim` (whole sizes in `segments`), each split (Mamba's in_proj)
  kFirstRank,   ///< whole on every rank but used by the first only (a row-parallel bias, added once)
  kSummed,      ///< whole on every rank, each rank's gradient its share (the q/k norms, shared by all heads)
};

struct ParameterSplit {
  TensorSplit split = TensorSplit::kReplicated;
  int64_t dim = 0;                              ///< kColumn, kSwiglu and kSegments: the split dimension
  int64_t heads = 0, groups = 0, head_dim = 0;  ///< kQkv only: the whole layer's counts
  std::vector<int64_t> segments;                ///< kSegments only: the whole segments' sizes along `dim`
  /// Whether each rank holds a different part (its gradient's square counts on every rank in the norm).
  bool is_sharded() const {
    return split != TensorSplit::kReplicated && split != TensorSplit::kFirstRank && split != TensorSplit::kSummed;
  }
};

/// This rank's part of `whole` (a copy for the sharded splits; `whole` itself for the others).
at::Tensor take_shard(const at::Tensor& whole, const ParameterSplit& split, TensorShard shard);
/// The whole tensor from every rank's part, in rank order (the first rank's for kReplicated and kFirstRank).
at::Tensor join_shards(const std::vector<at::Tensor>& shards, const ParameterSplit& split);
/// The whole tensor's sizes, from one rank's part among `size`.
std::vector<int64_t> whole_sizes(const at::Tensor& shard, const ParameterSplit& split, int64_t size);
/// The same, from the part's sizes.
std::vector<int64_t> whole_sizes(std::vector<int64_t> sizes, const ParameterSplit& split, int64_t size);

/// Megatron's padded vocabulary (_vocab_size_with_padding): the smallest multiple of divisible_by x
/// tensor_size that is at least `vocabulary`.
int64_t padded_vocabulary(int64_t vocabulary, int64_t divisible_by, int64_t tensor_size);

}  // namespace graphed::model

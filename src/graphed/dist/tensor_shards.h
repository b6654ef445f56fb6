// dist/tensor_shards.h — what one tensor-parallel rank holds of a whole weight, and how the shards join
// again, by Megatron's splits: column-parallel layers split their output features (QKV by query groups,
// SwiGLU's fc1 half by half), row-parallel layers their input features, and the vocabulary is padded so
// that it divides. Pure tensor functions, no communication: checkpoints stay whole, and a rank takes its
// shard on load.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

namespace graphed::dist {

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
/// rank's activation is its part of the whole activation.
at::Tensor swiglu_shard(const at::Tensor& weight, TensorShard shard);

/// The whole tensor from every rank's shard, in rank order (the inverses of the above).
at::Tensor join_column_shards(const std::vector<at::Tensor>& shards);
at::Tensor join_row_shards(const std::vector<at::Tensor>& shards);
at::Tensor join_qkv_shards(const std::vector<at::Tensor>& shards, int64_t heads, int64_t groups, int64_t head_dim);
at::Tensor join_swiglu_shards(const std::vector<at::Tensor>& shards);

/// Megatron's padded vocabulary (_vocab_size_with_padding): the smallest multiple of divisible_by x
/// tensor_size that is at least `vocabulary`.
int64_t padded_vocabulary(int64_t vocabulary, int64_t divisible_by, int64_t tensor_size);

}  // namespace graphed::dist

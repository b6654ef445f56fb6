// tests/model/tensor_shards_test.cpp — Megatron's tensor-parallel splits on the CPU in float64: every
// shard joins back to the whole tensor bit for bit; column shards give the rank's output features of the
// whole layer, row shards' partial products add up to it, a QKV shard holds exactly its ranks' heads and
// groups (GQA), a SwiGLU shard's activation is the rank's part of the whole activation, a segmented shard
// (Mamba's in projection [z | x | B | C | dt]) holds the rank's part of each segment; Megatron's
// vocabulary padding.
#include "graphed/model/tensor_shards.h"

#include <functional>

#include <gtest/gtest.h>

namespace graphed::model {
namespace {

const auto kFloat64 = at::TensorOptions().dtype(at::kDouble);

std::vector<at::Tensor> shards_of(const at::Tensor& whole, int64_t size,
                                  const std::function<at::Tensor(const at::Tensor&, TensorShard)>& split) {
  std::vector<at::Tensor> shards;
  for (int64_t rank = 0; rank < size; ++rank) shards.push_back(split(whole, TensorShard{size, rank}));
  return shards;
}

TEST(TensorShardsTest, ColumnShardsGiveEachRankItsOutputFeaturesAndJoinBack) {
  at::manual_seed(1);
  const at::Tensor weight = at::randn({12, 5}, kFloat64);
  const at::Tensor bias = at::randn({12}, kFloat64);
  const at::Tensor input = at::randn({3, 5}, kFloat64);
  const at::Tensor whole = at::linear(input, weight, bias);
  for (const int64_t size : {1, 2, 3, 4}) {
    const auto weights = shards_of(weight, size, column_shard);
    const auto biases = shards_of(bias, size, column_shard);
    for (int64_t rank = 0; rank < size; ++rank) {
      const at::Tensor mine = at::linear(input, weights[rank], biases[rank]);
      EXPECT_TRUE(at::equal(mine, whole.narrow(1, rank * 12 / size, 12 / size))) << size << " ranks, rank " << rank;
      EXPECT_TRUE(weights[rank].is_contiguous());
    }
    EXPECT_TRUE(at::equal(join_column_shards(weights), weight));
    EXPECT_TRUE(at::equal(join_column_shards(biases), bias));
  }
}

TEST(TensorShardsTest, RowShardsPartialProductsAddUpToTheWholeLayer) {
  at::manual_seed(2);
  const at::Tensor weight = at::randn({7, 12}, kFloat64);
  const at::Tensor input = at::randn({3, 12}, kFloat64);
  const at::Tensor whole = at::linear(input, weight);
  for (const int64_t size : {2, 3, 4}) {
    const auto weights = shards_of(weight, size, row_shard);
    at::Tensor sum = at::zeros_like(whole);
    for (int64_t rank = 0; rank < size; ++rank) {
      sum = sum + at::linear(input.narrow(1, rank * 12 / size, 12 / size), weights[rank]);  // the all-reduce
    }
    EXPECT_TRUE(at::allclose(sum, whole, 1e-12, 1e-12)) << size << " ranks";
    EXPECT_TRUE(at::equal(join_row_shards(weights), weight));
  }
}

TEST(TensorShardsTest, QkvShardsHoldTheirRanksHeadsAndGroups) {
  // 8 query heads in 4 groups of head dim 3, over 2 and 4 ranks.
  const int64_t heads = 8, groups = 4, head_dim = 3, hidden = 5;
  const at::Tensor weight = at::arange((heads + 2 * groups) * head_dim * hidden, kFloat64).view({-1, hidden});
  const at::Tensor bias = at::arange((heads + 2 * groups) * head_dim, kFloat64);
  const auto query_rows = [&](int64_t head) { return weight.narrow(0, head * head_dim, head_dim); };
  const auto key_rows = [&](int64_t group) { return weight.narrow(0, (heads + group) * head_dim, head_dim); };
  const auto value_rows = [&](int64_t group) {
    return weight.narrow(0, (heads + groups + group) * head_dim, head_dim);
  };
  for (const int64_t size : {1, 2, 4}) {
    std::vector<at::Tensor> shards, bias_shards;
    for (int64_t rank = 0; rank < size; ++rank) {
      SCOPED_TRACE(std::to_string(size) + " ranks, rank " + std::to_string(rank));
      const at::Tensor shard = qkv_shard(weight, heads, groups, head_dim, TensorShard{size, rank});
      const int64_t my_heads = heads / size, my_groups = groups / size;
      ASSERT_EQ(shard.size(0), (my_heads + 2 * my_groups) * head_dim);
      for (int64_t h = 0; h < my_heads; ++h) {
        EXPECT_TRUE(at::equal(shard.narrow(0, h * head_dim, head_dim), query_rows(rank * my_heads + h)));
      }
      for (int64_t g = 0; g < my_groups; ++g) {
        EXPECT_TRUE(at::equal(shard.narrow(0, (my_heads + g) * head_dim, head_dim), key_rows(rank * my_groups + g)));
        EXPECT_TRUE(at::equal(shard.narrow(0, (my_heads + my_groups + g) * head_dim, head_dim),
                              value_rows(rank * my_groups + g)));
      }
      shards.push_back(shard);
      bias_shards.push_back(qkv_shard(bias, heads, groups, head_dim, TensorShard{size, rank}));
    }
    EXPECT_TRUE(at::equal(join_qkv_shards(shards, heads, groups, head_dim), weight));
    EXPECT_TRUE(at::equal(join_qkv_shards(bias_shards, heads, groups, head_dim), bias));
  }
}

TEST(TensorShardsTest, SwigluShardsActivationIsTheRanksPartOfTheWholeActivation) {
  at::manual_seed(3);
  const int64_t ffn = 6, hidden = 4;
  const at::Tensor weight = at::randn({2 * ffn, hidden}, kFloat64);
  const at::Tensor input = at::randn({3, hidden}, kFloat64);
  const auto swiglu = [](const at::Tensor& projected) {
    const auto halves = projected.chunk(2, -1);
    return at::silu(halves[0]) * halves[1];
  };
  const at::Tensor whole = swiglu(at::linear(input, weight));
  for (const int64_t size : {2, 3}) {
    const auto shards =
        shards_of(weight, size, [](const at::Tensor& w, TensorShard shard) { return swiglu_shard(w, shard); });
    for (int64_t rank = 0; rank < size; ++rank) {
      EXPECT_TRUE(at::equal(swiglu(at::linear(input, shards[rank])), whole.narrow(1, rank * ffn / size, ffn / size)))
          << size << " ranks, rank " << rank;
    }
    EXPECT_TRUE(at::equal(join_swiglu_shards(shards), weight));
  }
}

TEST(TensorShardsTest, SegmentShardsHoldTheRanksPartOfEachSegment) {
  // Mamba's in projection with inner 4, groups x state 2 and 2 heads: [z 4 | x 4 | B 2 | C 2 | dt 2] rows.
  const std::vector<int64_t> segments = {4, 4, 2, 2, 2};
  const at::Tensor weight = at::arange(14 * 3, kFloat64).view({14, 3});
  const std::vector<at::Tensor> whole_segments = weight.split_with_sizes(segments, 0);
  for (const int64_t size : {1, 2}) {
    std::vector<at::Tensor> shards;
    for (int64_t rank = 0; rank < size; ++rank) {
      SCOPED_TRACE(std::to_string(size) + " ranks, rank " + std::to_string(rank));
      const at::Tensor shard = segments_shard(weight, segments, TensorShard{size, rank});
      ASSERT_EQ(shard.size(0), 14 / size);
      int64_t row = 0;
      for (const at::Tensor& segment : whole_segments) {  // the rank's rows of each segment, in order
        const int64_t part = segment.size(0) / size;
        EXPECT_TRUE(at::equal(shard.narrow(0, row, part), segment.narrow(0, rank * part, part)));
        row += part;
      }
      shards.push_back(shard);
    }
    EXPECT_TRUE(at::equal(join_segments_shards(shards, segments), weight));
  }
  // Along another dimension, through ParameterSplit: the convolution's channels [x 4 | B 2 | C 2] as columns.
  ParameterSplit channels{TensorSplit::kSegments, 1};
  channels.segments = {4, 2, 2};
  const at::Tensor columns = at::randn({3, 8}, kFloat64);
  const at::Tensor second = take_shard(columns, channels, TensorShard{2, 1});
  EXPECT_TRUE(
      at::equal(second, at::cat({columns.narrow(1, 2, 2), columns.narrow(1, 5, 1), columns.narrow(1, 7, 1)}, 1)));
  EXPECT_TRUE(channels.is_sharded());
}

TEST(TensorShardsTest, ParameterSplitsJoinWhatTheyTookAlongTheirDimension) {
  at::manual_seed(9);
  const at::Tensor experts = at::randn({3, 4, 12}, kFloat64);  // [E, h, 2 ffn]: halves along dimension 2
  ParameterSplit segments{TensorSplit::kSegments, 2};
  segments.segments = {6, 4, 2};
  const std::vector<ParameterSplit> splits = {
      {TensorSplit::kColumn, 1}, {TensorSplit::kSwiglu, 2}, {TensorSplit::kRow}, segments};
  for (const ParameterSplit& split : splits) {
    std::vector<at::Tensor> shards;
    for (int64_t rank = 0; rank < 2; ++rank) shards.push_back(take_shard(experts, split, TensorShard{2, rank}));
    EXPECT_EQ(whole_sizes(shards[0], split, 2), experts.sizes().vec());
    EXPECT_TRUE(at::equal(join_shards(shards, split), experts));
  }
  const at::Tensor gate_part = take_shard(experts, {TensorSplit::kSwiglu, 2}, TensorShard{2, 1}).narrow(2, 0, 3);
  EXPECT_TRUE(at::equal(gate_part, experts.narrow(2, 3, 3)));  // rank 1 holds the second half of the gates
}

TEST(TensorShardsTest, VocabularyIsPaddedToAMultipleOfDivisibleByTimesTensorSize) {
  EXPECT_EQ(padded_vocabulary(50257, 128, 1), 50304);  // GPT-2's vocabulary, Megatron's default padding
  EXPECT_EQ(padded_vocabulary(50257, 128, 2), 50432);
  EXPECT_EQ(padded_vocabulary(32000, 128, 2), 32000);  // already a multiple of 256
  EXPECT_EQ(padded_vocabulary(32001, 128, 4), 32256);
  EXPECT_EQ(padded_vocabulary(1, 1, 1), 1);
}

}  // namespace
}  // namespace graphed::model

// tests/dist/gradient_buckets_test.cpp — Megatron's gradient-buffer layout for the distributed optimizer: reverse
// order at 64-element boundaries, buckets closed at parameter boundaries and padded to lcm(data-parallel size, 128), a
// tied embedding in a bucket of its own, and each rank's equal shard of a bucket with the parameters' pieces in it
// (by hand for small cases; every element of every parameter in exactly one rank's shard for many).
#include <gtest/gtest.h>

#include <random>

#include "graphed/dist/gradient_buckets.h"

namespace graphed::dist {
namespace {

void expect_place(const ParameterPlace& place, int64_t begin, int64_t end, int64_t bucket) {
  EXPECT_EQ(place.begin, begin);
  EXPECT_EQ(place.end, end);
  EXPECT_EQ(place.bucket, bucket);
}

void expect_piece(const ShardPiece& piece, int64_t parameter, int64_t buffer_begin, int64_t elements,
                  int64_t shard_offset, int64_t parameter_offset) {
  EXPECT_EQ(piece.parameter, parameter);
  EXPECT_EQ(piece.buffer_begin, buffer_begin);
  EXPECT_EQ(piece.elements, elements);
  EXPECT_EQ(piece.shard_offset, shard_offset);
  EXPECT_EQ(piece.parameter_offset, parameter_offset);
}

TEST(GradientBucketsTest, ReverseOrderAt64ElementBoundariesInOnePaddedBucket) {
  const GradientBufferLayout layout = lay_out_gradient_buffer({100, 70, 3}, {2, std::nullopt});
  expect_place(layout.places[2], 0, 3, 0);
  expect_place(layout.places[1], 64, 134, 0);
  expect_place(layout.places[0], 192, 292, 0);
  ASSERT_EQ(layout.buckets.size(), 1u);
  EXPECT_EQ(layout.buckets[0].filled_end, 292);
  EXPECT_EQ(layout.elements, 384);  // the next multiple of lcm(2, 128)
  const auto first = shards_of(layout, 0, 2);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].begin, 0);
  EXPECT_EQ(first[0].end, 192);
  ASSERT_EQ(first[0].pieces.size(), 2u);
  expect_piece(first[0].pieces[0], 2, 0, 3, 0, 0);
  expect_piece(first[0].pieces[1], 1, 64, 70, 64, 0);
  const auto second = shards_of(layout, 1, 2);
  ASSERT_EQ(second[0].pieces.size(), 1u);
  expect_piece(second[0].pieces[0], 0, 192, 100, 0, 0);
}

TEST(GradientBucketsTest, ABucketClosesAtTheParameterThatFillsIt) {
  const GradientBufferLayout layout = lay_out_gradient_buffer({100, 70, 3}, {2, 100});
  ASSERT_EQ(layout.buckets.size(), 2u);
  EXPECT_EQ(layout.buckets[0].begin, 0);
  EXPECT_EQ(layout.buckets[0].filled_end, 134);
  EXPECT_EQ(layout.buckets[0].end, 256);
  EXPECT_EQ(layout.buckets[0].parameters, (std::vector<int64_t>{2, 1}));
  expect_place(layout.places[0], 256, 356, 1);
  EXPECT_EQ(layout.buckets[1].end, 384);
  EXPECT_EQ(layout.elements, 384);
}

TEST(GradientBucketsTest, AParameterSpansSeveralRanksShards) {
  const GradientBufferLayout layout = lay_out_gradient_buffer({300}, {4, std::nullopt});
  EXPECT_EQ(layout.elements, 384);  // lcm(4, 128) = 128: shards of 96
  expect_piece(shards_of(layout, 0, 4)[0].pieces[0], 0, 0, 96, 0, 0);
  expect_piece(shards_of(layout, 1, 4)[0].pieces[0], 0, 96, 96, 0, 96);
  expect_piece(shards_of(layout, 3, 4)[0].pieces[0], 0, 288, 12, 0, 288);
  // Three ranks: lcm(3, 128) = 384 as well, shards of 128; a small parameter leaves the last two empty.
  const GradientBufferLayout small = lay_out_gradient_buffer({10}, {3, std::nullopt});
  EXPECT_EQ(small.elements, 384);
  EXPECT_TRUE(shards_of(small, 2, 3)[0].pieces.empty());
}

TEST(GradientBucketsTest, ATiedEmbeddingGetsABucketOfItsOwn) {
  const GradientBufferLayout layout = lay_out_gradient_buffer({50, 20, 30}, {2, std::nullopt}, 0);
  ASSERT_EQ(layout.buckets.size(), 2u);
  EXPECT_EQ(layout.buckets[0].parameters, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(layout.buckets[0].end, 128);
  expect_place(layout.places[0], 128, 178, 1);
  EXPECT_EQ(layout.buckets[1].end, 256);
  // Registered last, it is laid out first, and what follows starts a bucket of its own.
  const GradientBufferLayout last = lay_out_gradient_buffer({20, 50}, {2, std::nullopt}, 1);
  ASSERT_EQ(last.buckets.size(), 2u);
  EXPECT_EQ(last.buckets[0].parameters, (std::vector<int64_t>{1}));
  EXPECT_EQ(last.buckets[1].parameters, (std::vector<int64_t>{0}));
}

TEST(GradientBucketsTest, EveryElementIsInExactlyOneRanksShard) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int64_t> sizes(1 + random() % 12);
    for (int64_t& size : sizes) size = 1 + static_cast<int64_t>(random() % 5000);
    const int64_t ranks = 1 + static_cast<int64_t>(random() % 8);
    const std::optional<int64_t> bucket =
        random() % 2 ? std::optional<int64_t>(1 + static_cast<int64_t>(random() % 8000)) : std::nullopt;
    const GradientBufferLayout layout = lay_out_gradient_buffer(sizes, {ranks, bucket});
    EXPECT_EQ(layout.elements % ranks, 0);
    std::vector<std::vector<int>> seen(sizes.size());
    for (std::size_t p = 0; p < sizes.size(); ++p) seen[p].assign(static_cast<std::size_t>(sizes[p]), 0);
    for (int64_t rank = 0; rank < ranks; ++rank) {
      for (const BucketShard& shard : shards_of(layout, rank, ranks)) {
        for (const ShardPiece& piece : shard.pieces) {
          EXPECT_EQ(shard.begin + piece.shard_offset, piece.buffer_begin);
          for (int64_t e = 0; e < piece.elements; ++e) {
            ++seen[static_cast<std::size_t>(piece.parameter)][static_cast<std::size_t>(piece.parameter_offset + e)];
          }
        }
      }
    }
    for (std::size_t p = 0; p < sizes.size(); ++p) {
      const int64_t once = std::count(seen[p].begin(), seen[p].end(), 1);
      EXPECT_EQ(once, sizes[p]) << "trial " << trial << ", parameter " << p;
    }
  }
}

}  // namespace
}  // namespace graphed::dist

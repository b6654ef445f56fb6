// tests/dist/bucket_shards_test.cpp — the distributed optimizer's collectives over a laid-out buffer, on 2 and 3 Gloo
// ranks as threads: after the reduce-scatter each rank's shard of every bucket is the sum of every rank's buffer
// there; after the all-gather every rank's buffer is the ranks' shards side by side.
#include <chrono>
#include <memory>
#include <vector>

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "graphed/dist/bucket_shards.h"
#include "graphed/dist/detail/backend.h"
#include "ranks_on_threads.h"

namespace graphed::dist {
namespace bucket_shards_test {  // named: the tests build as one unity source
namespace {

const auto kDouble = at::TensorOptions().dtype(at::kDouble);

/// Runs `body(group)` as `ranks` Gloo ranks on threads.
void on_ranks(int64_t ranks, const std::function<void(Communicator&)>& body) {
  const auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<int64_t> members;
  for (int64_t rank = 0; rank < ranks; ++rank) members.push_back(rank);
  testing::run_ranks_on_threads(ranks, [&](int64_t rank) {
    auto backend = detail::make_gloo_backend(store, rank, ranks, std::chrono::seconds(30), "127.0.0.1");
    Communicator group(backend, "data-parallel", members, rank);
    body(group);
  });
}

class BucketShardsTest : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    if (!detail::gloo_available()) GTEST_SKIP() << "this build has no Gloo";
  }
};

TEST_P(BucketShardsTest, ReduceScatterSumsIntoEachRanksShardAndAllGatherJoinsThem) {
  const int64_t ranks = GetParam();
  // Three parameters in two buckets (the first closes at 100 elements).
  const GradientBufferLayout layout = lay_out_gradient_buffer({150, 70, 40}, {ranks, 100});
  ASSERT_EQ(layout.buckets.size(), 2u);
  on_ranks(ranks, [&](Communicator& group) {
    const int64_t rank = group.rank();
    BucketShards shards(group, layout);
    at::Tensor buffer = at::arange(layout.elements, kDouble) + 1000.0 * static_cast<double>(rank);
    shards.reduce_scatter(buffer);
    // Every rank's value at i is i + 1000 r: the sum is ranks i + 1000 (0 + 1 + ... + ranks - 1).
    const double offsets = 1000.0 * static_cast<double>(ranks * (ranks - 1) / 2);
    for (const BucketShard& shard : shards.shards()) {
      const at::Tensor index = at::arange(shard.begin, shard.end, kDouble);
      const at::Tensor expected = static_cast<double>(ranks) * index + offsets;
      EXPECT_TRUE(at::allclose(buffer.narrow(0, shard.begin, shard.end - shard.begin), expected))
          << "rank " << rank << ", bucket " << shard.bucket;
    }
    ASSERT_EQ(shards.own_shards(buffer).size(), 2u);
    // The all-gather: each rank writes its rank into its shards; afterwards every buffer is the same.
    for (at::Tensor own : shards.own_shards(buffer)) own.fill_(static_cast<double>(rank + 1));
    shards.all_gather(buffer);
    for (const GradientBucket& bucket : layout.buckets) {
      const int64_t shard = (bucket.end - bucket.begin) / ranks;
      for (int64_t r = 0; r < ranks; ++r) {
        const at::Tensor part = buffer.narrow(0, bucket.begin + r * shard, shard);
        EXPECT_TRUE(at::equal(part, at::full({shard}, static_cast<double>(r + 1), kDouble)))
            << "rank " << rank << " sees rank " << r << "'s shard";
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, BucketShardsTest, ::testing::Values(2, 3));

}  // namespace
}  // namespace bucket_shards_test
}  // namespace graphed::dist

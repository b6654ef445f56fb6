// tests/dist/gradient_reducer_test.cpp — the data-parallel gradient reduction on 2 Gloo ranks as threads: the mean of
// the ranks' gradients, all-reduced in buckets or reduce-scattered into each rank's shards (the distributed
// optimizer), and with a bf16 staging buffer (--grad-reduce-in-bf16) the mean of the ranks' gradients rounded to bf16,
// summed and rounded again.
#include <chrono>
#include <memory>
#include <vector>

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "graphed/dist/detail/backend.h"
#include "graphed/dist/gradient_reducer.h"
#include "ranks_on_threads.h"

namespace graphed::dist {
namespace gradient_reducer_test {  // named: the tests build as one unity source
namespace {

constexpr int64_t kRanks = 2;
const std::vector<int64_t> kSizes = {150, 70, 40};

/// Runs `body(group)` as kRanks Gloo ranks on threads.
void on_ranks(const std::function<void(Communicator&)>& body) {
  const auto store = c10::make_intrusive<c10d::HashStore>();
  const std::vector<int64_t> members = {0, 1};
  testing::run_ranks_on_threads(kRanks, [&](int64_t rank) {
    auto backend = detail::make_gloo_backend(store, rank, kRanks, std::chrono::seconds(30), "127.0.0.1");
    Communicator group(backend, "data-parallel", members, rank);
    body(group);
  });
}

/// Rank r's gradient values at flat positions `index`: not representable in bf16, different on each rank.
at::Tensor gradient_values(const at::Tensor& index, int64_t rank) {
  return at::sin(index * 0.37 + 1.3 * static_cast<double>(rank)) * (1.0 + 1e-3 * index);
}

/// The reduction's expected result at `index`: the ranks' mean, each value and the sum rounded to bf16 when `bf16`.
at::Tensor expected_mean(const at::Tensor& index, bool bf16) {
  at::Tensor sum = at::zeros_like(index);
  for (int64_t rank = 0; rank < kRanks; ++rank) {
    const at::Tensor values = gradient_values(index, rank);
    sum = sum + (bf16 ? values.to(at::kBFloat16).to(at::kFloat) : values);
  }
  if (bf16) sum = sum.to(at::kBFloat16).to(at::kFloat);
  return sum / static_cast<double>(kRanks);
}

/// Parameters of kSizes whose gradients are views of `flat` at `begins`, filled with this rank's values.
std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>> parameters_over(at::Tensor& flat,
                                                                            const std::vector<int64_t>& begins,
                                                                            int64_t rank) {
  std::vector<at::Tensor> parameters, gradients;
  for (std::size_t p = 0; p < kSizes.size(); ++p) {
    parameters.push_back(at::zeros({kSizes[p]}));
    gradients.push_back(flat.narrow(0, begins[p], kSizes[p]));
    gradients.back().copy_(gradient_values(at::arange(begins[p], begins[p] + kSizes[p], at::kFloat), rank));
  }
  return {parameters, gradients};
}

class GradientReducerTest : public ::testing::TestWithParam<bool> {  // the parameter: bf16 sums
 protected:
  void SetUp() override {
    if (!detail::gloo_available()) GTEST_SKIP() << "this build has no Gloo";
  }
};

TEST_P(GradientReducerTest, AllReducedBucketsHoldTheMean) {
  const bool bf16 = GetParam();
  on_ranks([&](Communicator& group) {
    at::Tensor flat = at::zeros({150 + 70 + 40});
    auto [parameters, gradients] = parameters_over(flat, {0, 150, 220}, group.rank());
    GradientReducerOptions options;
    options.bucket_bytes = 100 * 4;  // two buckets: the last two parameters, then the first
    options.overlap_with_backward = false;
    if (bf16) options.staging = at::empty({flat.numel()}, at::kBFloat16);
    GradientReducer reducer(group, parameters, gradients, flat, options);
    EXPECT_EQ(reducer.bucket_count(), 2);
    reducer.arm();
    reducer.finish();
    const at::Tensor expected = expected_mean(at::arange(flat.numel(), at::kFloat), bf16);
    EXPECT_TRUE(at::allclose(flat, expected, 0.0, 1e-7)) << "rank " << group.rank();
    if (bf16) {  // the sums were rounded: not the float32 mean
      EXPECT_FALSE(at::allclose(flat, expected_mean(at::arange(flat.numel(), at::kFloat), false), 0.0, 1e-6));
    }
  });
}

TEST_P(GradientReducerTest, ReduceScatteredShardsHoldTheMeanAndTheRestIsLeft) {
  const bool bf16 = GetParam();
  const GradientBufferLayout layout = lay_out_gradient_buffer(kSizes, {kRanks, 100});
  ASSERT_EQ(layout.buckets.size(), 2u);
  on_ranks([&](Communicator& group) {
    BucketShards shards(group, layout);
    at::Tensor flat = at::zeros({layout.elements});
    std::vector<int64_t> begins;
    for (const ParameterPlace& place : layout.places) begins.push_back(place.begin);
    auto [parameters, gradients] = parameters_over(flat, begins, group.rank());
    const at::Tensor before = flat.clone();
    GradientReducerOptions options;
    options.overlap_with_backward = false;
    options.shards = &shards;
    if (bf16) options.staging = at::empty({flat.numel()}, at::kBFloat16);
    GradientReducer reducer(group, parameters, gradients, flat, options);
    reducer.arm();
    reducer.finish();
    // The padding holds zeros on every rank, so its mean is zero as well: compare whole shards.
    at::Tensor filled = at::zeros({layout.elements}, at::kBool);
    for (const ParameterPlace& place : layout.places)
      filled.narrow(0, place.begin, place.end - place.begin).fill_(true);
    const at::Tensor index = at::arange(layout.elements, at::kFloat);
    const at::Tensor expected = at::where(filled, expected_mean(index, bf16), at::zeros_like(index));
    for (const BucketShard& shard : shards.shards()) {
      const int64_t length = shard.end - shard.begin;
      EXPECT_TRUE(at::allclose(flat.narrow(0, shard.begin, length), expected.narrow(0, shard.begin, length), 0.0, 1e-7))
          << "rank " << group.rank() << ", bucket " << shard.bucket;
    }
    // Outside this rank's shards nothing is read: the reduction leaves this rank's own values there.
    at::Tensor others = at::ones({layout.elements}, at::kBool);
    for (const BucketShard& shard : shards.shards())
      others.narrow(0, shard.begin, shard.end - shard.begin).fill_(false);
    EXPECT_TRUE(at::equal(flat.masked_select(others), before.masked_select(others))) << "rank " << group.rank();
  });
}

INSTANTIATE_TEST_SUITE_P(Sums, GradientReducerTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "bf16" : "float32"; });

}  // namespace
}  // namespace gradient_reducer_test
}  // namespace graphed::dist

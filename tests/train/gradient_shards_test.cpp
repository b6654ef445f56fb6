// tests/train/gradient_shards_test.cpp — the distributed optimizer's shards on 2 and 3 Gloo ranks as threads, in
// buckets small enough that parameters straddle bucket and shard boundaries: reduce-scattered gradients, the
// sharded AdamW step and the gathered parameters against one AdamW stepped on the mean gradients; the norm from the
// shards (a parameter left out); the moments gathered whole and scattered back.
#include <chrono>
#include <cmath>
#include <functional>
#include <vector>

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "graphed/dist/detail/backend.h"
#include "graphed/train/gradient_shards.h"
#include "ranks_on_threads.h"

namespace graphed::train {
namespace gradient_shards_test {  // named: the tests build as one unity source
namespace {

const auto kDouble = at::TensorOptions().dtype(at::kDouble);
const std::vector<std::vector<int64_t>> kShapes = {{5, 7}, {130}, {3, 3, 3}, {64}, {1}, {40, 3}};

/// The same starting parameters on every rank.
std::vector<std::pair<std::string, at::Tensor>> make_parameters() {
  std::vector<std::pair<std::string, at::Tensor>> parameters;
  for (std::size_t i = 0; i < kShapes.size(); ++i) {
    const int64_t count = at::ones(kShapes[i], kDouble).numel();
    at::Tensor values = at::sin(at::arange(count, kDouble) + static_cast<double>(i)).view(kShapes[i]);
    parameters.emplace_back("p" + std::to_string(i), values.requires_grad_(true));
  }
  return parameters;
}

/// Rank `rank`'s gradient of parameter `i` at step `step`.
at::Tensor local_gradient(std::size_t i, int64_t rank, int64_t step) {
  const int64_t count = at::ones(kShapes[i], kDouble).numel();
  const double phase = static_cast<double>(rank * 17 + step * 5) + static_cast<double>(i);
  return at::cos(at::arange(count, kDouble) * 0.3 + phase).view(kShapes[i]);
}

AdamWOptions options_with(std::optional<FlatLayout> layout) {
  AdamWOptions options;
  options.weight_decay = 0.1;
  options.flat_layout = std::move(layout);
  return options;
}

class GradientShardsTest : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    if (!dist::detail::gloo_available()) GTEST_SKIP() << "this build has no Gloo";
  }

  /// kShapes over GetParam() ranks in buckets of 100 elements: several, and parameters straddle the shards' edges.
  static ShardingOptions sharding() {
    ShardingOptions options;
    options.data_parallel_size = GetParam();
    options.bucket_size = 100;
    return options;
  }
  static std::vector<int64_t> sizes() {
    std::vector<int64_t> counts;
    for (const auto& shape : kShapes) counts.push_back(at::ones(shape, kDouble).numel());
    return counts;
  }
  /// Runs `body(group)` on every rank, as Gloo ranks on threads.
  static void on_ranks(const std::function<void(dist::Communicator&)>& body) {
    const int64_t ranks = GetParam();
    const auto store = c10::make_intrusive<c10d::HashStore>();
    std::vector<int64_t> members;
    for (int64_t rank = 0; rank < ranks; ++rank) members.push_back(rank);
    testing::run_ranks_on_threads(ranks, [&](int64_t rank) {
      auto backend = dist::detail::make_gloo_backend(store, rank, ranks, std::chrono::seconds(30), "127.0.0.1");
      dist::Communicator group(backend, "data-parallel", members, rank);
      body(group);
    });
  }
};

TEST_P(GradientShardsTest, ShardedStepsMatchOneOptimizerOnTheMeanGradients) {
  const int64_t ranks = GetParam();
  const ShardedLayouts layouts = lay_out_shards(sizes(), sharding());
  ASSERT_GT(layouts.dense.buckets.size(), 2u);
  on_ranks([&](dist::Communicator& group) {
    const int64_t rank = group.rank();
    AdamW whole(make_parameters(), options_with(std::nullopt));
    AdamW sharded(make_parameters(), options_with(flat_layout_of(layouts, rank, 0)));
    ASSERT_TRUE(sharded.sharded());
    GradientShards shards(group, nullptr, layouts, sharded);
    whole.set_learning_rate(0.01);
    sharded.set_learning_rate(0.01);
    for (int64_t step = 0; step < 3; ++step) {
      at::Tensor left_out = at::zeros({}, kDouble);  // parameter 1's squares, which the norm leaves out
      for (std::size_t i = 0; i < kShapes.size(); ++i) {
        at::Tensor mean = at::zeros(kShapes[i], kDouble);
        for (int64_t r = 0; r < ranks; ++r) mean += local_gradient(i, r, step);
        mean /= static_cast<double>(ranks);
        whole.gradients()[i].copy_(mean);
        sharded.gradients()[i].copy_(local_gradient(i, rank, step));
        if (i == 1) left_out = mean.square().sum();
      }
      at::Tensor dense = shards.dense_part(sharded.flat_gradients());
      shards.dense().reduce_scatter(dense);
      dense.div_(static_cast<double>(ranks));
      at::Tensor squares = shards.dense_squares({1}).to(at::kDouble).reshape({1}).contiguous();
      group.all_reduce_sum(squares).wait();
      const double expected = whole.gradient_norm().to(at::kDouble).square().item<double>() - left_out.item<double>();
      EXPECT_NEAR(squares.item<double>(), expected, 1e-4 * expected) << "rank " << rank << ", step " << step;
      whole.step(std::nullopt);
      sharded.step(std::nullopt);
      shards.gather_parameters();
      for (std::size_t i = 0; i < kShapes.size(); ++i) {
        EXPECT_TRUE(at::allclose(sharded.parameters()[i], whole.parameters()[i], 1e-9, 1e-12))
            << "rank " << rank << ", step " << step << ", parameter " << i;
      }
    }
    // The moments gathered whole are one optimizer's; scattered back they are this rank's shards again.
    const auto gathered = shards.whole_state(at::Device(at::kCPU));
    EXPECT_TRUE(shards.whole_state(std::nullopt).empty()) << "a rank that takes part without keeping anything";
    EXPECT_EQ(shards.empty_whole_state(at::Device(at::kCPU)).size(), gathered.size());
    const auto expected = whole.state();
    ASSERT_EQ(gathered.size(), expected.size());
    for (std::size_t k = 0; k < gathered.size(); ++k) {
      EXPECT_EQ(gathered[k].first, expected[k].first);
      EXPECT_TRUE(at::allclose(gathered[k].second.to(at::kDouble), expected[k].second.to(at::kDouble), 1e-9, 1e-12))
          << "rank " << rank << ": " << gathered[k].first;
    }
    const at::Tensor before = sharded.flat_exp_avg().clone();
    const at::Tensor before_squared = sharded.flat_exp_avg_sq().clone();
    sharded.flat_exp_avg().zero_();
    sharded.flat_exp_avg_sq().zero_();
    shards.keep_own_state(gathered);
    EXPECT_TRUE(at::equal(sharded.flat_exp_avg(), before)) << "rank " << rank;
    EXPECT_TRUE(at::equal(sharded.flat_exp_avg_sq(), before_squared)) << "rank " << rank;
  });
}

// With working copies, three parameters released: each rank keeps only its shards of their values, their copies
// are gathered (bf16) and the rest's values too (fp32). The copies match one optimizer's; the released values
// gathered whole match its parameters, and written back they give each rank its shards again.
TEST_P(GradientShardsTest, ReleasedParametersKeepOnlyTheirShardsAndGatherTheirCopies) {
  const int64_t ranks = GetParam();
  ShardingOptions sharding = GradientShardsTest::sharding();
  sharding.released = {true, false, true, false, false, true};
  const ShardedLayouts layouts = lay_out_shards(sizes(), sharding);
  ASSERT_GT(layouts.released_elements, 0);
  const auto float_parameters = [] {
    auto parameters = make_parameters();
    for (auto& [name, parameter] : parameters) parameter = parameter.detach().to(at::kFloat).requires_grad_(true);
    return parameters;
  };
  on_ranks([&](dist::Communicator& group) {
    const int64_t rank = group.rank();
    AdamWOptions whole_options = options_with(std::nullopt);
    whole_options.working_copies = at::kBFloat16;
    AdamW whole(float_parameters(), whole_options);
    AdamWOptions sharded_options = options_with(flat_layout_of(layouts, rank, 0));
    sharded_options.working_copies = at::kBFloat16;
    AdamW sharded(float_parameters(), sharded_options);
    GradientShards shards(group, nullptr, layouts, sharded);
    for (std::size_t i = 0; i < kShapes.size(); ++i) {
      EXPECT_EQ(sharded.released(i), sharding.released[i]) << i;
      EXPECT_EQ(sharded.parameters()[i].sizes(), whole.parameters()[i].sizes())
          << "a released parameter keeps its shape";
    }
    // The kept parameters' values whole (with the buckets' padding), the released ones' only in this rank's shards.
    const int64_t elements = layouts.dense.elements;
    EXPECT_EQ(sharded.master_bytes(), 4 * (elements - layouts.released_elements + layouts.released_elements / ranks));
    whole.set_learning_rate(0.01);
    sharded.set_learning_rate(0.01);
    for (int64_t step = 0; step < 3; ++step) {
      for (std::size_t i = 0; i < kShapes.size(); ++i) {
        at::Tensor mean = at::zeros(kShapes[i], at::kFloat);
        for (int64_t r = 0; r < ranks; ++r) mean += local_gradient(i, r, step).to(at::kFloat);
        whole.gradients()[i].copy_(mean / static_cast<double>(ranks));
        sharded.gradients()[i].copy_(local_gradient(i, rank, step));
      }
      at::Tensor dense = shards.dense_part(sharded.flat_gradients());
      shards.dense().reduce_scatter(dense);
      dense.div_(static_cast<double>(ranks));
      whole.step(std::nullopt);
      sharded.step(std::nullopt);
      shards.gather_parameters();
      const auto whole_copies = whole.working_copies();
      const auto sharded_copies = sharded.working_copies();
      for (std::size_t i = 0; i < kShapes.size(); ++i) {
        EXPECT_TRUE(
            at::allclose(sharded_copies[i].second.to(at::kFloat), whole_copies[i].second.to(at::kFloat), 1e-2, 1e-3))
            << "rank " << rank << ", step " << step << ", copy of parameter " << i;
        if (!sharded.released(i)) {
          EXPECT_TRUE(at::allclose(sharded.parameters()[i], whole.parameters()[i], 1e-5, 1e-6))
              << "rank " << rank << ", step " << step << ", parameter " << i;
        }
      }
    }
    std::vector<std::pair<std::string, at::Tensor>> named;
    for (std::size_t i = 0; i < kShapes.size(); ++i) named.emplace_back(sharded.names()[i], sharded.parameters()[i]);
    const auto gathered = shards.whole_parameters(named, at::Device(at::kCPU));
    for (std::size_t i = 0; i < kShapes.size(); ++i) {
      EXPECT_TRUE(at::allclose(gathered[i].second, whole.parameters()[i], 1e-5, 1e-6)) << "rank " << rank << ": " << i;
    }
    const at::Tensor before = sharded.master_shards().clone();
    sharded.master_shards().zero_();
    for (std::size_t i = 0; i < kShapes.size(); ++i) {
      if (sharded.released(i)) sharded.write_released(i, gathered[i].second);
    }
    EXPECT_TRUE(at::equal(sharded.master_shards(), before)) << "rank " << rank;
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, GradientShardsTest, ::testing::Values(2, 3));

TEST(GradientShardsLayoutTest, EveryElementOfEveryBucketIsSteppedByExactlyOneRank) {
  const std::vector<int64_t> sizes = {300, 17, 1000, 64, 5};
  ShardingOptions sharding;
  sharding.data_parallel_size = 4;
  sharding.expert_data_parallel_size = 2;
  sharding.expert_parameters = 2;
  sharding.bucket_size = 256;
  const ShardedLayouts layouts = lay_out_shards(sizes, sharding);
  EXPECT_EQ(layouts.dense_parameters, 3);
  const int64_t elements = layouts.dense.elements + layouts.experts.elements;
  std::vector<int64_t> dense_count(static_cast<std::size_t>(layouts.dense.elements), 0);
  std::vector<int64_t> expert_count(static_cast<std::size_t>(layouts.experts.elements), 0);
  for (int64_t rank = 0; rank < 4; ++rank) {
    const FlatLayout flat = flat_layout_of(layouts, rank, rank % 2);
    ASSERT_EQ(flat.elements, elements);
    ASSERT_EQ(flat.offsets.size(), sizes.size());
    EXPECT_GE(flat.offsets[3], layouts.dense.elements) << "the experts come after the dense buffer";
    for (const FlatRange& range : flat.stepped) {
      for (int64_t e = range.begin; e < range.begin + range.length; ++e) {
        if (e < layouts.dense.elements) {
          ++dense_count[static_cast<std::size_t>(e)];
        } else if (rank < 2) {  // the expert-data ranks 0 and 1 (ranks 2 and 3 hold the other experts' copies)
          ++expert_count[static_cast<std::size_t>(e - layouts.dense.elements)];
        }
      }
    }
  }
  for (std::size_t e = 0; e < dense_count.size(); ++e) ASSERT_EQ(dense_count[e], 1) << "dense element " << e;
  for (std::size_t e = 0; e < expert_count.size(); ++e) ASSERT_EQ(expert_count[e], 1) << "expert element " << e;
}

}  // namespace
}  // namespace gradient_shards_test
}  // namespace graphed::train

// tests/capture/schedule_order_test.cpp — the worked examples of research/megatron-cudagraphs.md §5
// as golden orders, and Megatron's invariants (test_get_pipeline_parallel_order) over PP 1-8, VPP
// none/2/4/8 and 8 or 32 microbatches, with and without weight-gradient entries.
#include "graphed/capture/schedule_order.h"

#include <cmath>
#include <map>

#include <gtest/gtest.h>

#include "capture/pipeline_order_for_test.h"

namespace graphed::capture {
namespace {

TEST(ScheduleOrderTest, NoPipelineAlternatesForwardAndBackward) {
  EXPECT_EQ(order_for(1, 1, 1, 0, 1), (std::vector<int64_t>{1, -1}));
  EXPECT_EQ(order_for(4, 1, 1, 0, 1), (std::vector<int64_t>{1, -1, 1, -1, 1, -1, 1, -1}));
}

TEST(ScheduleOrderTest, TwoStagesWithoutVirtualPipeline) {
  EXPECT_EQ(warmup_microbatches({4, 1, 2, 0, 1}), 1);
  EXPECT_EQ(order_for(4, 1, 2, 0, 1), (std::vector<int64_t>{1, 1, -1, 1, -1, 1, -1, -1}));
  EXPECT_EQ(order_for(4, 1, 2, 1, 1), (std::vector<int64_t>{1, -1, 1, -1, 1, -1, 1, -1}));
}

TEST(ScheduleOrderTest, InterleavedTwoChunksMatchesWorkedExample) {
  const auto table = schedule_table(5, 2, 3);
  EXPECT_EQ(table, (std::vector<ScheduleEntry>{
                       {0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1}, {2, 1}, {3, 0}, {4, 0}, {3, 1}, {4, 1}}));
  EXPECT_EQ(warmup_microbatches({5, 2, 2, 0, 3}), 5);
  EXPECT_EQ(warmup_microbatches({5, 2, 2, 1, 3}), 3);
  EXPECT_EQ(order_for(5, 2, 2, 0, 3),
            (std::vector<int64_t>{1, 1, 1, 2, 2, 2, -2, 1, -2, 1, -2, 2, -1, 2, -1, -1, -2, -2, -1, -1}));
  EXPECT_EQ(order_for(5, 2, 2, 1, 3),
            (std::vector<int64_t>{1, 1, 1, 2, -2, 2, -2, 2, -2, 1, -1, 1, -1, 2, -1, 2, -2, -2, -1, -1}));
}

TEST(ScheduleOrderTest, VirtualChunksWithoutPipelineAreABug) {
  EXPECT_THROW(warmup_microbatches({8, 2, 1, 0, 1}), std::logic_error);
}

TEST(ScheduleOrderTest, WarmupRules) {
  EXPECT_EQ(warmup_microbatches({8, 1, 4, 0, 1, /*forward_only=*/true}), 8);
  EXPECT_EQ(warmup_microbatches({8, 2, 4, 1, 4, false, /*expert_parallel_overlap=*/true}), 2 * 2 + 4 + 1);
  EXPECT_EQ(warmup_microbatches({2, 2, 8, 0, 9}), 4) << "clamped to M x chunks";
}

TEST(ScheduleOrderTest, OverlapOrderMatchesTheDocstringExample) {
  const LayerOrder with = get_overlap_moe_expert_parallel_comm_order({1, 2, -2, 1, -1, -1}, {1, 2}, true);
  EXPECT_EQ(with.order, (std::vector<double>{1, 2, 3, 1, -3, -3.5, -2, -2.5, -1, -1.5, -1, -1.5}));
  ASSERT_EQ(with.chunk_ids.size(), 12u);
  EXPECT_EQ(with.chunk_ids[0], std::make_optional(std::make_pair(int64_t{0}, int64_t{0})));
  EXPECT_EQ(with.chunk_ids[1], std::make_optional(std::make_pair(int64_t{1}, int64_t{0})));
  EXPECT_EQ(with.chunk_ids[2], std::make_optional(std::make_pair(int64_t{1}, int64_t{1})));
  EXPECT_EQ(with.chunk_ids[3], std::make_optional(std::make_pair(int64_t{0}, int64_t{0})));
  for (std::size_t i = 4; i < 12; ++i) EXPECT_FALSE(with.chunk_ids[i].has_value()) << i;
  const LayerOrder without = get_overlap_moe_expert_parallel_comm_order({1, 2, -2, 1, -1, -1}, {1, 2}, false);
  EXPECT_EQ(without.order, (std::vector<double>{1, 2, 3, 1, -3, -2, -1, -1}));
}

TEST(ScheduleOrderTest, OverlapOrderWithoutPipeline) {
  EXPECT_EQ(get_overlap_moe_expert_parallel_comm_order({1, -1}, {2}, true).order,
            (std::vector<double>{1, 2, -2, -2.5, -1, -1.5}));
  EXPECT_EQ(get_overlap_moe_expert_parallel_comm_order({1, -1}, {2}, false).order, (std::vector<double>{1, 2, -2, -1}));
}

/// Megatron's invariants of an order over `chunks` chunks and M microbatches.
void expect_valid_order(const std::vector<double>& order, int64_t chunks, int64_t microbatches,
                        const std::string& what) {
  ASSERT_EQ(static_cast<int64_t>(order.size()), 2 * microbatches * chunks) << what;
  EXPECT_EQ(*std::max_element(order.begin(), order.end()), static_cast<double>(chunks)) << what;
  std::map<int64_t, int64_t> outstanding;
  double prefix = 0;
  for (const double value : order) {
    EXPECT_NE(value, 0.0) << what;
    const auto chunk = static_cast<int64_t>(std::abs(value));
    outstanding[chunk] += value > 0 ? 1 : -1;
    EXPECT_GE(outstanding[chunk], 0) << what << ": a backward before its forward";
    prefix += value;
    EXPECT_GE(prefix, 0.0) << what;
  }
  EXPECT_EQ(prefix, 0.0) << what;
  for (const auto& [chunk, count] : outstanding) EXPECT_EQ(count, 0) << what << ": chunk " << chunk;
}

TEST(ScheduleOrderTest, InvariantsAcrossPipelineShapes) {
  const std::vector<std::pair<int64_t, int64_t>> pipelines{{1, 1}, {2, 2}, {2, 4}, {4, 4}, {4, 5}, {8, 9}, {8, 11}};
  for (const auto& [pipeline, group] : pipelines) {
    for (const int64_t microbatches : {8, 32}) {
      for (const int64_t chunks : {1, 2, 4, 8}) {
        if (pipeline == 1 && chunks > 1) continue;  // a virtual pipeline needs pipeline parallelism
        for (int64_t rank = 0; rank < pipeline; ++rank) {
          const std::string what = "PP " + std::to_string(pipeline) + " group " + std::to_string(group) + " M " +
                                   std::to_string(microbatches) + " VPP " + std::to_string(chunks) + " rank " +
                                   std::to_string(rank);
          const auto order = order_for(microbatches, chunks, pipeline, rank, group);
          expect_valid_order(std::vector<double>(order.begin(), order.end()), chunks, microbatches, what);
          const std::vector<int64_t> layers(static_cast<std::size_t>(chunks), 2);
          const LayerOrder plain = get_overlap_moe_expert_parallel_comm_order(order, layers, false);
          expect_valid_order(plain.order, chunks * 2, microbatches, what + " per layer");
          const LayerOrder wgrad = get_overlap_moe_expert_parallel_comm_order(order, layers, true);
          EXPECT_EQ(wgrad.order.size() * 2, order.size() * 2 * 3) << what;
          for (std::size_t i = 0; i < wgrad.order.size(); ++i) {
            if (wgrad.order[i] != std::floor(wgrad.order[i])) {
              ASSERT_GT(i, 0u);
              EXPECT_EQ(wgrad.order[i], wgrad.order[i - 1] - 0.5) << what << " entry " << i;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace graphed::capture
